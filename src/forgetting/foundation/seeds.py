"""Every seed and stable hash of the pipeline, in one place.

A *key* is a sequence of parts (numbers, names, ids) joined by ``/``: ``(study seed, run id)``,
``(server seed, run key, call index, purpose)``. Its digest is SHA-256 of that text, which is
stable across Python versions, platforms and processes (unlike ``hash()``), so the same key
gives the same draw in every process that asks. From a key's digest:

* :func:`unit` — a uniform number in [0, 1) (the first 8 bytes over 2⁶⁴);
* :func:`seed63` — a 63-bit seed (the first 8 bytes, shifted right by one), e.g. a run's
  seed (:func:`derive_seed`) or a NumPy generator's;
* :func:`seed128` — a 128-bit seed (the first 16 bytes) for ``numpy.random.default_rng``.

:func:`text_hex` (:func:`bytes_hex`) is SHA-256 of a text (of bytes), hexadecimal: names and
digests that depend on their content only (a batch's name from its run ids, a pull chunk's
from its task ids, a patch's digest, a chat segment's content address).
"""

from __future__ import annotations

import hashlib


def key_digest(*parts: object) -> bytes:
    """SHA-256 of the parts joined by ``/`` (each part as ``str``)."""
    return hashlib.sha256("/".join(map(str, parts)).encode()).digest()


def key_hex(*parts: object) -> str:
    """:func:`key_digest` in hexadecimal."""
    return key_digest(*parts).hex()


def unit(*parts: object) -> float:
    """A uniform number in [0, 1) for the key ``parts``."""
    return int.from_bytes(key_digest(*parts)[:8], "big") / 2**64


def seed63(*parts: object) -> int:
    """A 63-bit seed for the key ``parts``."""
    return int.from_bytes(key_digest(*parts)[:8], "big") >> 1


def seed128(*parts: object) -> int:
    """A 128-bit seed for the key ``parts`` (``numpy.random.default_rng`` takes it whole)."""
    return int.from_bytes(key_digest(*parts)[:16], "big")


def derive_seed(study_seed: int, run_id: str) -> int:
    """A run's seed: 63 bits of ``sha256("{study_seed}/{run_id}")`` (config/README.md, ``study.seed``)."""
    return seed63(study_seed, run_id)


def bytes_hex(data: bytes) -> str:
    """SHA-256 of ``data``, hexadecimal."""
    return hashlib.sha256(data).hexdigest()


def text_hex(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), hexadecimal."""
    return bytes_hex(text.encode("utf-8"))
