"""The ``local`` backend: the demo tasks, evaluated for real on this machine.

For each run: a scratch copy of the task's repository at its base commit, the run's patch
applied as swebench's harness applies it, the test files reset and the test patch applied,
the test patch's test files run with pytest ``-rA`` between swebench's test-output markers,
and the log graded by swebench's parser — the same steps an instance image runs, with
the scratch repository in place of ``/testbed``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from swebench.harness.utils import record_test_exit_code

from forgetting.demo.tasks import checkout
from forgetting.evaluate.backends import Outcome
from forgetting.evaluate.execute import run_logged
from forgetting.evaluate.grading import spec_for, verdict_from_log
from forgetting.evaluate.scripts import PatchedTestFiles, apply_and_eval_script, demo_eval_script_lines
from forgetting.foundation.errors import ConfigError, UserError
from forgetting.instances.load import instances_path
from forgetting.study.config import Study
from forgetting.study.evaluation import EvalSettings

#: makes ``dest`` a git repository whose HEAD is the instance's base commit
Checkout = Callable[[Mapping[str, Any], Path], None]


def checkout_demo_task(tasks_dir: Path, instance_id: str, dest: Path) -> None:
    """The base repository of a demo task (``forgetting.demo.tasks.checkout``)."""
    checkout(tasks_dir, instance_id, dest)


def demo_checkout(tasks_dir: Path) -> Checkout:
    return lambda instance, dest: checkout_demo_task(tasks_dir, str(instance["instance_id"]), dest)


def with_report_flag(test_cmd: str) -> str:
    """swebench's pytest parser reads the ``-rA`` summary lines; make sure they are printed."""
    return test_cmd if "-rA" in shlex.split(test_cmd) else f"{test_cmd} -rA"


def tests_environment() -> dict[str, str]:
    """The environment of the tests: this interpreter's ``python`` first on PATH, nothing of
    this project's own import path or pytest options leaking in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # the demo projects need pytest alone: third-party plugins of this environment (hypothesis…)
    # would cost ~0.8 s of start-up per evaluation
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


class LocalBackend:
    name = "local"

    def __init__(self, settings: EvalSettings, *, checkout: Checkout) -> None:
        self.settings = settings
        self.checkout = checkout

    @classmethod
    def for_study(cls, settings: EvalSettings, study: Study) -> LocalBackend:
        kind = study.dataset.kind
        if kind != "demo":
            raise ConfigError(
                f"{study.source}: evaluation.backend: 'local' evaluates the demo tasks only "
                f"(dataset.kind demo), not {kind!r}; use 'docker' or 'apptainer' for SWE-bench"
            )
        return cls(settings, checkout=demo_checkout(instances_path(study)))

    def check(self, instances: Mapping[str, Mapping[str, Any]]) -> None:
        for tool in ("git", "bash"):
            if shutil.which(tool) is None:
                raise UserError(
                    f"evaluation.backend local: {tool!r} is not on PATH; install it to run the demo's tests"
                )

    def evaluate(self, instance: Mapping[str, Any], patch: str, *, work_dir: Path, label: str) -> Outcome:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="forgetting-eval-") as tmp:
            testbed = Path(tmp) / "testbed"
            self.checkout(instance, testbed)
            head = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=testbed, capture_output=True, text=True, check=True
            ).stdout.strip()
            base = instance.get("base_commit")
            if base and head != base:
                return Outcome(
                    "error",
                    None,
                    error=f"the checkout of {instance['instance_id']} is at {head}, not at {base}",
                )
            checkout_s = time.monotonic() - start
            (work_dir / "patch.diff").write_text(patch, encoding="utf-8")
            (work_dir / "test.patch").write_text(str(instance["test_patch"]), encoding="utf-8")
            test_cmd = with_report_flag(str(instance.get("test_cmd") or self.settings.local.test_cmd))
            lines = demo_eval_script_lines(
                testbed=str(testbed),
                base_commit=head,
                test_patch_file=str(work_dir / "test.patch"),
                files=PatchedTestFiles.of(str(instance["test_patch"])),
                test_cmd=test_cmd,
            )
            spec = spec_for(
                instance, eval_script_list=record_test_exit_code(lines), default_log_parser="parse_log_pytest"
            )
            (work_dir / "eval.sh").write_text(spec.eval_script, encoding="utf-8")
            run_sh = work_dir / "run.sh"
            run_sh.write_text(
                apply_and_eval_script(
                    testbed=str(testbed),
                    patch_file=str(work_dir / "patch.diff"),
                    eval_script=str(work_dir / "eval.sh"),
                ),
                encoding="utf-8",
            )
            log = work_dir / "test_output.txt"
            finished = run_logged(
                ["bash", str(run_sh)],
                log_path=log,
                timeout_s=self.settings.timeout_s,
                cwd=testbed,
                env=tests_environment(),
            )
            verdict = verdict_from_log(spec, log, timed_out=finished.timed_out)
        durations = {
            "checkout_s": round(checkout_s, 3),
            "tests_s": round(finished.seconds, 3),
            "total_s": round(time.monotonic() - start, 3),
        }
        return Outcome(
            verdict.status, verdict.patch_applied, verdict.grade, log, durations, note=verdict.note
        )
