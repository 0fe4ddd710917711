"""Shell commands the scripted model issues, and recognising them again in a history.

The model is stateless: on every call it reconstructs what it has done from the actions in
the conversation (actions are never deleted). So every command it builds here can be parsed
back: reads (``cat``, ``nl -ba … | sed -n 'a,bp'``, ``sed -n``, ``head``), edits (a Python
heredoc doing an exact, checked replacement, or ``sed -i`` for one-line changes), test runs,
reverts and the submission steps of mini-swe-agent's SWE-bench config.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass

from forgetting.agents import MINI_SUBMIT_MARKER as SUBMIT_MARKER
from forgetting.demo.scripted.knowledge import Edit, ReadSpec, TaskKnowledge

PATCH_FILE = "patch.txt"
CAT_PATCH = f"cat {PATCH_FILE}"
SUBMIT = f"echo {SUBMIT_MARKER} && cat {PATCH_FILE}"
SUBMIT_EMPTY = f"echo {SUBMIT_MARKER}"
REVIEW = "git diff"

#: exploration detours: generic looks around a repository that do not advance the fix
DETOURS: tuple[str, ...] = (
    "ls -la",
    "git log --oneline -5",
    "find . -name '*.py' -not -path './.git/*' | sort | head -40",
    "git status",
)

#: how a whole file is read (one style per run) and how a line range is read
FULL_READ_STYLES: tuple[str, ...] = ("cat {path}", "cat -n {path}", "nl -ba {path}")
RANGE_READ_STYLES: tuple[str, ...] = ("sed -n '{a},{b}p' {path}", "nl -ba {path} | sed -n '{a},{b}p'")
PAGE_LINES = 150
MAX_PAGES = 40


def submit_diff(paths: tuple[str, ...]) -> str:
    return f"git diff -- {' '.join(shlex.quote(p) for p in paths)} > {PATCH_FILE}"


def revert(path: str) -> str:
    return f"git checkout -- {shlex.quote(path)}"


def read_command(spec: ReadSpec, full_style: int, range_style: int) -> str:
    path = shlex.quote(spec.path)
    if spec.lines is None:
        return FULL_READ_STYLES[full_style % len(FULL_READ_STYLES)].format(path=path)
    a, b = spec.lines
    return RANGE_READ_STYLES[range_style % len(RANGE_READ_STYLES)].format(path=path, a=a, b=b)


def range_read(path: str, first: int, last: int) -> str:
    return f"nl -ba {shlex.quote(path)} | sed -n '{first},{last}p'"


def page_command(path: str, page: int) -> str:
    a = 1 + page * PAGE_LINES
    return range_read(path, a, a + PAGE_LINES - 1)


def norm_path(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path


@dataclass(frozen=True)
class ReadCommand:
    path: str
    numbered: bool  # output lines carry a line-number prefix (nl, cat -n)


_RANGE = re.compile(r"^\d+(,\d+)?p$")


def parse_read(command: str) -> ReadCommand | None:
    """The file a read command shows, for the forms a careful agent uses."""
    parts = [p.strip() for p in command.split("|")]
    try:
        first = shlex.split(parts[0])
        rest = [shlex.split(p) for p in parts[1:]]
    except ValueError:
        return None
    if not first:
        return None
    # a trailing pipe may only narrow the lines: | sed -n 'a,bp' or | head/tail
    for stage in rest:
        if not stage or stage[0] not in ("sed", "head", "tail"):
            return None
        if stage[0] == "sed" and (stage[1:2] != ["-n"] or len(stage) != 3 or not _RANGE.match(stage[2])):
            return None
    prog, args = first[0], first[1:]
    files = [a for a in args if not a.startswith("-") and not _RANGE.match(a) and not a.isdigit()]
    if prog == "cat" and len(files) == 1:
        return ReadCommand(norm_path(files[0]), "-n" in args)
    if prog == "nl" and len(files) == 1:
        return ReadCommand(norm_path(files[0]), True)
    if prog == "sed" and args[:1] == ["-n"] and len(args) == 3 and _RANGE.match(args[1]):
        return ReadCommand(norm_path(args[2]), False)
    if prog in ("head", "tail") and len(files) == 1:
        return ReadCommand(norm_path(files[0]), False)
    return None


def _py_literal(text: str) -> str:
    """A Python literal for ``text``: a triple-quoted string where that is exact, else repr."""
    if "\\" not in text and "'''" not in text and not text.endswith("'") and "\r" not in text:
        return f"'''{text}'''"
    return repr(text)


def python_edit(path: str, old: str, new: str) -> str:
    """A heredoc that replaces ``old`` by ``new`` in ``path``, failing loudly unless ``old``
    occurs exactly once."""
    body = (
        "from pathlib import Path\n"
        f"path = Path({path!r})\n"
        "text = path.read_text()\n"
        f"old = {_py_literal(old)}\n"
        f"new = {_py_literal(new)}\n"
        "count = text.count(old)\n"
        "if count != 1:\n"
        "    raise SystemExit(f'{path}: expected the old text exactly once, found it {count} times')\n"
        "path.write_text(text.replace(old, new, 1))\n"
        "print(f'{path}: replaced {len(old.splitlines())} line(s) with {len(new.splitlines())}')\n"
    )
    tag = "EOF"
    while any(line == tag for line in body.splitlines()):
        tag += "_"
    return f"python3 - <<'{tag}'\n{body}{tag}"


_SED_PATTERN_SPECIAL = re.compile(r"([\\.\[\]*^$|])")
_SED_REPL_SPECIAL = re.compile(r"([\\&|])")


def sed_edit(path: str, old: str, new: str) -> str | None:
    """``sed -i`` for a one-line change (``None`` when the change spans lines)."""
    old_line, new_line = old.removesuffix("\n"), new.removesuffix("\n")
    if (
        "\n" in old_line
        or "\n" in new_line
        or old.endswith("\n") != new.endswith("\n")
        or not old_line.strip()
    ):
        return None
    pattern = _SED_PATTERN_SPECIAL.sub(r"\\\1", old_line)
    repl = _SED_REPL_SPECIAL.sub(r"\\\1", new_line)
    return f"sed -i {shlex.quote(f's|{pattern}|{repl}|')} {shlex.quote(path)}"


def parse_python_edit(command: str) -> tuple[str, str, str] | None:
    """``(path, old, new)`` of an edit built by :func:`python_edit`."""
    m = re.match(r"python3? - <<'?(\w+)'?\n(.*)\n\1\s*$", command, re.DOTALL)
    if not m:
        return None
    try:
        tree = ast.parse(m.group(2) + "\n")
    except SyntaxError:
        return None
    found: dict[str, str] = {}
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            continue
        name, value = node.targets[0].id, node.value
        if (
            name == "path"
            and isinstance(value, ast.Call)
            and value.args
            and isinstance(value.args[0], ast.Constant)
        ):
            found["path"] = norm_path(str(value.args[0].value))
        elif name in ("old", "new") and isinstance(value, ast.Constant) and isinstance(value.value, str):
            found[name] = value.value
    if set(found) != {"path", "old", "new"}:
        return None
    return found["path"], found["old"], found["new"]


@dataclass(frozen=True)
class Classified:
    """What one command in the history was, as far as the model's plan is concerned."""

    kind: str  # locate detour read edit test revert review submit_diff submit_cat submit_final other
    path: str | None = None  # the file a read, edit or revert concerns
    read: ReadCommand | None = None  # set whenever the command shows a file's content
    edit: tuple[str, str, str] | None = None  # (path, old, new) for edits


def all_edits(task: TaskKnowledge) -> tuple[Edit, ...]:
    return (*task.edits, *((task.wrong_first,) if task.wrong_first else ()))


def classify(command: str, task: TaskKnowledge | None) -> Classified:
    cmd = command.strip()
    if cmd.startswith(f"echo {SUBMIT_MARKER}"):
        return Classified("submit_final")
    if cmd == CAT_PATCH:
        return Classified("submit_cat")
    if cmd.startswith("git diff") and cmd.endswith(f"> {PATCH_FILE}"):
        return Classified("submit_diff")
    if cmd == REVIEW:
        return Classified("review")
    if cmd.startswith("git checkout -- "):
        try:
            target = shlex.split(cmd)[3:]
        except ValueError:
            target = []
        return Classified("revert", norm_path(target[0]) if target else None)
    parsed = parse_python_edit(cmd)
    if parsed is not None:
        return Classified("edit", parsed[0], edit=parsed)
    if task is not None:
        for e in all_edits(task):
            if cmd == sed_edit(e.path, e.old, e.new):
                return Classified("edit", e.path, edit=(e.path, e.old, e.new))
    read = parse_read(cmd)
    path = read.path if read else None
    if task is not None:
        if cmd in task.locate:
            return Classified("locate", path, read)
        if cmd == task.test:
            return Classified("test")
    if cmd in DETOURS:
        return Classified("detour", path, read)
    if read is not None:
        return Classified("read", path, read)
    return Classified("other")
