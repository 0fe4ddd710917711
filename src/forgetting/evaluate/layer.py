"""The writable layer of one container run (a Trae run, an evaluation) on scratch, of the
configured size (``evaluation.apptainer.writable_layer_mib``).

Apptainer's ``--writable-tmpfs`` puts the container's writable layer in its session directory,
a tmpfs of ``sessiondir max size`` (64 MiB by default), which with ``--contain`` and no
``--workdir`` also holds /tmp and /var/tmp (Apptainer: pkg/util/apptainerconf/config.go,
"SESSIONDIR MAXSIZE"; internal/pkg/runtime/engine/apptainer/container_linux.go, addOverlayMount
and addTmpMount). A run's edits under /testbed, its ``.pyc`` files and test runs outgrow that.
Instead each run gets:

* an overlay image of N MiB, ``apptainer overlay create --sparse --size N [--fakeroot] IMAGE``
  (internal/app/apptainer/overlay_create.go: an ext3 file system holding ``upper/`` and
  ``work/``; ``--fakeroot`` for runs started with ``--fakeroot``; sparse: only what is written
  takes room), used with ``exec --overlay IMAGE`` — a write past N fails with ENOSPC, which
  the evaluation reports as an error (:func:`forgetting.evaluate.grading.infra_failure`);
* ``--workdir DIR``: with ``--contain``, /tmp and /var/tmp are ``DIR/tmp`` and ``DIR/var_tmp``
  (addTmpMount), on scratch, not in the session's 64 MiB.

Both live in a directory of their own under ``SCRATCH/apptainer/layers`` and are removed when
the run ends; a layer whose process was killed outright is removed by the next one made on that
host (:func:`remove_orphans`). ``writable_layer_mib: 0`` keeps Apptainer's ``--writable-tmpfs``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forgetting.foundation.errors import ResourceError
from forgetting.study.evaluation import ApptainerSettings

#: how long ``apptainer overlay create`` may take (mkfs.ext3 of a sparse file: seconds)
CREATE_TIMEOUT_S = 600


def layers_dir(settings: ApptainerSettings) -> Path:
    return settings.scratch_dir / "apptainer" / "layers"


def overlay_create_command(settings: ApptainerSettings, image: Path) -> list[str]:
    """``apptainer overlay create --sparse --size N [--fakeroot] IMAGE``."""
    fakeroot = ["--fakeroot"] if "--fakeroot" in settings.exec_args else []
    return [settings.executable, "overlay", "create", "--sparse", "--size", str(settings.writable_layer_mib),
            *fakeroot, str(image)]


def remove_orphans(root: Path) -> list[Path]:
    """Remove the layers of processes of this host that are gone (a run or an evaluation killed
    with SIGKILL, a node's job cancelled): each layer's name holds its owner's host and pid."""
    removed = []
    host = socket.gethostname()
    for d in root.iterdir():
        parts = d.name.split("@")
        if len(parts) != 3 or not d.is_dir():
            continue
        owner_host, _, pid = parts[1].rpartition(".")
        if owner_host != host or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        except PermissionError:  # another user's live process
            continue
    return removed


@contextmanager
def writable_layer(settings: ApptainerSettings, label: str) -> Iterator[list[str]]:
    """The ``apptainer exec`` options of one run's writable layer (module docstring), made on
    entry and removed on exit; a layer that cannot be made is a ResourceError naming the command."""
    if settings.writable_layer_mib == 0:
        yield ["--writable-tmpfs"]
        return
    root = layers_dir(settings)
    owner = f"{socket.gethostname()}.{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_orphans(root)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:80]
        home = Path(tempfile.mkdtemp(prefix=f"{name}@{owner}@", dir=root))
    except OSError as exc:
        raise ResourceError(f"evaluation.apptainer.scratch_dir: cannot make {root} ({exc.strerror or exc})") from None
    try:
        image, work = home / "overlay.img", home / "work"
        work.mkdir()
        cmd = overlay_create_command(settings, image)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=settings.environ(),
                                  timeout=CREATE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ResourceError(f"{' '.join(cmd)}: {exc}") from None
        if proc.returncode != 0:
            last = ((proc.stderr or proc.stdout).strip().splitlines() or [""])[-1][:300]
            raise ResourceError(f"{' '.join(cmd)} failed (exit {proc.returncode}): {last}")
        yield ["--overlay", str(image), "--workdir", str(work)]
    finally:
        shutil.rmtree(home, ignore_errors=True)
