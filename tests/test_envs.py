"""Software deployment: the conda environment files hold third-party packages only (exactly
pyproject.toml's), so they mean the same wherever Snakemake copies them; every job imports the
package of its own checkout through workflow/scripts/_checkout.py, whatever is installed.

What cannot run here (no conda on these machines): `snakemake --software-deployment-method
conda` creating the environments. It stops at once with "Error running conda info. Is conda
installed and accessible?"; the environments' creation is left to the cluster (docs/cluster.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import InvalidRequirement, Requirement

from forgetting_testkit.checkout import ROOT

ENVS = sorted((ROOT / "envs").glob("*.yaml"))
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pip_section(path: Path) -> list[str]:
    deps = yaml.safe_load(path.read_text())["dependencies"]
    (pip,) = [d["pip"] for d in deps if isinstance(d, dict) and "pip" in d]
    return [str(r) for r in pip]


def test_there_are_the_three_environments_the_rules_name():
    rules = "\n".join(p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    named = {line.split('"')[1].rsplit("/", 1)[-1] for line in rules.splitlines() if "../../envs/" in line}
    assert named == {p.name for p in ENVS} == {"agents.yaml", "analysis.yaml", "evaluation.yaml"}


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_an_environment_names_packages_only_exactly_the_projects(env):
    entries = pip_section(env)
    for entry in entries:
        try:
            req = Requirement(entry)  # a PEP 508 name: found on the index from any directory
        except InvalidRequirement:
            pytest.fail(f"{env.name}: {entry!r} is not a package requirement (a path, an option?)")
        assert req.url is None, entry
    assert entries == PROJECT["dependencies"] + PROJECT["optional-dependencies"]["pipeline"]


@pytest.mark.slow
@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_pip_reads_the_copied_file_without_looking_for_a_local_project(env, tmp_path):
    """As conda does for an environment file's pip section: a requirements file beside the copy
    Snakemake makes (.snakemake/conda/<hash>.yaml), pip run from that directory. Offline
    (--no-index), so pip can only fail: for a package, on finding no distribution; an entry that
    names a path (the old `-e ..[pipeline]`) fails on a directory that is no project."""
    copy_dir = tmp_path / "work" / ".snakemake" / "conda"
    copy_dir.mkdir(parents=True)
    shutil.copy(env, copy_dir / "0123abcd.yaml")
    (copy_dir / "condaenv.requirements.txt").write_text("\n".join(pip_section(copy_dir / "0123abcd.yaml")) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "--ignore-installed",
         "--disable-pip-version-check",
         "-r", "condaenv.requirements.txt"],
        cwd=copy_dir, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "does not appear to be a Python project" not in proc.stderr
    assert "Could not find a version that satisfies the requirement pyyaml>=6" in proc.stderr, proc.stderr[-2000:]


def test_a_job_imports_its_checkouts_package_with_no_package_installed(tmp_path):
    """`python -S`: no site-packages at all; the checkout is a copy somewhere else."""
    copy = tmp_path / "elsewhere" / "checkout"
    (copy / "workflow" / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "workflow" / "scripts" / "_checkout.py", copy / "workflow" / "scripts")
    shutil.copytree(ROOT / "src" / "forgetting", copy / "src" / "forgetting",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = "import sys; sys.path.append(sys.argv[1]); import _checkout, forgetting; print(forgetting.__file__)"
    out = subprocess.run([sys.executable, "-S", "-c", code, str(copy / "workflow" / "scripts")],
                         cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert out == str(copy / "src" / "forgetting" / "__init__.py")


def test_the_checkouts_package_wins_over_an_installed_one_and_finds_its_schema(tmp_path):
    """The interpreter here has another checkout's package installed (editable); a job of this
    checkout still imports this one, and its schema and resources resolve here."""
    code = ("import sys; sys.path.append(sys.argv[1]); import _checkout; "
            "from forgetting.foundation.config_schema import SCHEMA_PATH; print(SCHEMA_PATH)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "workflow" / "scripts")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert out == str(ROOT / "workflow" / "schemas" / "config.schema.yaml")


def test_every_workflow_script_imports_the_checkout_first():
    for script in sorted((ROOT / "workflow" / "scripts").glob("*.py")):
        if script.name == "_checkout.py":
            continue
        first = next(line for line in script.read_text().splitlines() if line.startswith(("import", "from")))
        assert first.startswith("import _checkout"), script.name
