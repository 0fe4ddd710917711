"""Reading an image's architecture from its SIF header, on files written byte by byte from the
format (forgetting_testkit/sif.py, independent of the reader). No SIF built by Apptainer can be
made here (that needs Apptainer): the cluster's preflight job reads real ones."""

from __future__ import annotations

import pytest

from forgetting.foundation.errors import ResourceError
from forgetting.foundation.sif import HEADER_SIZE, read_sif
from forgetting_testkit.sif import sif_bytes, write_sif


@pytest.mark.parametrize("arch", ["amd64", "arm64", "ppc64le", "riscv64"])
def test_the_architecture_of_the_header_and_of_the_primary_partition(tmp_path, arch):
    info = read_sif(write_sif(tmp_path / "x.sif", arch))
    assert (info.header_arch, info.partition_arch, info.arch) == (arch, arch, arch)


def test_the_layout_is_the_formats(tmp_path):
    raw = sif_bytes("arm64")
    assert raw[:31] == b"#!/usr/bin/env run-singularity\n" and raw[32:42] == b"SIF_MAGIC\x00"
    assert raw[42:45] == b"01\x00" and raw[45:48] == b"04\x00"  # version, arch code of arm64
    assert int.from_bytes(raw[96:104], "little") == 4096  # descriptors' offset
    assert len(raw) > HEADER_SIZE


def test_apptainers_own_check_reads_the_partition_so_does_the_reader(tmp_path):
    info = read_sif(write_sif(tmp_path / "x.sif", "amd64", header_arch="arm64"))
    assert (info.header_arch, info.partition_arch, info.arch) == ("arm64", "amd64", "amd64")
    bare = read_sif(write_sif(tmp_path / "y.sif", "amd64", partition=False, header_arch="amd64"))
    assert (bare.partition_arch, bare.arch) == (None, "amd64")


@pytest.mark.parametrize(("content", "message"), [
    (b"placeholder SIF written by an older test double\n", "shorter than its 128-byte header"),
    (sif_bytes("amd64", magic=b"NOT_MAGIC\x00"), "no SIF_MAGIC in its header"),
    (sif_bytes("amd64", version=b"02\x00"), "SIF format version '02', not 01"),
])
def test_what_is_not_a_sif_is_one_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.sif"
    path.write_bytes(content)
    with pytest.raises(ResourceError, match=rf"bad.sif: .*{message}"):
        read_sif(path)
    with pytest.raises(ResourceError, match=r"missing\.sif: cannot read the image"):
        read_sif(tmp_path / "missing.sif")
