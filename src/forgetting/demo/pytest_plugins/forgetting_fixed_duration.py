"""A pytest plugin for the demo's agent shells (``agent.fixed_test_durations`` in the config).

pytest's closing line reports wall-clock seconds ("14 passed in 0.06s"): the one piece of
run-to-run noise in the demo's tool outputs, and through token-level deletion and the
scripted model's reading of them it would make two runs of the demo differ. With this
plugin loaded (``PYTEST_ADDOPTS=-p forgetting_fixed_duration``) the line reads
"14 passed in <duration not shown>"; nothing else about pytest changes. The study's runs on
the cluster never load it.
"""

import _pytest.terminal


def _no_duration(seconds: float) -> str:
    return "<duration not shown>"


def pytest_configure(config: object) -> None:
    _pytest.terminal.format_session_duration = _no_duration
