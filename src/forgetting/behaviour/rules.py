"""The tool-call labeller: rules read from a data table (``forgetting/data/label_rules.yaml``).

The table, not this module, says which command is a read, a search, an edit, … (SPEC §4);
this module only knows how to apply it — the order of evaluation is documented at the top
of the table and in ``docs/behaviour.md``. A researcher extends the labeller by editing
the table or passing another one (``label_run(..., rules=PATH)``, ``forgetting label
--rules PATH``, config ``analysis.label_rules``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from forgetting.behaviour.shell import Command, Pipeline, parse
from forgetting.foundation.errors import UserError
from forgetting.foundation.inputs import read_yaml

PACKAGED = "label_rules.yaml"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MAX_DEPTH = 4  # bash -c "bash -c '…'" nesting followed

_COMMAND_KEYS = {
    "command",
    "subcommand",
    "module",
    "flags_any",
    "flags_none",
    "args_match",
    "script_match",
    "has_stdin_script",
    "writes_file",
    "class",
}
_TRANSFORM_KEYS = _COMMAND_KEYS | {"upstream"}
_TOOL_KEYS = {"tool", "args", "has_args", "output_match", "class", "shell"}
_TOP_KEYS = {"version", "classes", "default", "precedence", "agents", "tools", "shell"}
_SHELL_KEYS = {
    "aliases",
    "wrappers",
    "keywords",
    "neutral",
    "shells",
    "options_with_value",
    "commands",
    "pipes",
}


class RulesError(UserError):
    """A malformed label-rules table."""


def _names(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset([value])
    return frozenset(str(v) for v in value)


@dataclass(frozen=True)
class CommandRule:
    """One row of ``shell.commands`` / ``shell.pipes.transforms``."""

    label: str
    where: str
    command: frozenset[str] | None = None
    subcommand: frozenset[str] | None = None
    module: frozenset[str] | None = None
    flags_any: tuple[str, ...] = ()
    flags_none: tuple[str, ...] = ()
    args_match: re.Pattern[str] | None = None
    script_match: re.Pattern[str] | None = None
    has_stdin_script: bool | None = None
    writes_file: bool | None = None
    upstream: frozenset[str] | None = None


@dataclass(frozen=True)
class ToolRule:
    """One row of a family's ``tools`` table."""

    where: str
    tool: frozenset[str] | None
    args: Mapping[str, frozenset[str]]
    has_args: tuple[str, ...]
    output_match: re.Pattern[str] | None
    label: str | None
    shell: str | None


@dataclass(frozen=True)
class Simple:
    """A simple command after unwrapping: canonical name, arguments, the parsed command."""

    name: str
    args: tuple[str, ...]
    command: Command
    via_xargs: bool = False


def _has_flag(args: Sequence[str], flag: str) -> bool:
    for a in args:
        if a == "--":
            return False
        if flag.startswith("--") or len(flag) != 2:
            if a == flag or a.startswith(flag + "="):
                return True
        elif a.startswith("-") and not a.startswith("--") and len(a) > 1:
            cluster = re.match(r"[A-Za-z]*", a[1:])
            if cluster and flag[1] in cluster.group(0):
                return True
    return False


def _option_value(args: Sequence[str], option: str) -> str | None:
    """The word after the first ``option`` (or glued to it: ``-mpytest``)."""
    for i, a in enumerate(args):
        if a == option:
            return args[i + 1] if i + 1 < len(args) else None
        if len(option) == 2 and a.startswith(option) and not a.startswith("--"):
            return a[2:]
    return None


class Rules:
    """A loaded, checked rules table."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.source = source
        self._check_keys(data, _TOP_KEYS, "")
        self.classes: tuple[str, ...] = tuple(self._req(data, "classes", ""))
        self.default: str = self._label(data.get("default", "other"), "default")
        prec = [str(c) for c in self._req(data, "precedence", "")]
        if sorted(prec) != sorted(self.classes):
            raise RulesError(f"{source}: precedence must list every class once: {', '.join(self.classes)}")
        self.rank = {c: i for i, c in enumerate(prec)}
        self.agents: dict[str, str] = {str(k): str(v) for k, v in (data.get("agents") or {}).items()}
        tools = data.get("tools") or {}
        self.tools: dict[str, list[ToolRule]] = {}
        for family, rows in tools.items():
            self.tools[str(family)] = [
                self._tool_rule(r, f"tools.{family}[{i}]") for i, r in enumerate(rows or [])
            ]
        for agent, family in self.agents.items():
            if family not in self.tools:
                raise RulesError(f"{source}: agents.{agent}: no tools table {family!r}")
        sh = data.get("shell") or {}
        self._check_keys(sh, _SHELL_KEYS, "shell")
        self.aliases = [
            (self._regex(k, f"shell.aliases[{k!r}]"), str(v)) for k, v in (sh.get("aliases") or {}).items()
        ]
        self.wrappers: dict[str, dict[str, Any]] = {
            str(k): dict(v or {}) for k, v in (sh.get("wrappers") or {}).items()
        }
        self.keywords = frozenset(str(k) for k in sh.get("keywords") or [])
        self.neutral = frozenset(str(k) for k in sh.get("neutral") or [])
        self.shells = frozenset(str(k) for k in sh.get("shells") or [])
        self.options_with_value = {
            str(k): frozenset(map(str, v)) for k, v in (sh.get("options_with_value") or {}).items()
        }
        self.commands = [
            self._command_rule(r, f"shell.commands[{i}]", _COMMAND_KEYS)
            for i, r in enumerate(sh.get("commands") or [])
        ]
        pipes = sh.get("pipes") or {}
        self._check_keys(pipes, {"filters", "transforms"}, "shell.pipes")
        self.filters = frozenset(str(f) for f in pipes.get("filters") or [])
        self.transforms = [
            self._command_rule(r, f"shell.pipes.transforms[{i}]", _TRANSFORM_KEYS)
            for i, r in enumerate(pipes.get("transforms") or [])
        ]

    # --- loading helpers -----------------------------------------------------------------
    def _check_keys(self, obj: Any, allowed: set[str], where: str) -> None:
        if not isinstance(obj, Mapping):
            raise RulesError(f"{self.source}: {where or 'top level'}: expected a mapping")
        unknown = sorted(set(map(str, obj)) - allowed)
        if unknown:
            allowed_text = ", ".join(sorted(allowed))
            raise RulesError(
                f"{self.source}: {where or 'top level'}: unknown key {unknown[0]!r} (allowed: {allowed_text})"
            )

    def _req(self, obj: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in obj:
            raise RulesError(f"{self.source}: {where + '.' if where else ''}{key}: missing")
        return obj[key]

    def _label(self, value: Any, where: str) -> str:
        if value not in self.classes:
            raise RulesError(
                f"{self.source}: {where}: class {value!r} is not one of {', '.join(self.classes)}"
            )
        return str(value)

    def _regex(self, pattern: Any, where: str) -> re.Pattern[str]:
        try:
            return re.compile(str(pattern), re.MULTILINE)
        except re.error as exc:
            raise RulesError(f"{self.source}: {where}: bad regular expression ({exc})") from None

    def _command_rule(self, row: Any, where: str, allowed: set[str]) -> CommandRule:
        self._check_keys(row, allowed, where)
        return CommandRule(
            label=self._label(self._req(row, "class", where), f"{where}.class"),
            where=where,
            command=_names(row.get("command")),
            subcommand=_names(row.get("subcommand")),
            module=_names(row.get("module")),
            flags_any=tuple(map(str, row.get("flags_any") or ())),
            flags_none=tuple(map(str, row.get("flags_none") or ())),
            args_match=self._regex(row["args_match"], f"{where}.args_match") if "args_match" in row else None,
            script_match=self._regex(row["script_match"], f"{where}.script_match")
            if "script_match" in row
            else None,
            has_stdin_script=row.get("has_stdin_script"),
            writes_file=row.get("writes_file"),
            upstream=_names(row.get("upstream")),
        )

    def _tool_rule(self, row: Any, where: str) -> ToolRule:
        self._check_keys(row, _TOOL_KEYS, where)
        if ("class" in row) == ("shell" in row):
            raise RulesError(f"{self.source}: {where}: give exactly one of 'class' or 'shell'")
        args = row.get("args") or {}
        if not isinstance(args, Mapping):
            raise RulesError(f"{self.source}: {where}.args: expected a mapping of argument to value(s)")
        return ToolRule(
            where=where,
            tool=_names(row.get("tool")),
            args={str(k): _names(v) or frozenset() for k, v in args.items()},
            has_args=tuple(map(str, row.get("has_args") or ())),
            output_match=self._regex(row["output_match"], f"{where}.output_match")
            if "output_match" in row
            else None,
            label=self._label(row["class"], f"{where}.class") if "class" in row else None,
            shell=str(row["shell"]) if "shell" in row else None,
        )

    # --- tool calls ----------------------------------------------------------------------
    def family(self, agent: str) -> str:
        try:
            return self.agents[agent]
        except KeyError:
            known = ", ".join(sorted(self.agents))
            raise UserError(
                f"unknown agent {agent!r} for labelling (known: {known}; see {self.source})"
            ) from None

    def label_tool(self, agent: str, tool: str, arguments: Mapping[str, Any], output: str = "") -> str:
        """The class of one tool call of ``agent``."""
        for rule in self.tools[self.family(agent)]:
            if rule.tool is not None and tool not in rule.tool:
                continue
            if any(str(arguments.get(k)) not in v for k, v in rule.args.items()):
                continue
            if any(arguments.get(k) is None for k in rule.has_args):
                continue
            if rule.output_match is not None and not rule.output_match.search(output or ""):
                continue
            if rule.shell is not None:
                cmd = arguments.get(rule.shell)
                return self.label_shell(cmd) if isinstance(cmd, str) else self.default
            assert rule.label is not None
            return rule.label
        return self.default

    # --- shell commands ------------------------------------------------------------------
    def strongest(self, labels: Sequence[str]) -> str:
        return min(labels, key=self.rank.__getitem__) if labels else self.default

    def label_shell(self, text: str, _depth: int = 0) -> str:
        """The class of a shell command line (every pipeline and stage combined)."""
        labels: list[str] = []
        for pipeline in parse(text):
            labels += self._pipeline_labels(pipeline, _depth)
        return self.strongest(labels)

    def _pipeline_labels(self, pipeline: Pipeline, depth: int) -> list[str]:
        out: list[str] = []
        current: str | None = None
        for k, cmd in enumerate(pipeline.commands):
            simple = self.unwrap(cmd)
            first = k == 0 and not pipeline.continues_group
            if simple is None:
                continue
            if not first and simple.name in self.filters and not simple.via_xargs:
                for t in self.transforms:
                    if (
                        current is not None
                        and t.upstream is not None
                        and current in t.upstream
                        and self._matches(t, simple)
                    ):
                        current = t.label
                        break
                continue
            label = self.label_simple(simple, depth)
            if first:
                current = label
            else:
                out.append(label)
        if current is not None:
            out.append(current)
        return out

    def canonical(self, word: str) -> str:
        base = word.rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word
        for pattern, name in self.aliases:
            if pattern.search(base):
                return name
        return base

    def unwrap(self, cmd: Command) -> Simple | None:
        """Strip assignments, wrappers and keywords; None for a command that labels nothing."""
        words = list(cmd.words)
        via_xargs = False
        while True:
            while words and _ASSIGNMENT.match(words[0]):
                words.pop(0)
            if not words:
                return Simple(":", (), cmd) if cmd.writes_file else None
            w0 = words[0]
            if w0 in self.keywords:
                words.pop(0)
                continue
            if w0 in self.neutral:
                return None
            base = self.canonical(w0)
            spec = self.wrappers.get(base)
            if spec is None:
                break
            words.pop(0)
            with_value = set(spec.get("options_with_value") or ())
            while words and words[0].startswith("-") and words[0] != "-":
                opt = words.pop(0)
                if opt == "--":
                    break
                if opt in with_value and words:
                    words.pop(0)
            for _ in range(int(spec.get("positional", 0))):
                if words:
                    words.pop(0)
            via_xargs = via_xargs or base == "xargs"
        return Simple(self.canonical(words[0]), tuple(words[1:]), cmd, via_xargs)

    def _subcommand(self, s: Simple) -> str | None:
        with_value = self.options_with_value.get(s.name, frozenset())
        skip = False
        for a in s.args:
            if skip:
                skip = False
                continue
            if a in with_value:
                skip = True
                continue
            if not a.startswith("-"):
                return a
        return None

    def _script_text(self, s: Simple) -> str:
        parts = [s.command.stdin_text or ""]
        for opt in ("-c", "-e"):
            v = _option_value(s.args, opt)
            if v:
                parts.append(v)
        return "\n".join(parts)

    def _matches(self, r: CommandRule, s: Simple) -> bool:
        if r.command is not None and s.name not in r.command:
            return False
        if r.subcommand is not None and self._subcommand(s) not in r.subcommand:
            return False
        if r.module is not None and _option_value(s.args, "-m") not in r.module:
            return False
        if r.flags_any and not any(_has_flag(s.args, f) for f in r.flags_any):
            return False
        if r.flags_none and any(_has_flag(s.args, f) for f in r.flags_none):
            return False
        if r.args_match is not None and not r.args_match.search(" ".join(s.args)):
            return False
        if r.script_match is not None and not r.script_match.search(self._script_text(s)):
            return False
        if r.has_stdin_script is not None and (s.command.stdin_text is not None) != r.has_stdin_script:
            return False
        return r.writes_file is None or s.command.writes_file == r.writes_file

    def label_simple(self, s: Simple, depth: int = 0) -> str:
        if s.name in self.shells and depth < _MAX_DEPTH:
            script = self._shell_script(s)
            if script is not None:
                return self.label_shell(script, depth + 1)
        for r in self.commands:
            if self._matches(r, s):
                return r.label
        return self.default

    def _shell_script(self, s: Simple) -> str | None:
        """``bash -c SCRIPT`` → SCRIPT; ``bash <<EOF`` (no script file) → the here-document."""
        for i, a in enumerate(s.args):
            if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
                return s.args[i + 1] if i + 1 < len(s.args) else ""
            if not a.startswith("-"):
                return None
        return s.command.stdin_text


def _read_table(path: Path | None) -> tuple[Any, str]:
    if path is None:
        ref = resources.files("forgetting") / "data" / PACKAGED
        return yaml.safe_load(ref.read_text(encoding="utf-8")), f"forgetting/data/{PACKAGED}"
    if not path.is_file() and not path.is_dir():
        raise RulesError(f"{path}: label rules file not found")
    return read_yaml(path, what="label rules file", error=RulesError), str(path)


@functools.lru_cache(maxsize=8)
def _load_cached(path: Path | None) -> Rules:
    data, source = _read_table(path)
    if not isinstance(data, Mapping):
        raise RulesError(f"{source}: expected a mapping at the top level")
    return Rules(data, source)


def load_rules(path: str | os.PathLike[str] | None = None) -> Rules:
    """The rules table at ``path`` (the packaged one when None), checked."""
    return _load_cached(Path(path).resolve() if path is not None else None)
