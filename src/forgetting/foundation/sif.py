"""Reading the CPU architecture of an Apptainer image (a SIF file) from its header.

The layout, from the SIF format's reference implementation (github.com/sylabs/sif and its
fork github.com/apptainer/sif, ``pkg/sif/sif.go``, ``arch.go``, ``descriptor.go``; the same
in both): a 128-byte global header, little-endian, fields packed without padding —

=======  =====  ===============================================================
offset   bytes  field
=======  =====  ===============================================================
0        32     launch script, NUL-padded (Apptainer writes ``#!/usr/bin/env run-singularity\\n``)
32       10     magic ``SIF_MAGIC\\0``
42       3      format version, ``01\\0``
45       3      architecture of the primary system partition: ``02\\0`` amd64, ``04\\0``
                arm64, ``00\\0`` unknown (table :data:`ARCH_CODES`)
48       16     image UUID
64       8×8    created, modified, descriptors free, descriptors total, descriptors
                offset, descriptors size, data offset, data size (int64 each)
=======  =====  ===============================================================

then the descriptors (585 bytes each: data type int32, used bool, id, group id, linked id
uint32, offset, size, size with padding, created, modified, uid, gid int64, a 128-byte
name and 384 bytes of type-specific data). A partition descriptor (data type 0x4004) starts
its type-specific data with file-system type int32, partition type int32 (2: primary system
partition) and the 3-byte architecture code. ``sif`` copies the primary system partition's
architecture into the global header when it adds or sets that partition; Apptainer checks
the *descriptor's* value before it runs an image (``pkg/image/sif.go``: "the image's
architecture (…) could not run on the host's (…)"), so :func:`read_sif` reads both and
reports the descriptor's where the two differ.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from forgetting.foundation.errors import ResourceError

HEADER_SIZE = 128
MAGIC = b"SIF_MAGIC\x00"
VERSION = b"01\x00"
#: the global header: launch, magic, version, arch, uuid, then eight int64 fields
HEADER = struct.Struct("<32s10s3s3s16s8q")
#: one descriptor: type, used, id, group, link, offset, size, size+padding, 4 × int64, name, extra
DESCRIPTOR = struct.Struct("<i?III3q4q128s384s")
#: the start of a partition descriptor's type-specific data: fs type, partition type, arch
PARTITION = struct.Struct("<ii3s")
DATA_PARTITION = 0x4004
PART_PRIMARY_SYSTEM = 2

#: SIF architecture codes (``arch.go``) → Go's architecture names, as Apptainer reports them
ARCH_CODES: dict[bytes, str] = {
    b"00": "unknown",
    b"01": "386",
    b"02": "amd64",
    b"03": "arm",
    b"04": "arm64",
    b"05": "ppc64",
    b"06": "ppc64le",
    b"07": "mips",
    b"08": "mipsle",
    b"09": "mips64",
    b"10": "mips64le",
    b"11": "s390x",
    b"12": "riscv64",
    b"13": "loong64",
}
CODE_OF: dict[str, bytes] = {name: code for code, name in ARCH_CODES.items()}


@dataclass(frozen=True)
class SifInfo:
    """What the header says about one image."""

    path: Path
    #: the global header's architecture (Go name: ``amd64``, ``arm64``, ``unknown``)
    header_arch: str
    #: the primary system partition descriptor's, or None when the image has none
    partition_arch: str | None
    #: that descriptor's ID (what an ``id=`` image bind names), or None when there is none
    partition_id: int | None = None

    @property
    def arch(self) -> str:
        """The architecture Apptainer checks: the primary partition's, else the header's."""
        return self.partition_arch or self.header_arch


def _arch_name(field: bytes) -> str:
    return ARCH_CODES.get(field.rstrip(b"\x00"), "unknown")


def read_sif(path: str | os.PathLike[str]) -> SifInfo:
    """The architecture fields of the SIF file at ``path``; a file that is not a SIF (wrong
    magic or version, too short) is a :class:`ResourceError` naming it."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read(HEADER_SIZE)
            if len(raw) < HEADER_SIZE:
                raise ResourceError(f"{p}: not a SIF image ({len(raw)} bytes, shorter than its 128-byte header)")
            _launch, magic, version, arch, _uuid, *numbers = HEADER.unpack(raw)
            if magic != MAGIC:
                raise ResourceError(f"{p}: not a SIF image (no SIF_MAGIC in its header)")
            if version != VERSION:
                shown = version.rstrip(b"\x00").decode(errors="replace")
                raise ResourceError(f"{p}: SIF format version {shown!r}, not 01")
            _created, _modified, _free, total, offset, _size, _data_offset, _data_size = numbers
            partition_arch, partition_id = None, None
            if 0 < total <= 4096 and offset >= HEADER_SIZE:
                fh.seek(offset)
                for _ in range(total):
                    chunk = fh.read(DESCRIPTOR.size)
                    if len(chunk) < DESCRIPTOR.size:
                        break
                    dtype, used, ident, *_rest, extra = DESCRIPTOR.unpack(chunk)
                    if used and dtype == DATA_PARTITION:
                        _fs, parttype, part_arch = PARTITION.unpack_from(extra)
                        if parttype == PART_PRIMARY_SYSTEM:
                            partition_arch, partition_id = _arch_name(part_arch), int(ident)
                            break
    except OSError as exc:
        raise ResourceError(f"{p}: cannot read the image ({exc.strerror or exc})") from None
    return SifInfo(p, _arch_name(arch), partition_arch, partition_id)
