"""Seeds and stable hashes: one module (forgetting.foundation.seeds), the same numbers as before it.

The expected values were computed with the copies this module replaced (plan.derive_seed,
deletion.draws, scripted.draws, scripted.model, stats.synthetic, synth.world, synth.run):
a changed digest would change every run seed, deletion draw and scripted-model choice.
"""

from __future__ import annotations

import re
from pathlib import Path

from forgetting.deletion import draws
from forgetting.demo.scripted.draws import Draws, run_key_for
from forgetting.foundation import seeds
from forgetting.instances import tasks
from forgetting.prompt import chat_format
from forgetting.study.plan import derive_seed

SRC = Path(__file__).resolve().parent.parent / "src" / "forgetting"


def test_run_seeds_and_draws_are_the_ones_of_before():
    assert derive_seed(20260402, "mini/delayed-turn-tool_output-50/demo-1/1") == 8858155599146773633
    assert seeds.derive_seed is derive_seed
    assert draws.unit(123456789, 3, "tool_output") == 0.6707293879640125
    assert int(draws.rng(123456789, "tok", 4).integers(0, 2**62)) == 2668605879082486686
    d = Draws(0, "h:42", 5)
    assert (d.call("detour"), d.run("wrong_first")) == (0.28473159485662924, 0.7560356171936834)
    assert run_key_for(None, "fix the bug") == "t:280fd7e3571b7c85"
    assert seeds.key_hex("a", 1, "b") == "a3d9a05367a480ddbcf7ab0b06c530c8b1061897af2f14d95391654a5dd01bc7"
    assert seeds.unit("solve", "t1") == 0.3065394956700985
    assert seeds.seed63("world", 7, "t1") == 7634303351603584460
    assert seeds.unit("start", 7, "mini/baseline/t/1") == 0.534499677890889


def test_content_names_are_the_ones_of_before():
    assert tasks.stratified_sample(["a__b-1", "a__b-2", "c__d-3", "c__d-4", "c__d-5"], 3, 11) == [
        "a__b-1", "c__d-3", "c__d-4",
    ]
    assert chat_format.tools_id([{"type": "function", "function": {"name": "bash"}}]) == "2b97a2855cf9ad66"
    assert seeds.text_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_sha256_is_called_in_the_seeds_module_only():
    """Every other module hashes through forgetting.foundation.seeds, so a key is hashed one way."""
    callers = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name != "seeds.py" and re.search(r"\bhashlib\.sha256\b|from hashlib import", p.read_text(encoding="utf-8"))
    )
    assert callers == []
