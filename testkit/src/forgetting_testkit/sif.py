"""Small SIF files written byte by byte from the format's layout (github.com/sylabs/sif,
``pkg/sif``: the 128-byte global header, 48 descriptors of 585 bytes from offset 4096, then
the data), for tests of the code that reads an image's architecture. Written independently
of :mod:`forgetting.sif` (plain ``int.to_bytes``), so a test of the reader is not circular.

The real thing is an Apptainer-built image; these hold a few bytes of placeholder data
instead of a squashfs partition, which is all a header reader looks at.
"""

from __future__ import annotations

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


def sif_bytes(arch: str, *, header_arch: str | None = None, payload: bytes = b"placeholder partition\n",
              partition: bool = True, magic: bytes = b"SIF_MAGIC\x00", version: bytes = b"01\x00") -> bytes:
    """A SIF image whose primary system partition is built for ``arch`` (Go name); the global
    header says ``header_arch`` (default: the same, as sif writes it)."""
    data_offset = DESCRIPTORS_OFFSET + DESCRIPTORS * DESCRIPTOR_SIZE
    used = 1 if partition else 0
    header = b"".join([
        _pad(LAUNCH, 32),
        _pad(magic, 10),
        _pad(version, 3),
        _pad(CODES[header_arch or arch] if partition or header_arch else CODES["unknown"], 3),
        bytes(16),                       # uuid (deterministic images have the nil UUID)
        _i64(0), _i64(0),                # created, modified
        _i64(DESCRIPTORS - used), _i64(DESCRIPTORS),
        _i64(DESCRIPTORS_OFFSET), _i64(DESCRIPTORS * DESCRIPTOR_SIZE),
        _i64(data_offset), _i64(len(payload) if partition else 0),
    ])
    assert len(header) == 128
    descriptors = b""
    if partition:
        extra = _i32(1) + _i32(2) + _pad(CODES[arch], 3)  # squashfs, primary system partition, arch
        descriptors += b"".join([
            _i32(0x4004), b"\x01", _u32(1), _u32(0xF0000001), _u32(0),
            _i64(data_offset), _i64(len(payload)), _i64(len(payload)),
            _i64(0), _i64(0), _i64(0), _i64(0),
            bytes(128), _pad(extra, 384),
        ])
        assert len(descriptors) == DESCRIPTOR_SIZE
    descriptors = _pad(descriptors, DESCRIPTORS * DESCRIPTOR_SIZE)
    body = _pad(header, DESCRIPTORS_OFFSET) + descriptors
    return body + (payload if partition else b"")


def write_sif(path: str | Path, arch: str, **kwargs: object) -> Path:
    """Write :func:`sif_bytes` to ``path`` (its directory created); return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(sif_bytes(arch, **kwargs))  # type: ignore[arg-type]
    return p
