"""Hostile inputs that were a traceback, a hang or a silent wrong answer on main 8c875c1 and are
now one clean ``error:`` line (issue 25, "one clean line, no traceback"): a key given twice in
a YAML file, a ``served_name`` that is empty or holds a NUL, a ``base_url`` with a trailing
space or a malformed IPv6 host, ``forgetting serve --host`` with an IPv6 or unresolvable
address and an ``--advertise`` no URL can hold, an ``address_file`` under a regular file,
a ``run.json`` of the wrong shape (evaluated anyway), a torn ``eval.json`` that
``evaluate --errored`` skipped silently, and a misspelt ``snakemake --config`` key blamed on
the config file. (The proxy's cases: ``test_proxy_upstream.py``; a full disk:
``test_full_disk.py``.)

Each case is counted in the hostile-input summary under its class (``tests/hostile/conftest.py``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgetting_testkit.checkout import ROOT, cli_env
from forgetting_testkit.dryrun import snakemake_cmd
from forgetting_testkit.hostile import Outcome, changed, demo_config, run_main, snapshot


def judge(tally: Any, klass: str, argv: list[str], roots: list[Path], *, says: tuple[str, ...] = (),
          allowed: tuple[Path, ...] = ()) -> Outcome:
    """``forgetting ARGV`` must end in status 2 with one error line holding ``says``: no
    traceback, no hang, nothing below ``roots`` changed (``allowed`` aside)."""
    before = snapshot(*roots)
    outcome = run_main(argv)
    outcome.changed = changed(before, snapshot(*roots), allowed)
    found = tally.record(argv[0], outcome, expect="error", klass=klass)
    assert not found, f"{argv}: " + "; ".join(found)
    for fragment in says:
        assert fragment in outcome.stderr, outcome.stderr
    return outcome


# -- duplicate YAML keys -------------------------------------------------------------------------------------

DUPLICATES = {
    "a top-level key twice": "repeats: {baseline: 1, deletion: 1}\nrepeats: {baseline: 9, deletion: 9}\n",
    "a nested key twice": "statistics:\n  resamples: 100\n  seed: 3\n  resamples: 200\n",
    "a key twice in a flow mapping": "repeats: {baseline: 1, baseline: 2, deletion: 1}\n",
}


@pytest.mark.parametrize("what", sorted(DUPLICATES))
def test_a_key_given_twice_in_an_overlay_names_the_key_and_the_file(what, tmp_path, tally) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(DUPLICATES[what])
    judge(tally, "duplicate YAML key", ["plan", str(demo_config(tmp_path)), str(overlay)], [tmp_path],
          says=(str(overlay), "given twice", "line "))


def test_a_key_given_twice_in_the_config_and_in_a_set_value(tmp_path, tally) -> None:
    config = demo_config(tmp_path)
    config.write_text(config.read_text() + "agents: [mini]\n")  # `agents` is in the demo config already
    judge(tally, "duplicate YAML key", ["plan", str(config)], [tmp_path], says=(str(config), "'agents' given twice"))
    judge(tally, "duplicate YAML key", ["plan", str(demo_config(tmp_path)), "--set",
                                        "repeats={baseline: 1, baseline: 2, deletion: 1}"],
          [tmp_path], says=("--set repeats", "'baseline' given twice"))


def test_a_merge_key_may_still_override() -> None:
    from forgetting.foundation.inputs import parse_yaml

    assert parse_yaml("a: &a {x: 1}\nb:\n  <<: *a\n  x: 2\n", "s") == {"a": {"x": 1}, "b": {"x": 2}}


# -- served_name, base_url -----------------------------------------------------------------------------------

SERVED_NAMES = {"empty": "", "a NUL": "qwen\x00coder", "a trailing space": "qwen ", "a newline": "qwen\n",
                "a tab inside": "qw\ten"}


@pytest.mark.parametrize("what", sorted(SERVED_NAMES))
def test_a_served_name_that_is_empty_or_holds_a_control_character(what, tmp_path, tally) -> None:
    config = demo_config(tmp_path, model__served_name=SERVED_NAMES[what])
    judge(tally, "empty or NUL served_name", ["plan", str(config)], [tmp_path], says=("model.served_name",))


BASE_URLS = {
    "a trailing space": "http://127.0.0.1:8000/v1 ",
    "a leading space": " http://127.0.0.1:8000/v1",
    "a trailing newline": "http://127.0.0.1:8000/v1\n",
    "a malformed IPv6 host": "http://[::1/v1",
    "an IPv6 host not closed, with a port": "http://[fd00::7:8000/v1",
}


@pytest.mark.parametrize("what", sorted(BASE_URLS))
def test_a_base_url_with_a_space_or_a_malformed_ipv6_host(what, tmp_path, tally) -> None:
    config = demo_config(tmp_path, model={"backend": "endpoint", "name": "m",
                                          "endpoint": {"base_url": BASE_URLS[what]}})
    judge(tally, "malformed base_url", ["plan", str(config)], [tmp_path], says=("model.endpoint.base_url",))


def test_a_well_formed_ipv6_base_url_is_accepted(tmp_path) -> None:
    from forgetting.study.config import load_study

    config = demo_config(tmp_path, model={"backend": "endpoint", "name": "m",
                                          "endpoint": {"base_url": "http://[::1]:8000/v1"}})
    assert load_study(config).endpoint.base_url == "http://[::1]:8000/v1"


# -- forgetting serve: --host, --advertise, the address file -----------------------------------------------

def _serve(tmp_path: Path, *extra: str, address_file: Path | None = None) -> list[str]:
    address_file = address_file or tmp_path / "server" / "address.json"
    config = demo_config(tmp_path, model={"backend": "endpoint", "name": "scripted",
                                          "endpoint": {"address_file": str(address_file)}})
    return ["serve", str(config), "--backend", "scripted", "--port", "0", "--log", str(tmp_path / "serve.log"),
            *extra]


SERVE = {
    "--host an IPv6 address": (["--host", "::1"], "--host '::1'"),
    "--host every IPv6 interface": (["--host", "::"], "--host '::'"),
    "--host that does not resolve": (["--host", "no-such-host.invalid"], "--host 'no-such-host.invalid'"),
    "--host empty": (["--host", ""], "--host ''"),
    "--advertise with a space": (["--advertise", "gpu 017"], "--advertise 'gpu 017'"),
    "--advertise a URL": (["--advertise", "http://gpu017:8000/v1"], "--advertise"),
    "--advertise with a port": (["--advertise", "gpu017:8000"], "--advertise 'gpu017:8000'"),
    "--advertise empty": (["--advertise", ""], "--advertise ''"),
    "--advertise a newline": (["--advertise", "gpu017\nX: y"], "--advertise"),
}


@pytest.mark.parametrize("what", sorted(SERVE))
def test_serve_checks_its_host_and_what_it_advertises_before_any_server_starts(what, tmp_path, tally) -> None:
    extra, says = SERVE[what]
    judge(tally, "serve --host or --advertise unusable", _serve(tmp_path, *extra), [tmp_path], says=(says,))
    assert not (tmp_path / "server" / "address.json").exists() and not (tmp_path / "serve.log").exists()


def test_serve_with_its_address_file_under_a_regular_file(tmp_path, tally) -> None:
    (tmp_path / "afile").write_text("x")
    argv = _serve(tmp_path, address_file=tmp_path / "afile" / "address.json")
    judge(tally, "OSError on a path only the config names", argv, [tmp_path],
          says=("model.endpoint.address_file", "afile is not a directory"))
    assert not (tmp_path / "serve.log").exists()  # no server was started


def test_a_batch_waiting_for_an_address_under_a_regular_file_stops_at_once(tmp_path) -> None:
    from forgetting.endpoint.address import AddressError, wait_for_address

    (tmp_path / "afile").write_text("x")
    slept: list[float] = []
    with pytest.raises(AddressError, match="afile is not a directory"):
        wait_for_address(tmp_path / "afile" / "address.json", 3600, sleep=slept.append)
    assert not slept  # on main 8c875c1 it waited the whole address_wait_s for a file that cannot appear


def test_an_oserror_on_a_path_only_the_config_names_is_one_line(tmp_path, tally) -> None:
    """The study's paths are the user's: an OSError there is theirs to fix, not a traceback."""
    import argparse

    from forgetting.cli import _user_path, named_paths
    from forgetting.commands.study_args import noted
    from forgetting.study.config import load_study

    (tmp_path / "afile").write_text("x")
    config = demo_config(tmp_path, execution__scratch_dir=str(tmp_path / "afile" / "scratch"))

    args = argparse.Namespace(config=[str(config)], set=[])
    noted(args, load_study(config))
    exc = NotADirectoryError(20, "Not a directory", str(tmp_path / "afile" / "scratch" / "run-1"))
    assert _user_path(exc, named_paths(args)) == str(tmp_path / "afile" / "scratch" / "run-1")
    tally.count("cli", "OSError on a path only the config names")


# -- run.json of the wrong shape; evaluate --errored and a torn eval.json ------------------------------------

def _run_copy(world: Any, d: Path) -> Path:
    rel = world.mini_run.relative_to(world.study)
    run = d / "results" / rel
    shutil.copytree(world.mini_run, run)
    for name in ("eval.json", "eval"):
        p = run / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    return run


RUN_RECORDS = {
    "a JSON list": "[1, 2]",
    "an empty object": "{}",
    "only a run id": None,  # filled in: the shape the testkit wrote on main
    "status a number": "status",
    "another run's record": "other",
}


@pytest.mark.parametrize("what", sorted(RUN_RECORDS))
def test_a_run_record_of_the_wrong_shape_is_not_evaluated(what, world, tmp_path, tally) -> None:
    run = _run_copy(world, tmp_path)
    record = json.loads((run / "run.json").read_text())
    text = RUN_RECORDS[what]
    if text is None:
        text = json.dumps({"run_id": record["run_id"]})
    elif text == "status":
        text = json.dumps({**record, "status": 5})
    elif text == "other":
        text = json.dumps({**record, "run_id": "mini/baseline/other__task-1/1"})
    (run / "run.json").write_text(text)
    config = demo_config(tmp_path)
    outcome = judge(tally, "run.json of the wrong shape", ["evaluate", str(run), "--config", str(config)],
                    [tmp_path, world.study], says=(str(run / "run.json"),))
    assert not (run / "eval.json").exists(), outcome.stderr


def test_a_run_record_of_the_wrong_shape_fails_its_run_only_in_a_batch(world, tmp_path) -> None:
    from forgetting.evaluate.batch import check_run_record
    from forgetting.foundation.errors import RunOutputError
    from forgetting.study.config import load_study

    run = _run_copy(world, tmp_path)
    record = json.loads((run / "run.json").read_text())
    check_run_record(run, record["run_id"])  # a whole record passes
    (run / "run.json").write_text(json.dumps({"run_id": record["run_id"]}))
    with pytest.raises(RunOutputError, match=r"run\.json"):
        check_run_record(run, record["run_id"])
    assert load_study(world.config)  # the shared study is untouched


def test_evaluate_errored_finds_a_torn_eval_json_instead_of_skipping_it(world, tmp_path, tally) -> None:
    from forgetting.evaluate.redo import errored_runs
    from forgetting.study.config import load_study

    study_dir = tmp_path / "study"
    shutil.copytree(world.study, study_dir)
    cfg = yaml.safe_load((study_dir / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(study_dir)
    (study_dir / "study.yaml").write_text(yaml.safe_dump(cfg))
    study = load_study(study_dir / "study.yaml")
    assert errored_runs(study) == {}  # the synthetic study has no evaluation error
    victim = sorted(study_dir.rglob("runs/**/eval.json"))[0]
    victim.write_bytes(victim.read_bytes()[: len(victim.read_bytes()) // 2])  # torn by a kill
    run_id = "/".join(victim.parent.parts[-4:])
    found = errored_runs(study)
    assert [run_id] in found.values(), found
    tally.count("evaluate", "torn eval.json skipped by --errored")


# -- Snakemake: a misspelt --config key, a key twice in --configfile -----------------------------------------

def _snakemake(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = demo_config(tmp_path)
    return subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", str(config), *args),
                          cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)


def _one_line(tally: Any, klass: str, proc: subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    outcome = Outcome(["snakemake"], 2 if proc.returncode else 0, proc.stdout, "\n".join(errors),
                      traceback=proc.stderr if "Traceback" in proc.stderr else None)
    found = tally.record("snakemake", outcome, expect="error", klass=klass)
    assert not found, proc.stderr[-3000:]
    return errors[0]


@pytest.mark.slow
def test_a_misspelt_config_key_is_blamed_on_config_not_on_the_config_file(tmp_path, tally) -> None:
    line = _one_line(tally, "misspelt --config key", _snakemake(tmp_path, "--config", "repats=3"))
    assert line.startswith("error: --config repats: not a key of the config"), line
    assert "study.yaml" not in line, line


@pytest.mark.slow
def test_a_bad_config_value_is_blamed_on_config(tmp_path, tally) -> None:
    line = _one_line(tally, "misspelt --config key", _snakemake(tmp_path, "--config", "agents=nope"))
    assert line.startswith("error: --config agents:"), line


@pytest.mark.slow
def test_a_key_given_twice_in_a_configfile_stops_the_workflow(tmp_path, tally) -> None:
    config = demo_config(tmp_path)
    config.write_text(config.read_text() + "agents: [mini]\n")
    proc = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", str(config)), cwd=ROOT,
                          env=cli_env(), capture_output=True, text=True, timeout=600)
    line = _one_line(tally, "duplicate YAML key", proc)
    assert str(config) in line and "'agents' given twice" in line, line


@pytest.mark.slow
def test_a_missing_configfile_is_snakemakes_own_traceback_and_the_readme_says_so(tmp_path) -> None:
    """Snakemake reads --configfile before the Snakefile runs: no check of ours can come first,
    so README.md says what the user sees, and what to run instead."""
    missing = tmp_path / "nope.yaml"
    proc = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", str(missing)), cwd=ROOT,
                          env=cli_env(), capture_output=True, text=True, timeout=600)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "FileNotFoundError" in said and str(missing) in said
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "a `--configfile` that does not exist is read by Snakemake itself" in readme
    assert "`FileNotFoundError: … No such file or directory`" in readme
    done = run_main(["plan", str(missing)])
    assert done.returncode == 2 and done.stderr.strip() == f"error: {missing}: config file not found"
