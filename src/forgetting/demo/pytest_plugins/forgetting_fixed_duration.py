"""A pytest plugin for the demo's agent shells (``agent.fixed_test_durations`` in the config).

Two things pytest prints change from run to run with nothing about the code changing: the
wall-clock seconds of its closing line ("14 passed in 0.06s") and the memory addresses in the
default reprs of objects a failure shows ("<Settings object at 0x7f1f587d6850>"). Through
token-level deletion and the scripted model's reading of them they would make two runs of the
demo differ. With this plugin loaded (``PYTEST_ADDOPTS=-p forgetting_fixed_duration``) the
closing line reads "14 passed in <duration not shown>" and every address pytest writes reads
"0x<address>".

A third thing changes from checkout to checkout: where the Python environment lies. A
traceback through pytest's own code (a test module that does not import: pytest's collection
frames) names its files by their absolute paths — the virtual environment inside the project's
checkout, the interpreter's standard library — so two clones at paths of different lengths
would give the agent different text, the model different prompts and the tables different
token counts. With the plugin those directories read ``<site-packages>`` and ``<stdlib>``
("<site-packages>/_pytest/python.py:528: in importtestmodule"), and this plugin's own
directory (inside the checkout) ``<plugins>``; the task's own files (the
workspace, the same path in every checkout) are left as they are. Nothing else about pytest
changes. The study's runs on the cluster never load it.
"""

import os
import re
import sys
import sysconfig

import _pytest._io.terminalwriter
import _pytest.terminal

#: a memory address as CPython's default repr writes it (``at 0x7f1f587d6850``)
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{8,16}\b")
_write = _pytest._io.terminalwriter.TerminalWriter.write


def _environment_dirs() -> dict[str, str]:
    """The directories of this Python environment, each with the name it reads as: the
    packages' (``purelib``, ``platlib``) and the standard library's (this interpreter's and its
    base's: a virtual environment's stdlib is its base interpreter's), longest first."""
    names: dict[str, str] = {}
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars) if scheme_vars else sysconfig.get_paths()
        for key, name in (("purelib", "<site-packages>"), ("platlib", "<site-packages>"),
                          ("stdlib", "<stdlib>"), ("platstdlib", "<stdlib>")):
            path = paths.get(key)
            if path and len(path) > 1:
                names.setdefault(path.rstrip("/"), name)
    names.setdefault(os.path.dirname(os.path.abspath(__file__)), "<plugins>")
    return dict(sorted(names.items(), key=lambda item: -len(item[0])))


_DIRS = _environment_dirs()
#: any of them, as the start of a path (followed by ``/``): absolute, or relative up to the
#: root as pytest writes a path when that is shorter (``../../../../home/u/proj/.venv/…``)
_DIR = re.compile(r"(?:(?:\.\./)+|/)(?:" + "|".join(re.escape(d.lstrip("/")) for d in _DIRS)
                  + r")(?=/)") if _DIRS else None


def _name_of(match: re.Match[str]) -> str:
    return _DIRS["/" + match.group().lstrip("./")]


def _no_duration(seconds: float) -> str:
    return "<duration not shown>"


def _write_without_addresses(self: object, msg: str, **kwargs: object) -> None:
    msg = _ADDRESS.sub("0x<address>", msg)
    if _DIR is not None:
        msg = _DIR.sub(_name_of, msg)
    _write(self, msg, **kwargs)


def pytest_configure(config: object) -> None:
    _pytest.terminal.format_session_duration = _no_duration
    _pytest._io.terminalwriter.TerminalWriter.write = _write_without_addresses
