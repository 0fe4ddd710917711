"""The test command's provisioning of the report checks (``scripts/lib.sh: ensure_report_tools``).

As root with apt-get, ``./scripts/test`` installs what the HTML report's browser check and the
LaTeX tables' compile check need; without root those tests skip with the reason it exports.
Test doubles, named as such: ``apt-get`` and ``id`` are scripts on a PATH of their own (this
test must not install anything or need root), and the "installed" chromium and pdflatex are
empty executables the fake apt-get writes there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from forgetting_testkit.checkout import ROOT

BASH = shutil.which("bash") or "/bin/bash"

FAKE_APT_GET = """#!{bash}
# test double of apt-get: records its arguments; "installs" chromium and pdflatex as empty scripts
echo "$*" >> "{log}"
[ "$1" = install ] || exit 0
[ -n "{fail}" ] && exit 100
for p in "$@"; do
  case "$p" in
    chromium) tool=chromium ;;
    texlive-latex-base) tool=pdflatex ;;
    *) continue ;;
  esac
  printf '#!{bash}\\n' > "{bin}/$tool"
  "{chmod}" +x "{bin}/$tool"
done
"""

FAKE_ID = """#!{bash}
# test double of id: the user id this test pretends to run as
echo {uid}
"""

SKIPS = ("FORGETTING_CHROMIUM_SKIP", "FORGETTING_TEX_SKIP")


def provision(
    tmp_path: Path, *, uid: int, installed: tuple[str, ...] = (), apt: bool = True, fail: bool = False
) -> tuple[subprocess.CompletedProcess[str], list[str], dict[str, str]]:
    """Run ``ensure_report_tools`` on a PATH that holds only the doubles (and ``dirname``);
    return the process, the fake apt-get's calls and the skip variables it exported."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt-get.log"
    log.touch()

    def script(name: str, text: str) -> None:
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)

    chmod = shutil.which("chmod")
    dirname = shutil.which("dirname")
    assert chmod and dirname
    os.symlink(dirname, bin_dir / "dirname")
    script("id", FAKE_ID.format(bash=BASH, uid=uid))
    if apt:
        script("apt-get", FAKE_APT_GET.format(bash=BASH, log=log, bin=bin_dir, chmod=chmod, fail="1" if fail else ""))
    for tool in installed:
        script(tool, f"#!{BASH}\n")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    report = "ensure_report_tools; for v in " + " ".join(SKIPS) + '; do echo "$v=${!v-}"; done'
    proc = subprocess.run(
        [BASH, "-c", f'. "{ROOT}/scripts/lib.sh"; {report}'],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    exported = dict(line.split("=", 1) for line in proc.stdout.splitlines() if line.split("=", 1)[0] in SKIPS)
    return proc, log.read_text().splitlines(), exported


def test_as_root_it_installs_chromium_and_tex_without_recommends(tmp_path):
    proc, calls, exported = provision(tmp_path, uid=0)
    assert proc.returncode == 0, proc.stderr
    assert calls == [
        "update -qq",
        "install -y -qq --no-install-recommends chromium texlive-latex-base texlive-latex-recommended",
    ]
    assert exported == {"FORGETTING_CHROMIUM_SKIP": "", "FORGETTING_TEX_SKIP": ""}  # nothing skips
    assert (tmp_path / "bin" / "chromium").is_file() and (tmp_path / "bin" / "pdflatex").is_file()


def test_as_root_it_installs_only_what_is_missing(tmp_path):
    proc, calls, exported = provision(tmp_path, uid=0, installed=("chromium",))
    assert proc.returncode == 0, proc.stderr
    assert calls[-1] == "install -y -qq --no-install-recommends texlive-latex-base texlive-latex-recommended"
    assert not any(exported.values())


def test_nothing_is_installed_when_both_are_there(tmp_path):
    proc, calls, exported = provision(tmp_path, uid=0, installed=("chromium", "pdflatex"))
    assert proc.returncode == 0, proc.stderr
    assert calls == [] and not any(exported.values())


@pytest.mark.parametrize("case", ["not root", "no apt-get"])
def test_without_root_or_apt_get_the_checks_skip_with_the_reason(tmp_path, case):
    proc, calls, exported = provision(tmp_path, uid=1000 if case == "not root" else 0, apt=case == "not root")
    assert proc.returncode == 0, proc.stderr
    assert calls == []  # not even apt-get update
    chromium, tex = exported["FORGETTING_CHROMIUM_SKIP"], exported["FORGETTING_TEX_SKIP"]
    assert chromium.startswith("chromium not installed (not root (or no apt-get)")
    assert "the HTML report's rendering is not checked" in chromium
    assert tex.startswith("pdflatex not installed (not root (or no apt-get)")
    assert "texlive-latex-base texlive-latex-recommended" in tex
    assert "skipped (chromium not installed" in proc.stderr


def test_a_failed_install_stops_the_test_command(tmp_path):
    proc, calls, _ = provision(tmp_path, uid=0, fail=True)
    assert proc.returncode == 1 and calls[-1].startswith("install ")
    assert "error: apt-get install chromium texlive-latex-base texlive-latex-recommended failed" in proc.stderr
    assert "FORGETTING_CHROMIUM_SKIP=" not in proc.stdout  # it exited before exporting anything
