"""The scripted model's policy: what a careful agent does next, given what it can see.

Per task it works through exploring (``locate``), reading the files the fix touches
(``read``), editing (``edits``, possibly a wrong first guess), testing and submitting.
It is stateless: every call rebuilds its progress from the actions in the conversation, and
its knowledge of file contents from the read outputs still visible there.

The rule that couples it to deletion: it applies an edit only when the edit's ``old`` text
is visible in an earlier read output of that file. Otherwise

* the content is gone (a placeholder): it reads the file again — a re-fetch;
* only fragments remain (token-level deletion): with probability ``fragment_error_rate`` it
  copies the old text from the fragments (the edit then fails to match, and once it sees the
  error it re-reads), otherwise it re-reads;
* after ``read_attempts`` reads that never left the text visible (e.g. immediate deletion of
  every tool output) it gives up (``give_up_rate``) or edits blind, with the right old text
  with probability ``blind_success_rate``; ``stubborn_rate`` runs keep re-reading far longer,
  so loops and turn caps stay possible.

With ``reasoning_memory`` its diagnosis counts only while the reasoning that states it is
visible; once deleted, it re-orients (``git diff`` and a restated diagnosis) before it
continues editing or testing.

It uses the tools the agent offers (:class:`~forgetting.demo.scripted.commands.Toolset`):
with Trae's editor it reads files with ``view`` and edits with ``str_replace``; with Trae's
finishing tool it ends by checking the diff and calling ``task_done`` instead of
mini-swe-agent's submission commands.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import forgetting.demo.scripted.commands as cmds
import forgetting.demo.scripted.reasoning as say
from forgetting.demo.scripted.commands import Toolset
from forgetting.demo.scripted.draws import Draws
from forgetting.demo.scripted.history import Conversation, Step
from forgetting.demo.scripted.knowledge import Edit, ReadSpec, TaskKnowledge, words
from forgetting.demo.scripted.observations import (
    body,
    covered,
    file_text,
    fragment_guess,
    outcome,
    word_share,
)
from forgetting.demo.scripted.settings import ScriptedSettings

#: a ``grep -n`` output line: ``[path:]LINE:text``
_GREP_LINE = re.compile(r"^(?:(?P<path>[^:\s]+):)?(?P<line>\d+):")


@dataclass(frozen=True)
class Decision:
    """The model's next reply: free-text reasoning and the command(s) to run."""

    reasoning: str
    commands: tuple[str, ...]
    step: str  # what the policy is doing (locate, read, reread, edit, fragment_edit, …)


@dataclass(frozen=True)
class EditState:
    state: str  # pending | failed | believed | confirmed
    since: int = 0  # reads after this turn count towards the re-read limit
    views_from: int = 0  # read outputs after this turn still describe the file


def unknown_task(tools: Toolset | None = None) -> Decision:
    finish = cmds.TASK_DONE if tools is not None and tools.finish else cmds.SUBMIT_EMPTY
    return Decision(say.unknown_task(), (finish,), "unknown_task")


class Policy:
    def __init__(
        self,
        task: TaskKnowledge,
        conversation: Conversation,
        draws: Draws,
        settings: ScriptedSettings,
        *,
        multi_call: bool,
        tools: Toolset | None = None,
    ) -> None:
        self.task = task
        self.tools = tools or Toolset()
        self.conv = conversation
        self.draws = draws
        self.s = settings
        self.multi_call = multi_call
        self.steps = conversation.steps
        self.issued = {st.command.strip() for st in self.steps}
        self.full_style = int(draws.run("read_full_style") * len(cmds.FULL_READ_STYLES))
        self.range_style = int(draws.run("read_range_style") * len(cmds.RANGE_READ_STYLES))
        self.stubborn = draws.run("stubborn") < settings.stubborn_rate
        self.wrong_first = (
            task.wrong_first is not None and draws.run("wrong_first") < settings.wrong_first_rate
        )
        self.skip_tests = draws.run("skip_tests") < settings.skip_tests_rate
        self.diagnosis = task.summary

    # ------------------------------------------------------------------ helpers
    @property
    def last_steps(self) -> tuple[Step, ...]:
        return self.conv.turns[-1].steps if self.conv.turns else ()

    def read_cmd(self, spec: ReadSpec) -> str:
        if self.tools.editor:
            return cmds.view(spec.path, spec.lines)
        return cmds.read_command(spec, self.full_style, self.range_style)

    def reads_of(self, path: str, after: int = 0) -> list[Step]:
        return [
            st for st in self.steps if st.what.read is not None and st.what.path == path and st.turn > after
        ]

    def attempts_of(self, edit: Edit, after: int) -> list[Step]:
        out = []
        for st in self.steps:
            if st.kind != "edit" or st.turn <= after or st.what.edit is None:
                continue
            path, _, new = st.what.edit
            if path == edit.path and new == edit.new:
                out.append(st)
        return out

    def shows(self, step: Step) -> str:
        assert step.what.read is not None
        return file_text(step.observation, step.what.read.numbered)

    # ------------------------------------------------------------------ decide
    def decide(self) -> Decision:
        return self._submission() or self._detour() or self._locate() or self._read() or self._work()

    def _submission(self) -> Decision | None:
        started = [i for i, st in enumerate(self.steps) if st.kind == "submit_diff"]
        if not started:
            return None
        if self.tools.finish:  # the diff has been checked: done
            return Decision(say.finish(self.last_steps), (cmds.TASK_DONE,), "submit")
        after = [st.kind for st in self.steps[started[-1] + 1 :]]
        if "submit_cat" not in after:
            return Decision(say.check_patch(self.draws, self.last_steps), (cmds.CAT_PATCH,), "submit_cat")
        return Decision(say.submit(self.draws, self.last_steps), (cmds.SUBMIT,), "submit")

    def _missing_locates(self) -> list[str]:
        return [c for c in self.task.locate if c not in self.issued]

    def _read_done(self, spec: ReadSpec) -> Step | None:
        """The earlier read that served ``spec`` (the file, and its line range if any)."""
        for st in self.steps:
            if st.what.read is None or st.what.path != spec.path or st.kind == "detour":
                continue
            if spec.lines is None or f"{spec.lines[0]},{spec.lines[1]}p" in st.command:
                return st
            if st.what.read.lines == spec.lines:  # the editor's view of that range
                return st
        return None

    def _missing_reads(self) -> list[ReadSpec]:
        return [r for r in self.task.reads if self._read_done(r) is None]

    def _read_again(self, spec: ReadSpec) -> str:
        """A re-read repeats the command used before for the same read."""
        done = self._read_done(spec)
        return done.command.strip() if done is not None else self.read_cmd(spec)

    def _detour(self) -> Decision | None:
        if not (self._missing_locates() or self._missing_reads()):
            return None
        done = sum(1 for st in self.steps if st.kind == "detour")
        left = [d for d in cmds.DETOURS if d not in self.issued]
        if done >= self.s.max_detours or not left or self.draws.call("detour") >= self.s.detour_rate:
            return None
        command = self.draws.call_choice("detour_pick", left)
        return Decision(say.detour(self.draws, command, self.task, self.last_steps), (command,), "detour")

    def _locate(self) -> Decision | None:
        missing = self._missing_locates()
        if not missing:
            return None
        batch = tuple(missing) if self.multi_call else (missing[0],)
        first = not self.steps
        return Decision(say.locate(self.draws, self.task, batch, first, self.last_steps), batch, "locate")

    def _read(self) -> Decision | None:
        missing = self._missing_reads()
        if not missing:
            return None
        spec = missing[0]
        return Decision(say.read(self.draws, spec, self.last_steps), (self.read_cmd(spec),), "read")

    # ------------------------------------------------------------------ the fix
    def _work(self) -> Decision:
        reverts = [st for st in self.steps if st.kind == "revert"]
        wrong = self.task.wrong_first if self.wrong_first and not reverts else None
        plan = (wrong,) if wrong is not None else self.task.edits
        # what it currently believes the bug is: the wrong hypothesis until it is refuted
        self.diagnosis = wrong.why if wrong is not None else self.task.summary
        epoch = reverts[-1].turn if reverts else 0
        paths = tuple(dict.fromkeys(e.path for e in plan))

        attempts = [self.attempts_of(e, epoch) for e in plan]
        last_attempt = max((a[-1].turn for a in attempts if a), default=epoch)
        tests = [st for st in self.steps if st.kind == "test" and st.turn > epoch]
        tests_after = [t for t in tests if t.turn > last_attempt]
        latest_test = tests_after[-1] if tests_after else None
        test_ok = outcome(latest_test.observation) if latest_test else None
        failing = latest_test if latest_test is not None and test_ok is False else None

        if failing is not None and wrong is not None:
            return self._reorient(epoch) or Decision(
                say.revert(self.draws, self.task, failing), (cmds.revert(wrong.path),), "revert"
            )
        if failing is not None and len(tests) >= self.s.max_test_runs:
            return self._start_submission(paths, say.tests_keep_failing(self.draws, failing), "give_up")

        for i, edit in enumerate(plan):
            state = self._edit_state(edit, attempts[i], failing, epoch)
            if state.state in ("pending", "failed"):
                return self._handle_edit(edit, i, state, epoch, attempts, plan)

        if failing is not None:  # every edit is confirmed, yet the tests fail: out of ideas
            return self._start_submission(paths, say.tests_keep_failing(self.draws, failing), "give_up")
        if self.skip_tests:
            return self._start_submission(
                paths, say.submit_untested(self.draws, self.task, self.tools.finish), "submit_diff"
            )
        if latest_test is None:
            return self._reorient(epoch) or Decision(
                say.run_tests(self.draws, self.task, self.last_steps), (self.task.test,), "test"
            )
        return self._start_submission(
            paths, say.tests_done(self.draws, latest_test, test_ok, self.tools.finish), "submit_diff"
        )

    def _start_submission(self, paths: tuple[str, ...], reasoning: str, step: str) -> Decision:
        first = cmds.check_diff(paths) if self.tools.finish else cmds.submit_diff(paths)
        return Decision(reasoning, (first,), step)

    def _edit_state(
        self, edit: Edit, attempts: Sequence[Step], failing: Step | None, epoch: int
    ) -> EditState:
        if not attempts:
            return EditState("pending", epoch, 0)
        last = attempts[-1]
        ok = outcome(last.observation)
        state = "believed" if ok is None else ("confirmed" if ok else "failed")
        # a visible read after the attempt settles it
        for read in reversed(self.reads_of(edit.path, last.turn)):
            seen = self.shows(read)
            if edit.new in seen:
                return EditState("confirmed")
            if edit.old in seen:
                return EditState("failed", last.turn, 0)
        if failing is not None:
            clean = last.what.edit is not None and last.what.edit[1] == edit.old
            if state == "believed" or (state == "confirmed" and not clean):
                # the file may have changed: only reads after the failing test describe it
                return EditState("failed", failing.turn, failing.turn)
        # a failed match leaves the file as it was: earlier reads still describe it
        return EditState(state, last.turn, 0)

    def _read_limit(self) -> int:
        return self.s.stubborn_read_attempts if self.stubborn else self.s.read_attempts

    def _missed(self, read: Step, edit: Edit) -> bool:
        """A complete read of the file that does not contain the text (wrong range, or
        a long output cut short): not a loss of memory, so not a re-fetch that counts."""
        seen = self.shows(read)
        return read.intact and edit.old not in seen and edit.new not in seen

    def _handle_edit(
        self,
        edit: Edit,
        index: int,
        state: EditState,
        epoch: int,
        attempts: list[list[Step]],
        plan: Sequence[Edit],
    ) -> Decision:
        first_of_epoch = not any(attempts)
        views = self.reads_of(edit.path, state.views_from)
        for read in reversed(views):
            if edit.old in self.shows(read):
                if not first_of_epoch and (reorient := self._reorient(epoch)):
                    return reorient
                return self._edit(edit, edit.old, "edit", read, first_of_epoch)

        partial = [r for r in views if not r.intact]
        texts = [self.shows(r) for r in partial]
        if len(partial) > 1 and all(covered(edit.old, texts)):
            return self._edit(edit, edit.old, "pieced_edit", partial[-1], first_of_epoch, reads=len(partial))

        # from fragments it errs at most once per edit: after that it knows to re-read
        tried = {a.what.edit[1] for a in attempts[index] if a.what.edit is not None}
        best = max(partial, key=lambda r: word_share(edit.old, self.shows(r)), default=None)
        if (
            not any(old != edit.old for old in tried)
            and best is not None
            and word_share(edit.old, self.shows(best)) >= self.s.fragment_threshold
            and self.draws.call(f"fragment/{index}") < self.s.fragment_error_rate
        ):
            guess = fragment_guess(self.shows(best), edit.old)
            if guess is not None and guess != edit.old:
                return self._edit(edit, guess, "fragment_edit", best, first_of_epoch)

        counted = [r for r in self.reads_of(edit.path, state.since) if not self._missed(r, edit)]
        if len(counted) < self._read_limit():
            return self._reread(edit, state)

        paths = tuple(dict.fromkeys(e.path for e in plan))
        if (
            len(attempts[index]) >= self.s.max_edit_attempts
            or self.draws.call("give_up") < self.s.give_up_rate
        ):
            return self._start_submission(paths, say.give_up(self.draws, edit, len(counted)), "give_up")
        if self.draws.call(f"blind/{index}") < self.s.blind_success_rate:
            guess = edit.old
        else:
            guess = corrupt(edit.old, self.draws)
        return self._edit(edit, guess, "blind_edit", None, first_of_epoch, reads=len(counted))

    def _reread(self, edit: Edit, state: EditState) -> Decision:
        """Read the file again with a read that has not shown to miss the text; page
        through the file when every known read missed it (a range that does not cover it,
        or a long file cut short by the agent's output limit)."""
        reads = self.reads_of(edit.path)
        missed_cmds = {r.command.strip() for r in reads if self._missed(r, edit)}
        specs = [r for r in self.task.reads if r.path == edit.path] or [ReadSpec(edit.path)]
        usable = [sp for sp in specs if self._read_again(sp) not in missed_cmds]
        if usable:
            command = self._read_again(usable[0])
            last = reads[-1] if reads else None
            if state.state == "failed":
                reason = "failed"
            elif last is not None and word_share(edit.old, self.shows(last)) >= self.s.fragment_threshold:
                reason = "fragments"
            else:
                reason = "deleted"
        else:
            reason = "missed"
            hint = self._line_hint(edit)
            n_lines = len(edit.old.splitlines())
            targeted = cmds.range_read(edit.path, max(1, hint - 10), hint + n_lines + 10) if hint else None
            if targeted is not None and targeted not in missed_cmds:
                command = targeted
            else:
                pages = {cmds.page_command(edit.path, k) for k in range(cmds.MAX_PAGES)}
                done = sum(1 for r in self.reads_of(edit.path, state.since) if r.command.strip() in pages)
                command = cmds.page_command(edit.path, done % cmds.MAX_PAGES)
        return Decision(say.reread(self.draws, edit, reason, self.last_steps), (command,), "reread")

    def _line_hint(self, edit: Edit) -> int | None:
        """The line number of the text in ``edit.path``, from a visible search output
        (``grep -n`` style ``[path:]LINE:text``) showing the text's first line."""
        probe = next((ln.strip() for ln in edit.old.splitlines() if len(ln.strip()) >= 6), "")
        if not probe:
            return None
        for st in reversed(self.steps):
            if st.what.read is not None or st.kind == "edit" or not st.observation:
                continue
            for line in body(st.observation).splitlines():
                m = _GREP_LINE.match(line)
                if not m or probe not in line:
                    continue
                where = m.group("path")
                if where is None or cmds.norm_path(where) == edit.path:
                    return int(m.group("line"))
        return None

    def _edit(
        self, edit: Edit, old: str, step: str, seen: Step | None, first: bool, reads: int = 0
    ) -> Decision:
        if self.tools.editor:
            command, use_sed = cmds.str_replace(edit.path, old, edit.new), False
        else:
            sed = cmds.sed_edit(edit.path, old, edit.new) if step == "edit" else None
            use_sed = sed is not None and self.draws.call("edit_style") < 0.5
            command = sed if use_sed and sed is not None else cmds.python_edit(edit.path, old, edit.new)
        seen_text = self.shows(seen) if seen is not None else ""
        text = say.edit(self.draws, self.diagnosis, edit, step, seen_text, first, reads, checked=not use_sed)
        return Decision(text, (command,), step)

    # ------------------------------------------------------------------ reasoning memory
    def _diagnosis_visible(self) -> bool:
        for turn in self.conv.turns:
            if (
                any(st.kind in ("edit", "review") for st in turn.steps)
                and word_share(self.diagnosis, turn.reasoning) >= self.s.reasoning_recall_threshold
            ):
                return True
        return False

    def _reorient(self, epoch: int) -> Decision | None:
        if not self.s.reasoning_memory:
            return None
        carriers = [t for t in self.conv.turns if any(st.kind in ("edit", "review") for st in t.steps)]
        if not carriers or self._diagnosis_visible():
            return None
        if sum(1 for st in self.steps if st.kind == "review") >= self.s.max_reorients:
            return None
        if self.last_steps and self.last_steps[-1].kind == "review":
            return None
        return Decision(say.reorient(self.draws, self.diagnosis), (cmds.REVIEW,), "reorient")


def corrupt(old: str, draws: Draws) -> str:
    """A plausible mis-remembering of ``old``: wrong indentation or a misspelt name."""
    lines = old.splitlines(keepends=True)
    if draws.call("corrupt") < 0.5:
        target = next((i for i, ln in enumerate(lines) if ln.strip()), 0)
        line = lines[target]
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        lines[target] = " " * (indent + 4 if indent < 4 else indent - 4) + stripped
        return "".join(lines)
    names = [w for w in words(old) if len(w) > 3 and not w.isdigit()]
    if names:
        w = draws.call_choice("corrupt_word", names)
        return old.replace(w, w[:-1], 1)
    return old + " "
