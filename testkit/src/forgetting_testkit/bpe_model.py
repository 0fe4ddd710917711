"""A model directory for counting tests and benchmarks with no model hub: a byte-level BPE
trained here on a small corpus (``tokenizers``), beside a ChatML ``tokenizer_config.json``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]


def bpe_model_dir(root: Path, corpus: Iterable[str], *, vocab_size: int, chat_template: str | None = None) -> Path:
    """``root`` holding ``tokenizer.json`` (trained on ``corpus``), ``tokenizer_config.json``
    (ChatML's special tokens; ``chat_template`` if given) and an empty ``config.json``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(root / "tokenizer.json"))
    config = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    if chat_template is not None:
        config = {"chat_template": chat_template, **config}
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    (root / "config.json").write_text("{}")
    return root


def code_bpe_dir(root: Path) -> Path:
    """A model directory whose BPE is trained on code-like text (the benchmarks' served model)."""
    corpus = [f"def f_{i}(x):\n    return compute(x, {i})  # cat src/mod_{i}.py && ls -la\n" for i in range(2000)]
    return bpe_model_dir(root, corpus, vocab_size=2000)
