"""The scripted model under Trae agent's loop (the ``trae-cli`` test double's, in process): it
uses the tools Trae offers — its editor for views and edits, ``task_done`` to finish — so a
run ends submitted, not capped; deleted views are viewed again; an empty patch is refused by
``--must-patch``. The real ``trae-cli`` runs the same in tests/runner/test_trae_cli.py."""

from __future__ import annotations

import pytest

from forgetting.agents import MINI_SUBMIT_MARKER, TRAE_EDIT_TOOL, TRAE_FINISH_TOOL
from forgetting.demo.scripted import commands as cmds
from forgetting.demo.scripted.observations import file_text, is_intact, outcome
from forgetting_testkit import scripted as S
from forgetting_testkit.fakes.trae_cli import EXCEEDED, TOOLS, editor

CART = "src/shopcart/cart.py"


def _editor_calls(run: S.TraeRun, command: str) -> list[dict]:
    return [args for tool, args in run.calls if tool == TRAE_EDIT_TOOL and args["command"] == command]


def test_under_trae_it_views_and_edits_with_the_editor_and_finishes_with_task_done(tmp_path):
    repo = S.checkout(tmp_path / "repo")
    run = S.drive_trae(S.model(), repo)
    assert run.trajectory["success"] is True
    assert run.steps[-2:] == ["submit_diff", "submit"]
    assert run.calls[-1] == (TRAE_FINISH_TOOL, {})
    assert run.calls[-2] == ("bash", {"command": cmds.check_diff(("src/shopcart/cart.py", "src/shopcart/money.py"))})
    views, edits = _editor_calls(run, "view"), _editor_calls(run, "str_replace")
    assert views and edits
    assert all(a["path"].startswith(f"{repo.resolve()}/") for a in views + edits)  # Trae's editor: absolute paths
    # no mini-swe-agent submission, no shell edits or reads of the files it edits
    shell = [args["command"] for tool, args in run.calls if tool == "bash"]
    assert not any(MINI_SUBMIT_MARKER in c or "patch.txt" in c or c.startswith(("python3 -", "sed -i")) for c in shell)
    assert not (repo / "patch.txt").exists()
    assert S.run_tests(repo).returncode == 0
    # deterministic: the same run again makes the same calls (paths aside: a new checkout)
    again = S.drive_trae(S.model(), S.checkout(tmp_path / "again"))
    assert [(t, {**a, "path": a.get("path", "").replace("again", "repo")}) for t, a in again.calls] == [
        (t, {**a, "path": a.get("path", "")}) for t, a in run.calls
    ]


def test_under_trae_a_deleted_view_is_viewed_again(tmp_path):
    run = S.drive_trae(S.model(), S.checkout(tmp_path / "repo"), delete=S.delete_tool_output(keep_last=1))
    assert run.trajectory["success"] is True and "reread" in run.steps
    views = [a for a in _editor_calls(run, "view") if a["path"].endswith(CART)]
    assert len(views) >= 2 and views.count(views[0]) >= 2  # the same view again: a re-fetch


def test_under_trae_giving_up_without_a_patch_ends_capped(tmp_path):
    """Every output deleted at once: no edit ever applies; Trae refuses ``task_done`` with an
    empty patch (``--must-patch``), so the run reaches the step cap instead of submitting."""
    model = S.model(S.CALM.replace(give_up_rate=1.0))  # gives up rather than editing blind
    run = S.drive_trae(model, S.checkout(tmp_path / "repo"), delete=S.delete_tool_output(), max_steps=15)
    assert "give_up" in run.steps and run.steps[-1] == "submit"
    assert run.trajectory["success"] is False and run.trajectory["final_result"] == EXCEEDED
    assert run.calls[-3:] == [(TRAE_FINISH_TOOL, {})] * 3


def test_trae_tool_results_are_read_as_trae_writes_them(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("a = 1\nb = 2\nc = 3\n")
    view, _ = editor({"command": "view", "path": str(path)})
    shown = view.strip()  # Trae strips every tool result it sends
    assert is_intact(shown, plain=True) and file_text(shown, numbered=True) == "a = 1\nb = 2\nc = 3\n"
    damaged = "\n".join(line for line in shown.splitlines() if "b = 2" not in line)
    assert not is_intact(damaged, plain=True)  # a line gone: the numbers skip
    assert not is_intact("[tool output deleted]", plain=True)
    assert not is_intact(shown)  # not mini-swe-agent's <returncode>/<output> wrapper
    edited, _ = editor({"command": "str_replace", "path": str(path), "old_str": "b = 2\n", "new_str": "b = 'failed'\n"})
    assert outcome(edited) is True  # applied, though the snippet says "failed"
    _, refused = editor({"command": "str_replace", "path": str(path), "old_str": "zzz", "new_str": "y"})
    assert outcome(f"Tool call failed with error:\n{refused}") is False


TRAE_NAMES = [t["function"]["name"] for t in TOOLS]


@pytest.mark.parametrize(
    ("names", "task", "editor_", "finish"),
    [
        (TRAE_NAMES, "[Project root path]:\n/work/repo\n\n[Problem statement]: x", True, True),
        (TRAE_NAMES, "[Problem statement]: x", False, True),  # no root: no editor
        (["bash"], "[Project root path]:\n/work/repo\n\nx", False, False),  # mini-swe-agent: bash only
    ],
)
def test_it_uses_the_tools_the_agent_offers(names, task, editor_, finish):
    tools = [{"type": "function", "function": {"name": n}} for n in names]
    toolset = cmds.Toolset.offered(tools, task)
    assert (toolset.editor, toolset.finish, toolset.plain) == (editor_, finish, finish)
    view = cmds.view(CART, (3, 9))
    call = cmds.tool_call(view, toolset.root)
    assert call is not None and cmds.command_of(*call, toolset.root) == view
    assert cmds.classify(view, None).read == cmds.ReadCommand(CART, True, (3, 9))
    assert cmds.classify(cmds.TASK_DONE, None).kind == "submit_final"
