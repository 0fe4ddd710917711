"""``forgetting.workflow.job``: the body of every workflow script ends a UserError with one
``error:`` line (stderr and the rule's log) and status 2; any other exception is a bug and
keeps its traceback."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from forgetting.foundation.errors import ConfigError
from forgetting.foundation.stagelog import StageLog
from forgetting.workflow import job


def test_a_user_error_is_one_line_in_the_log_and_on_stderr(tmp_path, capsys):
    log = tmp_path / "logs" / "stage.log"
    with pytest.raises(SystemExit) as exit_, job(SimpleNamespace(log=[str(log)])):
        raise ConfigError("config: repeats.baseline: 0 is less than the minimum of 1")
    assert exit_.value.code == 2
    line = "error: config: repeats.baseline: 0 is less than the minimum of 1"
    assert capsys.readouterr().err == line + "\n"
    assert log.read_text() == line + "\n"


def test_the_stage_log_already_holding_the_error_gets_it_once(tmp_path, capsys):
    log = tmp_path / "stage.log"
    with pytest.raises(SystemExit), job(SimpleNamespace(log=[str(log)])), StageLog(log) as out:
        out.line("working")
        raise ConfigError("bad")
    assert log.read_text().splitlines() == ["working", "error: bad"]
    assert capsys.readouterr().err == "error: bad\n"


def test_a_bug_keeps_its_traceback(tmp_path):
    with pytest.raises(ZeroDivisionError), job(SimpleNamespace(log=[str(Path(tmp_path) / "x.log")])):
        1 / 0  # noqa: B018


def test_every_workflow_script_runs_its_body_in_job():
    """A rule script outside ``job`` would end a UserError with a traceback in Snakemake's log."""
    scripts = sorted((Path(__file__).resolve().parent.parent / "workflow" / "scripts").glob("[!_]*.py"))
    outside = [s.name for s in scripts if "with job(snakemake):" not in s.read_text(encoding="utf-8")]
    assert scripts and outside == []


def test_ctrl_c_ends_a_job_with_one_line_and_no_traceback(tmp_path, capsys):
    """SIGINT reaches every job of the process group: one line in the log and on stderr, status 130."""
    log = tmp_path / "stage.log"
    with pytest.raises(SystemExit) as exit_, job(SimpleNamespace(log=[str(log)])), StageLog(log) as out:
        out.line("working")
        raise KeyboardInterrupt
    assert exit_.value.code == 130
    line = "interrupted (SIGINT); the next invocation redoes what did not finish"
    assert log.read_text().splitlines() == ["working", line]
    assert capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize(("stop", "line"), [
    (SystemExit(143), "stopped (SIGTERM); the next invocation redoes what did not finish"),
    (SystemExit(3), "stopped (exit status 3); the next invocation redoes what did not finish"),
    (RuntimeError(), "error: RuntimeError"),
    (OSError("  "), "error: OSError"),
])
def test_a_stage_log_never_ends_in_a_bare_error(tmp_path, stop, line):
    log = tmp_path / "stage.log"
    with pytest.raises(type(stop)), StageLog(log):
        raise stop
    assert log.read_text().splitlines() == [line]
