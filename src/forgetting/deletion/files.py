"""Which files an agent's action names: the link from a tool output to the file it shows.

Actions are never deleted, so a policy can always read them back. A *file* is a word of a
shell command (after :mod:`forgetting.behaviour.shell` splits it into simple commands and
the label rules strip wrappers such as ``timeout 10`` or ``xargs``) that looks like a path
to a file: no spaces, quotes or shell patterns, not an option, and a last component with an
extension (``src/a.py``, ``setup.cfg``, ``.env``) — so ``sed -n '1,20p' a.py`` names
``a.py`` and not its script, and directories (``src/``) are not files. Redirection targets
(``cat > a.py <<EOF``) and pytest node ids (``tests/test_a.py::test_x``) count; ``bash -c
SCRIPT`` and ``bash <<EOF`` are read through. An editor tool's ``path`` / ``file_path``
argument (Trae's ``str_replace_based_edit_tool``) names its file directly.

Two paths are the *same file* when one equals the other or ends with ``/`` + the other
(``/testbed/src/a.py``, ``src/a.py`` and ``a.py``): agents mix absolute and relative paths.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from forgetting.behaviour.rules import load_rules
from forgetting.behaviour.shell import Command, parse
from forgetting.prompt.messages import Action

_PATHLIKE = re.compile(r"^[A-Za-z0-9_./~+@%-]+$")
_LAST = re.compile(r"^(?:[^.].*\.[A-Za-z0-9_]{1,12}|\.[A-Za-z0-9_][A-Za-z0-9_.-]*)$")
_NUMBER = re.compile(r"^[0-9.]+$")
_PATH_ARGUMENTS = ("path", "file_path", "filename")
_MAX_DEPTH = 4


def normalize(path: str) -> str:
    """``./src//a.py`` → ``src/a.py`` (no file-system access)."""
    p = posixpath.normpath(path.strip())
    return p[2:] if p.startswith("./") else p


def file_word(word: str) -> str | None:
    """The file a command word names (normalized), or None."""
    word = word.split("::", 1)[0]
    if not word or word.startswith("-") or not _PATHLIKE.match(word) or word.endswith("/"):
        return None
    last = word.rsplit("/", 1)[-1]
    if _NUMBER.match(last) or not _LAST.match(last):
        return None
    return normalize(word)


def same_file(a: str, b: str) -> bool:
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _command_files(cmd: Command, depth: int) -> set[str]:
    rules = load_rules()
    out: set[str] = set()
    for r in cmd.redirects:
        if r.op in (">", ">>", ">|", "&>", "&>>", "<", "<>") and r.target:
            f = file_word(r.target)
            if f:
                out.add(f)
    simple = rules.unwrap(cmd)
    if simple is None:
        return out
    if simple.name in rules.shells and depth < _MAX_DEPTH:
        script = next((simple.args[i + 1] for i, a in enumerate(simple.args[:-1]) if a == "-c"), None)
        script = script if script is not None else cmd.stdin_text
        if script:
            out |= command_files(script, depth + 1)
        return out
    for w in simple.args:
        f = file_word(w)
        if f:
            out.add(f)
    return out


@functools.lru_cache(maxsize=1 << 14)
def command_files(command: str, depth: int = 0) -> frozenset[str]:
    """The files a shell command line names (memoized: asked again at every call)."""
    out: set[str] = set()
    for pipeline in parse(command):
        for cmd in pipeline.commands:
            out |= _command_files(cmd, depth)
    return frozenset(out)


def action_files(action: Action) -> frozenset[str]:
    """The files one action (tool call) names."""
    out: set[str] = set()
    args: Mapping[str, Any] = action.arguments
    for key in _PATH_ARGUMENTS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            out.add(normalize(value))
    if action.command is not None:
        out |= command_files(action.command)
    return frozenset(out)


def touches(files: Iterable[str], others: Iterable[str]) -> bool:
    """Whether any of ``files`` is the same file as any of ``others``."""
    others = list(others)
    return any(same_file(a, b) for a in files for b in others)
