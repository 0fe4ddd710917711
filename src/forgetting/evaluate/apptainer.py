"""The ``apptainer`` backend: SWE-bench's instance images as SIF files, on the cluster.

swebench's harness needs a Docker engine, which HPC clusters lack. This backend uses the
same instance images, pulled once per instance into ``evaluation.image_dir`` as
``<instance_id>.sif`` (``apptainer pull --arch ARCH … docker://NAME``, the name and the
architecture from ``evaluation.instance_images``: :mod:`forgetting.instances.images`), and runs
in one ``apptainer exec`` what the harness runs in its container: apply the patch in
``/testbed`` (its ``GIT_APPLY_CMDS``), then the instance's eval script from swebench's
``make_test_spec``. The output is graded by swebench's parser for the instance.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from swebench.image_builder.constants import CONTAINER_WORKDIR

from forgetting.evaluate.backends import ConfiguredBySettings, Outcome
from forgetting.evaluate.execute import run_logged
from forgetting.evaluate.grading import require_harness_fields, spec_for, verdict_from_log
from forgetting.evaluate.layer import writable_layer
from forgetting.evaluate.scripts import apply_and_eval_script
from forgetting.foundation.atomic import atomic_output
from forgetting.foundation.errors import ResourceError, UserError
from forgetting.foundation.sif import read_sif
from forgetting.instances.images import InstanceImages, sif_path
from forgetting.instances.load import load_instances
from forgetting.study.config import Study
from forgetting.study.evaluation import ApptainerSettings

#: where the run's evaluation directory (patch, scripts, log) appears inside the container
MOUNT = "/forgetting"
TESTBED = CONTAINER_WORKDIR  # /testbed


def image_uri(instance: Mapping[str, Any], images: InstanceImages) -> str:
    """The instance's image as ``evaluation.instance_images`` names it (``docker://…``). A swebench
    5.x row's own ``image`` names the published x86_64 image and is not used: the same rows serve
    a site whose images are built for arm64."""
    return images.uri(str(instance["instance_id"]))


def pull_command(instance: Mapping[str, Any], target: Path, settings: ApptainerSettings,
                 images: InstanceImages) -> list[str]:
    """``apptainer pull --arch GOARCH [ARGS] TARGET docker://IMAGE``: the image for the configured
    architecture, wherever the pull runs (``--arch`` selects a platform of a docker:// source
    since Apptainer 1.3)."""
    return [settings.executable, "pull", "--arch", images.goarch, *settings.pull_args, str(target),
            image_uri(instance, images)]


def check_arch(sif: Path, images: InstanceImages, *, source: str | None = None) -> None:
    """The SIF's architecture (its header) is the configured one, else a ResourceError that says
    what to do: for a file in the image directory, remove it or set its architecture; for an image
    just pulled from ``source``, push images of the configured architecture."""
    found = read_sif(sif).arch
    if found == images.goarch:
        return
    configured = f"evaluation.instance_images.architecture: {images.architecture}"
    if source is None:
        raise ResourceError(
            f"{sif}: the image is built for {found}, not {images.goarch} ({configured}); remove it to pull "
            f"the {images.architecture} image, or set the architecture it has (docs/cluster.md, Architecture)"
        )
    raise ResourceError(
        f"apptainer pull {source}: the registry's image is built for {found}, not {images.goarch} ({configured}); "
        "push images of that architecture and name their registry in evaluation.instance_images.namespace"
    )


def exec_command(sif: Path, work_dir: Path, settings: ApptainerSettings,
                 layer: Sequence[str] = ("--writable-tmpfs",)) -> list[str]:
    """``apptainer exec [ARGS] LAYER --pwd /testbed --bind WORK:/forgetting SIF /bin/bash /forgetting/run.sh``,
    LAYER the options of its writable layer (:func:`forgetting.evaluate.layer.writable_layer`)."""
    if any(c in str(work_dir) for c in ":,"):
        raise UserError(
            f"{work_dir}: an apptainer bind path cannot contain ':' or ','; choose another results_dir"
        )
    return [
        settings.executable,
        "exec",
        *settings.exec_args,
        *layer,
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


def pull_image(instance: Mapping[str, Any], image_dir: Path, settings: ApptainerSettings,
               images: InstanceImages) -> Path:
    """The instance's SIF file, pulled once: an existing file of the configured architecture is
    reused (one of another is an error); a new one is pulled to a temporary name, its header
    checked, and renamed into place, so an interrupted or wrong pull leaves nothing."""
    sif = sif_path(image_dir, str(instance["instance_id"]))
    if sif.is_file():
        check_arch(sif, images)
        return sif
    with atomic_output(sif) as partial:
        try:
            proc = subprocess.run(
                pull_command(instance, partial, settings, images), capture_output=True, text=True,
                timeout=settings.pull_timeout_s, env=settings.environ(),
            )
        except subprocess.TimeoutExpired:
            raise ResourceError(
                f"apptainer pull {image_uri(instance, images)}: not done after {settings.pull_timeout_s} s "
                "(evaluation.apptainer.pull_timeout_s)"
            ) from None
        if proc.returncode != 0 or not partial.is_file():
            last = ((proc.stderr or proc.stdout).strip().splitlines() or [""])[-1][:300]
            raise ResourceError(f"apptainer pull {image_uri(instance, images)} failed (exit {proc.returncode}): {last}")
        check_arch(partial, images, source=image_uri(instance, images))
    return sif


def pull_images(
    study: Study, ids: Iterable[str] | None = None, *, progress: Callable[[str], None] | None = None
) -> list[Path]:
    """Pull the SIF image of every task of ``study`` (or of ``ids``) not pulled yet."""
    settings = study.evaluation
    require_executable(settings.apptainer)
    paths = []
    for instance_id, row in load_instances(study, ids).items():
        paths.append(pull_image(row, settings.image_dir, settings.apptainer, settings.images))
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
            sif = pull_image(instance, self.settings.image_dir, self.settings.apptainer, self.settings.images)
        except ResourceError as exc:
            return Outcome("error", None, error=str(exc))
        pull_s = time.monotonic() - start
        spec = spec_for({**instance, "image": self.settings.images.name(str(instance["instance_id"]))})
        (work_dir / "patch.diff").write_text(patch, encoding="utf-8")
        (work_dir / "eval.sh").write_text(spec.eval_script, encoding="utf-8")
        (work_dir / "run.sh").write_text(
            apply_and_eval_script(
                testbed=TESTBED, patch_file=f"{MOUNT}/patch.diff", eval_script=f"{MOUNT}/eval.sh"
            ),
            encoding="utf-8",
        )
        log = work_dir / "test_output.txt"
        try:
            with writable_layer(self.settings.apptainer, label) as layer:
                finished = run_logged(
                    exec_command(sif, work_dir.resolve(), self.settings.apptainer, layer),
                    log_path=log,
                    timeout_s=self.settings.timeout_s,
                    env=self.settings.apptainer.environ(),
                )
        except ResourceError as exc:
            return Outcome("error", None, error=str(exc))
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
