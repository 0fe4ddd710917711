"""The embedded demo's tasks: registry, validation and checkout (``resources/demo/``).

Each task is ``<tasks_dir>/<instance_id>/`` with ``instance.json`` (the SWE-bench instance
fields plus ``test_cmd``) and ``solution.yaml`` (what the scripted model knows; see
``resources/demo/README.md``). The repository files are stored once per project, fixed
and with every task's tests, under ``<tasks_dir>/../projects/<project>/``. A task's base
commit is that tree with the task's ``test_patch`` and gold ``patch`` taken back out
(``git apply -R``), committed with fixed author, committer, dates and message, so its
hash is the same on every machine and equals ``instance.json``'s ``base_commit``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from forgetting.foundation.errors import ResourceError, UserError
from forgetting.foundation.inputs import parse_json, parse_yaml, read_text

#: ``demo__<project>-<number>``
ID_PATTERN = re.compile(r"demo__(?P<project>[a-z][a-z0-9_]*)-(?P<number>[1-9][0-9]*)")

#: the author and committer of every base commit
GIT_IDENTITY = ("demo maintainer", "maintainer@demo.invalid")

#: files and directories of a project tree that never enter a base commit
_JUNK = ("__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", "*.pyc", "*.egg-info", ".git")

_STRING_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "version",
    "created_at",
    "environment_setup_commit",
    "hints_text",
    "test_cmd",
)
_SOLUTION_KEYS = ("summary", "locate", "read", "edits", "test", "wrong_first")
_EDIT_KEYS = ("path", "old", "new", "why")


def demo_task_ids(tasks_dir: Path) -> list[str]:
    """The ids of the demo tasks under ``tasks_dir`` (one directory with an instance.json each)."""
    return sorted(p.parent.name for p in Path(tasks_dir).glob("*/instance.json"))


def projects_dir(tasks_dir: Path) -> Path:
    """Where the projects' trees live: ``projects/`` beside the tasks directory."""
    return Path(tasks_dir).resolve().parent / "projects"


# --------------------------------------------------------------------------- instance.json


def _check_instance(data: Any, path: Path, instance_id: str) -> None:
    if not isinstance(data, dict):
        raise ResourceError(f"{path}: expected a JSON object")
    for key in _STRING_FIELDS:
        if not isinstance(data.get(key), str):
            raise ResourceError(f"{path}: {key}: expected a string, got {type(data.get(key)).__name__}")
    if data["instance_id"] != instance_id:
        raise ResourceError(f"{path}: instance_id is {data['instance_id']!r}, expected {instance_id!r}")
    match = ID_PATTERN.fullmatch(instance_id)
    if match is None:
        raise ResourceError(f"{path}: instance_id: {instance_id!r} is not demo__<project>-<number>")
    if data["repo"] != f"demo/{match['project']}":
        raise ResourceError(f"{path}: repo: expected 'demo/{match['project']}', got {data['repo']!r}")
    for key in ("base_commit", "environment_setup_commit"):
        if not re.fullmatch(r"[0-9a-f]{40}", data[key]):
            raise ResourceError(f"{path}: {key}: expected a 40-digit hex commit hash")
    for key in ("patch", "test_patch"):
        if not data[key].startswith("diff --git a/"):
            raise ResourceError(f"{path}: {key}: expected a unified diff starting with 'diff --git a/'")
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        tests = data.get(key)
        if not isinstance(tests, list) or not all(isinstance(t, str) and "::" in t for t in tests):
            raise ResourceError(f"{path}: {key}: expected a list of pytest node ids (file::test)")
    if not data["FAIL_TO_PASS"]:
        raise ResourceError(f"{path}: FAIL_TO_PASS: needs at least one test")
    _commit_date(data["created_at"], path)


def _commit_date(created_at: str, path: Path) -> str:
    """``created_at`` as git's internal date format (``<epoch> +0000``)."""
    try:
        moment = datetime.fromisoformat(created_at)
    except ValueError:
        raise ResourceError(f"{path}: created_at: {created_at!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        raise ResourceError(f"{path}: created_at: {created_at!r} needs a time zone (e.g. a trailing Z)")
    return f"{int(moment.timestamp())} +0000"


def _task_file(tasks_dir: Path, instance_id: str, name: str, missing: str) -> tuple[Path, str]:
    path = Path(tasks_dir) / instance_id / name
    if not path.is_file() and not path.is_dir():
        raise ResourceError(f"{path}: {missing}")
    return path, read_text(path, what=name, error=ResourceError)


def load_instance(tasks_dir: Path, instance_id: str) -> dict[str, Any]:
    """A demo task's SWE-bench instance fields, checked."""
    path, text = _task_file(tasks_dir, instance_id, "instance.json", f"no such demo task {instance_id!r}")
    data = parse_json(text, str(path), error=ResourceError)
    _check_instance(data, path, instance_id)
    return data


# --------------------------------------------------------------------------- solution.yaml


def _relative_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ResourceError(f"{where}: expected a non-empty path")
    parts = Path(value).parts
    if Path(value).is_absolute() or ".." in parts:
        raise ResourceError(f"{where}: {value!r} must be relative to the repository, without '..'")
    return value


def _check_keys(obj: Any, keys: Sequence[str], where: str) -> None:
    """A mapping of some of ``keys`` and nothing else."""
    if not isinstance(obj, dict):
        raise ResourceError(f"{where}: expected a mapping with {', '.join(keys)}")
    unknown = sorted(set(obj) - set(keys))
    if unknown:
        raise ResourceError(f"{where}: unknown key(s) {', '.join(unknown)}")


def _check_edit(edit: Any, where: str) -> None:
    _check_keys(edit, _EDIT_KEYS, where)
    _relative_path(edit.get("path"), f"{where}.path")
    for key in ("old", "new", "why"):
        if not isinstance(edit.get(key), str):
            raise ResourceError(f"{where}.{key}: expected a string")
    if not edit["old"] or not edit["why"].strip():
        raise ResourceError(f"{where}: old and why must not be empty")
    if edit["old"] == edit["new"]:
        raise ResourceError(f"{where}: old and new are the same text")


def _check_read(entry: Any, where: str) -> None:
    if not isinstance(entry, dict) or set(entry) - {"path", "lines"}:
        raise ResourceError(f"{where}: expected {{path: ..., lines: [first, last]}} (lines optional)")
    _relative_path(entry.get("path"), f"{where}.path")
    lines = entry.get("lines")
    if lines is not None and not (
        isinstance(lines, list)
        and len(lines) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
        and 1 <= lines[0] <= lines[1]
    ):
        raise ResourceError(f"{where}.lines: expected [first, last], 1-based, first <= last")


def _check_solution(data: Any, path: Path) -> None:
    _check_keys(data, _SOLUTION_KEYS, str(path))
    for key in ("summary", "test"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ResourceError(f"{path}: {key}: expected a non-empty string")
    locate = data.get("locate")
    commands_ok = isinstance(locate, list) and all(isinstance(c, str) and c.strip() for c in locate)
    if not commands_ok or not locate:
        raise ResourceError(f"{path}: locate: expected a non-empty list of shell commands")
    for key, check in (("read", _check_read), ("edits", _check_edit)):
        items = data.get(key)
        if not isinstance(items, list) or not items:
            raise ResourceError(f"{path}: {key}: expected a non-empty list")
        for index, item in enumerate(items):
            check(item, f"{path}: {key}[{index}]")
    if data.get("wrong_first") is not None:
        _check_edit(data["wrong_first"], f"{path}: wrong_first")


def load_solution(tasks_dir: Path, instance_id: str) -> dict[str, Any]:
    """A demo task's ``solution.yaml``, parsed and checked (see ``resources/demo/README.md``)."""
    path, text = _task_file(tasks_dir, instance_id, "solution.yaml", "missing (every demo task needs one)")
    data = parse_yaml(text, str(path), error=ResourceError)
    _check_solution(data, path)
    return data


# --------------------------------------------------------------------------- checkout


def git_env() -> dict[str, str]:
    """An environment in which git ignores every host and user setting.

    No system or global config, no ``GIT_*`` variables of the caller (``GIT_DIR``, …),
    fixed identity, and the C locale for messages we may parse.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME=GIT_IDENTITY[0],
        GIT_AUTHOR_EMAIL=GIT_IDENTITY[1],
        GIT_COMMITTER_NAME=GIT_IDENTITY[0],
        GIT_COMMITTER_EMAIL=GIT_IDENTITY[1],
        LC_ALL="C",
    )
    return env


#: options that pin down what could otherwise come from a repository's own config
_GIT_OPTIONS = (
    "-c", "core.autocrlf=false",
    "-c", "core.fileMode=false",
    "-c", "core.symlinks=false",
    "-c", "core.hooksPath=" + os.devnull,
    "-c", "core.excludesFile=" + os.devnull,
    "-c", "commit.gpgSign=false",
    "-c", "apply.whitespace=nowarn",
)


def _git(repo: Path, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *_GIT_OPTIONS, *args],
            cwd=repo,
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else git_env(),
            check=False,
        )
    except FileNotFoundError:
        raise UserError("git not found: the demo tasks are git repositories; install git") from None
    if done.returncode != 0:
        message = " ".join((done.stderr or done.stdout).split())[:300]
        raise ResourceError(f"git {args[0]} failed in {repo}: {message}")
    return done.stdout


def build_base(
    project: Path,
    patches: Sequence[str],
    dest: Path,
    *,
    message: str,
    date: str,
) -> str:
    """Make ``dest`` a git repository holding ``project`` with ``patches`` reversed, committed.

    ``patches`` are unified diffs whose new side is ``project`` (the gold patch and test
    patch); they are taken back out in reverse order. The single commit has the fixed
    identity of :data:`GIT_IDENTITY`, ``date`` (git's ``<epoch> <zone>`` format) as author and
    committer date, and ``message``; its hash is returned and is ``HEAD`` of branch
    ``main``. ``dest`` must be an empty or missing directory.
    """
    dest.mkdir(parents=True, exist_ok=True)
    env = git_env() | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    _git(dest, "init", "--quiet", "--initial-branch=main", env=env)
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns(*_JUNK), dirs_exist_ok=True)
    for patch in reversed(patches):
        _git(dest, "apply", "--reverse", "--whitespace=nowarn", "-", stdin=patch, env=env)
    files = sorted(
        p.relative_to(dest).as_posix()
        for p in dest.rglob("*")
        if p.is_file() and p.relative_to(dest).parts[0] != ".git"
    )
    for name in files:  # the commit records every file as 100644; the working tree agrees
        (dest / name).chmod(0o644)
    _git(dest, "add", "--force", "--", *files, env=env)
    tree = _git(dest, "write-tree", env=env).strip()
    commit = _git(dest, "commit-tree", tree, "-m", message, env=env).strip()
    _git(dest, "update-ref", "refs/heads/main", commit, env=env)
    return commit


def is_clean_checkout(repo: Path, commit: str) -> bool:
    """Whether ``repo`` is a git repository at ``commit`` with no changed or untracked files."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        env = git_env()
        return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0 or head.stdout.strip() != commit:
        return False
    status = git("status", "--porcelain", "--untracked-files=all")
    return status.returncode == 0 and not status.stdout.strip()


def base_commit_message(instance: Mapping[str, Any]) -> str:
    return f"{instance['repo'].split('/', 1)[1]} {instance['version']}"


def checkout(tasks_dir: Path, instance_id: str, dest: Path) -> Path:
    """Create ``dest`` as a git repository at the task's base commit (buggy, without its tests).

    ``dest`` must not exist or be an empty directory. The repository is built beside
    ``dest`` and renamed into place only once its ``HEAD`` is checked against
    ``instance.json``'s ``base_commit``, so ``dest`` is never left half-made.
    """
    instance = load_instance(tasks_dir, instance_id)
    source = Path(tasks_dir) / instance_id / "instance.json"
    project = projects_dir(tasks_dir) / instance["repo"].split("/", 1)[1]
    if not project.is_dir():
        raise ResourceError(f"{source}: repo: project tree {project} not found")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest}: already exists and is not an empty directory; remove it or pick another")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    work.chmod(0o755)
    try:
        head = build_base(
            project,
            [instance["patch"], instance["test_patch"]],
            work,
            message=base_commit_message(instance),
            date=_commit_date(instance["created_at"], source),
        )
        if head != instance["base_commit"]:
            raise ResourceError(
                f"{source}: base_commit is {instance['base_commit'][:12]} but the checkout made {head[:12]}:"
                f" {project} or the patches changed since the task was recorded"
            )
        os.replace(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return dest
