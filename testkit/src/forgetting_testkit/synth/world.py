"""A synthetic task: a small Python repository with one bug, its tests and its difficulty.

Everything is drawn from a seed derived from the task id and the generator seed, so every
run of a task (any agent, configuration or repeat) sees the same repository — the paired
design of the study. The code is generated, line by line, from a vocabulary of identifiers
and statement templates: it tokenizes like real Python (about 10 tokens a line), and its
lines are distinct enough that re-fetch detection (SPEC §4) behaves as on real files.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from forgetting.foundation.seeds import seed63

NOUNS = (
    "value", "field", "query", "model", "record", "token", "path", "config", "option", "result",
    "node", "item", "entry", "buffer", "schema", "handler", "request", "response", "session",
    "cache", "index", "column", "widget", "message", "parser", "stream", "context", "backend",
    "format", "timezone", "locale", "header", "payload", "filter", "manager", "registry",
)
VERBS = (
    "get", "set", "build", "parse", "render", "resolve", "normalize", "validate", "clean", "load",
    "save", "merge", "split", "apply", "convert", "compile", "lookup", "update", "format", "check",
)
TYPES = ("ValueError", "TypeError", "KeyError", "RuntimeError", "ImproperlyConfigured", "LookupError")
LITERALS = ("None", "True", "False", "0", "1", "''", "[]", "{}", "()", "-1")
COMMENT_WORDS = (
    "the", "a", "when", "if", "not", "is", "this", "value", "should", "be", "returned", "as",
    "default", "empty", "in", "case", "of", "legacy", "callers", "keep", "order", "for",
    "backwards", "compatibility", "see", "ticket", "avoid", "extra", "queries", "here",
)


@dataclass(frozen=True)
class SourceFile:
    path: str
    lines: tuple[str, ...]

    def text(self, lo: int = 1, hi: int | None = None) -> str:
        """Lines ``lo..hi`` (1-based, inclusive), each with its newline."""
        hi = len(self.lines) if hi is None else min(hi, len(self.lines))
        return "".join(line + "\n" for line in self.lines[lo - 1 : hi])

    def numbered(self, lo: int = 1, hi: int | None = None) -> str:
        """Lines as ``cat -n`` / ``nl -ba`` print them: six-wide number, tab, line."""
        hi = len(self.lines) if hi is None else min(hi, len(self.lines))
        return "".join(f"{n:6d}\t{self.lines[n - 1]}\n" for n in range(lo, hi + 1))


@dataclass(frozen=True)
class TaskWorld:
    """One synthetic task: the repository the agent works in and how hard the task is."""

    task: str
    package: str
    files: tuple[SourceFile, ...]
    target: int  # the file holding the bug
    bug_line: int  # 1-based line of the bug in the target file
    related: tuple[int, ...]  # other files the fix needs a look at
    test_file: SourceFile
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    solve_p: float  # chance a careful agent that saw everything resolves it
    base_turns: float  # median model calls of an unhindered run
    statement: str
    symbol: str  # the function the issue is about

    @property
    def target_file(self) -> SourceFile:
        return self.files[self.target]

    def bug_region(self) -> tuple[int, int]:
        """The lines an agent must see to fix the bug (1-based, inclusive)."""
        n = len(self.target_file.lines)
        return max(1, self.bug_line - 12), min(n, self.bug_line + 14)


class _Lines:
    """A generator of plausible Python lines from one random stream."""

    def __init__(self, rng: np.random.Generator, stem: str) -> None:
        self.rng = rng
        self.stem = stem
        self.k = 0

    def pick(self, seq: tuple[str, ...]) -> str:
        return seq[int(self.rng.integers(len(seq)))]

    def name(self) -> str:
        self.k += 1
        if self.rng.random() < 0.5:
            return f"{self.pick(NOUNS)}_{self.pick(NOUNS)}"
        return self.pick(NOUNS) + str(self.k % 7)

    def comment(self) -> str:
        n = int(self.rng.integers(4, 11))
        return " ".join(self.pick(COMMENT_WORDS) for _ in range(n))

    def function(self, indent: str) -> list[str]:
        verb, noun = self.pick(VERBS), self.pick(NOUNS)
        args = ", ".join(self.name() for _ in range(int(self.rng.integers(1, 4))))
        out = [f"{indent}def {verb}_{noun}(self, {args}, **kwargs):"]
        body = indent + "    "
        out.append(f'{body}"""{verb.capitalize()} the {noun} of {self.stem} ({self.comment()})."""')
        for _ in range(int(self.rng.integers(4, 18))):
            r = self.rng.random()
            a, b = self.name(), self.name()
            if r < 0.3:
                out.append(f"{body}{a} = self.{b}.{self.pick(VERBS)}_{self.pick(NOUNS)}({self.name()})")
            elif r < 0.45:
                out.append(f"{body}if {a} is {self.pick(LITERALS)} or not self.{b}:")
                out.append(f"{body}    {a} = {self.pick(LITERALS)}")
            elif r < 0.55:
                out.append(f"{body}for {a} in self.{b}:")
                out.append(f"{body}    self._{self.pick(VERBS)}_{self.pick(NOUNS)}({a}, kwargs.get('{b}'))")
            elif r < 0.63:
                out.append(f'{body}raise {self.pick(TYPES)}("{self.comment()}: %r" % ({a},))')
            elif r < 0.75:
                out.append(f"{body}# {self.comment()}")
            elif r < 0.85:
                out.append(f"{body}{a}.update({{'{b}': {self.pick(LITERALS)}, '{self.name()}': {a}}})")
            else:
                out.append(f"{body}return self.{self.pick(VERBS)}_{b}({a}, strict={self.pick(LITERALS)})")
        out.append("")
        return out

    def module(self, n_lines: int) -> list[str]:
        lines = [f'"""{self.stem.replace("_", " ").capitalize()}: {self.comment()}."""', ""]
        for _ in range(int(self.rng.integers(2, 6))):
            lines.append(f"from {self.stem.split('_')[0]}.{self.pick(NOUNS)} import {self.pick(NOUNS).capitalize()}")
        lines += ["", ""]
        while len(lines) < n_lines:
            lines.append(f"class {self.pick(NOUNS).capitalize()}{self.pick(NOUNS).capitalize()}{self.k % 10}:")
            self.k += 1
            for _ in range(int(self.rng.integers(2, 7))):
                lines += self.function("    ")
                if len(lines) >= n_lines:
                    break
            lines.append("")
        return lines[:n_lines]


def _package(task: str) -> str:
    repo = task.split("__", 1)[0] if "__" in task else task.split("-", 1)[0]
    return "".join(c if c.isalnum() else "_" for c in repo.lower()) or "pkg"


@functools.lru_cache(maxsize=256)
def task_world(task: str, seed: int) -> TaskWorld:
    """The synthetic repository and difficulty of ``task`` (cached per process)."""
    rng = np.random.default_rng(seed63("world", seed, task))
    package = _package(task)
    subdirs = [f"{package}/{d}" for d in ("core", "utils", "db", "forms", "http", "contrib")]
    n_files = int(rng.integers(10, 22))
    files = []
    used: set[str] = set()
    for i in range(n_files):
        while True:
            stem = f"{NOUNS[int(rng.integers(len(NOUNS)))]}_{VERBS[int(rng.integers(len(VERBS)))]}s"
            path = f"{subdirs[int(rng.integers(len(subdirs)))]}/{stem}.py"
            if path not in used:
                used.add(path)
                break
        n_lines = int(np.clip(rng.lognormal(np.log(320), 0.5), 60, 1400))
        files.append(SourceFile(path, tuple(_Lines(rng, f"{package}_{stem}_{i}").module(n_lines))))
    target = int(rng.integers(n_files))
    candidates = [i for i in range(n_files) if i != target]
    related = tuple(int(i) for i in rng.choice(candidates, size=int(rng.integers(1, 4)), replace=False))
    tf = files[target]
    defs = [n for n, line in enumerate(tf.lines, start=1) if line.lstrip().startswith("def ")]
    def_line = defs[int(rng.integers(len(defs)))] if defs else 1
    bug_line = min(len(tf.lines), def_line + int(rng.integers(2, 8)))
    symbol = tf.lines[def_line - 1].strip()[4:].split("(", 1)[0] if defs else "main"
    test_stem = tf.path.rsplit("/", 1)[1].removesuffix(".py")
    test_lines = _Lines(rng, f"test_{test_stem}").module(int(rng.integers(120, 400)))
    test_file = SourceFile(f"tests/test_{test_stem}.py", tuple(test_lines))
    n_f2p, n_p2p = int(rng.integers(1, 4)), int(rng.integers(4, 30))
    f2p = tuple(f"tests/test_{test_stem}.py::test_{symbol}_{k}" for k in range(n_f2p))
    p2p = tuple(
        f"tests/test_{test_stem}.py::test_{VERBS[int(rng.integers(len(VERBS)))]}_{k}" for k in range(n_p2p)
    )
    solve_p = float(np.clip(rng.beta(2.6, 0.9), 0.05, 0.995))
    base_turns = float(np.clip(rng.lognormal(np.log(36), 0.35), 16, 140))
    statement = (
        f"`{symbol}` in `{tf.path}` returns the wrong result when called with an empty "
        f"{NOUNS[int(rng.integers(len(NOUNS)))]}.\n\nSteps to reproduce:\n\n```python\n"
        f"from {tf.path.removesuffix('.py').replace('/', '.')} import *\n"
        f"obj.{symbol}(None)  # raises instead of returning the default\n```\n\n"
        "Expected: the default value is returned, as documented. This worked in the previous "
        "release; the regression seems to come from the recent refactoring of the "
        f"{package} internals."
    )
    return TaskWorld(
        task=task, package=package, files=tuple(files), target=target, bug_line=bug_line, related=related,
        test_file=test_file, fail_to_pass=f2p, pass_to_pass=p2p, solve_p=solve_p, base_turns=base_turns,
        statement=statement, symbol=symbol,
    )
