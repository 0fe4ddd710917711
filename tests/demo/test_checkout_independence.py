"""The demo's tool output does not depend on where the project is checked out.

The one output of the demo's agent shells that carried the checkout's path: a traceback through
pytest's own code — a test module that does not import (the demo's "test" step on a broken
edit) — names pytest's files under the virtual environment, which lies inside the checkout.
Two environments at paths of different lengths (as two clones' ``.venv`` are; pytest's
packages linked in, so the same code runs from both places) run the same failing test in the
same workspace, with the agent's shell environment (``agent.fixed_test_durations``): their
outputs are byte-identical. Without the demo's pytest plugin they are not (the path is there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from forgetting.run import mini

#: what pytest needs to run (its dependencies on this Python), linked into each environment
PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")


def _environment(where: Path) -> Path:
    """A virtual environment at ``where`` with this environment's pytest linked in; its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True, timeout=120)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    here = Path(__import__("_pytest").__file__).resolve().parent.parent
    for name in PACKAGES:
        if (here / name).exists():
            (site / name).symlink_to(here / name)
    return python


def _workspace(root: Path) -> Path:
    """A task repository whose test module cannot be imported (an edit that broke the indentation)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("from pkg.core import value\n")
    (root / "pkg" / "core.py").write_text("def value():\n    return 1\n      return 2\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text("from pkg import value\n\n\ndef test_value():\n"
                                                 "    assert value() == 1\n")
    return root


def _pytest_output(python: Path, workspace: Path, *, fixed: bool) -> str:
    env = {**os.environ, **mini.shell_env({}, local=True, fixed_test_durations=fixed)}
    env["PATH"] = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run([str(python), "-m", "pytest", "-q", "tests/test_core.py"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr  # a collection error
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def two_checkouts(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkouts")
    short = _environment(root / "a" / ".venv")
    long = _environment(root / "a-checkout-at-a-much-longer-path" / "of" / "the" / "project" / ".venv")
    # the workspace far from both (as the demo's, under the scratch directory, is from the checkout):
    # pytest names a file by its absolute path unless a relative one is shorter
    scratch = Path(tempfile.mkdtemp(prefix="forgetting-ws-"))
    try:
        yield short, long, _workspace(scratch / "forgetting-workspaces" / "0123456789abcdef" / "repo")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_agents_pytest_output_is_the_same_from_any_checkout(two_checkouts):
    short, long, workspace = two_checkouts
    a, b = (_pytest_output(p, workspace, fixed=True) for p in (short, long))
    assert "IndentationError" in a and "<site-packages>/_pytest/" in a, a
    assert str(short.parent.parent) not in a and str(long.parent.parent) not in b
    assert a == b
    assert str(workspace / "pkg" / "core.py") in a  # the task's own file, as the agent sees it


def test_without_the_plugin_the_path_is_there(two_checkouts):
    """The control: what the plugin takes out is really in pytest's output."""
    short, long, workspace = two_checkouts
    a, b = (_pytest_output(p, workspace, fixed=False) for p in (short, long))
    assert f"{short.parent.parent}/lib/" in a and f"{long.parent.parent}/lib/" in b


def test_a_path_pytest_writes_relative_up_to_the_root_is_named_too():
    """pytest writes a path relative to its start directory when that is shorter — climbing up
    to the root when the workspace and the environment share little (a warning's location)."""
    import importlib.util
    import sysconfig

    spec = importlib.util.spec_from_file_location("plugin", mini.PYTEST_PLUGIN_DIR / "forgetting_fixed_duration.py")
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    site = sysconfig.get_paths()["purelib"]
    for written in (f"{site}/_pytest/pathlib.py:123", f"../../../..{site}/_pytest/pathlib.py:123"):
        assert plugin._DIR.sub(plugin._name_of, written) == "<site-packages>/_pytest/pathlib.py:123"
