"""Studies for the runner tests: demo tasks, results in a temporary directory, the scripted
stand-in model or the vLLM test double (``fakes/vllm.py``) as the model server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from forgetting.foundation import config_schema
from forgetting.foundation.layout import CALLS, RUN_JSON, Layout
from forgetting.study.config import Study, load_study
from forgetting.study.plan import Batch, plan_batches
from forgetting.study.runner import RunnerSettings
from forgetting_testkit import fakes
from forgetting_testkit.checkout import ROOT

FAKE_VLLM = fakes.VLLM
FAKE_TRAE = fakes.TRAE_CLI
TASKS = ROOT / "resources" / "demo" / "tasks"

SCRIPTED = {"backend": "scripted", "name": "scripted-careful-agent", "served_name": "scripted", "max_tokens": 4096}
FAKE_VLLM_MODEL = {
    "backend": "vllm",
    "name": "fake/model",
    "served_name": "fake",
    # the vLLM double has no tokenizer of its own (fakes/vllm.py): its prompts are counted
    # with Qwen's approximation, as for a server whose tokenizer is not at hand
    "tokenizer": "qwen2.5",
    "vllm": {"executable": str(FAKE_VLLM), "startup_timeout_s": 30},
}


def write_study(tmp: Path, **sections: Any) -> Path:
    """A demo study config under ``tmp`` (results in ``tmp/results``); ``sections`` replace keys."""
    config: dict[str, Any] = {
        "study": {"name": "runner-test", "seed": 7, "results_dir": str(tmp / "results")},
        "agents": ["mini"],
        "tasks": {"ids": ["demo__confkit-1"]},
        "dataset": {"kind": "demo", "instances": str(TASKS)},
        "repeats": {"baseline": 1, "deletion": 1},
        "configurations": {"names": []},
        "model": SCRIPTED,
        "agent": {"turn_cap": 40, "command_timeout_s": 60},
        "execution": {"concurrency": 1, "scratch_dir": str(tmp / "scratch")},
    }
    config.update(sections)
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def study_at(tmp: Path, **sections: Any) -> Study:
    return load_study(write_study(tmp, **sections))


def runner_settings(**sections: Any) -> RunnerSettings:
    """The runner settings of a config of ``sections`` (the demo dataset and the scripted model
    unless given), every key left out the schema's default: no study needed."""
    return RunnerSettings.from_parts({"model": SCRIPTED, "dataset": {"kind": "demo"}, **sections})


def batch_of(study: Study, agent: str, configuration: str) -> Batch:
    (batch,) = [b for b in plan_batches(study) if b.agent == agent and b.configuration == configuration]
    return batch


def run_dir(study: Study, run_id: str) -> Path:
    return Layout(study.results_dir).run_dir(run_id)


def run_json(study: Study, run_id: str) -> dict[str, Any]:
    return json.loads((run_dir(study, run_id) / RUN_JSON).read_text())


def ok_calls(path: Path) -> list[dict[str, Any]]:
    """The successful call records of a call log."""
    records = [json.loads(line) for line in (path / CALLS).read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("type") == "call" and r.get("ok")]


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``root``: (mtime in ns, bytes)."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(root.rglob("*"))
            if p.is_file()}


def filled_model(part: Mapping[str, Any]) -> dict[str, Any]:
    """A ``model`` section as a loaded study holds it — checked, every default filled — from part
    of one (backend vllm and name "m" where it names none): what the model-server functions take."""
    return config_schema.section("model", {"backend": "vllm", "name": "m", **part})
