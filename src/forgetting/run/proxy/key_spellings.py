"""The spellings an API key may come back in, each replaced wherever a reply repeats it.

A provider that echoes the key it was sent (a wrong key in its error message, a debug field)
may write it as it was sent, or as a JSON string escapes it (``\\/``, ``\\uXXXX`` — a JSON body
inside a JSON body escapes it again), URL-encoded (a link back to a console, a query string),
or in base64 (an ``Authorization: Basic`` echo, a token that wraps it). Base64 of a key inside a
longer text depends on where the key starts modulo 3, so each of the three alignments is
matched by the run of base64 characters that only the key decides (the characters it shares
with its neighbours are left: they hold a few bits of the key at most). :func:`spellings`
lists them all (longest first); :func:`redact` replaces each.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

#: below this many characters a key's base64 core is too short to match without false alarms
MIN_BASE64_KEY = 8


def _json_forms(text: str) -> set[str]:
    """``text`` as JSON strings write it: as is, with ``/`` escaped, every character as \\uXXXX."""
    plain = json.dumps(text)[1:-1]
    forms = {plain, plain.replace("/", "\\/")}
    for case in ("x", "X"):
        forms.add("".join(f"\\u{ord(c):04{case}}" for c in text))
    return forms


def _url_forms(text: str) -> set[str]:
    forms = {quote(text, safe=""), quote(text), quote_plus(text)}
    return forms | {_lower_escapes(f) for f in forms}


def _lower_escapes(text: str) -> str:
    """``%2F`` → ``%2f``: the same URL encoding, with lower-case hex digits."""
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def _base64_cores(data: bytes) -> set[str]:
    """The base64 text only ``data`` decides, at each of its three alignments, in the standard
    and the URL-safe alphabet."""
    cores: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode("ascii")
        # the first character that holds no bit of the prefix, the last that holds none of what follows
        start = -(-shift * 8 // 6)
        end = (shift + len(data)) * 8 // 6
        core = encoded[start:end]
        if core:
            cores |= {core, core.translate(str.maketrans("+/", "-_"))}
    return cores


def spellings(key: str) -> list[bytes]:
    """Every spelling of ``key`` to replace, as bytes, longest first (a longer one holds a shorter)."""
    forms: set[str] = {key}
    forms |= _json_forms(key)
    forms |= {json.dumps(f)[1:-1] for f in list(forms)}  # a JSON string inside a JSON string
    forms |= _url_forms(key)
    if len(key) >= MIN_BASE64_KEY:
        forms |= _base64_cores(key.encode("utf-8"))  # every alignment: the key anywhere inside a longer text
    return sorted({f.encode("utf-8") for f in forms if f}, key=lambda b: (-len(b), b))


def redact(data: bytes, forms: list[bytes], replacement: bytes) -> bytes:
    """``data`` with every one of ``forms`` replaced."""
    for form in forms:
        if form in data:
            data = data.replace(form, replacement)
    return data


def redact_text(text: str, forms: list[bytes], replacement: str) -> str:
    for form in forms:
        spelled = form.decode("utf-8")
        if spelled in text:
            text = text.replace(spelled, replacement)
    return text
