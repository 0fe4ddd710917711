"""Shell commands the scripted model issues, and recognising them again in a history.

The model is stateless: on every call it reconstructs what it has done from the actions in
the conversation (actions are never deleted). So every command it builds here can be parsed
back: reads (``cat``, ``nl -ba … | sed -n 'a,bp'``, ``sed -n``, ``head``), edits (a Python
heredoc doing an exact, checked replacement, or ``sed -i`` for one-line changes), test runs,
reverts and the submission steps of mini-swe-agent's SWE-bench config.

Where the agent offers them (Trae agent, :class:`Toolset`), it also calls tools other than
``bash``: Trae's editor for views (``view``, with ``view_range`` for a line range) and edits
(``str_replace``), and Trae's finishing tool ``task_done``. The policy handles every action
as one string, so such a call is written ``TOOL {JSON arguments}`` with paths relative to the
project root (:func:`tool_command`); :func:`tool_call` turns it into the call the agent gets
(absolute paths, as Trae's editor requires) and :func:`command_of` reads a call back.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forgetting.agents import MINI_SUBMIT_MARKER as SUBMIT_MARKER
from forgetting.agents import TRAE_EDIT_TOOL as EDIT_TOOL
from forgetting.agents import TRAE_FINISH_TOOL as FINISH_TOOL
from forgetting.agents import TRAE_ROOT_HEADER
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
    return f"{check_diff(paths)} > {PATCH_FILE}"


def check_diff(paths: tuple[str, ...]) -> str:
    """The diff of the changed files, shown (with a finishing tool: the check before it)."""
    return f"git diff -- {' '.join(shlex.quote(p) for p in paths)}"


# ---------------------------------------------------------------------------- other tools
#: the tools besides bash the stand-in calls, when offered
OWN_TOOLS = (EDIT_TOOL, FINISH_TOOL)
_ROOT = re.compile(rf"^{re.escape(TRAE_ROOT_HEADER)}\s*\n(/[^\n]*?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Toolset:
    """What the agent offers beyond ``bash`` that the stand-in uses: Trae's editor (for views
    and edits; usable only with the project root its absolute paths start from) and its
    finishing tool. An agent with a finishing tool (Trae) returns tool results as plain
    text: no return code and no ``<output>`` wrapper, as mini-swe-agent's have (``plain``)."""

    editor: bool = False
    finish: bool = False
    root: str | None = None

    @property
    def plain(self) -> bool:
        return self.finish

    @classmethod
    def offered(cls, tools: Sequence[Mapping[str, Any]] | None, task_text: str) -> Toolset:
        """The toolset of a request: its ``tools`` and its task message (Trae names the
        project root there, ``[Project root path]:`` and the path on the next line)."""
        names = {str((t.get("function") or t).get("name", "")) for t in tools or () if isinstance(t, Mapping)}
        m = _ROOT.search(task_text)
        root = (m.group(1).rstrip("/") or "/") if m else None
        return cls(editor=EDIT_TOOL in names and root is not None, finish=FINISH_TOOL in names, root=root)


def tool_command(tool: str, arguments: Mapping[str, Any]) -> str:
    """A call of ``tool`` as one action string: ``TOOL {JSON arguments}``."""
    return f"{tool} {json.dumps(dict(arguments), ensure_ascii=False)}"


def parse_tool_command(command: str) -> tuple[str, dict[str, Any]] | None:
    """``(tool, arguments)`` of an action string made by :func:`tool_command`."""
    tool, _, rest = command.strip().partition(" ")
    if tool not in OWN_TOOLS or not rest.startswith("{"):
        return None
    try:
        arguments = json.loads(rest)
    except ValueError:
        return None
    return (tool, arguments) if isinstance(arguments, dict) else None


TASK_DONE = tool_command(FINISH_TOOL, {})


def view(path: str, lines: tuple[int, int] | None = None) -> str:
    """The editor's ``view`` of a file (``path`` relative to the root), or of a line range."""
    args: dict[str, Any] = {"command": "view", "path": path}
    if lines is not None:
        args["view_range"] = list(lines)
    return tool_command(EDIT_TOOL, args)


def str_replace(path: str, old: str, new: str) -> str:
    """The editor's exact replacement (it refuses unless ``old`` occurs exactly once)."""
    return tool_command(EDIT_TOOL, {"command": "str_replace", "path": path, "old_str": old, "new_str": new})


def _moved(arguments: Mapping[str, Any], change: Any) -> dict[str, Any]:
    args = dict(arguments)
    if isinstance(args.get("path"), str):
        args["path"] = change(args["path"])
    return args


def tool_call(command: str, root: str | None) -> tuple[str, dict[str, Any]] | None:
    """The tool call an action string stands for (``path`` made absolute under ``root``);
    None for a shell command."""
    parsed = parse_tool_command(command)
    if parsed is None:
        return None
    tool, args = parsed
    if root is None:
        return tool, args
    return tool, _moved(args, lambda p: p if p.startswith("/") else f"{root.rstrip('/')}/{p}")


def command_of(tool: str, arguments: Mapping[str, Any], root: str | None) -> str | None:
    """The action string of one of :data:`OWN_TOOLS`' calls in a history (``path`` relative
    to ``root`` again); None for any other tool."""
    if tool not in OWN_TOOLS:
        return None
    prefix = f"{root.rstrip('/')}/" if root else None
    return tool_command(tool, _moved(arguments, lambda p: p[len(prefix):] if prefix and p.startswith(prefix) else p))


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
    numbered: bool  # output lines carry a line-number prefix (nl, cat -n, the editor's view)
    lines: tuple[int, int] | None = None  # the line range an editor ``view`` shows


_RANGE = re.compile(r"^\d+(,\d+)?p$")


def parse_read(command: str) -> ReadCommand | None:
    """The file a read command shows, for the forms a careful agent uses."""
    tool = parse_tool_command(command)
    if tool is not None:
        return _parse_view(tool[1]) if tool[0] == EDIT_TOOL else None
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


def _parse_view(args: Mapping[str, Any]) -> ReadCommand | None:
    path, lines = args.get("path"), args.get("view_range")
    if args.get("command") != "view" or not isinstance(path, str):
        return None
    if isinstance(lines, list) and len(lines) == 2 and all(isinstance(n, int) for n in lines):
        return ReadCommand(norm_path(path), True, (lines[0], lines[1]))
    return ReadCommand(norm_path(path), True)


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


def _editor_edit(command: str) -> tuple[str, str, str] | None:
    tool = parse_tool_command(command)
    if tool is None or tool[0] != EDIT_TOOL or tool[1].get("command") != "str_replace":
        return None
    path, old, new = (tool[1].get(k) for k in ("path", "old_str", "new_str"))
    if not (isinstance(path, str) and isinstance(old, str) and isinstance(new, str | None)):
        return None
    return norm_path(path), old, new or ""


def classify(command: str, task: TaskKnowledge | None) -> Classified:
    cmd = command.strip()
    if cmd.startswith(f"echo {SUBMIT_MARKER}") or cmd == TASK_DONE:
        return Classified("submit_final")
    if cmd == CAT_PATCH:
        return Classified("submit_cat")
    if cmd.startswith("git diff") and cmd.endswith(f"> {PATCH_FILE}"):
        return Classified("submit_diff")
    if cmd.startswith("git diff -- ") and ">" not in cmd:  # the check before a finishing tool
        return Classified("submit_diff")
    edited = _editor_edit(cmd)
    if edited is not None:
        return Classified("edit", edited[0], edit=edited)
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
