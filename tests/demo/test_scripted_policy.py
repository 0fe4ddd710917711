"""How the scripted model behaves: it edits only what it can see, re-reads what was deleted,
errs from fragments with a seeded probability, replays deterministically, and speaks both
of mini-swe-agent's message styles."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest

from forgetting.demo.scripted import ScriptedModel, ScriptedSettings
from forgetting.demo.scripted import commands as cmds
from forgetting.demo.scripted.history import fenced_actions
from forgetting.demo.scripted.model import fence_of
from forgetting.demo.scripted.observations import file_text
from forgetting.prompt import messages as msgs
from forgetting_testkit import scripted as S

CART = "src/shopcart/cart.py"
CART_OLD = "        return self.subtotal() * self.discount_percent\n"
# mini-swe-agent's own action regex for text mode (LitellmTextbasedModelConfig.action_regex)
MINI_ACTION_REGEX = S.TEXT_ACTIONS.regex


def default_model() -> ScriptedModel:
    """A scripted model with the schema's default settings (the demo's own)."""
    return S.model(ScriptedSettings.from_mapping())


def ask(
    model: ScriptedModel,
    messages: list[dict[str, Any]],
    style: str,
    header: str | None = None,
    syntax: msgs.ActionSyntax | None = None,
):
    """One call; the reply's commands read with ``syntax`` (default: the blocks the stand-in
    writes for this prompt)."""
    request: dict[str, Any] = {"model": "scripted", "messages": messages}
    if style == "tool_calls":
        request["tools"] = [S.BASH_TOOL]
    response = model.complete(request, header)
    message = response["choices"][0]["message"]
    commands = [a.command for a in msgs.actions(message, syntax or fenced_actions(fence_of(messages)))]
    return response["scripted_stand_in"]["policy_step"], commands, response


def outputs(messages: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Every action's command with the message index of its output, in order."""
    out = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for k, a in enumerate(msgs.actions(m, S.TEXT_ACTIONS)):
            for j in range(i + 1, len(messages)):
                if messages[j].get("role") == "assistant":
                    break
                if (a.call_id is None and j == i + 1 + k) or (
                    a.call_id and messages[j].get("tool_call_id") == a.call_id
                ):
                    out.append((a.command or "", j))
                    break
    return out


def output_index(messages: list[dict[str, Any]], command: str) -> int:
    """The message index of the first output of ``command``."""
    for c, j in outputs(messages):
        if c == command:
            return j
    raise AssertionError(f"no output of {command!r}")


def cart_read(messages: list[dict[str, Any]]) -> str:
    for m in messages:
        for a in msgs.actions(m, S.TEXT_ACTIONS) if m.get("role") == "assistant" else []:
            read = cmds.parse_read(a.command or "")
            if read is not None and read.path == CART:
                return a.command or ""
    raise AssertionError("no read of cart.py")


def until(step: str):
    return lambda response: response["scripted_stand_in"]["policy_step"] == step


@pytest.fixture(params=["tool_calls", "text"])
def style(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def at_first_edit(tmp_path: Path, style: str):
    """The prompt of the call where the calm model makes its first edit (of cart.py)."""
    repo = S.checkout(tmp_path / "repo")
    run = S.drive(S.model(), repo, style=style, stop_before=until("edit"))
    assert run.exit == "stopped"
    return repo, run.sent[-1]


def test_edits_when_the_content_is_visible(at_first_edit, style: str) -> None:
    _repo, messages = at_first_edit
    step, commands, _ = ask(S.model(), messages, style)
    assert step == "edit"
    assert cmds.classify(commands[0], S.book().tasks[0]).path == CART
    # its old text really is visible in the read output in the context
    read_output = messages[output_index(messages, cart_read(messages))]["content"]
    assert CART_OLD in file_text(read_output, numbered=cmds.parse_read(cart_read(messages)).numbered)
    # other outputs deleted, the read of cart.py kept: still no re-read
    kept = copy.deepcopy(messages)
    keep = output_index(kept, cart_read(kept))
    for i, m in enumerate(kept):
        if i > 1 and m["role"] != "assistant" and i != keep:
            m["content"] = S.TOOL_PLACEHOLDER
    assert ask(S.model(), kept, style)[0] == "edit"


def test_rereads_when_the_content_was_deleted(at_first_edit, style: str) -> None:
    _repo, messages = at_first_edit
    deleted = copy.deepcopy(messages)
    deleted[output_index(deleted, cart_read(deleted))]["content"] = S.TOOL_PLACEHOLDER
    step, commands, response = ask(S.model(), deleted, style)
    assert step == "reread"
    assert commands == [cart_read(messages)]  # the same read again: a re-fetch
    assert "no longer in my context" in (response["choices"][0]["message"]["content"] or "")


def test_a_deleted_read_costs_one_reread_then_the_run_resolves(tmp_path: Path, style: str) -> None:
    repo = S.checkout(tmp_path / "repo")
    first_read: dict[str, str] = {}

    def delete_first_cart_read(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = copy.deepcopy(messages)
        try:
            command = cart_read(out)
        except AssertionError:
            return out
        first_read.setdefault("command", command)
        out[output_index(out, command)]["content"] = S.TOOL_PLACEHOLDER
        return out

    run = S.drive(S.model(), repo, style=style, delete=delete_first_cart_read)
    assert run.exit == "Submitted"
    assert run.steps.count("reread") == 1
    assert run.commands.count(first_read["command"]) == 2
    assert S.run_tests(repo).returncode == 0


def _fragmented(messages: list[dict[str, Any]], share: float, seed: int = 1) -> list[dict[str, Any]]:
    """Every output but the task's with ``share`` of its tokens removed."""
    return S.delete_tokens(share, keep_last=0, seed=seed)(messages)


def test_fragments_may_mislead_it_then_it_sees_the_error_and_rereads(at_first_edit, style: str) -> None:
    repo, messages = at_first_edit
    damaged = _fragmented(messages, 0.5)
    careless = ScriptedModel(S.book(), S.CALM.replace(fragment_error_rate=1.0))
    step, commands, _ = ask(careless, damaged, style)
    assert step == "fragment_edit"
    path, old, _new = cmds.parse_python_edit(commands[0])
    assert path == CART and old != CART_OLD  # built from what it could see
    before = (repo / CART).read_text()
    result = S.execute(repo, commands[0])
    assert result["returncode"] == 1 and "expected the old text exactly once" in result["output"]
    assert (repo / CART).read_text() == before
    # it sees the failure and reads the file again
    _, _, response = ask(careless, damaged, style)
    history = [*damaged, response["choices"][0]["message"]]
    template = S.mini_config(style)["model"]["observation_template"]

    obs = {"content": jinja2.Template(template).render(output=result)}
    call = response["choices"][0]["message"].get("tool_calls")
    obs.update({"role": "tool", "tool_call_id": call[0]["id"]} if call else {"role": "user"})
    step, commands, _ = ask(careless, [*history, obs], style)
    assert step == "reread" and commands == [cart_read(messages)]
    # a careful draw re-reads straight away
    assert ask(ScriptedModel(S.book(), S.CALM), damaged, style)[0] == "reread"


def test_fragment_errors_follow_their_seeded_rate(at_first_edit, style: str) -> None:
    _, messages = at_first_edit
    damaged = _fragmented(messages, 0.5)
    counts = {}
    for rate in (0.0, 0.5, 1.0):
        m = ScriptedModel(S.book(), S.CALM.replace(fragment_error_rate=rate))
        steps = [ask(m, damaged, style, header=f"run-{k}")[0] for k in range(40)]
        assert set(steps) <= {"fragment_edit", "reread"}
        counts[rate] = steps.count("fragment_edit")
    assert counts[0.0] == 0 and counts[1.0] == 40
    assert 10 <= counts[0.5] <= 30  # binomial(40, 0.5): outside this range with p < 0.002


def test_same_request_same_reply_and_the_seed_header_varies_runs(tmp_path: Path, style: str) -> None:
    repo = S.checkout(tmp_path / "repo")
    m = S.model(ScriptedSettings.from_mapping())
    run = S.drive(m, repo, style=style, seed_header="a", stop_before=until("test"))
    for sent, response in zip(run.sent, run.responses, strict=True):
        again = ask(default_model(), sent, style, header="a")[2]
        assert again["choices"] == response["choices"]
        assert again["usage"]["prompt_tokens"] == response["usage"]["prompt_tokens"]
    # same header, fresh repository: the identical run
    replay = S.drive(default_model(), S.checkout(tmp_path / "again"), style=style, seed_header="a",
                     stop_before=until("test"))
    assert replay.commands == run.commands
    # different headers (baseline repeats): the runs are not all the same
    variants = set()
    for k in range(8):
        other = S.drive(default_model(), S.checkout(tmp_path / f"r{k}"), style=style, seed_header=f"repeat-{k}",
                        stop_before=lambda r: r["scripted_stand_in"]["policy_step"] in ("edit", "test"))
        variants.add(tuple(other.commands) + tuple(other.responses[-1]["scripted_stand_in"]["policy_step"]))
    assert len(variants) >= 2


def test_reply_formats(at_first_edit, style: str) -> None:
    _, messages = at_first_edit
    _, _, response = ask(S.model(), messages, style)
    message = response["choices"][0]["message"]
    assert response["system_fingerprint"] == "forgetting-scripted-stand-in-v1"
    assert "stand-in" in response["scripted_stand_in"]["note"]
    if style == "tool_calls":
        assert response["choices"][0]["finish_reason"] == "tool_calls"
        (call,) = message["tool_calls"]
        assert call["type"] == "function" and call["function"]["name"] == "bash"
        assert cmds.parse_read(cart_read(messages))  # sanity
        assert len(message["content"].split(". ")) >= 2  # a few sentences of reasoning
    else:
        assert response["choices"][0]["finish_reason"] == "stop"
        assert "tool_calls" not in message
        assert len(re.findall(MINI_ACTION_REGEX, message["content"], re.DOTALL)) == 1
        assert message["content"].startswith("THOUGHT: ")


def test_text_mode_speaks_and_reads_bash_fences_of_mini_1x(tmp_path: Path) -> None:
    repo = S.checkout(tmp_path / "repo")
    run = S.drive(S.model(), repo, style="text", stop_before=until("edit"))
    modern = run.sent[-1]
    legacy = [
        {**m, "content": m["content"].replace("mswea_bash_command", "bash")} for m in copy.deepcopy(modern)
    ]
    step_modern, commands_modern, _ = ask(S.model(), modern, "text")
    step_legacy, commands_legacy, response = ask(S.model(), legacy, "text", syntax=msgs.MINI_1X_ACTIONS)
    assert (step_legacy, commands_legacy) == (step_modern, commands_modern)
    assert "```bash\n" in response["choices"][0]["message"]["content"]


def test_unknown_task_submits_without_changes(style: str) -> None:
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix issue 9000."},
    ]
    step, commands, response = ask(S.model(), messages, style)
    assert step == "unknown_task" and commands == [cmds.SUBMIT_EMPTY]
    assert response["scripted_stand_in"]["task"] is None


def test_baseline_run_resolves_and_submits_like_mini_asks(tmp_path: Path, style: str) -> None:
    repo = S.checkout(tmp_path / "repo")
    run = S.drive(S.model(), repo, style=style)
    assert run.exit == "Submitted"
    assert run.commands[-3:] == [
        "git diff -- src/shopcart/cart.py src/shopcart/money.py > patch.txt",
        "cat patch.txt",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt",
    ]
    assert "+        return self.subtotal() * self.discount_percent / 100" in run.submission
    assert S.run_tests(repo).returncode == 0


def test_wrong_first_guess_is_reverted_after_the_tests_fail(tmp_path: Path) -> None:
    repo = S.checkout(tmp_path / "repo")
    run = S.drive(S.model(S.CALM.replace(wrong_first_rate=1.0)), repo, style="tool_calls")
    assert run.exit == "Submitted"
    steps = run.steps
    assert steps.index("revert") > steps.index("test")
    assert steps.count("test") == 2
    assert S.run_tests(repo).returncode == 0


def _visible_before_edit(run: S.Run) -> None:
    """Every clean edit had its old text visible in a read output of that file."""
    task = S.book().tasks[0]
    for sent, response in zip(run.sent, run.responses, strict=True):
        if response["scripted_stand_in"]["policy_step"] != "edit":
            continue
        (command,) = [a.command for a in msgs.actions(response["choices"][0]["message"], S.TEXT_ACTIONS)]
        edit = next(
            e for e in (*task.edits, task.wrong_first) if cmds.classify(command, task).edit[2] == e.new
        )
        seen = False
        for c, j in outputs(sent):
            read = cmds.parse_read(c)
            if read is not None and read.path == edit.path:
                seen = seen or edit.old in file_text(sent[j]["content"], read.numbered)
        assert seen, f"edit of {edit.path} without its old text in view"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("deleter", "label"),
    [
        (S.delete_tool_output(keep_last=2), "delayed-turn-100"),
        (S.delete_tokens(0.5, keep_last=2, seed=3), "delayed-token-50"),
        (S.delete_tokens(0.25, keep_last=0, seed=3), "immediate-token-25"),
    ],
)
def test_never_edits_unseen_text(tmp_path: Path, deleter, label: str) -> None:
    for k in range(3):
        run = S.drive(default_model(), S.checkout(tmp_path / f"r{k}"), delete=deleter, seed_header=f"{label}-{k}")
        assert run.exit == "Submitted"
        _visible_before_edit(run)


@pytest.mark.slow
def test_immediate_total_deletion_ends_before_the_cap(tmp_path: Path) -> None:
    """Nothing is ever visible: bounded re-reads, then a blind edit or giving up."""
    deleter = S.delete_tool_output(keep_last=0)
    lengths = []
    for k in range(4):
        run = S.drive(
            S.model(ScriptedSettings.from_mapping({"stubborn_rate": 0.0})),
            S.checkout(tmp_path / f"r{k}"),
            delete=deleter,
            seed_header=f"imm-{k}",
        )
        assert run.exit == "Submitted"
        assert "edit" not in run.steps and "pieced_edit" not in run.steps
        assert run.steps.count("reread") >= 3
        assert {"blind_edit", "give_up"} & set(run.steps)
        lengths.append(len(run.responses))
    assert max(lengths) < 60
    # a stubborn run loops: ten or more identical reads in a row
    stubborn = S.drive(
        S.model(ScriptedSettings.from_mapping({"stubborn_rate": 1.0})),
        S.checkout(tmp_path / "stubborn"),
        delete=deleter,
        seed_header="imm-0",
    )
    longest, current, previous = 0, 0, None
    for command in stubborn.commands:
        current = current + 1 if command == previous else 1
        longest, previous = max(longest, current), command
    assert longest >= 10


def test_lost_reasoning_costs_reorientation_turns(tmp_path: Path) -> None:
    forget = S.delete_reasoning(keep_last=0)
    stop = until("test")
    settings = S.CALM
    run = S.drive(S.model(settings), S.checkout(tmp_path / "a"), delete=forget, stop_before=stop)
    assert "reorient" in run.steps
    assert "git diff" in run.commands
    kept = S.drive(S.model(settings), S.checkout(tmp_path / "b"), stop_before=stop)
    assert "reorient" not in kept.steps
    no_memory = S.drive(
        S.model(settings.replace(reasoning_memory=False)),
        S.checkout(tmp_path / "c"),
        delete=forget,
        stop_before=stop,
    )
    assert "reorient" not in no_memory.steps
    assert len(run.responses) > len(kept.responses) == len(no_memory.responses)


def test_pages_through_a_long_file_whose_read_was_cut_short(tmp_path: Path) -> None:
    """``cat`` of a long file is cut to head and tail by mini's observation template; the
    needed text sits in the elided middle, so the model pages with line numbers to find it."""
    import json as _json

    import yaml as _yaml

    tasks = tmp_path / "tasks" / "demo__long-1"
    repo = tmp_path / "long"
    (repo / "pkg").mkdir(parents=True)
    body = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(400))
    body = body.replace("    return x + 200\n", "    return x - 200\n")
    (repo / "pkg" / "funcs.py").write_text(body)
    S.git(repo, "init", "-q", "-b", "main")
    S.git(repo, "add", "-A")
    S.git(repo, "commit", "-q", "-m", "base")
    tasks.mkdir(parents=True)
    statement = "helper_200 subtracts instead of adding\n\nhelper_200(1) should be 201."
    (tasks / "instance.json").write_text(
        _json.dumps({"instance_id": "demo__long-1", "problem_statement": statement})
    )
    (tasks / "solution.yaml").write_text(
        _yaml.safe_dump(
            {
                "summary": "helper_200 subtracts 200 instead of adding it",
                "locate": ["grep -n 'def helper_200' pkg/funcs.py"],
                "read": [{"path": "pkg/funcs.py"}],
                "edits": [
                    {
                        "path": "pkg/funcs.py",
                        "old": "def helper_200(x):\n    return x - 200\n",
                        "new": "def helper_200(x):\n    return x + 200\n",
                        "why": "every other helper adds its number",
                    }
                ],
                "test": "python -c 'import pkg.funcs as f; assert f.helper_200(1) == 201; print(\"ok\")'",
            }
        )
    )
    from forgetting.demo.scripted import TaskBook

    model = ScriptedModel(TaskBook.load(tmp_path / "tasks"), S.CALM)
    run = S.drive(model, repo, style="text", task_id="demo__long-1", tasks=tmp_path / "tasks")
    assert run.exit == "Submitted"
    # the grep output said line 601: it reads around it with line numbers, then edits
    assert run.commands[:3] == [
        "grep -n 'def helper_200' pkg/funcs.py",
        "cat pkg/funcs.py",
        "nl -ba pkg/funcs.py | sed -n '591,613p'",
    ]
    assert run.steps[:4] == ["locate", "read", "reread", "edit"]
    assert "+    return x + 200" in run.submission
