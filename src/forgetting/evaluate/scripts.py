"""The shell scripts an evaluation runs: the patch-apply wrapper and the demo eval script.

``run.sh`` applies the model patch the way swebench's harness does in ``run_instance``
(each of its ``GIT_APPLY_CMDS`` in turn from a clean tree, then a reverse check for a patch
that is already in place), prints swebench's ``>>>>> Applied Patch`` / ``>>>>> Patch Apply
Failed`` line, and hands over to the instance's eval script. The apptainer backend runs it
inside the instance image, the local backend on the host against a scratch repository.

For the demo tasks, whose rows carry no eval script, :func:`demo_eval_script_lines` writes
one of the shape swebench's eval scripts have: reset the test files, apply the test patch,
run the test files between the test-output markers, reset again.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from swebench.harness.constants import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    NON_TEST_EXTS,
    START_TEST_OUTPUT,
)
from swebench.harness.run_evaluation import GIT_APPLY_CMDS
from unidiff import PatchSet

#: exit status of run.sh when no way of applying the patch worked
PATCH_FAILED_EXIT = 97


def apply_and_eval_script(*, testbed: str, patch_file: str, eval_script: str) -> str:
    """``run.sh``: apply ``patch_file`` in ``testbed`` as the harness does, then run ``eval_script``."""
    q = shlex.quote
    cmds = " ".join(q(c) for c in GIT_APPLY_CMDS)
    return "\n".join(
        [
            "#!/bin/bash",
            "# Written by forgetting: apply the model patch as swebench's harness does (its",
            "# GIT_APPLY_CMDS in order, from a clean tree each time), then run the eval script.",
            f"cd {q(testbed)} || exit 98",
            f"patch_file={q(patch_file)}",
            "applied=''",
            "tried=''",
            f"for cmd in {cmds}; do",
            '  if [ -n "$tried" ]; then git checkout -- . ; git clean -fd ; fi',
            "  tried=1",
            '  if $cmd "$patch_file"; then applied="$cmd"; break; fi',
            "done",
            'if [ -z "$applied" ] && git apply --check --reverse "$patch_file"; then',
            '  applied="already applied"',
            "fi",
            f'if [ -z "$applied" ]; then echo {q(APPLY_PATCH_FAIL)}; exit {PATCH_FAILED_EXIT}; fi',
            f'echo "{APPLY_PATCH_PASS} ($applied)"',
            f"exec /bin/bash {q(eval_script)}",
            "",
        ]
    )


@dataclass(frozen=True)
class PatchedTestFiles:
    """The files a test patch touches: reset before it is applied, run afterwards."""

    existing: tuple[str, ...]  # present at the base commit: restored from it
    added: tuple[str, ...]  # created by the test patch: removed before it is applied
    runnable: tuple[str, ...]  # test files to hand to the test command

    @classmethod
    def of(cls, test_patch: str) -> PatchedTestFiles:
        existing, added, runnable = [], [], []
        for f in PatchSet(test_patch):
            path = f.path
            (added if f.is_added_file else existing).append(path)
            if not f.is_removed_file and not any(path.endswith(ext) for ext in NON_TEST_EXTS):
                runnable.append(path)
        return cls(tuple(existing), tuple(added), tuple(runnable))


def demo_eval_script_lines(
    *, testbed: str, base_commit: str, test_patch_file: str, files: PatchedTestFiles, test_cmd: str
) -> list[str]:
    """The eval script of a demo task (without swebench's shebang/``set`` header)."""
    q = shlex.quote

    def paths(items: Sequence[str]) -> str:
        return " ".join(q(p) for p in items)

    reset = [f"git checkout {q(base_commit)} -- {paths(files.existing)}"] if files.existing else []
    remove = [f"rm -f {paths(files.added)}"] if files.added else []
    return [
        f"cd {q(testbed)}",
        *reset,
        *remove,
        f"git apply -v {q(test_patch_file)}",
        f": '{START_TEST_OUTPUT}'",
        f"{test_cmd} {paths(files.runnable)}".rstrip(),
        f": '{END_TEST_OUTPUT}'",
        *reset,
    ]
