"""The free-text reasoning of the scripted model's replies.

A few sentences to a paragraph per reply, as a careful engineer would write them, referring
to what is visible (quoting a line of the last output when it is still there) and to the
task knowledge (``summary`` and each edit's ``why``). Phrasings vary by seeded draws.
"""

from __future__ import annotations

from collections.abc import Sequence

from forgetting.demo.scripted.draws import Draws
from forgetting.demo.scripted.history import Step
from forgetting.demo.scripted.knowledge import Edit, ReadSpec, TaskKnowledge
from forgetting.demo.scripted.observations import body, file_text, first_line, last_line, returncode


def _issue_gist(task: TaskKnowledge) -> str:
    line = first_line(task.problem_statement, 160).lstrip("#").strip()
    return line.rstrip(".")


def _lower_first(text: str) -> str:
    """Lower-case a sentence's first word for use mid-sentence, unless it is a name."""
    word = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if word.isalpha() and word[1:].islower() else text


def _where(spec: ReadSpec) -> str:
    if spec.lines is None:
        return f"`{spec.path}`"
    return f"lines {spec.lines[0]}–{spec.lines[1]} of `{spec.path}`"


def glimpse(steps: Sequence[Step]) -> str:
    """One sentence on what the previous command showed, as far as it is still visible."""
    if not steps:
        return ""
    step = steps[-1]
    obs = step.observation
    if obs is None:
        return ""
    if not step.intact and not (step.plain and step.what.read is None):  # plain output: no telling
        if returncode(obs) is None and len(obs) < 80:
            return "The output of my last command is no longer in my context."
        return "Only parts of the output of my last command are still in my context."
    numbered = step.what.read is not None and step.what.read.numbered
    shown = first_line(file_text(obs, numbered))
    if not shown:
        return "The last command printed nothing."
    return f"The last command showed `{shown}`."


def unknown_task() -> str:
    return (
        "I cannot match this task to anything I know how to fix. Rather than making speculative changes "
        "to code I have not understood, I will submit without modifying any file, so that nothing in the "
        "repository is broken by a guess."
    )


def locate(draws: Draws, task: TaskKnowledge, batch: Sequence[str], first: bool, last: Sequence[Step]) -> str:
    if first:
        opener = draws.call_choice(
            "say/locate",
            [
                f"The issue reports: {_issue_gist(task)}. Before changing anything I want to find where this "
                "behaviour is implemented and how it is used.",
                f"Let me start by understanding the problem: {_issue_gist(task)}. I need to locate the code "
                "responsible before I can reason about a fix.",
            ],
        )
    else:
        opener = " ".join(
            p for p in (glimpse(last), "I still need to pin down where the relevant code lives.") if p
        )
    what = "these searches" if len(batch) > 1 else "a search"
    return f"{opener} I'll run {what} over the repository to see which files are involved."


def detour(draws: Draws, command: str, task: TaskKnowledge, last: Sequence[Step]) -> str:
    intent = {
        "ls -la": "Let me first get an overview of the top level of the repository",
        "git log --oneline -5": "Let me check the recent history to see whether this area changed lately",
        "find . -name '*.py' -not -path './.git/*' | sort | head -40": "Let me list the Python files to "
        "get a feel for how the package is organised",
        "git status": "Let me make sure the working tree is clean before I start",
    }.get(command, "Let me look around the repository a little")
    tail = draws.call_choice(
        "say/detour",
        [
            " — it may not be strictly necessary, but it helps me avoid surprises later.",
            ", which should make it easier to judge the scope of the change.",
        ],
    )
    return " ".join(p for p in (glimpse(last), intent + tail) if p)


def read(draws: Draws, spec: ReadSpec, last: Sequence[Step]) -> str:
    seen = glimpse(last)
    plan = draws.call_choice(
        "say/read",
        [
            f"I'll read {_where(spec)} to understand the current logic before touching it.",
            f"Next I want to see {_where(spec)} in full, so that my change fits the surrounding code.",
            f"That points me to `{spec.path}`. Let me read {_where(spec)} carefully.",
        ],
    )
    return " ".join(p for p in (seen, plan) if p)


def reread(draws: Draws, edit: Edit, reason: str, last: Sequence[Step]) -> str:
    why = {
        "deleted": f"I need to change `{edit.path}`, but its content is no longer in my context — the "
        "earlier output has been removed. I won't edit code I cannot see, so I'll read the file again.",
        "fragments": f"Only fragments of `{edit.path}` are left in my context; several words and lines are "
        "missing, so I can't copy the exact text I need to replace. I'll read it again.",
        "failed": f"My edit of `{edit.path}` did not apply as intended, so the version of the file in my "
        "head is not reliable. Let me look at the current content again before retrying.",
        "missed": f"The part of `{edit.path}` I need was not in what I have read so far. I'll page "
        "through the file with line numbers to find it.",
    }[reason]
    extra = draws.call_choice("say/reread", ["", " Then I can make a precise, checked replacement."])
    return why + extra


def _quote(edit: Edit, seen: str) -> str:
    for line in edit.old.splitlines():
        if line.strip() and line.strip() in seen:
            return line.strip()[:100]
    return ""


def edit(
    draws: Draws, diagnosis: str, e: Edit, step: str, seen: str, first: bool, reads: int, checked: bool
) -> str:
    """``diagnosis``: what it believes the bug is (the task's summary, or a wrong first guess
    whose ``why`` is that diagnosis)."""
    quote = _quote(e, seen)
    diagnosis = diagnosis.rstrip(".")
    why = e.why if e.why.rstrip(".") != diagnosis else ""
    parts = [f"Diagnosis: {diagnosis}."] if first else []
    if step == "edit":
        if quote:
            parts.append(f"In `{e.path}` I can see `{quote}`.")
        parts.append(why)
        if checked:
            parts.append(
                draws.call_choice(
                    "say/edit",
                    [
                        "I'll replace exactly that block, failing loudly if the text does not match.",
                        "I'll make a minimal, exact replacement that refuses to run if the text differs.",
                    ],
                )
            )
        else:
            parts.append("It is a one-line change, so a sed substitution on that line is enough.")
    elif step == "pieced_edit":
        parts.append(
            f"None of my {reads} reads of `{e.path}` is complete any more, but together they show every part "
            "of the block I need to change, so I can piece the exact text together."
        )
        parts.append(why)
    elif step == "fragment_edit":
        parts.append(
            f"Only parts of my earlier read of `{e.path}` are still in my context, but I think they are "
            + (f"enough to see where the change goes (`{quote}`)." if quote else "enough to rebuild it.")
        )
        parts.append(why + " I'll rebuild the old text from what I can see and replace it.")
    else:  # blind_edit
        parts.append(
            f"I have read `{e.path}` {reads} times and its content never stayed in my context. I'll make the "
            "change from what I expect the code to look like, and check the result afterwards."
        )
        parts.append(why)
    if not first:
        parts.append(f"(Recap: {diagnosis}.)")
    return " ".join(p.strip() for p in parts if p.strip())


def run_tests(draws: Draws, task: TaskKnowledge, last: Sequence[Step]) -> str:
    seen = glimpse(last)
    plan = draws.call_choice(
        "say/test",
        [
            "The change is in place. Now let me run the tests that cover this behaviour to verify the fix.",
            "With the edit done, I'll run the relevant tests to make sure the issue is fixed and nothing "
            "else broke.",
        ],
    )
    return " ".join(p for p in (seen, plan) if p)


_WRITE_PATCH = "writing the patch of the source files I changed to patch.txt."
_CHECK_DIFF = "checking the diff of the source files I changed before I finish."


def tests_done(draws: Draws, test: Step, ok: bool | None, finish: bool = False) -> str:
    """``finish``: the agent has a finishing tool (the diff is checked, not written out)."""
    if ok:
        result = last_line(body(test.observation))
        seen = f"The tests pass (`{result}`)." if result else "The tests pass."
    else:
        seen = "I can no longer see the test output, but my edits went in as planned."
    if finish:
        return seen + " I'll check the diff of the source files I changed before I finish."
    return seen + " I'll write the patch of the source files I changed to patch.txt."


def submit_untested(draws: Draws, task: TaskKnowledge, finish: bool = False) -> str:
    return (
        f"The fix is straightforward: {task.summary}. I'm confident in the change, so I'll go straight to "
        + (_CHECK_DIFF if finish else _WRITE_PATCH)
    )


def tests_keep_failing(draws: Draws, failing: Step) -> str:
    shown = last_line(body(failing.observation))
    return (
        f"The tests still fail (`{shown}`) and I have run out of good ideas for this one. "
        "I'll submit the changes I have rather than keep guessing."
    )


def revert(draws: Draws, task: TaskKnowledge, failing: Step) -> str:
    wrong = task.wrong_first
    shown = last_line(body(failing.observation))
    return (
        f"The tests still fail (`{shown}`), so my first hypothesis was wrong"
        + (f": {_lower_first(wrong.why)}" if wrong else ".")
        + f" Looking at the failure again, the real problem is that {_lower_first(task.summary)}. "
        "I'll revert my change first and then fix the actual cause."
    )


def give_up(draws: Draws, e: Edit, reads: int) -> str:
    return (
        f"I have read `{e.path}` {reads} times, but the text I need to change never stays visible to me, and "
        "editing code I cannot see risks breaking it. I'll stop here and submit what I have."
    )


def reorient(draws: Draws, diagnosis: str) -> str:
    return (
        "My earlier analysis is no longer in my context, so let me re-orient before continuing. "
        f"Diagnosis, restated: {diagnosis.rstrip('.')}. "
        "I'll check with git diff which changes I have already made."
    )


def check_patch(draws: Draws, last: Sequence[Step]) -> str:
    return "Let me inspect patch.txt to confirm it only contains my intended changes to the source files."


def submit(draws: Draws, last: Sequence[Step]) -> str:
    shown = ""
    if last and last[-1].observation and last[-1].intact:
        for line in body(last[-1].observation).splitlines():
            if line.startswith("+++ "):
                shown = line
                break
    if shown:
        return f"The patch looks right (`{shown}`) and contains only my source changes. Submitting."
    return "The patch is written. Submitting it now."


def finish(last: Sequence[Step]) -> str:
    """Calling the agent's finishing tool after checking the diff (the last step)."""
    shown = ""
    if last and last[-1].observation:
        shown = next((ln for ln in body(last[-1].observation).splitlines() if ln.startswith("+++ ")), "")
    if shown:
        return f"The diff looks right (`{shown}`) and contains only my source changes. The task is done."
    return "I have nothing more to change; I am finishing the task."
