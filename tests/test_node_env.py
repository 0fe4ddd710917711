"""scripts/node-env: a venv of the node's own architecture for route C's GPU side on a mixed
site (docs/cluster.md); one made on another architecture is refused, never run."""

from __future__ import annotations

import os
import platform
import subprocess

from forgetting_testkit.checkout import ROOT

SCRIPT = ROOT / "scripts" / "node-env"


def test_a_venv_of_another_architecture_is_refused(tmp_path):
    env_dir = tmp_path / "env"
    (env_dir / "bin").mkdir(parents=True)
    other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    (env_dir / ".arch").write_text(other + "\n")
    proc = subprocess.run([str(SCRIPT), str(env_dir), "true"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {env_dir} was made on {other}, this node is {platform.machine()}: give " \
                                  "another DIR"


def test_a_venv_of_this_architecture_runs_the_command(tmp_path):
    env_dir = tmp_path / "env"
    (env_dir / "bin").mkdir(parents=True)
    os.symlink(subprocess.run(["sh", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip(),
               env_dir / "bin" / "python")
    (env_dir / ".arch").write_text(platform.machine() + "\n")
    (env_dir / "bin" / "hello").write_text("#!/bin/sh\necho from-env \"$@\"\n")
    (env_dir / "bin" / "hello").chmod(0o755)
    proc = subprocess.run([str(SCRIPT), str(env_dir), "hello", "a b"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from-env a b\n"
