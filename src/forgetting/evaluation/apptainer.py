"""The ``apptainer`` backend: SWE-bench's instance images as SIF files, on the cluster.

swebench's harness needs a Docker engine, which HPC clusters lack. This backend uses the
same instance images, pulled once per instance into ``evaluation.image_dir`` as
``<instance_id>.sif`` (``apptainer pull … docker://swebench/sweb.eval.x86_64.<id>:latest``,
``__`` in the id written ``_1776_`` as the harness names them), and runs in one
``apptainer exec`` what the harness runs in its container: apply the patch in ``/testbed``
(its ``GIT_APPLY_CMDS``), then the instance's eval script from swebench's ``make_test_spec``.
The output is graded by swebench's parser for the instance.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from swebench.image_builder.constants import CONTAINER_WORKDIR

from forgetting.atomic import atomic_output
from forgetting.config import Study
from forgetting.errors import ResourceError, UserError
from forgetting.evaluation.backends import ConfiguredBySettings, Outcome
from forgetting.evaluation.execute import run_logged
from forgetting.evaluation.grading import require_harness_fields, spec_for, verdict_from_log
from forgetting.evaluation.instances import load_instances
from forgetting.evaluation.scripts import apply_and_eval_script
from forgetting.evaluation.settings import ApptainerSettings, EvalSettings, sif_path

#: where the run's evaluation directory (patch, scripts, log) appears inside the container
MOUNT = "/forgetting"
TESTBED = CONTAINER_WORKDIR  # /testbed


def default_image(instance_id: str) -> str:
    """The published instance image, named as swebench's harness names it."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


def image_of(instance: Mapping[str, Any]) -> str:
    """The row's ``image`` (swebench 5.x rows name it), else the published name."""
    return str(instance.get("image") or default_image(str(instance["instance_id"])))


def image_uri(instance: Mapping[str, Any]) -> str:
    image = image_of(instance)
    return image if "://" in image else f"docker://{image}"


def pull_command(instance: Mapping[str, Any], target: Path, settings: ApptainerSettings) -> list[str]:
    """``apptainer pull [ARGS] TARGET docker://IMAGE``."""
    return [settings.executable, "pull", *settings.pull_args, str(target), image_uri(instance)]


def exec_command(sif: Path, work_dir: Path, settings: ApptainerSettings) -> list[str]:
    """``apptainer exec [ARGS] --pwd /testbed --bind WORK:/forgetting SIF /bin/bash /forgetting/run.sh``."""
    if any(c in str(work_dir) for c in ":,"):
        raise UserError(
            f"{work_dir}: an apptainer bind path cannot contain ':' or ','; choose another results_dir"
        )
    return [
        settings.executable,
        "exec",
        *settings.exec_args,
        "--pwd",
        TESTBED,
        "--bind",
        f"{work_dir}:{MOUNT}",
        str(sif),
        "/bin/bash",
        f"{MOUNT}/run.sh",
    ]


def require_executable(settings: ApptainerSettings) -> str:
    found = shutil.which(settings.executable)
    if found is None:
        raise UserError(
            f"evaluation.backend apptainer: {settings.executable!r} not found on PATH "
            "(evaluation.apptainer.executable); load or install Apptainer, or use the docker or local backend"
        )
    return found


def pull_image(instance: Mapping[str, Any], image_dir: Path, settings: ApptainerSettings) -> Path:
    """The instance's SIF file, pulled once: an existing file is reused; a new one is pulled
    to a temporary name and renamed into place, so an interrupted pull leaves nothing."""
    sif = sif_path(image_dir, str(instance["instance_id"]))
    if sif.is_file():
        return sif
    with atomic_output(sif) as partial:
        try:
            proc = subprocess.run(
                pull_command(instance, partial, settings), capture_output=True, text=True,
                timeout=settings.pull_timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise ResourceError(
                f"apptainer pull {image_uri(instance)}: not done after {settings.pull_timeout_s} s "
                "(evaluation.apptainer.pull_timeout_s)"
            ) from None
        if proc.returncode != 0 or not partial.is_file():
            last = ((proc.stderr or proc.stdout).strip().splitlines() or [""])[-1][:300]
            raise ResourceError(f"apptainer pull {image_uri(instance)} failed (exit {proc.returncode}): {last}")
    return sif


def pull_images(
    study: Study, ids: Iterable[str] | None = None, *, progress: Callable[[str], None] | None = None
) -> list[Path]:
    """Pull the SIF image of every task of ``study`` (or of ``ids``) not pulled yet."""
    settings = EvalSettings.from_study(study)
    require_executable(settings.apptainer)
    paths = []
    for instance_id, row in load_instances(study, ids).items():
        paths.append(pull_image(row, settings.image_dir, settings.apptainer))
        if progress:
            progress(f"{instance_id}: {paths[-1]}")
    return paths


class ApptainerBackend(ConfiguredBySettings):
    name = "apptainer"

    def check(self, instances: Mapping[str, Mapping[str, Any]]) -> None:
        require_executable(self.settings.apptainer)
        require_harness_fields(instances, backend="apptainer", optional=("image",))

    def evaluate(self, instance: Mapping[str, Any], patch: str, *, work_dir: Path, label: str) -> Outcome:
        start = time.monotonic()
        try:
            sif = pull_image(instance, self.settings.image_dir, self.settings.apptainer)
        except ResourceError as exc:
            return Outcome("error", None, error=str(exc))
        pull_s = time.monotonic() - start
        spec = spec_for({**instance, "image": image_of(instance)})
        (work_dir / "patch.diff").write_text(patch, encoding="utf-8")
        (work_dir / "eval.sh").write_text(spec.eval_script, encoding="utf-8")
        (work_dir / "run.sh").write_text(
            apply_and_eval_script(
                testbed=TESTBED, patch_file=f"{MOUNT}/patch.diff", eval_script=f"{MOUNT}/eval.sh"
            ),
            encoding="utf-8",
        )
        log = work_dir / "test_output.txt"
        finished = run_logged(
            exec_command(sif, work_dir.resolve(), self.settings.apptainer),
            log_path=log,
            timeout_s=self.settings.timeout_s,
        )
        verdict = verdict_from_log(spec, log, timed_out=finished.timed_out)
        durations = {
            "pull_s": round(pull_s, 3),
            "tests_s": round(finished.seconds, 3),
            "total_s": round(time.monotonic() - start, 3),
        }
        error = None
        if verdict.status == "error":
            error = f"apptainer exec exited {finished.returncode}: {verdict.note}"
        return Outcome(
            verdict.status,
            verdict.patch_applied,
            verdict.grade,
            log,
            durations,
            error=error,
            note=verdict.note,
        )
