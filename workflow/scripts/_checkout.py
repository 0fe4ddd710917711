"""Imported first by every script of the workflow: puts this checkout's ``src/`` first on
``sys.path``, so a job imports the ``forgetting`` package of the Snakefile it runs, in whichever
Python runs it — a conda environment of third-party packages only (``envs/*.yaml``), the
venv Snakemake runs in, a container. Snakemake puts the script's own directory on the path of
a ``script:`` job (after the environment's site-packages), which is how this module is found;
a path in an environment file (``-e ..``) could not do this, because Snakemake copies the file
to ``.snakemake/conda/`` before it creates the environment (docs/cluster.md, *Software*).
"""

import signal
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")
if sys.path[:1] != [SRC]:
    sys.path.insert(0, SRC)

# Ctrl-C while the job is still importing (before `with job(snakemake)` catches it): one line,
# not a traceback (forgetting.workflow.job says the same once the job runs)
_hook = sys.excepthook


def _interrupted(kind, value, tb):
    if issubclass(kind, KeyboardInterrupt):
        print("interrupted (SIGINT); the next invocation redoes what did not finish", file=sys.stderr, flush=True)
        return
    _hook(kind, value, tb)


sys.excepthook = _interrupted

# the Snakefile starts a local job with SIGINT held (forgetting.workflow.job_shell_prefix), so that
# a Ctrl-C during Snakemake's own preamble prints no traceback: released here, it takes effect now
if hasattr(signal, "pthread_sigmask"):
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
