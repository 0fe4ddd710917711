"""A full disk while a command writes its Parquet or CSV output: one ``error:`` line naming the
file, status 2, the earlier output left as it was and no temporary file behind — never
pyarrow's traceback (issue 25, "one clean line"). On a real full file system (a tiny tmpfs,
mounted when the tests run as root and may mount), and by an ENOSPC injected at the write
boundary (everywhere).

Each case is counted in the hostile-input summary under its class (``tests/hostile/conftest.py``)."""

from __future__ import annotations

import errno
import os
import subprocess
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forgetting_testkit.checkout import ROOT
from forgetting_testkit.hostile import changed, run_main, snapshot

CLASS = "full disk"


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (a real ENOSPC from the kernel once :func:`_fill` filled it)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the injected cases below run everywhere)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        (mnt / "out").mkdir()
        yield mnt / "out"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _commands(world: Any, out: Path) -> dict[str, list[str]]:
    return {
        "plan --out a Parquet file": ["plan", str(ROOT / "config/demo.yaml"), "--out", str(out / "runs.parquet")],
        "plan --out a CSV file": ["plan", str(ROOT / "config/demo.yaml"), "--out", str(out / "runs.csv")],
        "cost --out a Parquet file": ["cost", str(world.mini_run), "--out", str(out / "calls.parquet")],
        "label --out a CSV file": ["label", str(world.mini_run), "--out", str(out / "labels.csv")],
    }


NAMES = ["plan --out a Parquet file", "plan --out a CSV file", "cost --out a Parquet file", "label --out a CSV file"]


def _fill(where: Path) -> Path:
    """Fill the file system of ``where`` to its last byte; the filler (left out of the checks)."""
    filler = where.parent / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


def _judge(tally: Any, argv: list[str], out: Path, roots: list[Path], *, fill: bool = False) -> None:
    target = Path(argv[argv.index("--out") + 1])
    target.write_bytes(b"the earlier output\n")  # what a failed write must leave as it was
    if fill:
        _fill(out)
    before = snapshot(*roots)
    outcome = run_main(argv)
    outcome.changed = changed(before, snapshot(*roots))
    found = tally.record(argv[0], outcome, expect="error", klass=CLASS)
    assert not found, "; ".join(found)
    assert str(target) in outcome.stderr and "No space left on device" in outcome.stderr, outcome.stderr
    assert target.read_bytes() == b"the earlier output\n"
    assert [p.name for p in out.iterdir()] == [target.name]  # no temporary file left behind


@pytest.mark.parametrize("name", NAMES)
def test_a_full_file_system_is_one_line_naming_the_file(name, world, full_fs, tally) -> None:
    argv = _commands(world, full_fs)[name]
    _judge(tally, argv, full_fs, [full_fs, world.study], fill=True)


@pytest.mark.parametrize("name", NAMES)
def test_an_enospc_injected_at_the_write_is_one_line_naming_the_file(name, world, tmp_path, tally, monkeypatch):
    """What the kernel says to the write itself: the temporary file is written in part, then
    ENOSPC (pyarrow's words for Parquet, an OSError with the errno for CSV)."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    real_parquet, real_csv = pq.write_table, pcsv.write_csv

    def parquet_full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        Path(str(where)).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    def csv_full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        Path(str(where)).write_bytes(b"a,b\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", parquet_full)
    monkeypatch.setattr(pcsv, "write_csv", csv_full)
    out = tmp_path / "out"
    out.mkdir()
    try:
        _judge(tally, _commands(world, out)[name], out, [out, world.study])
    finally:
        monkeypatch.setattr(pq, "write_table", real_parquet)
        monkeypatch.setattr(pcsv, "write_csv", real_csv)


def test_a_workflow_job_that_fills_the_disk_ends_in_one_line(tmp_path, capsys) -> None:
    from forgetting.workflow import job

    log = tmp_path / "logs" / "stage.log"
    smk = types.SimpleNamespace(log=[str(log)])
    with pytest.raises(SystemExit) as exit_, job(smk):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.parquet"))
    assert exit_.value.code == 2
    line = f"error: {tmp_path / 'x.parquet'}: No space left on device"
    assert capsys.readouterr().err == line + "\n" and log.read_text() == line + "\n"
