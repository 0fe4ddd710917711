"""``apptainer exec`` of the apptainer test double, each behaviour the project relies on as
Apptainer's source does it (github.com/apptainer/apptainer, read at v1.5.3+; files named below).

* Options: parsed as the CLI does; an unknown one is "unknown flag" (exit 255).
* The image (``open_image``): a SIF's primary system partition must be of the host's
  architecture, or one the host runs by persistent binfmt_misc emulation (pkg/image/sif.go:
  "the image's architecture (…) could not run on the host's (…)";
  internal/pkg/util/machine/machine.go: CompatibleWith, canEmulate). A directory is a sandbox.
* Binds (``parse_bind``): ``src[:dst[:opts]]``, options ``ro``, ``rw``, ``image-src=``, ``id=``
  and nothing else (pkg/runtime/engine/apptainer/config/bind.go: bindOptions). A bind with
  ``image-src`` or ``id`` mounts a partition of the image at ``src``: with ``id`` > 0 the one of
  that descriptor ID among all partitions, else the *first data partition*; none is "no data
  partition found in SRC"; ``id=0`` is "id number must be greater than 0"; an ``image-src`` the
  partition lacks is "… doesn't exist in image …" (internal/pkg/runtime/engine/apptainer/
  container_linux.go: addImageBindMount; pkg/image/sif.go files the primary system partition as
  root-file-system use only, data and overlay partitions apart). The double's partitions hold a
  tar archive (forgetting_testkit.sif.tree_payload) where the real ones hold squashfs.
* ``--contain``: ``/tmp`` and ``/var/tmp`` are fresh directories of this exec's session, gone
  when it ends — unless ``--workdir DIR`` is given, when they are ``DIR/tmp`` and ``DIR/var_tmp``,
  kept between execs (container_linux.go: addTmpMount).
* The home directory (container_linux.go: getHomePaths, addHomeStagingDir, addHomeMount): its
  destination is ``/root`` under ``--fakeroot`` or as root, else the user's home; ``--home
  SRC[:DST]`` binds SRC there; under ``--contain`` (no ``--home``) it is a fresh, empty
  directory — ``WORKDIR/home`` with ``--workdir``, else one in the session — hiding the image's
  own ``/root`` (its ``.bashrc`` included); ``--no-home`` mounts nothing, so the image's own
  directory shows (a sandbox's own, else ``$FAKE_APPTAINER_ROOT`` + the destination). ``HOME`` is the destination.
* The session directory is a tmpfs of ``sessiondir max size`` (64 MiB by default:
  pkg/util/apptainerconf/config.go, "SESSIONDIR MAXSIZE": it holds ``--contain``'s /tmp without
  ``--workdir`` and ``--writable-tmpfs``'s upper layer: container_linux.go, addOverlayMount). An
  ``--overlay FILE`` (``apptainer overlay create --size N``: an ext3 image of N MiB with
  ``upper/`` and ``work/``, internal/app/apptainer/overlay_create.go) is the writable layer
  instead, kept between execs. As root (CI) the double mounts these for real in a private mount
  namespace (``unshare -m``: a size-limited tmpfs, the overlay image by loop, an overlayfs over
  ``/testbed``), so a write past the size fails with ENOSPC as in the container; otherwise it
  copies ``/testbed`` into a plain session directory, without the size limit
  (:func:`can_mount` says which).
* ``--cleanenv``: only the variables Apptainer always passes (internal/pkg/util/env/create.go:
  alwaysPassKeys) and ``PATH`` (kept so that other test doubles resolve), ``HOME``; then
  ``APPTAINERENV_*`` and ``--env`` apply.
* ``--nv``: ``nvidia-smi`` exists in the container only with it.

The container's file system is the host's, with container paths mapped: each bind's
destination to its source, ``/testbed`` to ``$FAKE_TESTBED`` (through the writable layer),
``/tmp`` as above (also as ``TMPDIR``, which the host's programs need to land there), anything
else under ``/`` the host lacks to ``$FAKE_APPTAINER_ROOT``. Arguments are mapped, and shell
scripts found in bound directories, or run as the command out of an image partition, are
copied with their container paths mapped. It is not an
isolation of any kind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

#: what Apptainer keeps under --cleanenv (its internal/pkg/util/env/create.go: alwaysPassKeys)
ALWAYS_PASSED = ("TERM", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
                 "all_proxy", "ALL_PROXY", "ftp_proxy", "FTP_PROXY")
#: exec options that take a value (cmd/internal/cli/action_flags.go), short forms included
VALUED = {"--env": "--env", "--bind": "--bind", "-B": "--bind", "--pwd": "--pwd", "--home": "--home",
          "-H": "--home", "--env-file": "--env-file", "--overlay": "--overlay", "-o": "--overlay",
          "--mount": "--mount", "--workdir": "--workdir", "-W": "--workdir"}
FLAGS = {"--contain": "--contain", "-c": "--contain", "--containall": "--containall", "-C": "--containall",
         "--cleanenv": "--cleanenv", "-e": "--cleanenv", "--nv": "--nv", "--fakeroot": "--fakeroot",
         "-f": "--fakeroot", "--writable-tmpfs": "--writable-tmpfs", "--writable": "--writable",
         "-w": "--writable", "--no-home": "--no-home"}
#: bind options and whether each takes a value (config/bind.go: bindOptions)
BIND_OPTIONS = {"ro": False, "rw": False, "image-src": True, "id": True}
#: sif's partition types (PartPrimSys, PartData, PartOverlay)
PRIMSYS, DATA, OVERLAY = 2, 3, 4
#: the ELF magic binfmt_misc must match to emulate an architecture (machine.go: formats)
ELF_MAGIC = {"amd64": "7f454c4602010100000000000000000002003e00",
             "arm64": "7f454c460201010000000000000000000200b700"}
#: sessiondir max size in MiB (apptainerconf/config.go default)
SESSION_MIB = 64


class Fatal(Exception):
    """Apptainer's ``FATAL:`` line; exit 255."""


@dataclass
class Partition:
    ident: int
    parttype: int
    arch: str
    data: bytes


@dataclass
class Options:
    flags: set[str] = field(default_factory=set)
    binds: list[str] = field(default_factory=list)
    envs: dict[str, str] = field(default_factory=dict)
    overlays: list[str] = field(default_factory=list)
    pwd: str | None = None
    workdir: str | None = None
    home: str | None = None


def host_arch() -> str:
    import platform

    if os.environ.get("FAKE_APPTAINER_HOST_ARCH"):
        return os.environ["FAKE_APPTAINER_HOST_ARCH"]
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


ARCH_NAMES = {b"00": "unknown", b"01": "386", b"02": "amd64", b"03": "arm", b"04": "arm64", b"06": "ppc64le",
              b"11": "s390x", b"12": "riscv64"}


def read_partitions(path: Path) -> list[Partition] | None:
    """The partitions of the SIF at ``path`` (sif's descriptor layout), None if it is no SIF."""
    raw = path.read_bytes() if path.is_file() else b""
    if raw[32:42] != b"SIF_MAGIC\x00":
        return None
    total = int.from_bytes(raw[88:96], "little")
    offset = int.from_bytes(raw[96:104], "little")
    parts = []
    for i in range(min(total, 4096)):
        d = raw[offset + 585 * i: offset + 585 * (i + 1)]
        if len(d) < 585 or not d[4] or int.from_bytes(d[0:4], "little") != 0x4004:
            continue
        ident = int.from_bytes(d[5:9], "little")
        start, size = int.from_bytes(d[17:25], "little", signed=True), int.from_bytes(d[25:33], "little", signed=True)
        extra = d[201:]
        parts.append(Partition(ident, int.from_bytes(extra[4:8], "little"),
                               ARCH_NAMES.get(extra[8:10], "unknown"), raw[start:start + size]))
    return parts


def can_emulate(arch: str) -> bool:
    """machine.go canEmulate: binfmt_misc enabled with a persistent (F) entry for the ELF magic."""
    root = Path(os.environ.get("FAKE_APPTAINER_BINFMT_MISC", "/proc/sys/fs/binfmt_misc"))
    try:
        if (root / "status").read_text() != "enabled\n":
            return False
        entries = [p for p in root.iterdir() if p.name not in ("status", "register")]
    except OSError:
        return False
    for entry in entries:
        try:
            lines = entry.read_text().splitlines()
        except OSError:
            continue
        magic = next((ln.split(" ")[1] for ln in lines if ln.startswith("magic") and " " in ln), "")
        flags = next((ln.split(" ")[1] for ln in lines if ln.startswith("flags") and " " in ln), "")
        if "enabled" in lines and "F" in flags and magic == ELF_MAGIC.get(arch):
            return True
    return False


def open_image(path: Path) -> list[Partition]:
    """The image's partitions after Apptainer's checks (sif.go initializer)."""
    parts = read_partitions(path)
    if parts is None:
        raise Fatal(f"could not open image {path}: failed to retrieve path for {path}")
    for p in parts:
        if p.parttype == PRIMSYS and p.arch != "unknown" and p.arch != host_arch() and not can_emulate(p.arch):
            raise Fatal(f"the image's architecture ({p.arch}) could not run on the host's ({host_arch()})")
    return parts


def parse_options(args: list[str]) -> tuple[Options, list[str]]:
    o = Options()
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, _, inline = args[i].partition("=")
        if name in VALUED:
            value = inline if inline else args[i + 1]
            i += 1 if inline else 2
            key = VALUED[name]
            if key == "--env":
                k, _, v = value.partition("=")
                o.envs[k] = v
            elif key == "--bind":
                o.binds += [value]
            elif key == "--overlay":
                o.overlays.append(value)
            elif key == "--pwd":
                o.pwd = value
            elif key == "--workdir":
                o.workdir = value
            elif key == "--home":
                o.home = value
        elif name in FLAGS:
            o.flags.add(FLAGS[name])
            i += 1
        else:
            raise Fatal(f"unknown flag: {args[i]}")
    if "--containall" in o.flags:
        o.flags |= {"--contain", "--cleanenv"}
    return o, args[i:]


@dataclass
class Bind:
    source: str
    destination: str
    options: dict[str, str]


def parse_bind(spec: str) -> Bind:
    """One ``src[:dst[:opt,opt]]`` (bind.go; the project never escapes ':' or ',')."""
    fields = spec.split(":")
    if len(fields) > 3:
        raise Fatal(f"while getting bind path: wrong bind syntax: {spec}")
    src = fields[0]
    dst = fields[1] if len(fields) > 1 else src
    options: dict[str, str] = {}
    if len(fields) == 3:
        for opt in fields[2].split(","):
            key, eq, value = opt.partition("=")
            if key not in BIND_OPTIONS or BIND_OPTIONS[key] != bool(eq):
                raise Fatal(f"while getting bind path: {opt} is not a valid bind option")
            options[key] = value
    return Bind(src, dst, options)


def image_bind(bind: Bind, session: Path, n: int) -> str:
    """The host directory of an image bind (addImageBindMount)."""
    part_id = 0
    if "id" in bind.options:
        try:
            part_id = int(bind.options["id"])
        except ValueError:
            raise Fatal(f"while parsing id bind option: invalid syntax {bind.options['id']!r}") from None
        if part_id <= 0:
            raise Fatal("id number must be greater than 0")
    image_src = bind.options.get("image-src") or "/"
    parts = open_image(Path(bind.source))
    if part_id > 0:
        chosen = next((p for p in parts if p.ident == part_id), None)
    else:
        chosen = next((p for p in parts if p.parttype == DATA), None)
    if chosen is None:
        raise Fatal(f"container creation failed: mount hook function failure: no data partition found in "
                    f"{bind.source}")
    dest = session / "data-images" / str(n)
    dest.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=__import__("io").BytesIO(chosen.data)) as tar:
            tar.extractall(dest, filter="tar")
    except tarfile.TarError:
        pass  # a placeholder partition: an empty file system
    src = dest / image_src.lstrip("/")
    if not src.exists():
        raise Fatal(f"container creation failed: {image_src} doesn't exist in image {bind.source}")
    return str(src)


def can_mount() -> bool:
    """Whether this process may mount (root, with ``unshare``): the size limits are then real."""
    if os.environ.get("FAKE_APPTAINER_NO_MOUNT"):
        return False
    return os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("mount") is not None


def session_mib() -> int:
    return int(os.environ.get("FAKE_APPTAINER_SESSIONDIR_MAX_SIZE", SESSION_MIB))


def exec_main(args: list[str]) -> int:
    try:
        o, rest = parse_options(args)
        if not rest:
            raise Fatal("exec requires an image and a command")
        return run(o, Path(rest[0]), rest[1:])
    except Fatal as exc:
        print(f"FATAL:   {exc}", file=sys.stderr)
        return 255


def run(o: Options, image: Path, command: list[str]) -> int:
    if os.environ.get("FAKE_APPTAINER_HANG"):
        time.sleep(600)
    if not image.is_dir():
        open_image(image)
    binds = [parse_bind(b) for b in o.binds]
    session = Path(tempfile.mkdtemp(prefix="fake-apptainer-session-"))
    try:
        plan = {"session": str(session), "session_mib": session_mib(), "mounts": []}
        mapping: dict[str, str] = {}
        for n, b in enumerate(binds):
            if "image-src" in b.options or "id" in b.options:
                mapping[b.destination] = image_bind(b, session, n)
            else:
                if not Path(b.source).exists():
                    raise Fatal(f"container creation failed: mount hook function failure: mount {b.source}->"
                                f"{b.destination} error: while mounting {b.source}: mount source {b.source} "
                                "doesn't exist")
                mapping[b.destination] = b.source
        # /tmp and /var/tmp (addTmpMount)
        if "--contain" in o.flags:
            if o.workdir:
                work = Path(o.workdir).resolve()
                for name in ("tmp", "var_tmp"):
                    (work / name).mkdir(parents=True, exist_ok=True)
                tmp, var_tmp = work / "tmp", work / "var_tmp"
            else:
                tmp, var_tmp = session / "tmp", session / "var_tmp"
                tmp.mkdir(), var_tmp.mkdir()
            mapping.setdefault("/tmp", str(tmp))
            mapping.setdefault("/var/tmp", str(var_tmp))
        home = home_mount(o, session, image)
        if home is not None:
            mapping.setdefault(*home)
        # the writable layer over /testbed
        testbed = os.environ.get("FAKE_TESTBED")
        if image.is_dir() and (image / "testbed").is_dir():  # a sandbox (build --sandbox) holds its own
            mapping.setdefault("/testbed", str(image / "testbed"))
        else:  # the image's /testbed: $FAKE_TESTBED, else an empty one
            if not testbed:
                testbed = str(session / "image-testbed")
                Path(testbed).mkdir()
            mapping.setdefault("/testbed", writable_testbed(o, Path(testbed), session, plan))
        env = environment(o, mapping)
        if home is not None:
            env["HOME"] = home[1]
        argv = translate_command(command, mapping, session)
        program = resolve(argv, o, env) if argv else None
        if program is None:
            print(f"/.singularity.d/actions/exec: line 9: exec: {(command or [''])[0]}: not found", file=sys.stderr)
            return 127
        program = script_copy(Path(program), mapping, session)
        cwd = translate(o.pwd, mapping) if o.pwd else None
        plan.update({"argv": [program, *argv[1:]], "env": env, "cwd": cwd})
        if plan["mounts"]:
            spec = session.parent / f"{session.name}.json"
            spec.write_text(json.dumps(plan))
            try:
                return subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, __file__,
                                       str(spec)]).returncode
            finally:
                spec.unlink(missing_ok=True)
        return spawn(plan)
    finally:
        shutil.rmtree(session, ignore_errors=True)


def home_destination(o: Options) -> str:
    """Where the home directory goes in the container (getHomePaths)."""
    if o.home:
        src, _, dst = o.home.partition(":")
        return dst or src
    if "--fakeroot" in o.flags or os.geteuid() == 0:
        return "/root"
    return str(Path.home())


def image_root(image: Path) -> str | None:
    """Where the image's own file system is: a sandbox's directory, else ``$FAKE_APPTAINER_ROOT``."""
    return str(image) if image.is_dir() else os.environ.get("FAKE_APPTAINER_ROOT")


def home_mount(o: Options, session: Path, image: Path) -> tuple[str, str] | None:
    """(container destination, host directory) of the home directory: the image's own under
    ``--no-home`` (None where the double has none: the host's), None where it is the
    user's own home at the same path (no --contain)."""
    if "--no-home" in o.flags:
        root, dest = image_root(image), home_destination(o)
        return (dest, str(Path(root) / dest.lstrip("/"))) if root else None
    dest = home_destination(o)
    if o.home:
        return dest, str(Path(o.home.partition(":")[0]).resolve())
    if "--contain" not in o.flags:
        # the user's home bound at the destination (addHomeStagingDir: bindSource)
        return (dest, str(Path.home())) if dest != str(Path.home()) else None
    if o.workdir:
        stage = Path(o.workdir).resolve() / "home"
        stage.mkdir(mode=0o700, parents=True, exist_ok=True)
    else:
        stage = session / "home"
        stage.mkdir(mode=0o700)
    return dest, str(stage)


def writable_testbed(o: Options, testbed: Path, session: Path, plan: dict) -> str:
    """Where /testbed is: an overlay (upper in the session tmpfs, or in the --overlay image) over
    the image's read-only /testbed; without mounts, a copy of it."""
    merged = session / "merged-testbed"
    merged.mkdir()
    if not can_mount():
        shutil.rmtree(merged)
        shutil.copytree(testbed, merged, symlinks=True)
        return str(merged)
    if o.overlays:
        image = Path(o.overlays[0].split(":")[0]).resolve()
        layer = session / "overlay-image"
        layer.mkdir()
        plan["mounts"].append(["mount", "-o", "loop", str(image), str(layer)])
        upper, work = layer / "upper" / "testbed", layer / "work" / "testbed"
    else:
        upper, work = session / "tmpfs" / "upper", session / "tmpfs" / "work"
    plan["mounts"].append(["mkdir", "-p", str(upper), str(work)])
    plan["mounts"].append(["mount", "-t", "overlay", "overlay", "-o",
                           f"lowerdir={testbed},upperdir={upper},workdir={work}", str(merged)])
    return str(merged)


def environment(o: Options, mapping: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k in (*ALWAYS_PASSED, "PATH", "HOME")} \
        if "--cleanenv" in o.flags else dict(os.environ)
    prefixed = {k[len("APPTAINERENV_"):]: v for k, v in os.environ.items() if k.startswith("APPTAINERENV_")}
    env = {**base, **prefixed, **o.envs}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    if "/tmp" in mapping:
        env["TMPDIR"] = mapping["/tmp"]  # tempfile's /tmp: the container's
    return {k: translate(v, mapping) if k in o.envs else v for k, v in env.items()}


def _pattern(mapping: dict[str, str]) -> re.Pattern[str]:
    keys = sorted(mapping, key=len, reverse=True)
    return re.compile("(?<![\\w/.-])(" + "|".join(re.escape(k) for k in keys) + ")(?=/|$|[^\\w.-])")


def translate(text: str, mapping: dict[str, str]) -> str:
    """Container paths in ``text`` → host paths, in one pass."""
    if not mapping:
        return text
    return _pattern(mapping).sub(lambda m: mapping[m.group(1)], text)


def translate_command(command: list[str], mapping: dict[str, str], session: Path) -> list[str]:
    # shell scripts in bound directories: copies with their container paths mapped
    scripts = session / "scripts"
    scripts.mkdir()
    full = dict(mapping)
    for dst, src in list(mapping.items()):
        if dst in ("/testbed", "/tmp", "/var/tmp") or not Path(src).is_dir():
            continue
        for f in Path(src).iterdir():
            if f.is_file() and f.suffix == ".sh":
                full[f"{dst}/{f.name}"] = str(scripts / f"{len(full)}-{f.name}")
    for key, copy in full.items():
        if copy.startswith(str(scripts)):
            host = Path(mapping[key.rsplit("/", 1)[0]]) / key.rsplit("/", 1)[1]
            Path(copy).write_text(translate(host.read_text(encoding="utf-8"), full), encoding="utf-8")
    return [translate(a, full) for a in command]


def resolve(argv: list[str], o: Options, env: dict[str, str]) -> str | None:
    """The host executable of the container command, or None ("not found", as the image's
    action script says)."""
    program = argv[0]
    if Path(program).name == "nvidia-smi" and "--nv" not in o.flags:
        return None
    root = os.environ.get("FAKE_APPTAINER_ROOT")
    if program.startswith("/") and not Path(program).exists() and root:
        program = str(Path(root) / program.lstrip("/"))
    return shutil.which(program, path=env.get("PATH"))


def script_copy(program: Path, mapping: dict[str, str], session: Path) -> str:
    """A shell script run as the command, with its container paths mapped (a copy)."""
    try:
        with open(program, "rb") as fh:
            head = fh.read(2)
    except OSError:
        return str(program)
    if head != b"#!" or program.stat().st_size > 1_000_000 or not str(program).startswith(str(session)):
        return str(program)
    copy = session / "scripts" / f"command-{program.name}"
    copy.write_text(translate(program.read_text(encoding="utf-8"), mapping), encoding="utf-8")
    copy.chmod(0o755)
    return str(copy)


def spawn(plan: dict) -> int:
    try:
        return subprocess.run(plan["argv"], env=plan["env"], cwd=plan["cwd"]).returncode
    except FileNotFoundError:
        print(f"/.singularity.d/actions/exec: line 9: exec: {plan['argv'][0]}: not found", file=sys.stderr)
        return 127


def inside(spec_path: str) -> int:
    """In the private mount namespace: the session tmpfs, the layers, then the command."""
    plan = json.loads(Path(spec_path).read_text())
    session = plan["session"]
    tmpfs = Path(session)
    keep = tmpfs.parent / f"{tmpfs.name}.keep"
    # the session's contents so far (data images, scripts) move onto its tmpfs
    shutil.copytree(tmpfs, keep, symlinks=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={plan['session_mib']}m", "tmpfs", session], check=True)
    shutil.copytree(keep, tmpfs, symlinks=True, dirs_exist_ok=True)
    shutil.rmtree(keep, ignore_errors=True)
    for cmd in plan["mounts"]:
        subprocess.run(cmd, check=True)
    return spawn(plan)


if __name__ == "__main__":
    raise SystemExit(inside(sys.argv[1]))
