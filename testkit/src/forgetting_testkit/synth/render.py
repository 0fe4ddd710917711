"""A synthetic agent's steps as the messages each real agent would exchange with the model.

* ``mini`` (mini-swe-agent 2.x, tool calling): one ``bash`` tool; the assistant's text is its
  reasoning; observations are ``role: tool`` messages ``<returncode>N</returncode>\\n<output>
  \\n…</output>`` (an output of 10,000 characters or more shows its head and tail only, as
  mini-swe-agent does); submission is the :data:`~forgetting.agents.MINI_SUBMIT_MARKER` command.
* ``trae`` (Trae agent through Chat Completions): tools ``bash``,
  ``str_replace_based_edit_tool`` (``view`` prints ``cat -n`` style), ``sequentialthinking``
  and ``task_done``; results come back as ``role: tool`` messages.

The texts (system prompts, task template, reasoning) are this project's own wording.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forgetting.agents import MINI_SUBMIT_MARKER
from forgetting.cost.trajectory import MINI_BASH_TOOL
from forgetting_testkit.synth.agent import TEST_FILE, Step
from forgetting_testkit.synth.world import NOUNS, SourceFile, TaskWorld

#: mini-swe-agent shows outputs this long only by their head and tail
MINI_ELIDE_AT = 10_000
MINI_HEAD_TAIL = 5_000

TRAE_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "bash",
        "description": "Run commands in a bash shell. State persists across calls; avoid commands "
                       "with very large output; long-running commands should run in the background.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "The bash command to run."},
            "restart": {"type": "boolean", "description": "Restart the shell session."}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "str_replace_based_edit_tool",
        "description": "View, create and edit files. `view` shows a file with line numbers (cat -n) or a "
                       "directory two levels deep; `create` writes a new file; `str_replace` replaces one "
                       "exact occurrence of old_str; `insert` adds text after a line.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string", "description": "Absolute path to a file or directory."},
            "view_range": {"type": "array", "items": {"type": "integer"}},
            "file_text": {"type": "string"},
            "old_str": {"type": "string"},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer"}},
            "required": ["command", "path"]}}},
    {"type": "function", "function": {
        "name": "sequentialthinking",
        "description": "Think step by step about the problem; each call records one thought.",
        "parameters": {"type": "object", "properties": {
            "thought": {"type": "string"},
            "thought_number": {"type": "integer"},
            "total_thoughts": {"type": "integer"},
            "next_thought_needed": {"type": "boolean"}},
            "required": ["thought", "thought_number", "total_thoughts", "next_thought_needed"]}}},
    {"type": "function", "function": {
        "name": "task_done",
        "description": "Report that the task is complete, after verifying the fix.",
        "parameters": {"type": "object", "properties": {}, "required": []}}},
]

_FILLER = (
    "I want to keep the change minimal and consistent with the surrounding code.",
    "The existing tests should tell me whether anything else depends on this behaviour.",
    "It is worth checking how the callers pass this argument before deciding.",
    "The naming in this module follows the rest of the package, which helps.",
    "I should not change the public signature, only the handling of the edge case.",
    "There may be a similar pattern elsewhere that was already fixed.",
    "Let me be careful about the indentation of the block I am looking at.",
    "This looks like a regression from the refactoring the issue mentions.",
)


@dataclass
class Rendered:
    """One step as its agent issues it and the output it gets back."""

    reasoning: str
    tool: str
    arguments: dict[str, Any]
    output: str | None  # the observation text; None when the step ends the run (submit)
    returncode: int = 0
    coverage: tuple[int, int] | None = None  # lines a read actually shows
    exec_s: float = 0.2


@dataclass
class FileState:
    """The repository as the run has changed it: (file, line) → the line's new text."""

    edits: dict[tuple[int, int], str] = field(default_factory=dict)

    def lines(self, world: TaskWorld, file: int) -> list[str]:
        src = world.test_file if file == TEST_FILE else world.files[file]
        lines = list(src.lines)
        for (f, n), text in self.edits.items():
            if f == file:
                lines[n - 1] = text
        return lines


def fixed_line(line: str, wrong: bool) -> str:
    if wrong:
        return line.rstrip() + "  # treat empty input as missing"
    if " is None" in line:
        return line.replace(" is None", " is not None", 1)
    if " or not " in line:
        return line.replace(" or not ", " and not ", 1)
    indent = line[: len(line) - len(line.lstrip())]
    return f"{indent}{line.strip()} if {NOUNS[0]} is not None else None"


def unified_diff(world: TaskWorld, state: FileState) -> str:
    """The patch of the run's edits, as ``git diff`` prints it (3 lines of context)."""
    out: list[str] = []
    for file in sorted({f for f, _ in state.edits}):
        src: SourceFile = world.test_file if file == TEST_FILE else world.files[file]
        new = state.lines(world, file)
        changed = sorted(n for f, n in state.edits if f == file and new[n - 1] != src.lines[n - 1])
        if not changed:
            continue
        path = src.path
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n")
        for n in changed:
            lo, hi = max(1, n - 3), min(len(src.lines), n + 3)
            count = hi - lo + 1
            out.append(f"@@ -{lo},{count} +{lo},{count} @@\n")
            for k in range(lo, hi + 1):
                if k == n:
                    out.append(f"-{src.lines[k - 1]}\n+{new[k - 1]}\n")
                else:
                    out.append(f" {src.lines[k - 1]}\n")
    return "".join(out)


class Renderer(ABC):
    """The agent-independent part: reasoning texts and command outputs."""

    agent = ""
    tools: list[dict[str, Any]] | None = None

    def __init__(self, world: TaskWorld, rng: np.random.Generator) -> None:
        self.world = world
        self.rng = rng
        self.state = FileState()
        self.created = False

    # -- texts ---------------------------------------------------------------------------
    def _path(self, file: int | None) -> str:
        if file is None:
            return self.world.package
        return self.world.test_file.path if file == TEST_FILE else self.world.files[file].path

    def _reasoning(self, step: Step) -> str:
        w, p = self.world, self._path(step.file)
        noun = NOUNS[int(self.rng.integers(len(NOUNS)))]
        why = step.why
        if step.kind == "read":
            text = {
                "relevant": f"The search points at `{p}`. Let me read lines {step.lo}-{step.hi} to see how "
                            f"`{w.symbol}` deals with an empty {noun}.",
                "context": f"Let me look at `{p}` (lines {step.lo}-{step.hi}) to see how the {noun} is built "
                           f"before it reaches `{w.symbol}`.",
                "tests": f"Let me see how the existing tests in `{p}` exercise `{w.symbol}`.",
                "verify": f"Let me look at the edited lines of `{p}` to check the change.",
                "restore": f"The earlier output of `{p}` is no longer in view. I need lines {step.lo}-{step.hi} "
                           "again before I change anything.",
                "recheck": f"Let me re-read lines {step.lo}-{step.hi} of `{p}` to make sure I have the details right.",
                "stuck": f"I still cannot see the contents of `{p}`. Let me print lines {step.lo}-{step.hi} again.",
                "restate": f"Let me re-read the code around line {w.bug_line} of `{p}` and restate the problem: "
                           f"`{w.symbol}` does not handle an empty {noun} before using it, so the call fails "
                           "instead of returning the default.",
                "forgot": f"Let me check `{p}` again; I am not sure I have looked at it yet.",
            }.get(why, f"Let me read `{p}`.")
        elif step.kind == "search":
            text = {
                "forgot": f"I lost track of where `{w.symbol}` is used. Let me search for it again.",
            }.get(why, f"Let me find where `{w.symbol}` is defined and used in the {w.package} package.")
        elif step.kind == "other":
            text = {
                "diagnose": (
                    f"Now I understand the problem. In `{w.target_file.path}`, `{w.symbol}` reaches line "
                    f"{w.bug_line} without checking whether the {noun} is empty, so the value passed on is "
                    "invalid and the caller raises instead of returning the default the documentation "
                    f"promises. The fix belongs at line {w.bug_line}: handle the empty case before the "
                    f"value is used. I will first reproduce the issue with a small script, then make the "
                    f"change and run the tests in `{w.test_file.path}`."
                ),
                "reorient": "My earlier notes are gone. Let me see what I have changed so far.",
            }.get(why, "Let me check the state of the repository.")
        elif step.kind == "think":
            text = "Let me think through the remaining steps before I continue."
        elif step.kind == "create":
            text = "Let me write a small script that reproduces the issue."
        elif step.kind == "run":
            text = "Now let me run the reproduction script."
        elif step.kind == "edit":
            text = (f"I'll change line {w.bug_line} of `{w.target_file.path}` so that the empty {noun} is "
                    "handled before it is used.")
        elif step.kind == "test":
            text = f"Let me run the tests for `{w.symbol}`."
        else:
            text = "The fix is in place and the tests pass. Let me submit the change."
        k = int(self.rng.integers(0, 4))
        extra = [_FILLER[int(i)] for i in self.rng.choice(len(_FILLER), size=k, replace=False)]
        return " ".join([text, *extra])

    def _grep_output(self) -> str:
        w, rng = self.world, self.rng
        hits = []
        tf = w.target_file
        for n, line in enumerate(tf.lines, start=1):
            if w.symbol in line:
                hits.append(f"{tf.path}:{n}:{line}")
        for _ in range(int(rng.integers(3, 30))):
            f = w.files[int(rng.integers(len(w.files)))]
            n = int(rng.integers(1, len(f.lines) + 1))
            hits.append(f"{f.path}:{n}:{f.lines[n - 1]}")
        return "\n".join(hits[:40]) + "\n"

    def _find_output(self) -> str:
        paths = sorted({f.path for f in self.world.files} | {self.world.test_file.path})
        return "\n".join(f"./{p}" for p in paths) + "\n"

    def _ls_output(self) -> str:
        rng = self.rng
        rows = ["total 96", "drwxr-xr-x  8 root root  4096 Jan  1 00:00 .",
                "drwxr-xr-x 12 root root  4096 Jan  1 00:00 .."]
        for f in self.world.files:
            size = int(rng.integers(900, 60000))
            rows.append(f"-rw-r--r--  1 root root {size:5d} Jan  1 00:00 {f.path.rsplit('/', 1)[1]}")
        return "\n".join(rows) + "\n"

    def _test_output(self, failed: bool) -> str:
        w, rng = self.world, self.rng
        n = len(w.fail_to_pass) + len(w.pass_to_pass)
        dots = "." * (n - (1 if failed else 0)) + ("F" if failed else "")
        out = [
            "============================= test session starts ==============================",
            "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0",
            "rootdir: /testbed",
            f"collected {n} items",
            "",
            f"{w.test_file.path} {dots} [100%]",
            "",
        ]
        if failed:
            test = w.fail_to_pass[0].split("::")[1]
            out += ["=================================== FAILURES ===================================",
                    f"_______________________________ {test} _______________________________", ""]
            lo = int(rng.integers(1, max(2, len(w.test_file.lines) - 12)))
            out += [f"    {line}" for line in w.test_file.lines[lo : lo + int(rng.integers(6, 14))]]
            out += [f"{w.target_file.path}:{w.bug_line}: in {w.symbol}",
                    f"    {self.state.lines(w, w.target)[w.bug_line - 1].strip()}",
                    "E   AssertionError: expected the default value, got None",
                    "=========================== short test summary info ============================",
                    f"FAILED {w.fail_to_pass[0]} - AssertionError: expected the default value, got None",
                    f"{'=' * 25} 1 failed, {n - 1} passed in {rng.uniform(0.3, 4):.2f}s {'=' * 25}"]
        else:
            out.append(f"{'=' * 30} {n} passed in {rng.uniform(0.3, 4):.2f}s {'=' * 30}")
        return "\n".join(out) + "\n"

    def _script(self) -> str:
        w = self.world
        module = w.target_file.path.removesuffix(".py").replace("/", ".")
        return (f"import {module} as target\n\n\ndef main():\n    obj = target.__dict__\n"
                f"    result = obj.get('{w.symbol}')\n    print('result:', result)\n\n\n"
                "if __name__ == '__main__':\n    main()\n")

    def _run_output(self) -> tuple[str, int]:
        w = self.world
        if (w.target, w.bug_line) in self.state.edits and not self._wrong():
            return "result: default\n", 0
        return (f"Traceback (most recent call last):\n  File \"/testbed/reproduce_issue.py\", line 11, in <module>\n"
                f"    main()\n  File \"/testbed/{w.target_file.path}\", line {w.bug_line}, in {w.symbol}\n"
                f"    {w.target_file.lines[w.bug_line - 1].strip()}\nTypeError: 'NoneType' object is not iterable\n", 1)

    def _wrong(self) -> bool:
        key = (self.world.target, self.world.bug_line)
        return key in self.state.edits and self.state.edits[key].endswith("# treat empty input as missing")

    def apply_edit(self, step: Step) -> tuple[str, str]:
        w = self.world
        old = self.state.lines(w, w.target)[w.bug_line - 1]
        new = fixed_line(w.target_file.lines[w.bug_line - 1], wrong=step.why == "wrong")
        self.state.edits[(w.target, w.bug_line)] = new
        return old, new

    def read_text(self, step: Step, numbered: bool) -> tuple[str, tuple[int, int]]:
        assert step.file is not None
        lines = self.state.lines(self.world, step.file)
        lo, hi = step.lo, min(step.hi, len(lines))
        if numbered:
            return "".join(f"{n:6d}\t{lines[n - 1]}\n" for n in range(lo, hi + 1)), (lo, hi)
        return "".join(line + "\n" for line in lines[lo - 1 : hi]), (lo, hi)

    # -- agent-specific --------------------------------------------------------------------
    @abstractmethod
    def preamble(self) -> list[dict[str, Any]]:
        """The system prompt and the task message."""

    @abstractmethod
    def render(self, step: Step) -> Rendered:
        """The step as this agent issues it, and what comes back."""

    def assistant_message(self, r: Rendered, call_id: str) -> dict[str, Any]:
        return {"role": "assistant", "content": r.reasoning, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": r.tool, "arguments": json.dumps(r.arguments, ensure_ascii=False)}}]}

    @abstractmethod
    def observation(self, r: Rendered, call_id: str) -> dict[str, Any] | None:
        """The message the step's output comes back in (None: the step ended the run)."""


def _mini_observation(output: str, returncode: int) -> str:
    if len(output) < MINI_ELIDE_AT:
        return f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"
    elided = len(output) - 2 * MINI_HEAD_TAIL
    return (
        f"<returncode>{returncode}</returncode>\n<warning>\nThe output of your last command was too long.\n"
        "Please try a different command that produces less output (head, tail, sed -n, grep).\n</warning>"
        f"<output_head>\n{output[:MINI_HEAD_TAIL]}\n</output_head>\n<elided_chars>\n{elided} characters elided\n"
        f"</elided_chars>\n<output_tail>\n{output[-MINI_HEAD_TAIL:]}\n</output_tail>"
    )


class MiniRenderer(Renderer):
    agent = "mini"
    tools: list[dict[str, Any]] | None = [MINI_BASH_TOOL]  # noqa: RUF012 - read only

    def preamble(self) -> list[dict[str, Any]]:
        w = self.world
        system = (
            "You are a careful software engineer working in a Linux shell. You solve programming "
            "issues by running one bash command at a time through the bash tool and reading its "
            "output. Explain your reasoning briefly before every command. Commands run in a fresh "
            "subshell each time, so change directories inside the command when you need to."
        )
        task = (
            "<pr_description>\nConsider the following issue in the repository at /testbed:\n\n"
            f"{w.statement}\n</pr_description>\n\n<instructions>\n"
            "Make changes to non-test files under /testbed so that the issue is resolved. Work in "
            "this order: find and read the relevant code, write a script that reproduces the issue, "
            "edit the source to fix it, check that the script now succeeds, and think about edge "
            "cases. Do not modify the tests.\n\nRules:\n1. Every response contains a short "
            "explanation and exactly one tool call.\n2. Avoid commands that print very long outputs; "
            "use grep, head, tail or sed -n to look at parts of files.\n3. Interactive editors are "
            "not available; edit files with sed, a python script or a here-document.\n4. When you are "
            f"done, run `echo {MINI_SUBMIT_MARKER} && git add -A && git diff --cached` on its own; you "
            "cannot continue working afterwards.\n</instructions>"
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": task}]

    def render(self, step: Step) -> Rendered:
        w, rng = self.world, self.rng
        reasoning = self._reasoning(step)
        path = self._path(step.file)
        if step.kind == "read":
            v = step.variant
            lines = self.state.lines(w, step.file) if step.file is not None else []
            if v == 0 or (v == 3 and step.lo > 1):
                text, cov = self.read_text(step, numbered=True)
                cmd = f"nl -ba {path} | sed -n '{cov[0]},{cov[1]}p'"
            elif v == 1:
                text, cov = self.read_text(step, numbered=False)
                cmd = f"sed -n '{cov[0]},{cov[1]}p' {path}"
            elif v == 2 and step.lo == 1 and step.hi >= len(lines):
                text, cov = self.read_text(step, numbered=False)
                cmd = f"cat {path}"
            else:
                text, cov = self.read_text(Step("read", step.file, 1, step.hi), numbered=False)
                cmd = f"head -n {cov[1]} {path}"
            if len(text) >= MINI_ELIDE_AT:  # the agent saw the head and the tail only
                n_head = text[:MINI_HEAD_TAIL].count("\n")
                cov = (cov[0], cov[0] + max(0, n_head - 1))
            return Rendered(reasoning, "bash", {"command": f"cd /testbed && {cmd}"}, text, 0, cov,
                            float(rng.uniform(0.02, 0.2)))
        if step.kind == "search" or (step.kind == "other" and step.why == "diagnose"):
            if step.why == "diagnose":
                tf = w.target_file
                out = "".join(f"{n}:{line}\n" for n, line in enumerate(tf.lines, 1) if w.symbol in line)
                cmd = f"grep -n '{w.symbol}' {tf.path}"
            elif step.variant == 0:
                out, cmd = self._grep_output(), f"grep -rn '{w.symbol}' {w.package}/ --include='*.py' | head -40"
            elif step.variant == 1:
                out, cmd = self._find_output(), f"find {w.package} tests -name '*.py' | sort"
            else:
                out, cmd = self._ls_output(), f"ls -la {w.target_file.path.rsplit('/', 1)[0]}"
            return Rendered(reasoning, "bash", {"command": f"cd /testbed && {cmd}"}, out, 0, None,
                            float(rng.uniform(0.05, 0.8)))
        if step.kind in ("other", "think"):
            if step.why == "reorient" or step.variant == 1:
                out, cmd = unified_diff(w, self.state), "git diff"
            elif step.variant == 0:
                out = "On branch main\nChanges not staged for commit:\n  (use \"git add <file>...\" to update)\n"
                out += "".join(f"\tmodified:   {self._path(f)}\n" for f in sorted({f for f, _ in self.state.edits}))
                out += "\nUntracked files:\n\treproduce_issue.py\n" if self.created else ""
                cmd = "git status"
            elif step.variant == 2:
                out, cmd = "Python 3.11.9\n", "python --version"
            else:
                out = "".join(f"{int(rng.integers(1 << 27, 1 << 28)):07x} {line[:60].strip()}\n"
                              for line in w.files[int(rng.integers(len(w.files)))].lines[:5])
                cmd = "git log --oneline -5"
            return Rendered(reasoning, "bash", {"command": f"cd /testbed && {cmd}"}, out, 0, None,
                            float(rng.uniform(0.02, 0.3)))
        if step.kind == "create":
            self.created = True
            cmd = f"cat <<'EOF' > /testbed/reproduce_issue.py\n{self._script()}EOF"
            return Rendered(reasoning, "bash", {"command": cmd}, "", 0)
        if step.kind == "run":
            out, rc = self._run_output()
            return Rendered(reasoning, "bash", {"command": "cd /testbed && python reproduce_issue.py"}, out, rc,
                            exec_s=float(rng.uniform(0.3, 2)))
        if step.kind == "edit":
            _, new = self.apply_edit(step)
            escaped = new.replace("\\", "\\\\").replace("/", "\\/").replace("'", "'\\''").replace("&", "\\&")
            cmd = f"cd /testbed && sed -i '{w.bug_line}s/.*/{escaped}/' {w.target_file.path}"
            return Rendered(reasoning, "bash", {"command": cmd}, "", 0)
        if step.kind == "test":
            failed = step.why == "fail"
            cmd = f"cd /testbed && python -m pytest {w.test_file.path} -q -x"
            return Rendered(reasoning, "bash", {"command": cmd}, self._test_output(failed), 1 if failed else 0,
                            exec_s=float(rng.uniform(1.5, 25)))
        cmd = f"echo {MINI_SUBMIT_MARKER} && git add -A && git diff --cached"
        return Rendered(reasoning, "bash", {"command": cmd}, None, 0)

    def observation(self, r: Rendered, call_id: str) -> dict[str, Any] | None:
        if r.output is None:
            return None
        return {"role": "tool", "tool_call_id": call_id, "content": _mini_observation(r.output, r.returncode)}


class TraeRenderer(Renderer):
    agent = "trae"
    tools = TRAE_TOOLS

    def preamble(self) -> list[dict[str, Any]]:
        w = self.world
        system = (
            "You are an expert software engineering agent. You are given a repository and an issue, "
            "and you change the repository so that the issue is resolved.\n\nWork methodically: "
            "1. understand the issue; 2. explore the code with the tools to find the relevant "
            "files; 3. reproduce the bug with a small script; 4. find the root cause; 5. make a "
            "minimal, correct fix; 6. verify it with the reproduction script and the existing "
            "tests; 7. consider edge cases; 8. call task_done when you are finished.\n\nUse "
            "absolute paths with the file tool. Keep commands' outputs small. Explain what you are "
            "doing in a sentence or two before each tool call."
        )
        task = ("[Project root path]:\n/testbed\n\n[Problem statement]: We're currently solving the following "
                f"issue within our repository. Here's the issue text:\n{w.statement}\n")
        return [{"role": "system", "content": system}, {"role": "user", "content": task}]

    def render(self, step: Step) -> Rendered:
        w, rng = self.world, self.rng
        reasoning = self._reasoning(step)
        path = self._path(step.file)
        abspath = f"/testbed/{path}"
        if step.kind == "read":
            lines = self.state.lines(w, step.file) if step.file is not None else []
            if step.variant == 3:  # Trae agents use the shell too
                text, cov = self.read_text(step, numbered=False)
                return Rendered(reasoning, "bash", {"command": f"sed -n '{cov[0]},{cov[1]}p' {abspath}"}, text, 0, cov,
                                float(rng.uniform(0.02, 0.2)))
            whole = step.lo == 1 and step.hi >= len(lines) and len(lines) <= 400
            text, cov = self.read_text(step, numbered=True)
            args: dict[str, Any] = {"command": "view", "path": abspath}
            if not whole:
                args["view_range"] = [cov[0], cov[1]]
            out = f"Here's the result of running `cat -n` on {abspath}:\n{text}"
            return Rendered(reasoning, "str_replace_based_edit_tool", args, out, 0, cov, float(rng.uniform(0.02, 0.2)))
        if step.kind == "search" or (step.kind == "other" and step.why == "diagnose"):
            if step.why == "diagnose":
                tf = w.target_file
                out = "".join(f"{n}:{line}\n" for n, line in enumerate(tf.lines, 1) if w.symbol in line)
                return Rendered(reasoning, "bash", {"command": f"grep -n '{w.symbol}' /testbed/{tf.path}"}, out)
            if step.variant == 0:
                cmd = f"grep -rn '{w.symbol}' /testbed/{w.package} --include='*.py' | head -40"
                return Rendered(reasoning, "bash", {"command": cmd}, self._grep_output())
            if step.variant == 1:
                return Rendered(reasoning, "bash", {"command": f"find /testbed/{w.package} -name '*.py' | sort"},
                                self._find_output())
            d = w.target_file.path.rsplit("/", 1)[0]
            listing = "".join(f"/testbed/{f.path}\n" for f in w.files if f.path.startswith(d))
            out = (f"Here's the files and directories up to 2 levels deep in /testbed/{d}, excluding hidden "
                   f"items:\n/testbed/{d}\n{listing}")
            return Rendered(reasoning, "str_replace_based_edit_tool", {"command": "view", "path": f"/testbed/{d}"}, out)
        if step.kind == "think":
            thought = (f"The issue is about `{w.symbol}`. So far I have looked at {len(w.related) + 1} files. "
                       "Next I need to confirm where the empty value enters and make sure the fix does not "
                       "change the behaviour for valid input.")
            args = {"thought": thought, "thought_number": int(rng.integers(1, 6)), "total_thoughts": 6,
                    "next_thought_needed": True}
            out = json.dumps({"thought_number": args["thought_number"], "total_thoughts": 6,
                              "next_thought_needed": True, "branches": [], "thought_history_length": 1}, indent=2)
            status = f"Sequential thinking step completed.\n\nStatus:\n{out}"
            return Rendered(reasoning, "sequentialthinking", args, status)
        if step.kind == "other":
            if step.why == "reorient" or step.variant == 1:
                return Rendered(reasoning, "bash", {"command": "cd /testbed && git diff"}, unified_diff(w, self.state))
            out = "On branch main\nnothing added to commit but untracked files present\n"
            return Rendered(reasoning, "bash", {"command": "cd /testbed && git status"}, out)
        if step.kind == "create":
            self.created = True
            args = {"command": "create", "path": "/testbed/reproduce_issue.py", "file_text": self._script()}
            return Rendered(reasoning, "str_replace_based_edit_tool", args,
                            "File created successfully at: /testbed/reproduce_issue.py")
        if step.kind == "run":
            out, rc = self._run_output()
            return Rendered(reasoning, "bash", {"command": "cd /testbed && python reproduce_issue.py"}, out, rc,
                            exec_s=float(rng.uniform(0.3, 2)))
        if step.kind == "edit":
            old, new = self.apply_edit(step)
            args = {"command": "str_replace", "path": f"/testbed/{w.target_file.path}", "old_str": old, "new_str": new}
            lines = self.state.lines(w, w.target)
            lo, hi = max(1, w.bug_line - 4), min(len(lines), w.bug_line + 4)
            snippet = "".join(f"{n:6d}\t{lines[n - 1]}\n" for n in range(lo, hi + 1))
            out = (f"The file /testbed/{w.target_file.path} has been edited. Here's the result of running `cat -n` "
                   f"on a snippet of /testbed/{w.target_file.path}:\n{snippet}Review the changes and make sure they "
                   "are as expected. Edit the file again if necessary.")
            return Rendered(reasoning, "str_replace_based_edit_tool", args, out)
        if step.kind == "test":
            failed = step.why == "fail"
            cmd = f"cd /testbed && python -m pytest {w.test_file.path} -q"
            return Rendered(reasoning, "bash", {"command": cmd}, self._test_output(failed), 1 if failed else 0,
                            exec_s=float(rng.uniform(1.5, 25)))
        return Rendered(reasoning, "task_done", {}, None)

    def observation(self, r: Rendered, call_id: str) -> dict[str, Any] | None:
        if r.output is None:
            return None
        return {"role": "tool", "tool_call_id": call_id, "content": r.output.strip()}


class MiniTextRenderer(MiniRenderer):
    """mini-swe-agent's text mode: the command in a fenced ``mswea_bash_command`` block of the
    reply, no tools, the observation as a ``user`` message."""

    agent = "mini-text"
    tools = None

    def assistant_message(self, r: Rendered, call_id: str) -> dict[str, Any]:
        block = f"```mswea_bash_command\n{r.arguments['command']}\n```"
        return {"role": "assistant", "content": f"THOUGHT: {r.reasoning}\n\n{block}"}

    def observation(self, r: Rendered, call_id: str) -> dict[str, Any] | None:
        if r.output is None:
            return None
        return {"role": "user", "content": _mini_observation(r.output, r.returncode)}


def renderer_for(agent: str, world: TaskWorld, rng: np.random.Generator) -> Renderer:
    if agent == "trae":
        return TraeRenderer(world, rng)
    return MiniTextRenderer(world, rng) if agent == "mini-text" else MiniRenderer(world, rng)
