"""The preflight's check of a Trae run's own launch: the command line a run starts its agent
with (:func:`forgetting.run.trae.container_command`, the same code), in the first task's
instance image, with the run's options, its writable layer (made on scratch as a run makes it)
and its binds — Trae's prefix by its ``id=`` image bind included — and the run's environment
(Apptainer's cache and temporary directories). In it, the file ``BASH_ENV`` names (the image's
conda activation) must be readable, and the agent's program is asked for ``--help``:
the launch, not the model, is what this checks (the model is checked by ``--serve`` and the
smoke run)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from forgetting.cluster.preflight.checks import Check, last_line, run_probe
from forgetting.evaluate.layer import writable_layer
from forgetting.foundation.errors import UserError
from forgetting.instances.images import sif_path
from forgetting.run.trae import container_command
from forgetting.study.config import Study

NAME = "trae-cli"
#: in the container: the file BASH_ENV names (the image's /root/.bashrc, its `conda activate
#: testbed`) must be there — Apptainer's --contain home over /root would hide it (run/trae.py,
#: --no-home) and every bash session of the agent would then lack the task's environment —, then
#: the agent's program answers ``--help``
_PROBE = ('[ -r "$BASH_ENV" ] || { echo "BASH_ENV=$BASH_ENV is not readable in the container: the agent\'s '
          'bash would start without the image\'s environment"; exit 3; }; exec "$0" --help')


def check_trae_launch(study: Study, environ: Mapping[str, str]) -> Check:
    """``trae-cli --help`` through a Trae run's own ``apptainer exec`` (module docstring)."""
    settings = study.runner
    image = settings.trae.apptainer_image
    if image is None or not image.is_file():
        return Check(NAME, False, f"not tried: {image} not found")
    task = study.tasks[0]
    instance = sif_path(settings.image_dir, task)
    if not instance.is_file():
        return Check(NAME, False, f"not tried: {instance} not found (the instance images are pulled first)")
    apptainer = settings.apptainer_settings
    try:
        settings.scratch_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="preflight-trae-", dir=settings.scratch_dir) as out, \
                writable_layer(apptainer, "preflight-trae") as layer:
            command = [*container_command(settings, instance, Path(out), "/testbed", layer),
                       "/bin/bash", "-c", _PROBE, settings.trae.executable]
            status, text = run_probe(command, env=apptainer.environ(environ))
    except (UserError, OSError) as exc:
        return Check(NAME, False, f"a run's launch could not be prepared: {exc}")
    if status == 0:
        return Check(NAME, True, f"`{settings.trae.executable} --help` answers in {instance.name} through a run's own "
                     f"command line (binds, writable layer, environment)")
    return Check(NAME, False, f"a Trae run's launch `{' '.join(command)}` exited {status}: {last_line(text)}; "
                 "rebuild containers/trae-agent.def, or see docs/runs.md (Trae inside the instance image)")
