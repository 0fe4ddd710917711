"""A pytest plugin for the demo's agent shells (``agent.fixed_test_durations`` in the config).

Two things pytest prints change from run to run with nothing about the code changing: the
wall-clock seconds of its closing line ("14 passed in 0.06s") and the memory addresses in the
default reprs of objects a failure shows ("<Settings object at 0x7f1f587d6850>"). Through
token-level deletion and the scripted model's reading of them they would make two runs of the
demo differ. With this plugin loaded (``PYTEST_ADDOPTS=-p forgetting_fixed_duration``) the
closing line reads "14 passed in <duration not shown>" and every address pytest writes reads
"0x<address>"; nothing else about pytest changes. The study's runs on the cluster never load it.
"""

import re

import _pytest._io.terminalwriter
import _pytest.terminal

#: a memory address as CPython's default repr writes it (``at 0x7f1f587d6850``)
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{8,16}\b")
_write = _pytest._io.terminalwriter.TerminalWriter.write


def _no_duration(seconds: float) -> str:
    return "<duration not shown>"


def _write_without_addresses(self: object, msg: str, **kwargs: object) -> None:
    _write(self, _ADDRESS.sub("0x<address>", msg), **kwargs)


def pytest_configure(config: object) -> None:
    _pytest.terminal.format_session_duration = _no_duration
    _pytest._io.terminalwriter.TerminalWriter.write = _write_without_addresses
