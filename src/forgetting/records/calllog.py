"""The proxy's call log: one JSON record per line, appended as the run goes (``calls.jsonl``).

Record types, in the order they are written:

``header``   once, first: format version, run id, deletion configuration, seed, tokenizer,
             chat format, upstream; ``prompt_count`` (how the prompts were counted:
             ``method`` ``served`` — the served model's own tokenizer and chat template,
             :mod:`forgetting.prompt.served_format`, its generation prompt's ids recorded — or
             ``approximation`` — Qwen3-Coder's format with Qwen's BPE for a server whose
             tokenizer is not at hand; absent in older logs: the approximation) and
             ``server`` (what the model server said of its prefix cache: ``kv_block_size``,
             where it was read; absent when it says nothing).
``segment``  once per distinct prompt block (content-addressed, see
             :func:`forgetting.prompt.chat_format.segment_key`): the message exactly as sent after
             deletion, its token count and token ids. Written before the first call that
             uses it, so repeated messages are stored once.
``call``     one per model call: ``index`` (1-based among successful calls; failed calls
             have ``ok: false`` and no index), request and response times, the prompt as a
             list of segment keys, request parameters, ``deleted`` (the parts *newly*
             rewritten for this call — a rewritten part stays rewritten in every later call —
             as :class:`forgetting.records.PartDeletion` records, written and parsed
             by that one class),
             the response (content, reasoning, tool calls, finish reason), the upstream
             ``usage`` exactly as the server reported it (read back as a typed
             :class:`forgetting.prompt.usage.Usage`: prompt, completion, cached and cache-write
             tokens in any common API's field names), status, error.

A line is flushed as soon as it is written, so a killed proxy loses at most the call in
flight; a torn last line is detected on read: :func:`read_call_log` raises
:class:`TornCallLog` (naming the file and the line), unless the caller asks for the readable
prefix with ``allow_torn=True`` — then :attr:`CallLog.torn_line` says where the tail was cut.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import orjson

from forgetting.foundation.errors import RunOutputError
from forgetting.foundation.seeds import text_hex
from forgetting.prompt import chat_format
from forgetting.prompt.served_format import ServedFormat
from forgetting.prompt.usage import Usage, parse_usage
from forgetting.records import PartDeletion
from forgetting.records.calllog_fields import check_call, check_header, check_segment

FORMAT = "forgetting-calllog/1"
FILENAME = "calls.jsonl"


_ABSENT = object()  # a field missing from a message (distinct from None)
#: the context of a message keyed alone (one object: the keys memo compares them at every call)
_PLAIN_CONTEXT = chat_format.SegmentContext()
_KEYED = ("role", "content", "reasoning_content", "tool_calls")  # the memo's fast fields


def _memo_json(value: Any) -> bytes | str:
    """An exact text of a JSON value, for the segment-key memo (not itself a key)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return chat_format.canonical_json(value)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class PreparedPrompt:
    """A call's prompt ready to log (:meth:`CallLogWriter.prepare`)."""

    keys: list[str]
    tools_id: str | None
    #: segment key → its record, for the segments not logged when it was prepared
    new: dict[str, dict[str, Any]]


class CallLogWriter:
    """Appends records to a run's call log; thread-safe; one writer per file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: Mapping[str, Any],
        *,
        fsync: bool = False,
        created: float | None = None,
        served: ServedFormat | None = None,
    ) -> None:
        """``created`` (unix seconds) is the header's creation time; default now. A
        generator of synthetic logs passes its own clock so that its output is reproducible.
        ``served``: count prompts with the served model's own format, else with
        :mod:`forgetting.prompt.chat_format`."""
        self.path = Path(path)
        self._served = served
        self._block_keys: dict[tuple[str, str], str] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._keys: dict[tuple[Any, ...], str] = {}
        self._prev: tuple[list[dict[str, Any]], list[chat_format.SegmentContext], list[str]] = ([], [], [])
        self._n_calls = 0
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists:  # resume appending to a log (a proxy restarted within one run)
            log = read_call_log(self.path, allow_torn=True)
            self._seen = set(log.segments)
            self._n_calls = len(log.calls)
            if log.torn:
                _truncate_torn_tail(self.path)
        self._fh: TextIO = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        if not exists:
            stamp = time.time() if created is None else created
            self._write({"type": "header", "format": FORMAT, "created": stamp, **header})

    def _write(self, record: Mapping[str, Any]) -> None:
        try:
            self._fh.write(_dumps(record) + "\n")
        except UnicodeEncodeError:  # a lone surrogate: JSON can write it escaped, UTF-8 cannot
            self._fh.write(json.dumps(record, ensure_ascii=True, separators=(",", ":"), sort_keys=True) + "\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())

    def prepare(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> PreparedPrompt:
        """A call's prompt made ready to log: its segment keys, and the records of the segments
        not logged yet, token ids and all. The proxy prepares a request's prompt *before* it
        forwards the request, so whatever fails on it fails before the call is served."""
        if self._served is not None:
            return self._prepare_served(self._served, messages, tools)
        plan = chat_format.segment_plan(messages, tools)
        with self._lock:
            keys = self._segment_keys(plan)
            new: dict[str, dict[str, Any]] = {}
            for key, (m, c, i) in zip(keys, plan, strict=True):
                if key not in self._seen and key not in new:
                    ids = chat_format.segment_ids(m, c, tools if c.tools_id else None)
                    msg = dict(m) if i is not None else {**m, "implicit": True}
                    record = {"type": "segment", "key": key, "message": msg, "n_tokens": len(ids)}
                    new[key] = {**record, "token_ids": ids}
        return PreparedPrompt(keys, chat_format.tools_id(tools), new)

    def _prepare_served(
        self, fmt: ServedFormat, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> PreparedPrompt:
        """:meth:`prepare` with the served model's blocks: a block that renders one message is
        keyed by the message and its text (two tool results of equal text stay two messages),
        one the template added (``implicit``) or one of several messages by its text alone."""
        blocks = fmt.blocks(messages, tools)
        extra = len(blocks) - len(messages)
        aligned = extra in (0, 1) and [b.role for b in blocks[extra:]] == [m.get("role") for m in messages]
        with self._lock:
            if aligned:
                message_keys = self._segment_keys([(m, _PLAIN_CONTEXT, i) for i, m in enumerate(messages)])
            keys: list[str] = []
            new: dict[str, dict[str, Any]] = {}
            for j, block in enumerate(blocks):
                i = j - extra if aligned else -1
                owner = message_keys[i] if i >= 0 else ("implicit" if aligned else "rendered")
                memo = (owner, block.text)
                key = self._block_keys.get(memo)
                if key is None:
                    key = self._block_keys[memo] = text_hex(owner + "\0" + block.text)[:20]
                keys.append(key)
                if key in self._seen or key in new:
                    continue
                ids = fmt.ids(block.text)
                if i >= 0:
                    msg: dict[str, Any] = dict(messages[i])
                else:
                    msg = {"role": block.role or "system", "content": block.text, owner: True}
                new[key] = {"type": "segment", "key": key, "message": msg, "n_tokens": len(ids), "token_ids": ids}
        return PreparedPrompt(keys, chat_format.tools_id(tools), new)

    def append_call(
        self,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        prompt: PreparedPrompt | None = None,
        params: Mapping[str, Any],
        deleted: Sequence[PartDeletion],
        response: Mapping[str, Any] | None,
        usage: Mapping[str, Any] | None,
        t_request: float,
        t_response: float,
        status: int = 200,
        error: str | None = None,
        attempts: int = 1,
        extra: Mapping[str, Any] | None = None,
    ) -> int | None:
        """Log one call (its prompt's new segments first); return its index (None if failed).
        The prompt is ``prompt`` (:meth:`prepare`), else ``messages`` and ``tools``."""
        if prompt is None:
            prompt = self.prepare(messages or [], tools)
        keys = prompt.keys
        ok = status == 200 and error is None
        with self._lock:
            for key, segment in prompt.new.items():
                if key not in self._seen:
                    self._write(segment)
                    self._seen.add(key)
            index = None
            if ok:
                self._n_calls += 1
                index = self._n_calls
            record: dict[str, Any] = {
                "type": "call",
                "index": index,
                "ok": ok,
                "t_request": t_request,
                "t_response": t_response,
                "latency_ms": round((t_response - t_request) * 1000.0, 3),
                "segments": keys,
                "tools": prompt.tools_id,
                "params": dict(params),
                "deleted": [d.to_json() for d in deleted],
                "response": dict(response) if response is not None else None,
                "usage": dict(usage) if usage is not None else None,
                "status": status,
                "error": error,
                "attempts": attempts,
            }
            if extra:
                record["extra"] = dict(extra)
            self._write(record)
            return index

    def _segment_keys(
        self, plan: list[tuple[Mapping[str, Any], chat_format.SegmentContext, int | None]]
    ) -> list[str]:
        """The segment keys of a prompt. A history grows by appending, so usually the previous
        call's blocks are a prefix of this one's: one C-level comparison of the two lists
        reuses their keys; other blocks go through the memo."""
        messages = [m for m, _, _ in plan]
        ctxs = [c for _, c, _ in plan]
        prev_messages, prev_ctxs, prev_keys = self._prev
        n = len(prev_messages)
        if n and len(plan) >= n and ctxs[:n] == prev_ctxs and messages[:n] == prev_messages:
            keys = prev_keys[:]
            copies = prev_messages[:]  # equal to this call's head, and this writer's own
        else:  # some earlier message changed (the proxy rewrote a turn): compare one by one
            n, keys, copies = min(n, len(plan)), [], []
            for j in range(n):
                same = (ctxs[j] is prev_ctxs[j] or ctxs[j] == prev_ctxs[j]) and messages[j] == prev_messages[j]
                keys.append(prev_keys[j] if same else self._segment_key(messages[j], ctxs[j]))
                copies.append(prev_messages[j] if same else dict(messages[j]))
        keys += [self._segment_key(m, c) for m, c in zip(messages[n:], ctxs[n:], strict=True)]
        # shallow copies: a caller that reassigns a message's field in place is still seen
        self._prev = (copies + [dict(m) for m in messages[n:]], ctxs, keys)
        return keys

    def _segment_key(self, message: Mapping[str, Any], ctx: chat_format.SegmentContext) -> str:
        """:func:`chat_format.segment_key`, memoized: a long history repeats the same messages at
        every call, and hashing their text (done once per string object) is far cheaper than
        serializing it again."""
        fields = []
        for name in _KEYED:
            value = message.get(name, _ABSENT)
            if not (value is None or value is _ABSENT or isinstance(value, str)):
                value = ("json", _memo_json(value))  # tagged: never equal to a text
            fields.append(value)
        # every other key counts too (tool_call_id, name, …): the key addresses the exact message
        rest = tuple(
            sorted(
                (k, v if isinstance(v, str) else ("json", _memo_json(v)))
                for k, v in message.items()
                if k not in _KEYED
            )
        )
        memo = (*fields, rest, ctx)
        key = self._keys.get(memo)
        if key is None:
            key = self._keys[memo] = chat_format.segment_key(message, ctx)
        return key

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> CallLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _truncate_torn_tail(path: Path) -> None:
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    with open(path, "r+b") as fh:
        fh.truncate(cut)


class TornCallLog(RunOutputError):
    """A call log whose last line was cut by a kill: everything from ``line`` on is missing."""

    def __init__(self, path: Path, line: int, calls: int) -> None:
        self.path, self.line, self.calls = path, line, calls
        super().__init__(
            f"{path}: line {line} is torn (the proxy was killed mid-write); the call log is truncated "
            f"({calls} calls readable before it)"
        )


@dataclass
class SegmentRecord:
    key: str
    message: dict[str, Any]
    token_ids: list[int]


@dataclass
class CallRecord:
    index: int
    t_request: float
    t_response: float
    segments: list[str]
    params: dict[str, Any]
    deleted: tuple[PartDeletion, ...]
    response: dict[str, Any]
    usage: Usage  # parsed once here; ``usage.raw`` is the object as the server reported it
    attempts: int = 1


@dataclass
class CallLog:
    path: Path
    header: dict[str, Any]
    segments: dict[str, SegmentRecord]
    calls: list[CallRecord]
    failed: list[dict[str, Any]] = field(default_factory=list)
    #: the line the tail was torn at (read with ``allow_torn``); None for a whole log
    torn_line: int | None = None

    @property
    def torn(self) -> bool:
        return self.torn_line is not None

    @property
    def prompt_count(self) -> str:
        """How the proxy counted the prompts: ``served`` (the served model's own tokenizer and
        template) or ``approximation`` (Qwen3-Coder's format, Qwen's BPE; logs before the
        header said so are that)."""
        found = self.header.get("prompt_count")
        return str(found["method"]) if isinstance(found, Mapping) else "approximation"

    @property
    def generation_ids(self) -> list[int]:
        """The generation prompt's ids: as the header records them (a served model's), else
        Qwen3-Coder's."""
        found = self.header.get("prompt_count")
        if isinstance(found, Mapping) and found.get("generation_prompt_ids") is not None:
            return list(found["generation_prompt_ids"])
        return chat_format.generation_prompt_ids()

    @property
    def kv_block_size(self) -> int | None:
        """The server's prefix-cache block in tokens, as the header records it (None: not read)."""
        server = self.header.get("server")
        size = server.get("kv_block_size") if isinstance(server, Mapping) else None
        return size if type(size) is int else None

    def prompt_ids(self, call: CallRecord) -> list[int]:
        """The exact prompt token ids of a call (generation prompt included)."""
        ids: list[int] = []
        for key in call.segments:
            ids += self.segments[key].token_ids
        return ids + self.generation_ids

    def messages(self, call: CallRecord) -> list[dict[str, Any]]:
        """The messages of a call as sent (the implicit tools system block left out)."""
        return [self.segments[k].message for k in call.segments if not self.segments[k].message.get("implicit")]

    def output_tokens_reported(self, call: CallRecord) -> bool:
        """Whether the server reported the call's output tokens (else :meth:`output_tokens`
        counts them with Qwen's BPE: an approximation)."""
        return call.usage.completion_tokens is not None

    def output_tokens(self, call: CallRecord) -> int:
        """Output tokens: from upstream usage when reported, else tokenized (Qwen's BPE)."""
        if call.usage.completion_tokens is not None:
            return call.usage.completion_tokens
        msg = {"role": "assistant", **(call.response or {})}
        return len(chat_format.completion_token_ids(msg))


def _loads(line: bytes) -> Any:
    """One JSON record: orjson (fast on the long token-id lists), the standard parser for what
    orjson refuses but JSON allows (integers beyond 64 bits, NaN)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _deleted(rec: Mapping[str, Any], where: str) -> tuple[PartDeletion, ...]:
    entries = rec.get("deleted")
    if not isinstance(entries, list):
        raise RunOutputError(f"{where}: 'deleted' is not a list of deletion records")
    return tuple(PartDeletion.from_json(d, f"{where}: deleted[{k}]") for k, d in enumerate(entries))


#: the last log read, by (path, size, mtime, allow_torn): the analysis of a run reads its log
#: twice (behaviour and cost); a changed file has another key, so it is read again
_LAST: list[tuple[tuple[Any, ...], CallLog]] = []


def read_call_log(path: str | os.PathLike[str], *, allow_torn: bool = False) -> CallLog:
    """Load a call log. A torn *last* line (a proxy killed mid-write: cut short, or its
    newline missing) is a :class:`TornCallLog` error; with ``allow_torn`` it is dropped and
    its number kept in ``torn_line``. Any other bad line is an error.

    Reading the same unchanged file again returns the same (read-only) :class:`CallLog`."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        st = None
    if st is None or not p.is_file():
        raise RunOutputError(f"{p}: call log not found")
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, allow_torn)
    if _LAST and _LAST[0][0] == key:
        return _LAST[0][1]
    log = _read_call_log(p, allow_torn)
    _LAST[:] = [(key, log)]
    return log


def _read_call_log(p: Path, allow_torn: bool) -> CallLog:
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    complete_end = raw.endswith(b"\n")
    if complete_end:
        lines = lines[:-1]
    header: dict[str, Any] | None = None
    segments: dict[str, SegmentRecord] = {}
    calls: list[CallRecord] = []
    failed: list[dict[str, Any]] = []
    torn_line: int | None = None
    for n, line in enumerate(lines, start=1):
        last = n == len(lines)
        try:
            rec = _loads(line)
            if not isinstance(rec, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            if last and not complete_end:
                if not allow_torn:
                    raise TornCallLog(p, n, len(calls)) from None
                torn_line = n
                break
            raise RunOutputError(f"{p}: line {n} is not a JSON record; the call log is corrupt") from None
        if last and not complete_end:
            # parsed, but the newline is missing: the writer was interrupted inside the line;
            # dropped like any torn tail (a resumed writer cuts it off, so it is never a call)
            if not allow_torn:
                raise TornCallLog(p, n, len(calls))
            torn_line = n
            break
        kind = rec.get("type")
        if not isinstance(rec.get("ok", True), bool):
            raise RunOutputError(
                f"{p}: line {n}: 'ok' is {rec['ok']!r}, expected true or false; the call log is corrupt"
            )
        if kind == "header":
            if rec.get("format") != FORMAT:
                raise RunOutputError(f"{p}: unknown call-log format {rec.get('format')!r} (expected {FORMAT})")
            check_header(rec, p, n)
            header = rec
        elif kind == "segment":
            key, message, token_ids = check_segment(rec, p, n)
            segments[key] = SegmentRecord(key, message, token_ids)
        elif kind == "call":
            if rec.get("ok", True) is not True:
                failed.append(rec)
                continue
            c = check_call(rec, p, n)
            missing = [k for k in c.segments if k not in segments]
            if missing:
                raise RunOutputError(f"{p}: line {n}: call refers to unknown segment {missing[0]}")
            where = f"{p}: line {n} (call {rec.get('index')})"
            calls.append(
                CallRecord(
                    index=c.index,
                    t_request=c.t_request,
                    t_response=c.t_response,
                    segments=c.segments,
                    params=c.params,
                    deleted=_deleted(rec, where),
                    response=c.response,
                    usage=parse_usage(c.usage, where),
                    attempts=c.attempts,
                )
            )
        else:
            raise RunOutputError(f"{p}: line {n}: unknown record type {kind!r}")
    if header is None:
        raise RunOutputError(f"{p}: no header record; not a call log")
    return CallLog(p, header, segments, calls, failed, torn_line)
