"""Hostile inputs for every ``forgetting`` subcommand: each case ends in success or status 2
with exactly one ``error:`` line — no traceback, no hang, no changed or lost file
(:mod:`forgetting_testkit.hostile`). Table-driven cases, schema-driven config values and
property-based ones (hypothesis); they run in this process through ``forgetting.cli.main``
(``test_subprocesses.py`` runs a subset as real processes)."""

from __future__ import annotations

import copy
import dataclasses
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgetting_testkit.hostile import (
    DEMO,
    changed,
    demo_config,
    run_main,
    run_subprocess,
    snapshot,
    without_dac_override,
)
from forgetting_testkit.trajectories import edit_at as _at
from forgetting_testkit.trajectories import text_trajectory, toolcall_trajectory, trae_trajectory

UPSTREAM = "http://127.0.0.1:9/v1"  # nothing listens there: a proxy case never gets that far


@dataclass
class Spec:
    """One invocation: its arguments, what it must end in (``error``, ``ok``, ``any``), the
    paths it may write (everything else must stay as it was), and text the error must hold."""

    argv: list[str]
    expect: str = "error"
    allowed: list[Path] = field(default_factory=list)
    says: tuple[str, ...] = ()
    perms: bool = False  # file permissions must bite (root: capabilities dropped)


@dataclass(frozen=True)
class Case:
    surface: str
    name: str
    build: Callable[[Any, Path], Spec]
    klass: str = "general"  # the kind of hostility, counted in the summary (tests/hostile/conftest.py)

    @property
    def id(self) -> str:
        return f"{self.surface}: {self.name}"


def check(
    world: Any, tmp: Path, tally: Any, surface: str, spec: Spec, *, process: bool = False, klass: str = "general"
) -> None:
    roots = [tmp, world.study]
    before = snapshot(*roots)
    with without_dac_override() if spec.perms else _nothing() as enforced:
        if not enforced:
            pytest.skip("file permissions cannot be enforced here")
        outcome = run_subprocess(spec.argv) if process else run_main(spec.argv)
    outcome.changed = changed(before, snapshot(*roots), spec.allowed)
    found = tally.record(surface, outcome, expect=spec.expect, klass=klass)
    assert not found, f"{spec.argv}: " + "; ".join(found)
    for fragment in spec.says:
        assert fragment in outcome.stderr, outcome.stderr


class _nothing:
    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc: object) -> None:
        pass


# -- building blocks ---------------------------------------------------------------------------------

def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def deep(n: int) -> str:
    return "[" * n + "]" * n


def laughs(levels: int = 9) -> str:
    """A YAML alias bomb: each level names the one below nine times."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


#: hostile contents of a study config (or overlay)
CONFIG_CONTENTS: dict[str, bytes] = {
    "not UTF-8": b"study:\n  name: \xff\xfe\n",
    "a NUL byte": b"study:\x00\n",
    "invalid YAML": b"study: [\n",
    "a tab": b"\tstudy: x\n",
    "empty": b"",
    "a list": b"- a\n- b\n",
    "a number": b"42\n",
    "nested 5000 deep": ("x: " + deep(5000) + "\n").encode(),
    "an alias bomb": laughs().encode(),
    "required keys missing": b"study: {name: x, seed: 1}\n",
    "an unknown key": yaml.safe_dump({**DEMO, "colour": "blue"}).encode(),
}

#: the study commands, with what each needs besides the config
STUDY_COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "plan": lambda c, d: ["plan", str(c)],
    "collect": lambda c, d: ["collect", str(c)],
    "report": lambda c, d: ["report", str(c)],
    "run": lambda c, d: ["run", str(c), "--run-id", "mini/baseline/demo__confkit-1/1"],
    "run-batch": lambda c, d: ["run-batch", str(c), "--batch", "mini/baseline/b000-00000000"],
    "evaluate": lambda c, d: ["evaluate", "--errored", "--config", str(c)],
    "scripted-model": lambda c, d: ["scripted-model", "--config", str(c)],
    "preflight": lambda c, d: ["preflight", str(c)],
    "serve": lambda c, d: ["serve", str(c), "--backend", "scripted", "--port", "0", "--log", str(d / "serve.log")],
    "proxy": lambda c, d: ["proxy", "--upstream", UPSTREAM, "--deletion", "baseline", "--seed", "1",
                           "--log", str(d / "log"), "--agent", "mini", "--config", str(c)],
}


def config_cases() -> Iterator[Case]:
    for command, argv in STUDY_COMMANDS.items():
        for what, data in CONFIG_CONTENTS.items():
            yield Case(command, f"config {what}",
                       lambda w, d, a=argv, b=data: Spec(a(write(d / "bad.yaml", b), d)))
        yield Case(command, "config missing", lambda w, d, a=argv: Spec(a(d / "none.yaml", d), says=("not found",)))
        yield Case(command, "config a directory",
                   lambda w, d, a=argv: Spec(a(_mkdir(d / "c.yaml"), d), says=("is a directory",)))
        yield Case(command, "config unreadable",
                   lambda w, d, a=argv: Spec(a(_unreadable(demo_config(d)), d), perms=True,
                                             says=("cannot read",)))
    for what, data in CONFIG_CONTENTS.items():
        yield Case("plan", f"overlay {what}", lambda w, d, b=data: Spec(  # a partial overlay is fine
            ["plan", str(demo_config(d)), str(write(d / "overlay.yaml", b))], expect="any"))


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _unreadable(p: Path) -> Path:
    p.chmod(0)
    return p


def _readonly_dir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    p.chmod(0o555)
    return p


# -- every key of the schema, wrongly typed or out of range -------------------------------------------

def _leaves(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    for key, sub in (node.get("properties") or {}).items():
        if "$ref" in sub or not isinstance(sub, dict):
            continue
        if sub.get("type") == "object" and sub.get("properties"):
            yield from _leaves(sub, (*path, key))
        elif "type" in sub:
            yield (*path, key), sub


def _wrong_values(schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    kind = schema["type"]
    if isinstance(kind, list):  # e.g. [string, "null"]: a key an overlay may unset
        kind = next(k for k in kind if k != "null")
    yield "wrongly typed", {"string": 5, "integer": "five", "number": "five", "boolean": "maybe",
                            "array": "not a list", "object": ["not", "an", "object"]}[kind]
    if kind in ("integer", "number") and "maximum" in schema:
        yield "above its maximum", schema["maximum"] * 10 + 1
    if kind in ("integer", "number") and "minimum" in schema:
        yield "below its minimum", schema["minimum"] - 1
    if kind == "array" and (schema.get("items") or {}).get("type") == "string":
        yield "a list of numbers", [1, 2]


def schema_cases() -> Iterator[Case]:
    from forgetting.foundation.config_schema import load_schema

    for path, sub in _leaves(load_schema()):
        if path[0] in ("only", "only_agents", "only_tasks"):
            continue
        for what, value in _wrong_values(sub):
            key = "__".join(path)
            yield Case("plan", f"config {'.'.join(path)} {what}",
                       lambda w, d, k=key, v=value: Spec(["plan", str(demo_config(d, **{k: v}))]))


# -- --set ----------------------------------------------------------------------------------------------

SETS = {
    "invalid YAML": "repeats=[1",
    "no =": "repeats",
    "an empty key": "=5",
    "a tab": "repeats=\t@",
    "a NUL": "study=\x00",
    "nested 3000 deep": "x=" + deep(3000),
    "an alias bomb": "x={" + laughs(7).replace("\n", ", ").rstrip(", ") + "}",
    "repeats zero": "repeats={baseline: 0}",
    "repeats 10^9": "repeats={baseline: 1000000000, deletion: 1}",
    "agents a string": "agents=nope",
    "an unknown configuration": "only=never-heard-of-it",
    "regenerate a word": "regenerate=perhaps",
    "study a list": "study=[1, 2]",
}


def set_cases() -> Iterator[Case]:
    for command in ("plan", "report", "collect", "preflight"):
        for what, item in SETS.items():
            yield Case(command, f"--set {what}",
                       lambda w, d, c=command, i=item: Spec([c, str(demo_config(d)), "--set", i]))


# -- output paths ---------------------------------------------------------------------------------------

def out_cases() -> Iterator[Case]:
    def under_a_file(d: Path, name: str) -> Path:
        return write(d / "afile", "x") / name

    elsewhere = {  # where neither an output file nor an output directory can go
        "under a file": under_a_file,
        "in a read-only folder": lambda d, name: _readonly_dir(d / "ro") / name,
        "under /proc": lambda d, name: Path("/proc/forgetting-hostile") / name,
    }
    files = {"a directory": lambda d, name: _mkdir(d / name), **elsewhere}
    for what, target in files.items():
        perms = what == "in a read-only folder"
        yield Case("plan", f"--out {what}", lambda w, d, t=target, p=perms: Spec(
            ["plan", str(demo_config(d)), "--out", str(t(d, "runs.parquet"))], perms=p))
        yield Case("label", f"--out {what}", lambda w, d, t=target, p=perms: Spec(
            ["label", str(w.mini_run), "--out", str(t(d, "labels.csv"))], perms=p))
        yield Case("cost", f"--out {what}", lambda w, d, t=target, p=perms: Spec(
            ["cost", str(w.mini_run), "--out", str(t(d, "calls.parquet"))], perms=p))
        yield Case("tasks", f"--out {what}", lambda w, d, t=target, p=perms: Spec(
            ["tasks", "sample", "-n", "3", "--out", str(t(d, "ids.txt"))], perms=p))
        if what != "under /proc":  # root may write there: the download would start
            yield Case("dataset", f"--out {what}", lambda w, d, t=target, p=perms: Spec(
                ["dataset", "fetch", "--out", str(t(d, "rows.jsonl"))], perms=p))
    dirs = {"a file": lambda d, name: write(d / name, "x"), **elsewhere}
    for what, target in dirs.items():
        perms = what == "in a read-only folder"
        yield Case("proxy", f"--log {what}", lambda w, d, t=target, p=perms: Spec(
            ["proxy", "--upstream", UPSTREAM, "--deletion", "baseline", "--seed", "1", "--log", str(t(d, "log")),
             "--agent", "mini"], perms=p))
        commands = [("report", ["report"]), ("collect", ["collect"])]
        if what != "under /proc":  # root may write there (the kernel says no later): no agent run is started
            commands += [("run", ["run", "--run-id", "mini/baseline/demo__confkit-1/1"]),
                         ("run-batch", ["run-batch", "--batch", "BATCH"])]
        for command, argv in commands:
            yield Case(command, f"results_dir {what}", lambda w, d, t=target, a=argv, p=perms: _results_case(
                w, d, a, t(d, "results"), p))
    for suffix in (".txt", ".json", ""):
        yield Case("label", f"--out suffix {suffix or 'none'}", lambda w, d, s=suffix: Spec(
            ["label", str(w.mini_run), "--out", str(d / f"rows{s}")]))
        yield Case("cost", f"--out suffix {suffix or 'none'}", lambda w, d, s=suffix: Spec(
            ["cost", str(w.mini_run), "--out", str(d / f"rows{s}")]))


def _results_case(world: Any, d: Path, argv: list[str], results: Path, perms: bool) -> Spec:
    """A study command whose results directory is unusable."""
    config = demo_config(d, "s.yaml", study__results_dir=str(results))
    if argv[0] == "run-batch":
        argv = _with_batch(world, ["run-batch", str(config), "--batch", "BATCH"])
        return Spec(argv, perms=perms)
    return Spec([argv[0], str(config), *argv[1:]], perms=perms)


# -- label, cost: paths, trajectories, call logs, rules, price sheets --------------------------------------

def _mutated_json(make: Callable[[], Any], mutate: Callable[[Any], None]) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        doc = make()
        mutate(doc)
        return write(d / "x.traj.json", json.dumps(doc))
    return build


TRAJECTORIES: dict[str, Callable[[Path], Path]] = {
    "mini tool_calls a string": _mutated_json(toolcall_trajectory, _at("messages", 2, "tool_calls", value="nope")),
    "mini a tool call a number": _mutated_json(toolcall_trajectory, _at("messages", 2, "tool_calls", value=[1])),
    "mini a function a list": _mutated_json(toolcall_trajectory, _at("messages", 2, "tool_calls", 0, "function",
                                                                      value=[])),
    "mini arguments a number": _mutated_json(toolcall_trajectory, _at("messages", 2, "tool_calls", 0, "function",
                                                                       "arguments", value=5)),
    "mini arguments nested 3000 deep": _mutated_json(toolcall_trajectory, _at(
        "messages", 2, "tool_calls", 0, "function", "arguments", value=deep(3000))),
    "mini content a number": _mutated_json(toolcall_trajectory, _at("messages", 3, "content", value=5)),
    "mini role missing": _mutated_json(toolcall_trajectory, _at("messages", 1, "role", delete=True)),
    "mini messages an object": _mutated_json(toolcall_trajectory, _at("messages", value={})),
    "mini a message null": _mutated_json(toolcall_trajectory, _at("messages", 1, value=None)),
    "mini extra a list": _mutated_json(toolcall_trajectory, _at("messages", 3, "extra", value=[1])),
    "mini info a number": _mutated_json(toolcall_trajectory, _at("info", value=3)),
    "mini step_limit a string": _mutated_json(toolcall_trajectory, _at("info", "config", "agent", "step_limit",
                                                                       value="many")),
    "mini unknown format": _mutated_json(toolcall_trajectory, _at("trajectory_format", value="mini-swe-agent-9")),
    "mini-text content a list of numbers": _mutated_json(text_trajectory, _at("messages", 3, "content", value=[1])),
    "mini-text action_regex a list": _mutated_json(text_trajectory, _at("info", "config",
                                                                        value={"model": {"action_regex": []}})),
    "trae llm_interactions [1]": _mutated_json(trae_trajectory, _at("llm_interactions", 0, value=1)),
    "trae llm_interactions a string": _mutated_json(trae_trajectory, _at("llm_interactions", value="x")),
    "trae input_messages an object": _mutated_json(trae_trajectory, _at("llm_interactions", 0, "input_messages",
                                                                        value={})),
    "trae response a list": _mutated_json(trae_trajectory, _at("llm_interactions", 0, "response", value=[])),
    "trae tool_calls a string": _mutated_json(trae_trajectory, _at("llm_interactions", 0, "response", "tool_calls",
                                                                   value="nope")),
    "trae a tool call a number": _mutated_json(trae_trajectory, _at("llm_interactions", 0, "response",
                                                                    "tool_calls", value=[7])),
    "trae agent_steps a number": _mutated_json(trae_trajectory, _at("agent_steps", value=3)),
    "trae max_steps a string": _mutated_json(trae_trajectory, _at("max_steps", value="ten")),
    "not JSON": lambda d: write(d / "x.traj.json", "{not json"),
    "not UTF-8": lambda d: write(d / "x.traj.json", b'{"messages": ["\xff"]}'),
    "nested 100000 deep": lambda d: write(d / "x.traj.json", deep(100_000)),
    "a JSON number": lambda d: write(d / "x.traj.json", "[1]"),
    "neither format": lambda d: write(d / "x.traj.json", '{"hello": 1}'),
    "empty": lambda d: write(d / "x.traj.json", ""),
}


def _log_lines(world: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in world.mini_log.read_text().splitlines()]


def _first(records: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(r for r in records if r["type"] == kind)


def _mutated_log(mutate: Callable[[list[dict[str, Any]]], None]) -> Callable[[Any, Path], Path]:
    def build(world: Any, d: Path) -> Path:
        records = _log_lines(world)
        mutate(records)
        return write(d / "calls.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    return build


def _set(kind: str, *path: Any, value: Any = None, delete: bool = False) -> Callable[[list[dict[str, Any]]], None]:
    def mutate(records: list[dict[str, Any]]) -> None:
        _at(*path, value=value, delete=delete)(_first(records, kind))
    return mutate


CALL_LOGS: dict[str, Callable[[Any, Path], Path]] = {
    **{f"call {field} missing": _mutated_log(_set("call", field, delete=True))
       for field in ("index", "t_request", "t_response", "segments", "deleted")},
    **{f"call {field} {what}": _mutated_log(_set("call", field, value=value)) for field, what, value in (
        ("index", "a string", "1"), ("index", "a float", 1.5), ("t_request", "a string", "noon"),
        ("segments", "a number", 5), ("segments", "a list of numbers", [1, 2]), ("params", "a list", [1]),
        ("deleted", "an object", {}), ("deleted", "a list of numbers", [1]), ("response", "a list", [1]),
        ("usage", "a string", "lots"), ("attempts", "a string", "two"), ("ok", "a string", "yes"))},
    **{f"response {field} {what}": _mutated_log(_set("call", "response", field, value=value))
       for field, what, value in (("tool_calls", "[1]", [1]), ("tool_calls", "a string", "nope"),
                                  ("content", "a number", 5), ("reasoning_content", "a list", []),
                                  ("finish_reason", "a number", 3))},
    **{f"segment {field} missing": _mutated_log(_set("segment", field, delete=True))
       for field in ("key", "message", "token_ids")},
    **{f"segment {field} {what}": _mutated_log(_set("segment", field, value=value)) for field, what, value in (
        ("key", "a number", 5), ("message", "a number", 5), ("message", "without role", {"content": "x"}),
        ("token_ids", "a string", "x"), ("token_ids", "negative", [-1]), ("token_ids", "floats", [1.5]))},
    "header format unknown": _mutated_log(_set("header", "format", value="other/9")),
    "header run_id a number": _mutated_log(_set("header", "run_id", value=5)),
    "header missing": _mutated_log(lambda r: r.pop(0)),
    "an unknown record type": _mutated_log(lambda r: r.append({"type": "mystery"})),
    "a record a list": lambda w, d: write(d / "calls.jsonl", w.mini_log.read_text() + "[1, 2]\n"),
    "a call on an unknown segment": _mutated_log(_set("call", "segments", value=["nope"])),
    "a torn last line": lambda w, d: write(d / "calls.jsonl", w.mini_log.read_bytes()[:-40]),
    "a corrupt middle line": lambda w, d: write(d / "calls.jsonl",
                                                w.mini_log.read_bytes().replace(b"\n", b"\n{x\n", 1)),
    "a line nested 100000 deep": lambda w, d: write(d / "calls.jsonl", w.mini_log.read_text() + deep(100_000) + "\n"),
    "not UTF-8": lambda w, d: write(d / "calls.jsonl", w.mini_log.read_bytes().replace(b"\n", b"\n\xff\n", 1)),
    "empty": lambda w, d: write(d / "calls.jsonl", ""),
}


def unreadable_yaml(not_utf8: bytes, invalid: str, a_list: str, deep_key: str) -> dict[str, str | bytes]:
    """The ways every YAML table an option names is damaged: not UTF-8, not YAML, a list where a
    mapping belongs, nested 5000 deep under ``deep_key``."""
    return {"not UTF-8": not_utf8, "invalid YAML": invalid, "a list": a_list,
            "nested 5000 deep": f"{deep_key}: " + deep(5000) + "\n"}


RULES: dict[str, str | bytes] = {
    **unreadable_yaml(b"classes: [\xff]\n", "classes: [read\n", "- read\n", "x"),
    "an unknown key": "colour: blue\n",
    "a bad regular expression": (
        "version: 1\nclasses: [read, other]\ndefault: other\nprecedence: [read, other]\nagents: {mini: mini}\n"
        "tools: {mini: []}\nshell: {commands: [{command: cat, args_match: '(', class: read}]}\n"),
    "classes a string": "version: 1\nclasses: read\n",
    "empty": "",
}

PRICES: dict[str, str | bytes] = {
    **unreadable_yaml(b"currency: \xff\n", "per_million_tokens: {input: [\n", "- 1\n", "description"),
    "no prices": "currency: USD\n",
    "a negative price": "per_million_tokens: {input: -1, cached_input: 0, output: 1}\n",
    "a price .nan": "per_million_tokens: {input: .nan, cached_input: 0, output: 1}\n",
    "a price .inf": "per_million_tokens: {input: .inf, cached_input: 0, output: 1}\n",
    "a price a string": "per_million_tokens: {input: cheap, cached_input: 0, output: 1}\n",
    "an unknown key": "per_million_tokens: {input: 1, cached_input: 0, output: 1}\nfree: true\n",
    "min_prefix negative": "per_million_tokens: {input: 1, cached_input: 0, output: 1}\ncache: {min_prefix: -1}\n",
    "increment zero": "per_million_tokens: {input: 1, cached_input: 0, output: 1}\ncache: {increment: 0}\n",
    "ttl zero": "per_million_tokens: {input: 1, cached_input: 0, output: 1}\ncache: {ttl_s: 0}\n",
    "capacity a string": "per_million_tokens: {input: 1, cached_input: 0, output: 1}\ncache: {capacity_tokens: x}\n",
    "currency a number": "per_million_tokens: {input: 1, cached_input: 0, output: 1}\ncurrency: 5\n",
    "empty": "",
}


def label_cost_cases() -> Iterator[Case]:
    for what, make in TRAJECTORIES.items():
        # arguments that are no JSON object are kept as raw text: a trajectory that still reads
        expect = "any" if what == "mini arguments nested 3000 deep" else "error"
        yield Case("label", f"trajectory {what}", lambda w, d, m=make, e=expect: Spec(["label", str(m(d))], e))
        yield Case("cost", f"trajectory {what}", lambda w, d, m=make, e=expect: Spec(["cost", str(m(d))], e))
    for what, make in CALL_LOGS.items():
        yield Case("cost", f"call log {what}", lambda w, d, m=make: Spec(["cost", str(m(w, d))]))
        yield Case("label", f"--call-log {what}", lambda w, d, m=make: Spec(
            ["label", str(w.mini_trajectory), "--call-log", str(m(w, d))]))
    for what, text in RULES.items():
        yield Case("label", f"--rules {what}", lambda w, d, t=text: Spec(
            ["label", str(w.mini_run), "--rules", str(write(d / "rules.yaml", t))]))
    for what, text in PRICES.items():
        yield Case("cost", f"--pricing {what}", lambda w, d, t=text: Spec(
            ["cost", str(w.mini_run), "--pricing", str(write(d / "sheet.yaml", t))]))
    paths = {
        "missing": lambda w, d: d / "nothing-here",
        "an empty directory": lambda w, d: _mkdir(d / "empty"),
        "a text file": lambda w, d: write(d / "notes.txt", "hello\n"),
        "a binary file": lambda w, d: write(d / "blob.bin", bytes(range(256))),
        "unreadable": lambda w, d: _unreadable(write(d / "x.traj.json", json.dumps(toolcall_trajectory()))),
    }
    for what, make in paths.items():
        for command in ("label", "cost"):
            yield Case(command, f"path {what}", lambda w, d, c=command, m=make, p=what == "unreadable": Spec(
                [c, str(m(w, d))], perms=p))
    flags = {
        "--threshold 0": ["--threshold", "0"], "--threshold -1": ["--threshold", "-1"],
        "--threshold 1.5": ["--threshold", "1.5"], "--threshold nan": ["--threshold", "nan"],
        "--threshold inf": ["--threshold", "inf"], "--threshold x": ["--threshold", "x"],
        "--looping-window 1": ["--looping-window", "1"], "--looping-window x": ["--looping-window", "x"],
        "--turn-cap 0": ["--turn-cap", "0"], "--turn-cap -3": ["--turn-cap", "-3"],
        "--agent trae on mini": ["--agent", "trae"], "--agent other": ["--agent", "gpt"],
        "--call-log with a directory": ["--call-log", "CALLLOG"],
    }
    for what, extra in flags.items():
        yield Case("label", what, lambda w, d, e=extra: Spec(
            ["label", str(w.mini_trajectory if "CALLLOG" not in e else w.study / "runs"),
             *[str(w.mini_log) if x == "CALLLOG" else x for x in e]]))
    yield Case("cost", "--run-id with two paths", lambda w, d: Spec(
        ["cost", str(w.mini_run), str(w.text_run), "--run-id", "x"]))
    yield Case("cost", "--pricing unknown", lambda w, d: Spec(["cost", str(w.mini_run), "--pricing", "nope"]))
    yield Case("cost", "--pricing twice", lambda w, d: Spec(["cost", str(w.mini_run), "--pricing", "paper",
                                                             "--pricing", "paper"]))
    yield Case("cost", "--pricing-dir a file", lambda w, d: Spec(
        ["cost", str(w.mini_run), "--pricing-dir", str(write(d / "f", "x"))]))
    yield Case("cost", "a good run", lambda w, d: Spec(["cost", str(w.mini_run)], expect="ok"))
    yield Case("label", "a good run", lambda w, d: Spec(["label", str(w.mini_run)], expect="ok"))


# -- evaluate, tasks, proxy, scripted-model, demo, run, run-batch, report, dataset ---------------------

def _eval_patch(d: Path, *existing: str) -> list[str]:
    patch = write(d / "fix.diff", "diff --git a/x b/x\n")
    for name in existing:
        if name == "eval":
            write(d / "eval" / "notes.txt", "my notes\n")
        else:
            write(d / name, '{"mine": true}\n')
    return ["evaluate", "--patch", str(patch), "--instance", "demo__confkit-1", "--config", str(demo_config(d))]


def other_cases() -> Iterator[Case]:
    evaluate = {
        "--timeout 0": lambda w, d: [*_eval_patch(d), "--timeout", "0"],
        "--timeout -1": lambda w, d: [*_eval_patch(d), "--timeout", "-1"],
        "--timeout x": lambda w, d: [*_eval_patch(d), "--timeout", "x"],
        "--timeout beyond the schema's maximum": lambda w, d: [*_eval_patch(d), "--timeout", "999999999"],
        "--backend other": lambda w, d: [*_eval_patch(d), "--backend", "cloud"],
        "an eval.json beside the patch": lambda w, d: _eval_patch(d, "eval.json"),
        "an eval/ beside the patch": lambda w, d: _eval_patch(d, "eval"),
        "an eval.json in --out": lambda w, d: [*_eval_patch(d / "p"), "--out", str(_eval_out(d, "eval.json"))],
        "an eval/ in --out": lambda w, d: [*_eval_patch(d / "p"), "--out", str(_eval_out(d, "eval"))],
        "--out a file": lambda w, d: [*_eval_patch(d), "--out", str(write(d / "file", "x"))],
        "--patch missing": lambda w, d: ["evaluate", "--patch", str(d / "no.diff"), "--instance", "x",
                                         "--config", str(demo_config(d))],
        "--patch a directory": lambda w, d: ["evaluate", "--patch", str(_mkdir(d / "p.diff")), "--instance", "x",
                                             "--config", str(demo_config(d))],
        "--patch without --instance": lambda w, d: ["evaluate", "--patch", str(write(d / "f.diff", "x")),
                                                    "--config", str(demo_config(d))],
        "an unknown instance": lambda w, d: [*_eval_patch(d)[:4], "nope__nope-1", *_eval_patch(d)[5:]],
        "a binary patch": lambda w, d: ["evaluate", "--patch", str(write(d / "b.diff", b"\x00\xff")), "--instance",
                                        "demo__confkit-1", "--config", str(demo_config(d))],
        "not a run directory": lambda w, d: ["evaluate", str(_mkdir(d / "somewhere")), "--config",
                                             str(demo_config(d))],
        "--errored with --patch": lambda w, d: [*_eval_patch(d), "--errored"],
        "a run directory and --patch": lambda w, d: [*_eval_patch(d), str(w.mini_run)],
    }
    for what, argv in evaluate.items():
        yield Case("evaluate", what, lambda w, d, a=argv: Spec(a(w, d)))
    tasks = {
        "-n 0": ["-n", "0"], "-n -1": ["-n", "-1"], "-n x": ["-n", "x"], "-n beyond the pool": ["-n", "100000"],
        "--seed -1": ["--seed", "-1"], "--seed x": ["--seed", "x"], "--seed 2^64": ["--seed", str(2**64)],
    }
    for what, extra in tasks.items():
        yield Case("tasks", what, lambda w, d, e=extra: Spec(["tasks", "sample", *e]))
    sources = {
        "missing": lambda d: d / "none.txt", "a directory": lambda d: _mkdir(d / "ids"),
        "not UTF-8": lambda d: write(d / "ids.txt", b"a__b-1\n\xff\n"), "empty": lambda d: write(d / "ids.txt", ""),
        "unreadable": lambda d: _unreadable(write(d / "ids.txt", "a__b-1\n")),
    }
    for what, make in sources.items():
        yield Case("tasks", f"--from {what}", lambda w, d, m=make, p=what == "unreadable": Spec(
            ["tasks", "sample", "-n", "1", "--from", str(m(d))], perms=p))
    proxy = {
        "--upstream port out of range": ["--upstream", "http://127.0.0.1:99999/v1"],
        "--upstream malformed IPv6": ["--upstream", "http://[::1/v1"],
        "--upstream not http": ["--upstream", "ftp://127.0.0.1/v1"],
        "--upstream no host": ["--upstream", "http:///v1"],
        "--upstream a space": ["--upstream", "http://local host:8000/v1"],
        "--upstream non-ASCII": ["--upstream", "http://mödel:8000/v1"],
        "--upstream a newline": ["--upstream", "http://127.0.0.1:8000/v1\r\nX: y"],
        "--port 70000": ["--port", "70000"], "--port -1": ["--port", "-1"], "--port x": ["--port", "x"],
        "--seed -1": ["--seed", "-1"], "--seed x": ["--seed", "x"], "--seed 2^64": ["--seed", str(2**64)],
        "--run-id CR LF": ["--run-id", "mini/x\r\nX-Evil: 1"], "--run-id non-ASCII": ["--run-id", "mini/café/1"],
        "--run-id a space": ["--run-id", "a b"], "--run-id empty": ["--run-id", ""],
        "--run-id 10000 characters": ["--run-id", "x" * 10000],
        "--deletion unknown": ["--deletion", "delete-everything"], "--deletion empty": ["--deletion", ""],
        "--agent other": ["--agent", "gpt"],
    }
    for what, extra in proxy.items():
        yield Case("proxy", what, lambda w, d, e=extra: Spec(_proxy_argv(d, e)))
    yield Case("proxy", "port in use", _port_in_use)
    scripted = {
        "--settings not JSON": ["--settings", "{"], "--settings a list": ["--settings", "[1]"],
        "--settings nested 100000 deep": ["--settings", deep(100_000)],
        "--settings an unknown key": ["--settings", '{"colour": "blue"}'],
        "--settings a wrong type": ["--settings", '{"detour_rate": "often"}'],
        "--settings out of range": ["--settings", '{"detour_rate": 7}'],
        "--port 70000": ["--port", "70000"], "--seed -1": ["--seed", "-1"],
        "--tasks missing": ["--tasks", "/nonexistent/tasks"],
    }
    for what, extra in scripted.items():
        yield Case("scripted-model", what, lambda w, d, e=extra: Spec(["scripted-model", *e]))
    demo = {
        "--tasks missing": lambda d: ["--tasks", str(d / "none")],
        "--tasks a file": lambda d: ["--tasks", str(write(d / "t", "x"))],
        "--tasks empty": lambda d: ["--tasks", str(_mkdir(d / "tasks"))],
        "instance.json not UTF-8": lambda d: ["--tasks", str(write(d / "t" / "x__y-1" / "instance.json",
                                                                   b"{\xff}").parent.parent)],
        "instance.json not JSON": lambda d: ["--tasks", str(write(d / "t" / "x__y-1" / "instance.json",
                                                                  "{").parent.parent)],
        "instance.json nested 100000 deep": lambda d: ["--tasks", str(write(
            d / "t" / "x__y-1" / "instance.json", deep(100_000)).parent.parent)],
        "--dest a file": lambda d: ["--dest", str(write(d / "dest", "x"))],
    }
    for what, extra in demo.items():
        yield Case("demo", what, lambda w, d, e=extra: Spec(["demo", "setup", *e(d)]))
    runs = {
        "run --run-id malformed": lambda d: ["run", str(demo_config(d)), "--run-id", "a/b"],
        "run --run-id CR LF": lambda d: ["run", str(demo_config(d)), "--run-id", "mini/baseline/x\r\n/1"],
        "run --run-id not planned": lambda d: ["run", str(demo_config(d)), "--run-id", "mini/baseline/none__x-1/1"],
        "run-batch --batch unknown": lambda d: ["run-batch", str(demo_config(d)), "--batch", "mini/baseline/b999"],
        "run-batch --manifest a directory": lambda d: ["run-batch", str(demo_config(d)), "--batch", "BATCH",
                                                       "--manifest", str(_mkdir(d / "m"))],
    }
    for what, argv in runs.items():
        yield Case(what.split()[0], what, lambda w, d, a=argv: Spec(_with_batch(w, a(d))))
    reports = {
        "--print an unknown table": lambda w, d: ["report", str(demo_config(d)), "--print", "nope"],
        "--only an unknown step": lambda w, d: ["report", str(demo_config(d)), "--only", "everything"],
        "datasets missing": lambda w, d: ["report", str(demo_config(d))],
        "runs dataset corrupt": lambda w, d: ["report", str(_with_datasets(w, d, runs=b"PAR1 not really"))],
        "runs dataset of another schema": lambda w, d: ["report", str(_with_datasets(w, d, runs="calls"))],
    }
    for what, argv in reports.items():
        yield Case("report", what, lambda w, d, a=argv: Spec(a(w, d)))
    yield Case("collect", "a batch file corrupt (the datasets stay)", _collect_corrupt)
    preflight = {
        "--partition tpu": ["--partition", "tpu"],
        "--partition empty": ["--partition", ""],
        "--serve with a bad --set": ["--serve", "--set", "model=[1"],
    }
    for what, extra in preflight.items():
        yield Case("preflight", what, lambda w, d, e=extra: Spec(["preflight", str(demo_config(d)), *e]))
    serve = {  # the demo's config names no address file: each stops before a server starts
        "no address file": ["--backend", "scripted"],
        "--port out of range": ["--backend", "scripted", "--port", "70000"],
        "--port negative": ["--backend", "scripted", "--port", "-1"],
        "--backend unknown": ["--backend", "sglang"],
        "--set model a list": ["--set", "model=[1, 2]"],
    }
    for what, extra in serve.items():
        yield Case("serve", what, lambda w, d, e=extra: Spec(["serve", str(demo_config(d)), *e]))
    yield Case("dataset", "--name with --out a directory", lambda w, d: Spec(
        ["dataset", "fetch", "--name", "x/y", "--out", str(_mkdir(d / "o"))]))
    for what, argv in {"no command": [], "an unknown command": ["fly"], "an unknown option": ["plan", "--fly"],
                       "--version": ["--version"]}.items():
        yield Case("cli", what, lambda w, d, a=argv: Spec(list(a), expect="any"))


def _eval_out(d: Path, existing: str) -> Path:
    out = _mkdir(d / "out")
    if existing == "eval":
        write(out / "eval" / "mine.txt", "keep me\n")
    else:
        write(out / existing, '{"mine": true}\n')
    return out


def _proxy_argv(d: Path, extra: list[str]) -> list[str]:
    base = {"--upstream": UPSTREAM, "--deletion": "baseline", "--seed": "1", "--log": str(d / "log"),
            "--agent": "mini", "--port": "0"}
    for k, v in zip(extra[::2], extra[1::2], strict=True):
        base[k] = v
    return ["proxy", *[x for kv in base.items() for x in kv]]


def _port_in_use(w: Any, d: Path) -> Spec:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    _HELD.append(sock)  # closed at the end of the session
    port = sock.getsockname()[1]
    return Spec(_proxy_argv(d, ["--port", str(port)]), says=("cannot listen",))


_HELD: list[socket.socket] = []


def _with_batch(world: Any, argv: list[str]) -> list[str]:
    if "BATCH" in argv:
        from forgetting.study.config import load_study
        from forgetting.study.plan import plan_batches

        argv[argv.index("BATCH")] = plan_batches(load_study(argv[1]))[0].key
    return argv


def _with_datasets(world: Any, d: Path, *, runs: bytes | str) -> Path:
    import shutil

    config = demo_config(d)
    results = d / "results"
    shutil.copytree(world.study / "datasets", results / "datasets")
    target = results / "datasets" / "runs.parquet"
    if isinstance(runs, bytes):
        target.write_bytes(runs)
    else:
        shutil.copy(results / "datasets" / f"{runs}.parquet", target)
    return config


def _collect_corrupt(world: Any, d: Path) -> Spec:
    import shutil

    study = d / "study"
    shutil.copytree(world.study, study)
    cfg = yaml.safe_load((study / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(study)
    write(study / "study.yaml", yaml.safe_dump(cfg))
    summary = next((study / "batches").rglob("summary.parquet"))
    summary.write_bytes(b"garbage")
    return Spec(["collect", str(study / "study.yaml")], says=("have no readable output",))


def _classed(klass: str, cases: Iterator[Case]) -> list[Case]:
    return [dataclasses.replace(c, klass=klass) for c in cases]


CASES: list[Case] = [
    *_classed("malformed config file", config_cases()),
    *_classed("config value wrongly typed or out of range", schema_cases()),
    *_classed("malformed --set", set_cases()), *_classed("unusable output path", out_cases()),
    *_classed("malformed run output or rule table", label_cost_cases()),
    *_classed("bad option or input file", other_cases()),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_input_ends_in_one_error_line(case: Case, world: Any, tmp_path: Path, tally: Any) -> None:
    check(world, tmp_path, tally, case.surface, case.build(world, tmp_path), klass=case.klass)


#: a representative subset, run as real processes (`python -m forgetting …`): what a user's shell sees
AS_PROCESSES = {
    "plan: config not UTF-8", "report: --set invalid YAML", "collect: config a directory", "plan: --out a directory",
    "plan: config an alias bomb", "run: config nested 5000 deep", "run-batch: run-batch --batch unknown",
    "label: trajectory mini tool_calls a string", "label: trajectory trae llm_interactions [1]",
    "cost: call log call index missing", "cost: --pricing not UTF-8", "evaluate: --timeout 0",
    "evaluate: an eval/ beside the patch", "tasks: --from missing", "proxy: --upstream port out of range",
    "proxy: --upstream malformed IPv6", "proxy: port in use", "proxy: --run-id CR LF",
    "scripted-model: --settings an unknown key", "demo: --tasks missing", "dataset: --out a directory",
    "report: --print an unknown table", "cli: an unknown command", "preflight: config invalid YAML",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.id in AS_PROCESSES], ids=lambda c: c.id)
def test_a_hostile_input_as_a_real_process(case: Case, world: Any, tmp_path: Path, tally: Any) -> None:
    check(world, tmp_path, tally, f"process: {case.surface}", case.build(world, tmp_path), process=True,
          klass=case.klass)


def test_the_table_covers_every_command_and_counts_at_least_300() -> None:
    from forgetting.cli import COMMANDS

    surfaces = {c.surface for c in CASES}
    assert set(COMMANDS) <= surfaces, set(COMMANDS) - surfaces
    assert len(CASES) >= 300
    assert len([c for c in CASES if c.id in AS_PROCESSES]) == len(AS_PROCESSES)  # every name still a case


# -- property-based ---------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _paths_of(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths_of(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths_of(v, (*prefix, i))
    return out


MINI_DOC = toolcall_trajectory()
MINI_PATHS = _paths_of(MINI_DOC)
TRAE_DOC = trae_trajectory()
TRAE_PATHS = _paths_of(TRAE_DOC)


@PROPERTY
@given(data=st.data(), value=JSON, agent=st.sampled_from(["mini", "trae"]))
def test_any_field_of_a_trajectory_replaced_by_any_json(world, tmp_path, tally, data, value, agent) -> None:
    doc, paths = (MINI_DOC, MINI_PATHS) if agent == "mini" else (TRAE_DOC, TRAE_PATHS)
    path = data.draw(st.sampled_from(paths))
    doc = copy.deepcopy(doc)
    _at(*path, value=value)(doc)
    d = tmp_path / f"case-{tally.cases['property: trajectory']}"
    traj = write(d / "x.traj.json", json.dumps(doc, allow_nan=True))
    command = data.draw(st.sampled_from(["label", "cost"]))
    check(world, d, tally, "property: trajectory", Spec([command, str(traj)], expect="any"),
          klass="any JSON in a trajectory field")


@PROPERTY
@given(data=st.data(), value=JSON)
def test_any_field_of_a_call_log_record_replaced_by_any_json(world, tmp_path, tally, data, value) -> None:
    records = _log_lines(world)[:6]
    line = data.draw(st.integers(0, len(records) - 1))
    paths = _paths_of(records[line])
    path = data.draw(st.sampled_from(paths)) if paths else ()
    if path:
        _at(*path, value=value)(records[line])
    d = tmp_path / f"case-{tally.cases['property: call log']}"
    log = write(d / "calls.jsonl", "".join(json.dumps(r, allow_nan=True) + "\n" for r in records))
    check(world, d, tally, "property: call log", Spec(["cost", str(log)], expect="any"),
          klass="any JSON in a call-log field")


def _config_paths(doc: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _config_paths(v, (*prefix, k))
    return out


CONFIG_PATHS = _config_paths(DEMO)


@PROPERTY
@given(path=st.sampled_from(CONFIG_PATHS), value=JSON)
def test_any_key_of_the_config_set_to_any_value(world, tmp_path, tally, path, value) -> None:
    d = tmp_path / f"case-{tally.cases['property: config']}"
    d.mkdir()
    config = demo_config(d, **{"__".join(path): value})
    check(world, d, tally, "property: config", Spec(["plan", str(config)], expect="any"),
          klass="any JSON as a config value")


@PROPERTY
@given(data=st.binary(max_size=200))
def test_any_bytes_as_a_config_file(world, tmp_path, tally, data) -> None:
    d = tmp_path / f"case-{tally.cases['property: config bytes']}"
    config = write(d / "c.yaml", data)
    check(world, d, tally, "property: config bytes", Spec(["plan", str(config)], expect="any"),
          klass="any bytes as a config file")


@PROPERTY
@given(key=st.text(max_size=12), value=st.text(max_size=40))
def test_any_set_item(world, tmp_path, tally, key, value) -> None:
    d = tmp_path / f"case-{tally.cases['property: --set']}"
    d.mkdir()
    check(world, d, tally, "property: --set",
          Spec(["plan", str(demo_config(d)), "--set", f"{key}={value}"], expect="any"),
          klass="any text as a --set item")


def teardown_module() -> None:
    for sock in _HELD:
        sock.close()
