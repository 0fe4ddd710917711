"""Small SIF files written byte by byte from the format's layout (github.com/sylabs/sif,
``pkg/sif``: the 128-byte global header, 48 descriptors of 585 bytes from offset 4096, then
the data), for tests of the code that reads an image's architecture. Written independently
of :mod:`forgetting.foundation.sif` (plain ``int.to_bytes``), so a test of the reader is not circular.

The real thing is an Apptainer-built image; these hold a few bytes of placeholder data, or a
tar archive of a small tree (:func:`tree_payload`, which the apptainer test double reads),
instead of a squashfs partition; a header reader looks only at the descriptors.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

LAUNCH = b"#!/usr/bin/env run-singularity\n"
#: Go architecture name → SIF code (sif's arch.go)
CODES = {"unknown": b"00", "386": b"01", "amd64": b"02", "arm": b"03", "arm64": b"04", "ppc64le": b"06",
         "s390x": b"11", "riscv64": b"12"}
DESCRIPTORS = 48
DESCRIPTOR_SIZE = 585
DESCRIPTORS_OFFSET = 4096


def _i32(v: int) -> bytes:
    return v.to_bytes(4, "little", signed=True)


def _u32(v: int) -> bytes:
    return v.to_bytes(4, "little", signed=False)


def _i64(v: int) -> bytes:
    return v.to_bytes(8, "little", signed=True)


def _pad(raw: bytes, size: int) -> bytes:
    assert len(raw) <= size
    return raw + bytes(size - len(raw))


#: descriptor data types (sif's pkg/sif/descriptor.go: DataDeffile, DataPartition, DataGenericJSON)
DATA_DEFFILE, DATA_PARTITION, DATA_GENERIC_JSON = 0x4001, 0x4004, 0x4006
#: partition types (sif's PartPrimSys, PartData, PartOverlay) and file-system types (FsSquash, FsExt3)
PART_PRIMSYS, PART_DATA, PART_OVERLAY = 2, 3, 4
FS_SQUASH, FS_EXT3 = 1, 2
#: the JSON objects ``apptainer build`` adds before the root file system, so that its partition
#: is descriptor 4 as in Apptainer's own e2e test of an id= bind (e2e/actions/actions.go,
#: "SifWithID": ``--bind IMAGE:/rootfs:id=4`` — "rootfs ID is now '4'")
BUILD_JSON_OBJECTS = ("labels", "oci-config")


@dataclass(frozen=True)
class Obj:
    """One data object of a SIF file: its descriptor's fields and its bytes."""

    dtype: int
    data: bytes
    name: str = ""
    parttype: int | None = None  # a partition's type (DATA_PARTITION only)
    fstype: int = FS_SQUASH
    arch: str = "unknown"


def tree_payload(tree: Mapping[str, bytes | str]) -> bytes:
    """A partition's bytes for the apptainer test double: a tar archive of ``tree`` (container path →
    content; a path ending in ``*`` is written executable, without the star). The real partition is
    a squashfs or ext3 file system, which nothing here can mount; the double reads this archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in sorted(tree.items()):
            executable = name.endswith("*")
            raw = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name.rstrip("*").lstrip("/"))
            info.size, info.mode, info.mtime = len(raw), 0o755 if executable else 0o644, 0
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def sif_image(objects: list[Obj], *, header_arch: str = "unknown", magic: bytes = b"SIF_MAGIC\x00",
              version: bytes = b"01\x00") -> bytes:
    """A SIF file holding ``objects`` in order, descriptor IDs 1, 2, … as sif assigns them."""
    data_offset = DESCRIPTORS_OFFSET + DESCRIPTORS * DESCRIPTOR_SIZE
    descriptors, data = b"", b""
    for i, obj in enumerate(objects):
        extra = b""
        if obj.dtype == DATA_PARTITION:
            extra = _i32(obj.fstype) + _i32(obj.parttype or PART_DATA) + _pad(CODES[obj.arch], 3)
        elif obj.dtype == DATA_GENERIC_JSON:
            extra = b""
        offset = data_offset + len(data)
        descriptors += b"".join([
            _i32(obj.dtype), b"\x01", _u32(i + 1), _u32(0xF0000001), _u32(0),
            _i64(offset), _i64(len(obj.data)), _i64(len(obj.data)),
            _i64(0), _i64(0), _i64(0), _i64(0),
            _pad(obj.name.encode(), 128), _pad(extra, 384),
        ])
        data += obj.data
    header = b"".join([
        _pad(LAUNCH, 32),
        _pad(magic, 10),
        _pad(version, 3),
        _pad(CODES[header_arch], 3),
        bytes(16),                       # uuid (deterministic images have the nil UUID)
        _i64(0), _i64(0),                # created, modified
        _i64(DESCRIPTORS - len(objects)), _i64(DESCRIPTORS),
        _i64(DESCRIPTORS_OFFSET), _i64(DESCRIPTORS * DESCRIPTOR_SIZE),
        _i64(data_offset), _i64(len(data)),
    ])
    assert len(header) == 128
    return _pad(header, DESCRIPTORS_OFFSET) + _pad(descriptors, DESCRIPTORS * DESCRIPTOR_SIZE) + data


def sif_bytes(arch: str, *, header_arch: str | None = None, payload: bytes = b"placeholder partition\n",
              partition: bool = True, magic: bytes = b"SIF_MAGIC\x00", version: bytes = b"01\x00",
              definition: str | None = None, data: tuple[bytes, ...] = ()) -> bytes:
    """A SIF image whose primary system partition is built for ``arch`` (Go name); the global
    header says ``header_arch`` (default: the same, as sif writes it).

    With ``definition`` it is laid out as ``apptainer build`` writes one (its
    internal/pkg/build/assemblers/sif.go, createSIF: the definition file, the JSON objects in
    alphabetical order, then the root file system partition): the partition is then descriptor 4.
    Without, the partition is descriptor 1. ``data`` adds data partitions after it (as
    ``apptainer sif add --parttype 3`` would), the first of which is what an image bind without
    ``id=`` mounts."""
    objects: list[Obj] = []
    if definition is not None:
        objects.append(Obj(DATA_DEFFILE, definition.encode()))
        objects += [Obj(DATA_GENERIC_JSON, b"{}", name=name) for name in BUILD_JSON_OBJECTS]
    if partition:
        objects.append(Obj(DATA_PARTITION, payload, parttype=PART_PRIMSYS, arch=arch))
    objects += [Obj(DATA_PARTITION, raw, parttype=PART_DATA, arch="amd64") for raw in data]
    shown = header_arch or (arch if partition else "unknown")
    return sif_image(objects, header_arch=shown, magic=magic, version=version)


def write_sif(path: str | Path, arch: str, **kwargs: object) -> Path:
    """Write :func:`sif_bytes` to ``path`` (its directory created); return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(sif_bytes(arch, **kwargs))  # type: ignore[arg-type]
    return p
