"""Small models committed with refsim (each folder has a README.md with how it was made).

    pydoc_llama/   a two-layer Llama-architecture decoder (hidden 256, 4 heads, MLP 640, vocabulary
                   1024, bfloat16, 2.0 M parameters) trained from scratch on CPU on the built-in
                   calibration text; its own byte-level BPE tokenizer. The decoder of the quality
                   tests (GPTQ/AWQ vs round-to-nearest in held-out perplexity).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["pydoc_llama_path"]


def pydoc_llama_path() -> Path:
    """The folder of the bundled decoder (config.json, model.safetensors, tokenizer.json, ...)."""
    return Path(__file__).parent / "pydoc_llama"
