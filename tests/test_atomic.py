"""Atomic writes: a new file gets the mode any new file gets under the umask (not a temporary
file's 0600), and a set of files is replaced only as a whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest

from forgetting.foundation.atomic import atomic_path, atomic_paths, write_json, write_text
from forgetting.records.schemas import write_table


@pytest.fixture
def umask():
    def set_to(mask: int) -> None:
        os.umask(mask)

    old = os.umask(0o022)
    yield set_to
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    write_text(tmp_path / "a.txt", "x")
    write_json(tmp_path / "b.json", {"x": 1})
    with atomic_path(tmp_path / "c.parquet") as tmp:
        write_table(pa.table({"x": [1]}), tmp)
    with atomic_paths([tmp_path / "d.bin", tmp_path / "e.bin"]) as temps:
        for t in temps:
            t.write_bytes(b"x")
    for name in ("a.txt", "b.json", "c.parquet", "d.bin", "e.bin"):
        assert mode(tmp_path / name) == expected, name


def test_a_replaced_file_takes_the_umask_not_its_old_mode(tmp_path, umask):
    target = tmp_path / "a.txt"
    target.write_text("old")
    target.chmod(0o600)
    write_text(target, "new")
    assert mode(target) == 0o644 and target.read_text() == "new"


def test_a_set_of_files_is_replaced_only_when_every_one_is_written(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old a")
    b.write_text("old b")
    with pytest.raises(RuntimeError), atomic_paths([a, b]) as (ta, tb):
        ta.write_text("new a")
        raise RuntimeError("the second one fails")
    assert (a.read_text(), b.read_text()) == ("old a", "old b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]  # no temporary file left
    (tmp_path / ".a.txt.deadbeef.tmp").write_text("left by a killed attempt")
    with atomic_paths([a, b]) as (ta, tb):
        ta.write_text("new a")
        tb.write_text("new b")
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_a_directory_is_never_written_over(tmp_path):
    (tmp_path / "out.json").mkdir()
    with pytest.raises(IsADirectoryError):
        write_json(tmp_path / "out.json", {})
    assert (tmp_path / "out.json").is_dir() and not list((tmp_path / "out.json").iterdir())


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write_and_a_live_ones_is_not(tmp_path):
    import signal
    import subprocess
    import sys

    target = tmp_path / "table.csv"
    # a writer killed (SIGKILL: no finally runs) while its temporary file is open
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from forgetting.foundation.atomic import atomic_path\n"
        f"with atomic_path({str(target)!r}) as tmp:\n"
        "    tmp.write_text('half')\n"
        "    print(tmp, flush=True)\n"
        "    time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    killed = Path(writer.stdout.readline().strip())
    assert killed.is_file() and f".{writer.pid}@" in killed.name
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    # a live writer of the same file (this machine, a process that still runs)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = killed.with_name(killed.name.replace(f".{writer.pid}@", f".{sleeper.pid}@"))
        live.write_text("being written")
        write_text(target, "whole")
        assert target.read_text() == "whole"
        assert not killed.exists() and live.is_file()
    finally:
        sleeper.kill()
        sleeper.wait()
