"""Hostile inputs, round two: paths that are not what they seem and the key in other spellings.

- **Special files as outputs** (``out special``): every output option of every command, given a
  FIFO, a socket, a symbolic link to a FIFO or a device node, is one ``error:`` line naming the
  option and the path, before any work — the special file is left as it was (an atomic write
  never replaces what is not a regular file: ``forgetting.foundation.atomic.refuse_special``).
- **Symbolic links in run directories** (``run-dir symlink``): a run whose ``patch.diff``,
  ``trajectory.json``, ``calls.jsonl``, ``run.json`` or ``eval.json`` links out of the results
  tree is refused, one line naming the file; the outside content reaches no output.
- **Linked run directories** (``linked run dir``): a run directory that is itself a link, or lies
  below a linked folder up to ``runs/``, is refused the same way, naming the linked folder
  (``forgetting.foundation.inputs.linked_problem``).
- **The key's other spellings** (``key spelling``): an ``address_file`` whose ``base_url``
  holds credentials, an API key that is not ASCII — one line, never the secret.

Every case reports to the shared tally (``tests/hostile/conftest.py``)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from forgetting_testkit.checkout import ROOT
from forgetting_testkit.hostile import changed, demo_config, run_main, snapshot


def judge(tally: Any, surface: str, argv: list[str], roots: list[Path], *, says: tuple[str, ...] = (),
          expect: str = "error", quiet: bool = False, secret: str | None = None, klass: str | None = None) -> Any:
    """Run ``forgetting ARGV`` in this process, hold it to the contract (nothing under ``roots``
    changed), and check that the error says ``says`` (and, ``quiet``, nothing on stdout: the
    refusal came before any work; ``secret``: it is nowhere in what was printed)."""
    before = snapshot(*roots)
    outcome = run_main(argv)
    outcome.changed = changed(before, snapshot(*roots))
    more = []
    for fragment in says:
        if fragment not in outcome.stderr:
            more.append(f"the error does not say {fragment!r}: {outcome.stderr.strip()}")
    if quiet and outcome.stdout.strip():
        more.append(f"work was done before the refusal: {outcome.stdout.strip()[:300]}")
    if secret is not None and secret in outcome.stdout + outcome.stderr:
        more.append("the secret was printed")
    found = tally.record(surface, outcome, expect=expect, more=more, klass=klass)
    assert not found, f"{argv}: " + "; ".join(found)
    return outcome


# -- special files as outputs ------------------------------------------------------------------------

def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


def _socket(p: Path) -> Path:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()  # the socket file stays
    return p


def _link_to_fifo(p: Path) -> Path:
    target = _fifo(p.with_name(p.name + ".fifo"))
    p.symlink_to(target)
    return p


def _link_to_dev_null(p: Path) -> Path:
    p.symlink_to("/dev/null")  # a write that followed it would replace /dev/null (as root)
    return p


SPECIAL: dict[str, Callable[[Path], Path]] = {
    "a FIFO": _fifo, "a socket": _socket, "a link to a FIFO": _link_to_fifo, "a link to /dev/null": _link_to_dev_null,
}


def _batch_key(config: Path) -> str:
    from forgetting.study.config import load_study
    from forgetting.study.plan import plan_batches

    return plan_batches(load_study(config))[0].key


#: each output option: (surface, file name, argv given the case's directory, the world and the target)
OUTPUTS: dict[str, tuple[str, str, Callable[[Path, Any, Path], list[str]]]] = {
    "plan --out": ("plan", "runs.parquet", lambda d, w, t: ["plan", str(demo_config(d)), "--out", str(t)]),
    "tasks sample --out": ("tasks", "ids.txt", lambda d, w, t: ["tasks", "sample", "-n", "3", "--out", str(t)]),
    "label --out": ("label", "rows.csv", lambda d, w, t: ["label", str(w.mini_run), "--out", str(t)]),
    "cost --out": ("cost", "rows.parquet", lambda d, w, t: ["cost", str(w.mini_run), "--out", str(t)]),
    "dataset fetch --out": ("dataset", "rows.jsonl", lambda d, w, t: ["dataset", "fetch", "--out", str(t)]),
    "run-batch --manifest": ("run-batch", "runs.json", lambda d, w, t: [
        "run-batch", str(c := demo_config(d)), "--batch", _batch_key(c), "--manifest", str(t)]),
    "run-batch --log": ("run-batch", "batch.log", lambda d, w, t: [
        "run-batch", str(c := demo_config(d)), "--batch", _batch_key(c), "--log", str(t)]),
    "scripted-model --port-file": ("scripted-model", "port", lambda d, w, t: [
        "scripted-model", "--port", "0", "--port-file", str(t)]),
    "serve address_file": ("serve", "address.json", lambda d, w, t: [
        "serve", "--backend", "scripted", "--host", "127.0.0.1", "--log", str(d / "server.log"),
        str(demo_config(d, model__backend="endpoint", model__endpoint={"address_file": str(t)}))]),
}


def special_cases() -> Iterator[tuple[str, str]]:
    for option in OUTPUTS:
        for what in SPECIAL:
            if option == "run-batch --log" and what == "a link to /dev/null":
                continue  # a log appended to may be a character device (/dev/null, a terminal)
            yield option, what


@pytest.mark.parametrize(("option", "what"), list(special_cases()), ids=lambda v: v)
def test_an_output_that_is_a_special_file_is_refused_before_any_work(world, tally, tmp_path, option, what):
    _command, name, argv_of = OUTPUTS[option]
    target = SPECIAL[what](tmp_path / name)
    argv = argv_of(tmp_path, world, target)
    judge(tally, "out special", argv, [tmp_path, world.study], says=(str(target), "not a regular file"), quiet=True)
    assert target.is_symlink() or not target.is_file()


def test_dev_null_itself_is_refused_as_an_output(tally):
    """``--out /dev/null`` names the machine's device node: refused by the check every command
    runs first (checked before the command runs at all: were it not refused, root would
    replace /dev/null)."""
    from forgetting.foundation.atomic import refuse_special
    from forgetting.foundation.errors import UserError
    from forgetting.foundation.inputs import check_output_file

    with pytest.raises(UserError, match="/dev/null: exists and is a character device, not a regular file"):
        check_output_file("/dev/null", "--out")
    with pytest.raises(OSError, match="not a regular file"):
        refuse_special("/dev/null")
    before = os.stat("/dev/null")
    outcome = judge(tally, "out special", ["plan", str(ROOT / "config/demo.yaml"), "--out", "/dev/null"], [],
                    says=("--out /dev/null",), quiet=True)
    assert len(outcome.stderr.strip().splitlines()) == 1
    after = os.stat("/dev/null")
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)


def test_the_atomic_writes_refuse_a_special_file(tmp_path):
    """The writes themselves (a caller that skipped the check): nothing written, the FIFO kept."""
    from forgetting.foundation import atomic

    fifo = _fifo(tmp_path / "f")
    for write in (lambda: atomic.write_text(fifo, "x"),
                  lambda: atomic.atomic_paths([tmp_path / "ok", fifo]).__enter__(),
                  lambda: atomic.atomic_output(fifo).__enter__()):
        with pytest.raises(atomic.NotARegularFile, match="a FIFO"):
            write()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"] and not fifo.is_file()
    (tmp_path / "regular").write_text("old")
    atomic.write_text(tmp_path / "regular", "new")  # a regular file is replaced, as before
    assert (tmp_path / "regular").read_text() == "new"


# -- the key's other spellings -----------------------------------------------------------------------

SECRET = "sk-hostile-secret-7f3a"


def _endpoint_study(d: Path, **endpoint: Any) -> tuple[Path, str]:
    config = demo_config(d, model__backend="endpoint", model__endpoint={"api_key_env": "FORGETTING_HOSTILE_KEY",
                                                                      "address_wait_s": 1, **endpoint},
                         execution__scratch_dir=str(d / "scratch"))
    return config, _batch_key(config)


def _address(d: Path, base_url: str) -> Path:
    import json

    path = d / "address.json"
    path.write_text(json.dumps({"base_url": base_url, "host": "127.0.0.1", "port": 9, "model": "scripted",
                                "backend": "scripted", "started": "2026-01-01T00:00:00Z", "job_id": None, "pid": 1}))
    return path


ADDRESS_URLS = {
    "user and password": f"http://user:{SECRET}@127.0.0.1:9/v1",
    "a bare key": f"http://{SECRET}@127.0.0.1:9/v1",
    "not http, with a key": f"ftp://{SECRET}@127.0.0.1:9/v1",
}


@pytest.mark.parametrize("what", list(ADDRESS_URLS))
def test_credentials_in_an_address_file_are_refused_and_never_echoed(tally, tmp_path, monkeypatch, what):
    monkeypatch.setenv("FORGETTING_HOSTILE_KEY", "sk-the-real-key-1")
    address = _address(tmp_path, ADDRESS_URLS[what])
    config, batch = _endpoint_study(tmp_path, address_file=str(address))
    judge(tally, "key spelling", ["run-batch", str(config), "--batch", batch], [address],
          says=(f"{address}: field 'base_url' (model.endpoint.address_file)", "credentials"), secret=SECRET)
    logs = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    assert all(SECRET.encode() not in p.read_bytes() for p in logs)


NOT_ASCII = {"Cyrillic": "sk-ключ-0001", "an en dash": "sk-\u2013-0002", "latin-1 é": "sk-caf\xe9-0003",
             "an emoji": "sk-\U0001f511-0004"}


@pytest.mark.parametrize("what", list(NOT_ASCII))
def test_an_api_key_that_is_not_ascii_is_one_line(tally, tmp_path, monkeypatch, what):
    """Before the fix such a key was a traceback (UnicodeEncodeError) once the endpoint's check
    sent its first request: a server listens here, so the request gets that far."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        monkeypatch.setenv("FORGETTING_HOSTILE_KEY", NOT_ASCII[what])
        config, batch = _endpoint_study(tmp_path, base_url=url)
        judge(tally, "key spelling", ["run-batch", str(config), "--batch", batch], [],
              says=("model.endpoint.api_key_env: the value of FORGETTING_HOSTILE_KEY holds a character outside ASCII",),
              secret=NOT_ASCII[what])
        monkeypatch.setenv("FORGETTING_HOSTILE_KEY", NOT_ASCII[what])
        judge(tally, "key spelling", ["proxy", "--upstream", url, "--deletion", "baseline", "--seed", "1",
                                      "--log", str(tmp_path / "log"), "--agent", "mini",
                                      "--api-key-env", "FORGETTING_HOSTILE_KEY"], [],
              says=("--api-key-env: the value of FORGETTING_HOSTILE_KEY",), secret=NOT_ASCII[what])
    finally:
        listener.close()


# -- symbolic links in run directories ------------------------------------------------------------------

OUTSIDE = "OUTSIDE-THE-RESULTS-TREE-5b1e"


def _study_copy(world: Any, d: Path) -> tuple[Path, Path]:
    """A copy of the shared synthetic study under ``d`` (its config pointing at the copy)."""
    import shutil

    study = d / "study"
    shutil.copytree(world.study, study, symlinks=True)
    config = study / "study.yaml"
    config.write_text(config.read_text().replace(str(world.study.resolve()), str(study.resolve())))
    return study, config


def _link_out(run_dir: Path, name: str, outside: Path) -> Path:
    """``run_dir/name`` replaced by a link to a copy of it outside the results tree, marked."""
    outside.mkdir(parents=True, exist_ok=True)
    original = run_dir / name
    copy_ = outside / name
    data = original.read_bytes() if original.is_file() else b""
    if name == "patch.diff":
        data = data + f"# {OUTSIDE}\n".encode()
    copy_.write_bytes(data)
    original.unlink(missing_ok=True)
    original.symlink_to(copy_)
    return original


RUN_FILES = ("trajectory.json", "calls.jsonl", "run.json", "patch.diff", "eval.json")


@pytest.mark.parametrize("command", ["label", "cost"])
@pytest.mark.parametrize("name", RUN_FILES)
def test_a_run_file_that_links_out_of_the_results_is_refused(world, tally, tmp_path, command, name):
    study, _ = _study_copy(world, tmp_path)
    run_dir = study / world.mini_run.relative_to(world.study)
    link = _link_out(run_dir, name, tmp_path / "elsewhere")
    judge(tally, "run-dir symlink", [command, str(run_dir)], [tmp_path], says=(f"{link}: a symbolic link",))


@pytest.mark.parametrize("name", RUN_FILES)
def test_a_run_file_that_is_a_fifo_is_refused_not_waited_on(world, tally, tmp_path, name):
    study, _ = _study_copy(world, tmp_path)
    run_dir = study / world.mini_run.relative_to(world.study)
    (run_dir / name).unlink(missing_ok=True)
    os.mkfifo(run_dir / name)
    judge(tally, "run-dir symlink", ["label", str(run_dir)], [tmp_path], says=(f"{run_dir / name}: a FIFO",))


def test_a_linked_patch_never_reaches_the_evaluation(world, tally, tmp_path):
    """``patch.diff`` links to a file elsewhere: the evaluation of that run is an error naming
    the file (counted with the evaluation errors), and the outside content is in no file of the
    results — not in ``eval/patch.diff``, not in ``eval.json`` — for the workflow's evaluation
    and for ``forgetting evaluate RUN_DIR``."""
    from forgetting.evaluate.batch import evaluate_batch
    from forgetting.study.config import load_study
    from forgetting.study.plan import plan_batches

    study_dir, config = _study_copy(world, tmp_path)
    run_dir = study_dir / world.mini_run.relative_to(world.study)
    link = _link_out(run_dir, "patch.diff", tmp_path / "elsewhere")
    (run_dir / "eval.json").unlink()
    outcome = judge(tally, "run-dir symlink", ["evaluate", str(run_dir), "--config", str(config), "--backend", "local"],
                    [tmp_path], says=(f"{link}: a symbolic link",))
    assert outcome.returncode == 2
    study = load_study(config)
    run_id = "/".join(run_dir.parts[-4:])
    batch = next(b for b in plan_batches(study) if any(r.run_id == run_id for r in b.runs))
    evaluate_batch(study, batch, manifest=tmp_path / "manifest.json", only={run_id})
    import json

    report = json.loads((run_dir / "eval.json").read_text())
    assert report["status"] == "error" and f"{link}: a symbolic link" in report["error"]
    holding = [p for p in study_dir.rglob("*")
               if p.is_file() and not p.is_symlink() and OUTSIDE.encode() in p.read_bytes()]
    assert holding == []
    assert link.is_symlink()  # left as it was: the user's to look at


LINKED = "linked run directory"
#: a folder of a run's path that is a link: how many levels above the run's files it is
LINKED_LEVELS = {"the run directory": 0, "its task folder": 1, "its configuration folder": 2,
                 "its agent folder": 3, "runs/": 4}


def _link_folder(run_dir: Path, level: int, outside: Path) -> Path:
    """The folder ``level`` above ``run_dir`` (0: itself) moved outside the results tree, a link to
    it left in its place, the run's patch marked: what a stage reads through it is outside."""
    import shutil

    folder = run_dir.parents[level - 1] if level else run_dir
    (run_dir / "patch.diff").write_bytes((run_dir / "patch.diff").read_bytes() + f"# {OUTSIDE}\n".encode())
    outside.mkdir(parents=True, exist_ok=True)
    moved = outside / folder.name
    shutil.move(folder, moved)
    folder.symlink_to(moved, target_is_directory=True)
    return folder


@pytest.mark.parametrize("command", ["label", "cost", "evaluate"])
@pytest.mark.parametrize("where", list(LINKED_LEVELS))
def test_a_run_directory_reached_through_a_link_is_refused(world, tally, tmp_path, command, where):
    """``linked run dir``: the run directory itself, or a folder above it up to ``runs/``, is a link
    out of the results tree — every file of the run would come from there. One line naming the
    linked folder; nothing of the outside content reaches an output."""
    study, config = _study_copy(world, tmp_path)
    run_dir = study / world.mini_run.relative_to(world.study)
    link = _link_folder(run_dir, LINKED_LEVELS[where], tmp_path / "elsewhere")
    argv = [command, str(run_dir)] + (["--config", str(config), "--backend", "local"] if command == "evaluate" else [])
    judge(tally, "linked run dir", argv, [tmp_path], says=(f"{link} is a symbolic link",), klass=LINKED)
    holding = [p for p in study.rglob("*") if p.is_file() and OUTSIDE.encode() in p.read_bytes()
               and not any(q.is_symlink() for q in (p, *p.parents))]
    assert holding == []


def test_the_evaluation_of_a_linked_run_directory_is_an_error_naming_the_link(world, tally, tmp_path):
    """The workflow's evaluation: a run whose directory is a link is an evaluation error (its log
    line naming the link; counted with the evaluation errors, redone once the link is replaced),
    and nothing is written through the link."""
    import json

    from forgetting.evaluate.batch import evaluate_batch
    from forgetting.study.config import load_study
    from forgetting.study.plan import plan_batches

    study_dir, config = _study_copy(world, tmp_path)
    run_dir = study_dir / world.mini_run.relative_to(world.study)
    (run_dir / "eval.json").unlink()
    link = _link_folder(run_dir, 0, tmp_path / "elsewhere")
    outside = sorted((tmp_path / "elsewhere").rglob("*"))
    study = load_study(config)
    run_id = "/".join(run_dir.parts[-4:])
    batch = next(b for b in plan_batches(study) if any(r.run_id == run_id for r in b.runs))
    manifest = tmp_path / "manifest.json"
    evaluate_batch(study, batch, manifest=manifest, only={run_id}, log=tmp_path / "evaluate.log")
    assert sorted((tmp_path / "elsewhere").rglob("*")) == outside  # nothing written through the link
    assert json.loads(manifest.read_text())["runs"][run_id]["status"] == "error"
    assert f"{link} is a symbolic link" in (tmp_path / "evaluate.log").read_text()
    tally.count("linked run dir", klass=LINKED)


def test_an_analysis_lists_a_linked_run_as_not_analysed(world, tmp_path):
    """The analysis of a batch: a run whose ``eval.json`` links out is not analysed, the reason
    naming the file — a counted exclusion, never the outside content."""
    import pyarrow.parquet as pq

    from forgetting.analyze.batch import analyze_batch
    from forgetting.foundation.layout import Layout
    from forgetting.study.config import load_study
    from forgetting.study.plan import plan_batches

    study_dir, config = _study_copy(world, tmp_path)
    run_dir = study_dir / world.mini_run.relative_to(world.study)
    link = _link_out(run_dir, "eval.json", tmp_path / "elsewhere")
    study = load_study(config)
    run_id = "/".join(run_dir.parts[-4:])
    batch = next(b for b in plan_batches(study) if any(r.run_id == run_id for r in b.runs))
    out = Layout(study.results_dir).batch_dir(batch.key)
    analyze_batch(study, batch, outputs={n: tmp_path / "out" / f"{n}.parquet" for n in
                                         ("summary", "calls", "tool_calls", "run_costs", "timings")})
    rows = {r["run_id"]: r for r in pq.read_table(tmp_path / "out" / "summary.parquet").to_pylist()}
    assert rows[run_id]["status"] is None and f"{link}: a symbolic link" in rows[run_id]["error"]
    assert sum(r["status"] is not None for r in rows.values()) == len(batch.runs) - 1
    assert out.is_dir()
