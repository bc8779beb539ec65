"""Make gguf_goldens.npz: the ``gguf`` package's own quantize/dequantize of ggml's block types.

Run by hand, in an environment that has the gguf package (pure Python + NumPy; never a dependency of
refsim; the tests read only the .npz)::

    pip install gguf==0.19.0 numpy
    python tests/formats/data/make_gguf_goldens.py

For each type ``T`` (its ggml name):

    x        float32 (98, 64)  the input of the types that gguf quantizes (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 BF16)
    T.raw    uint8 (rows, cols / block_size * type_size)   gguf.quants.quantize(x, T), or for the types
             gguf only dequantizes (Q2_K..Q6_K, IQ4_NL, IQ4_XS) random block bytes whose fp16 scales
             are set to chosen values (normal, subnormal, zero, large, negative)
    T.y      float32 (rows, cols)  gguf.quants.dequantize(raw, T)

plus ``versions``.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

OUT = Path(__file__).with_name("gguf_goldens.npz")
QUANTIZED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "F16", "BF16")
DEQUANT_ONLY = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")
# byte offsets of the fp16 scales in each block (d first, then dmin where the type has one)
HALF_FIELDS = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
               "IQ4_NL": (0,), "IQ4_XS": (0,)}


def blocks32(seed: int) -> np.ndarray:
    """float32 (98, 64): rows of block kinds; each row holds two 32-blocks."""
    rng = np.random.default_rng(seed)
    rows = [rng.standard_normal(64) * s for s in (1.0, 1.0, 1.0, 1e-3, 1e3, 0.02)]
    rows.append(np.zeros(64))
    rows.append(np.full(64, 0.5))
    rows.append(np.full(64, -3.0))
    out = rng.standard_normal(64) * 0.01
    out[5], out[40] = 300.0, -250.0
    rows.append(out)
    rows.append(rng.standard_normal(64) * 1e-6)               # d lands in fp16 subnormals
    rows.append(rng.standard_normal(64) * 1e-9)               # d underflows fp16 to 0
    rows.append(rng.standard_normal(64) * 1e5)                # d overflows fp16 (Q8_0: 1e5/127 fits; Q4_0 too)
    rows.append(np.abs(rng.standard_normal(64)))              # all positive (min > 0 for Q4_1/Q5_1)
    rows.append(-np.abs(rng.standard_normal(64)))
    ties = (np.arange(64) - 32).astype(np.float64) / 8.0      # exact multiples of d: x*id + 8.5 on halves
    rows.append(ties)
    rows.append(rng.uniform(-1, 1, 64))
    rows.append(np.round(rng.standard_normal(64) * 4) / 4)
    for s in 10.0 ** rng.uniform(-4, 4, 80):                 # 160 more blocks at scales 1e-4 .. 1e4
        rows.append(rng.standard_normal(64) * s)
    return np.stack(rows).astype(np.float32)


def raw_blocks(name: str, n_blocks: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    block, size = gguf.GGML_QUANT_SIZES[Q[name]]
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    halves = np.array([1.0, 0.5, -0.25, 2.0 ** -20, 6.1e-5, 0.0, 1000.0, 3.0e-3, -1.5e-2, 65504.0], np.float16)
    for i in range(n_blocks):
        for j, off in enumerate(HALF_FIELDS[name]):
            h = halves[(i + 3 * j) % len(halves)] if i < 40 else np.float16(rng.standard_normal() * 0.01)
            raw[i, off:off + 2] = np.frombuffer(np.float16(h).tobytes(), np.uint8)
    return raw


def main() -> None:
    out: dict = {}
    x = blocks32(0)
    out["x"] = x
    for name in QUANTIZED:
        raw = quantize(x, Q[name])
        out[f"{name}.raw"] = np.asarray(raw).view(np.uint8).reshape(x.shape[0], -1)
        out[f"{name}.y"] = dequantize(out[f"{name}.raw"], Q[name])
    for i, name in enumerate(DEQUANT_ONLY):
        block, size = gguf.GGML_QUANT_SIZES[Q[name]]
        per_row = max(1, 256 // block)                         # rows of 256 values
        raw = raw_blocks(name, 48 * per_row if block == 32 else 48, seed=100 + i).reshape(-1, per_row * size)
        out[f"{name}.raw"] = raw
        out[f"{name}.y"] = dequantize(raw, Q[name])
    out["versions"] = np.array(f"gguf {metadata.version('gguf')}; "
                               f"numpy {np.__version__}")
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(out)} arrays)")


if __name__ == "__main__":
    main()
