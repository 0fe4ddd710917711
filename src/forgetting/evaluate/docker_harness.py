"""The ``docker`` backend: swebench's own harness, run as its users run it.

For one run it writes a predictions file (``instance_id``, ``model_name_or_path``,
``model_patch``) and the instance's dataset row, calls
``python -m swebench.harness.run_evaluation`` on them in the run's evaluation directory,
and reads back what the harness leaves under ``logs/run_evaluation/<run_id>/<model>/<id>/``:
``report.json`` (its verdict), ``test_output.txt`` (the test log) and ``run_instance.log``
(patch application, errors).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from swebench.harness.constants import (
    APPLY_PATCH_FAIL,
    FAIL_TO_PASS,
    LOG_INSTANCE,
    LOG_REPORT,
    LOG_TEST_OUTPUT,
    PASS_TO_PASS,
    RUN_EVALUATION_LOG_DIR,
)

from forgetting.evaluate.backends import ConfiguredBySettings, Outcome
from forgetting.evaluate.execute import run_logged
from forgetting.evaluate.grading import Grade, grade_log, require_harness_fields, spec_for
from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import UserError

HARNESS_MODULE = "swebench.harness.run_evaluation"
PREDICTIONS_FILE = "predictions.jsonl"
INSTANCE_FILE = "instance.jsonl"
HARNESS_LOG = "harness.log"


def harness_run_id(name: str) -> str:
    """A harness run id from a run id: it names a log directory and a container, so ``/``
    and anything else Docker does not allow in a container name becomes ``.``."""
    return re.sub(r"[^A-Za-z0-9_.-]", ".", name).strip(".") or "run"


def prediction(instance_id: str, patch: str, model: str) -> dict[str, str]:
    return {"instance_id": instance_id, "model_name_or_path": model, "model_patch": patch}


def write_predictions(path: Path, instance_id: str, patch: str, model: str) -> None:
    write_text(path, json.dumps(prediction(instance_id, patch, model), sort_keys=True) + "\n")


def harness_command(
    *,
    python: str,
    instances_file: Path,
    instance_id: str,
    predictions_file: Path,
    run_id: str,
    timeout_s: int,
    report_dir: Path,
) -> list[str]:
    """``python -m swebench.harness.run_evaluation`` for one instance and one prediction."""
    return [
        python,
        "-m",
        HARNESS_MODULE,
        "--dataset_name",
        str(instances_file),
        "--split",
        "test",
        "--instance_ids",
        instance_id,
        "--predictions_path",
        str(predictions_file),
        "--max_workers",
        "1",
        "--timeout",
        str(timeout_s),
        "--run_id",
        run_id,
        "--report_dir",
        str(report_dir),
    ]


def harness_log_dir(work_dir: Path, run_id: str, model: str, instance_id: str) -> Path:
    """Where the harness (run in ``work_dir``) leaves one instance's logs."""
    return work_dir / RUN_EVALUATION_LOG_DIR / run_id / model.replace("/", "__") / instance_id


def require_engine() -> None:
    """A one-line error unless a Docker engine answers (``DOCKER_HOST`` or the default socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:
        reason = (str(exc).splitlines() or [""])[0][:160]
        raise UserError(
            f"evaluation.backend docker: no Docker engine reachable at {host} "
            f"({type(exc).__name__}: {reason}); start Docker, or use evaluation.backend apptainer "
            "(clusters) or local (the demo)"
        ) from None


def _last_line(*paths: Path) -> str:
    for p in paths:
        if p.is_file():
            lines = [
                line for line in p.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()
            ]
            if lines:
                return lines[-1].strip()[:300]
    return "no output"


def collect(
    work_dir: Path, *, instance: Mapping[str, Any], run_id: str, model: str, timed_out: bool = False
) -> Outcome:
    """Read the harness's logs for one instance back into an :class:`Outcome`."""
    instance_id = str(instance["instance_id"])
    logs = harness_log_dir(work_dir, run_id, model, instance_id)
    report_file, test_output, instance_log = logs / LOG_REPORT, logs / LOG_TEST_OUTPUT, logs / LOG_INSTANCE
    log = test_output if test_output.is_file() else None
    if report_file.is_file():
        verdict = json.loads(report_file.read_text(encoding="utf-8"))[instance_id]
        resolved = bool(verdict.get("resolved"))
        spec = spec_for(instance)
        ours = grade_log(spec, test_output) if log else None
        status_tests = verdict.get("tests_status") or (ours.tests if ours else None)
        grade = None
        if status_tests is not None:
            grade = Grade(
                tests_parsed=bool(verdict.get("patch_successfully_applied")),
                status_map=ours.status_map if ours else {},
                tests={
                    k: {
                        "success": list(status_tests[k]["success"]),
                        "failure": list(status_tests[k]["failure"]),
                    }
                    for k in (FAIL_TO_PASS, PASS_TO_PASS)
                },
                resolution=ours.resolution if ours else "",
            )
        note = None
        if ours is not None and ours.resolved != resolved:
            note = f"the harness says resolved={resolved}, grading its test log again says {ours.resolved}"
        elif not verdict.get("patch_successfully_applied"):
            note = "swebench found no usable test results in the log"
        return Outcome("resolved" if resolved else "unresolved", True, grade, log, note=note)
    instance_text = (
        instance_log.read_text(encoding="utf-8", errors="replace") if instance_log.is_file() else ""
    )
    if APPLY_PATCH_FAIL in instance_text:
        return Outcome("patch_failed", False, None, log)
    output_text = test_output.read_text(encoding="utf-8", errors="replace") if log else ""
    if timed_out or "Timeout error:" in output_text or "Test timed out after" in instance_text:
        return Outcome("timeout", True, None, log)
    return Outcome(
        "error",
        None,
        None,
        log,
        error=f"the swebench harness left no report: {_last_line(instance_log, work_dir / HARNESS_LOG)}",
    )


class DockerBackend(ConfiguredBySettings):
    name = "docker"

    def check(self, instances: Mapping[str, Mapping[str, Any]]) -> None:
        require_harness_fields(instances, backend="docker")
        require_engine()

    def command(self, instance_id: str, work_dir: Path, run_id: str) -> list[str]:
        return harness_command(
            python=self.settings.docker.python,
            instances_file=work_dir / INSTANCE_FILE,
            instance_id=instance_id,
            predictions_file=work_dir / PREDICTIONS_FILE,
            run_id=run_id,
            timeout_s=self.settings.timeout_s,
            report_dir=work_dir,
        )

    def evaluate(self, instance: Mapping[str, Any], patch: str, *, work_dir: Path, label: str) -> Outcome:
        start = time.monotonic()
        instance_id = str(instance["instance_id"])
        model = self.settings.docker.model_name
        run_id = harness_run_id(label)
        # the image evaluation.instance_images names (the row's own is the published x86_64 one)
        row = {**instance, "image": self.settings.images.name(instance_id)}
        write_text(work_dir / INSTANCE_FILE, json.dumps(row, sort_keys=True, default=str) + "\n")
        write_predictions(work_dir / PREDICTIONS_FILE, instance_id, patch, model)
        finished = run_logged(
            self.command(instance_id, work_dir, run_id),
            log_path=work_dir / HARNESS_LOG,
            timeout_s=self.settings.timeout_s + self.settings.docker.startup_s,
            cwd=work_dir,
        )
        outcome = collect(
            work_dir, instance=instance, run_id=run_id, model=model, timed_out=finished.timed_out
        )
        outcome.durations = {"total_s": round(time.monotonic() - start, 3)}
        return outcome
