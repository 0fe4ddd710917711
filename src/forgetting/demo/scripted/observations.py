"""Reading tool outputs the way the model sees them: possibly deleted, possibly in fragments.

mini-swe-agent renders an observation as ``<returncode>N</returncode>`` followed by
``<output>…</output>`` (or, for long output, ``<output_head>``/``<output_tail>`` around an
elided middle). After the deletion proxy an observation may be a short placeholder
(turn-level deletion) or the same text with a share of its tokens removed (token-level
deletion). Trae agent's tool results are plain text (``plain``): the output, then any
standard error after ``Tool call failed with error:``; its editor's ``view`` is a header line
and the file's lines numbered as by ``cat -n``. Nothing here knows which configuration is
active: the model judges only by what is in front of it.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from forgetting.demo.scripted.knowledge import words

_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
#: what a reader still recognises as the return code in a damaged observation
_RC_LOOSE = re.compile(r"returncode>?\s*(-?\d+)")
_FAILED = re.compile(r"\b(?:failed|FAILED|FAIL|Error|Traceback|expected the old text|found it \d+ times)\b")
_PASSED = re.compile(r"\b\d+ passed\b")
_OUTPUT = re.compile(r"<output>\n?(.*)</output>", re.DOTALL)
_HEAD = re.compile(r"<output_head>\n?(.*?)\n?</output_head>", re.DOTALL)
_TAIL = re.compile(r"<output_tail>\n?(.*?)\n?</output_tail>", re.DOTALL)
_INTACT = re.compile(
    r"\s*(?:<exception>.*?</exception>\s*)?<returncode>-?\d+</returncode>\s*"
    r"(?:<output>\n.*</output>|<warning>.*?</warning>\s*<output_head>\n.*</output_head>\s*"
    r"<elided_chars>\n\d+ characters elided\n</elided_chars>\s*<output_tail>\n.*</output_tail>)\s*",
    re.DOTALL,
)
_LINE_NUMBER = re.compile(r"^ *\d+\t", re.MULTILINE)
_BARE_LAST_NUMBER = re.compile(r"\n *\d+\Z")
_NUMBERED = re.compile(r" *(\d+)(?:\t|$)")  # a last, empty line loses its tab to Trae's strip()
#: the header line of Trae's editor ``view`` (and of its edit's snippet)
_VIEW_HEADER = re.compile(r"Here's the result of running `cat -n` on [^\n]*:")
#: Trae's editor: an applied edit, and a refused one
_EDITED = re.compile(r"The file \S+ has been edited\. ")
_NOT_EDITED = "No replacement was performed"


def returncode(observation: str | None) -> int | None:
    """The command's return code, when it is still recognisable."""
    if not observation:
        return None
    m = _RC.search(observation) or _RC_LOOSE.search(observation)
    return int(m.group(1)) if m else None


def outcome(observation: str | None) -> bool | None:
    """Whether the command visibly succeeded (``True``), visibly failed (``False``), or the
    evidence is gone (``None``): the return code when legible, else the wording of the
    output (a failing test run, a traceback, an edit that found no match)."""
    rc = returncode(observation)
    if rc is not None:
        return rc == 0
    text = observation or ""
    if _NOT_EDITED in text:
        return False
    if _EDITED.match(text):
        return True
    if _FAILED.search(text):
        return False
    if _PASSED.search(text):
        return True
    return None


def is_intact(observation: str | None, plain: bool = False) -> bool:
    """Whether the observation still has mini-swe-agent's complete structure; for ``plain``
    results (Trae) whether it is a complete numbered listing (the editor's ``view`` or
    ``nl -ba``: every line numbered, the numbers consecutive) — of other plain output
    nothing shows whether it is whole."""
    if not observation:
        return False
    if not plain:
        return _INTACT.fullmatch(observation) is not None
    lines = observation.split("\n")
    if _VIEW_HEADER.fullmatch(lines[0]):
        lines = lines[1:]
    if lines and lines[-1] == "":
        lines = lines[:-1]
    numbers = [m.group(1) if (m := _NUMBERED.match(line)) else None for line in lines]
    if not numbers or None in numbers:
        return False
    first = int(numbers[0] or 0)
    return all(int(n or 0) == first + k for k, n in enumerate(numbers))


def was_truncated(observation: str | None) -> bool:
    return bool(observation) and "<output_head>" in observation


def body(observation: str | None) -> str:
    """The command output inside the observation (head and tail of a long one); the whole
    text when the structure is gone."""
    if not observation:
        return ""
    head, tail = _HEAD.search(observation), _TAIL.search(observation)
    if head or tail:
        return (head.group(1) if head else "") + "\n" + (tail.group(1) if tail else "")
    m = _OUTPUT.search(observation)
    return m.group(1) if m else observation


def file_text(observation: str | None, numbered: bool) -> str:
    """What a read shows of the file: its output with any line-number prefixes (and the
    header line of Trae's editor ``view``) removed."""
    text = body(observation)
    if (m := _VIEW_HEADER.match(text)) and text[m.end() : m.end() + 1] == "\n":
        # the view's last line, empty in a file that ends with a newline, lost its tab to strip()
        text = _BARE_LAST_NUMBER.sub("\n", text[m.end() + 1 :])
    return _LINE_NUMBER.sub("", text) if numbered else text


def word_share(needle: str, text: str) -> float:
    """The share of ``needle``'s words (with multiplicity) that ``text`` still holds."""
    wanted = words(needle)
    if not wanted:
        return 0.0
    have: dict[str, int] = {}
    for w in words(text):
        have[w] = have.get(w, 0) + 1
    hit = 0
    for w in wanted:
        if have.get(w, 0) > 0:
            have[w] -= 1
            hit += 1
    return hit / len(wanted)


def first_line(text: str, limit: int = 100) -> str:
    """The first non-blank line of ``text``, stripped and shortened for quoting."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def last_line(text: str, limit: int = 100) -> str:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _window(text: str, old: str) -> str | None:
    """The stretch of ``text`` around where ``old`` would be (with some margin), found by
    an intact line of ``old`` or, failing that, by the longest common substring."""
    anchor = -1
    offset = 0
    for line in old.splitlines(keepends=True):
        probe = line.strip()
        if len(probe) >= 8:
            anchor = text.find(probe)
            if anchor >= 0:
                offset = old.find(probe)
                break
    if anchor < 0:
        m = SequenceMatcher(None, text, old, autojunk=False).find_longest_match(0, len(text), 0, len(old))
        if m.size < 6:
            return None
        anchor, offset = m.a, m.b
    lo = max(0, anchor - offset - 200)
    hi = min(len(text), anchor + (len(old) - offset) + 200)
    return text[lo:hi]


def _blocks(window: str, old: str) -> list[tuple[int, int, int]]:
    return [
        (b.a, b.b, b.size)
        for b in SequenceMatcher(None, window, old, autojunk=False).get_matching_blocks()
        if b.size >= 3
    ]


def fragment_guess(text: str, old: str) -> str | None:
    """What an agent would copy as ``old`` from a garbled view ``text`` of the file: the
    stretch of ``text`` aligned with ``old`` (same extent), gaps and all. ``None`` when
    nothing of ``old`` is recognisable."""
    window = _window(text, old)
    if window is None:
        return None
    blocks = _blocks(window, old)
    if not blocks:
        return None
    (fa, fb, _), (la, lb, ls) = blocks[0], blocks[-1]
    start = max(0, fa - fb)
    end = min(len(window), la + ls + (len(old) - lb - ls))
    return window[start:end] or None


def covered(old: str, views: list[str]) -> list[bool]:
    """Which characters of ``old`` at least one of the (fragmentary) ``views`` shows in
    place: piecing several partial views together can recover the whole text."""
    mask = [False] * len(old)
    for text in views:
        window = _window(text, old)
        if window is None:
            continue
        for _, b, size in _blocks(window, old):
            for k in range(b, b + size):
                mask[k] = True
        if all(mask):
            break
    return mask
