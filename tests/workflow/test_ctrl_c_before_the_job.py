"""Ctrl-C while a job's Python is still in Snakemake's own script preamble (issue 25, item 2):
one line, no KeyboardInterrupt traceback, and the job stops.

Snakemake runs a ``script:`` job as ``PREFIX PYTHON SCRIPT`` through bash (snakemake/shell.py,
snakemake/script/__init__.py: ``PythonScript.execute_script``), the script being Snakemake's
preamble (``import pickle; snakemake = pickle.loads(…); from snakemake.logging import logger;
…``) followed by the rule's script, whose first line is ``import _checkout``. A terminal's Ctrl-C
reaches the job at any point, the preamble's second or more of imports included. The job here
is that command with the Snakefile's prefix (:func:`forgetting.workflow.job_shell_prefix`): its
"preamble" takes the SIGINT (sent to the job itself, as a terminal sends it to the whole group)
and goes on importing Snakemake; then the rule script's first import.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from forgetting.workflow import SNAKEMAKE_PREFIX, job_shell_prefix
from forgetting_testkit.checkout import ROOT, cli_env

PREAMBLE = """
import os, signal, sys
sys.path.extend([{scripts!r}])
os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C lands while Snakemake's preamble imports
from snakemake.logging import logger
from snakemake.iocontainers import Snakemake
"""
SCRIPT = """
import _checkout  # noqa: F401
print("the job ran on", flush=True)
"""


def _job(tmp_path, prefix: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(PREAMBLE.format(scripts=str(ROOT / "workflow/scripts")) + SCRIPT)
    return subprocess.run(["bash", "-c", f"{prefix}{sys.executable} {script}"], cwd=ROOT, env=cli_env(),
                          capture_output=True, text=True, timeout=120)


def test_a_ctrl_c_during_snakemakes_preamble_is_one_line(tmp_path):
    prefix = job_shell_prefix(local=True)
    if prefix == SNAKEMAKE_PREFIX:
        pytest.skip("this machine's env cannot start a command with a signal held (GNU coreutils < 8.31)")
    done = _job(tmp_path, prefix)
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert done.stderr.strip() == "interrupted (SIGINT); the next invocation redoes what did not finish"
    assert "the job ran on" not in done.stdout  # the Ctrl-C is not lost: it stops the job
    assert done.returncode in (130, -2)  # by SIGINT, as Python ends on an uncaught KeyboardInterrupt


def test_without_the_prefix_the_same_ctrl_c_is_a_traceback(tmp_path):
    """What the prefix prevents (Snakemake's own prefix alone, as before): the test above can fail."""
    done = _job(tmp_path, SNAKEMAKE_PREFIX)
    assert "KeyboardInterrupt" in done.stderr and "Traceback" in done.stderr


def test_cluster_jobs_get_snakemakes_prefix_alone():
    assert job_shell_prefix(local=False) == SNAKEMAKE_PREFIX


def test_the_snakefile_sets_the_prefix_for_local_jobs():
    text = (ROOT / "Snakefile").read_text()
    assert "shell.prefix(job_shell_prefix(local=workflow.exec_mode == ExecMode.DEFAULT))" in text
