"""A run's prompts as sequences of token *blocks*, read from a call log or a trajectory.

Every prompt of the Qwen3-Coder chat format is the concatenation of one block per message
(:func:`forgetting.prompt.chat_format.prompt_segments`) and the generation prompt
``<|im_start|>assistant\\n``. A run's prompts share almost all their blocks, so each
distinct block is stored once in a :class:`BlockStore` (interned by its token ids, so two
blocks with equal ids are one block even when their messages differ in fields the template
does not render) and a prompt is a tuple of block ids. Nothing is re-tokenized: a call
log's blocks are its segment records; a trajectory's messages are rendered once each.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from forgetting.prompt.usage import NO_USAGE, Usage
from forgetting.records import PartDeletion, run_id_from_path
from forgetting.records.calllog import read_call_log

SourceKind = Literal["calllog", "trajectory"]


class BlockStore:
    """The distinct token blocks of one run, interned by content; ids are dense from 0."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self._index: dict[bytes, int] = {}

    def intern(self, ids: Iterable[int]) -> int:
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int32)
        key = arr.tobytes()
        bid = self._index.get(key)
        if bid is None:
            bid = len(self.arrays)
            arr.setflags(write=False)
            self.arrays.append(arr)
            self._index[key] = bid
        return bid

    def length(self, bid: int) -> int:
        return int(self.arrays[bid].shape[0])

    def tokens(self, blocks: Sequence[int]) -> list[int]:
        """The concatenated token ids of a block sequence (for reference checks and tests)."""
        out: list[int] = []
        for b in blocks:
            out += self.arrays[b].tolist()
        return out

    def __len__(self) -> int:
        return len(self.arrays)


@dataclass
class CallPrompt:
    """One model call: its prompt as block ids (message blocks, then the generation prompt)."""

    call: int  # 1-based
    blocks: tuple[int, ...]
    n_messages: int
    output_tokens: int
    time: float | None = None  # request time (call log) or response time (trajectory), unix s
    finish_reason: str | None = None
    deleted: tuple[PartDeletion, ...] = ()  # the parts the proxy newly rewrote for this call
    usage: Usage = NO_USAGE  # what the server reported for the call (:mod:`forgetting.prompt.usage`)

    @property
    def n_positions(self) -> int:
        """Message positions (blocks before the generation prompt)."""
        return len(self.blocks) - 1

    @property
    def reported_cached(self) -> int | None:
        """The server's count of prompt tokens its cache served; None when it reported none."""
        return self.usage.cached_tokens


@dataclass
class RunPrompts:
    run_id: str
    source: Path
    kind: SourceKind
    store: BlockStore
    calls: list[CallPrompt] = field(default_factory=list)
    #: the line a torn call log was cut at (read with ``allow_torn``): the calls are its prefix
    torn_line: int | None = None
    #: how the prompts were counted: ``served`` (the served model's tokenizer and template, or
    #: the scripted model's own format) or ``approximation`` (Qwen's BPE, Qwen3-Coder's format)
    prompt_count: str = "approximation"
    #: the server's prefix-cache block as the call log recorded it (None: not recorded)
    kv_block_size: int | None = None
    #: calls whose output tokens were counted here with Qwen's BPE, the server reporting none
    output_estimated: int = 0

    def prompt_tokens(self, call: CallPrompt) -> list[int]:
        return self.store.tokens(call.blocks)

    @property
    def has_times(self) -> bool:
        return bool(self.calls) and all(c.time is not None for c in self.calls)


def from_call_log(
    path: str | os.PathLike[str], run_id: str | None = None, *, allow_torn: bool = False
) -> RunPrompts:
    """The prompts of a proxy call log (``calls.jsonl``): its segments' token ids as blocks.

    A torn log is an error (:class:`forgetting.records.calllog.TornCallLog`); ``allow_torn`` prices
    the calls before the torn line and records where it was (``torn_line``)."""
    log = read_call_log(path, allow_torn=allow_torn)
    store = BlockStore()
    by_key: dict[str, int] = {}
    gen = store.intern(log.generation_ids)
    parent = Path(path).resolve().parent
    rid = run_id or str(log.header.get("run_id") or run_id_from_path(parent) or parent.name)
    run = RunPrompts(rid, Path(path), "calllog", store, torn_line=log.torn_line, prompt_count=log.prompt_count,
                     kv_block_size=log.kv_block_size)
    for n, call in enumerate(log.calls, start=1):
        blocks = []
        for key in call.segments:
            bid = by_key.get(key)
            if bid is None:
                bid = by_key[key] = store.intern(log.segments[key].token_ids)
            blocks.append(bid)
        blocks.append(gen)
        response = call.response or {}
        run.output_estimated += not log.output_tokens_reported(call)
        run.calls.append(
            CallPrompt(
                call=n,
                blocks=tuple(blocks),
                n_messages=len(log.messages(call)),
                output_tokens=log.output_tokens(call),
                time=call.t_request,
                finish_reason=response.get("finish_reason"),
                deleted=call.deleted,
                usage=call.usage,
            )
        )
    return run
