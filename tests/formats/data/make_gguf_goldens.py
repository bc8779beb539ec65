"""Make gguf_goldens.npz: the ``gguf`` package's own quantize/dequantize of ggml's block types.

Run by hand, in an environment that has the gguf package (pure Python + NumPy; never a dependency of
refsim; the tests read only the .npz)::

    pip install gguf==0.19.0 numpy
    python tests/formats/data/make_gguf_goldens.py

For each type ``T`` (its ggml name):

    x        float32 (98, 64)  the input of the types that gguf quantizes (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 BF16)
    T.x      float32 (rows, cols)  the input of TQ1_0 TQ2_0 (rows of 256) and MXFP4 (x plus edge blocks)
    T.raw    uint8 (rows, cols / block_size * type_size)   gguf.quants.quantize(x or T.x, T), or for the
             types gguf only dequantizes (Q2_K..Q6_K, IQ4_NL, IQ4_XS, NVFP4, the IQ lattice types) random
             block bytes whose scales are set to chosen values (fp16: normal, subnormal, zero, large,
             negative, inf, NaN for the newer types; NVFP4's UE4M3 bytes: 0x00 0x7F 0xFF 0x80 0x7E ...)
    T.y      float32 (rows, cols)  gguf.quants.dequantize(raw, T)
    T.any.raw, T.any.y   for the quantized types TQ1_0 TQ2_0 MXFP4: random bytes (scales set as above;
             MXFP4's E8M0 byte 0, 1, 2, 127, 128, 253, 254, 255) and their dequantization

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
# the types added later (each with its own seed, so the arrays above stay as they were)
DEQUANT_ONLY_NEW = ("NVFP4", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")
QUANTIZED_NEW = ("TQ1_0", "TQ2_0", "MXFP4")
# byte offsets of the fp16 scales in each block (d first, then dmin where the type has one)
HALF_FIELDS = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
               "IQ4_NL": (0,), "IQ4_XS": (0,), "TQ1_0": (52,), "TQ2_0": (64,), "IQ2_XXS": (0,), "IQ2_XS": (0,),
               "IQ2_S": (0,), "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,), "IQ1_M": ()}


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
        for j, off in enumerate(HALF_FIELDS[name]):  # IQ1_M has no d field: edge_halves_new sets its d
            h = halves[(i + 3 * j) % len(halves)] if i < 40 else np.float16(rng.standard_normal() * 0.01)
            raw[i, off:off + 2] = np.frombuffer(np.float16(h).tobytes(), np.uint8)
    return raw


def edge_halves_new(raw: np.ndarray, name: str) -> np.ndarray:
    """The newer types' first blocks: d = +-inf, NaN, fp16 max, the smallest subnormal; IQ1_M's d (the top
    nibbles of its 4 scale words at bytes 48..55) set the same way; NVFP4 and MXFP4 scale bytes at their edges."""
    special = np.array([0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0x0001, 0x8000, 0x3C00], np.uint16)
    if name == "NVFP4":
        codes = np.array([0x00, 0x7F, 0xFF, 0x80, 0x7E, 0x01, 0x08, 0x38, 0xF8, 0x07], np.uint8)
        for i in range(len(codes)):
            raw[i, 0:4] = np.roll(codes, i)[:4]
        return raw
    if name == "MXFP4":
        raw[:8, 0] = [0, 1, 2, 127, 128, 253, 254, 255]
        return raw
    for i, h in enumerate(special):
        if name == "IQ1_M":
            w = raw[i, 48:56].copy().view("<u2") & np.uint16(0x0FFF)
            w |= (np.uint16(h) >> np.array([0, 4, 8, 12], np.uint16) << 12).astype(np.uint16)  # nibble k -> word k
            raw[i, 48:56] = w.view(np.uint8)
        else:
            off = HALF_FIELDS[name][0]
            raw[i, off:off + 2] = np.frombuffer(h.tobytes(), np.uint8)
    return raw


def edge_blocks_mxfp4(seed: int) -> np.ndarray:
    """float32 (8, 64): MXFP4's edge blocks: amax in float32 subnormals (e wraps), amax just below 2^100
    (float32 log2 rounds up to 100), float32 max, values on the midpoints of the scaled kvalues, +-0."""
    rng = np.random.default_rng(seed)
    rows = [rng.standard_normal(64) * 1e-39, rng.standard_normal(64) * 1e-44,
            np.full(64, np.float32(2.0 ** 100) * np.float32(1 - 2.0 ** -24)),
            np.concatenate([np.full(32, np.finfo(np.float32).max), -np.full(32, np.finfo(np.float32).max)]),
            np.tile(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0,
                              6.0, -6.0]), 4),
            np.where(np.arange(64) % 2 == 0, 0.0, -0.0), rng.standard_normal(64) * 1e30,
            rng.standard_normal(64) * 1e-30]
    return np.stack(rows).astype(np.float32)


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
    kinds = blocks32(1)                                        # (98, 64): each of the first 20 kinds 4 times
    x256 = np.concatenate([np.tile(kinds[:20], (1, 4)), kinds[20:92].reshape(-1, 256)])  # (38, 256)
    for i, name in enumerate(QUANTIZED_NEW):
        xq = x256 if name != "MXFP4" else np.concatenate([x, edge_blocks_mxfp4(7)])
        out[f"{name}.x"] = xq
        raw = quantize(xq, Q[name])
        out[f"{name}.raw"] = np.asarray(raw).view(np.uint8).reshape(xq.shape[0], -1)
        out[f"{name}.y"] = dequantize(out[f"{name}.raw"], Q[name])
        block, size = gguf.GGML_QUANT_SIZES[Q[name]]
        n = 24 * max(1, 256 // block)
        rng = np.random.default_rng(300 + i)
        anyraw = rng.integers(0, 256, (n, size), dtype=np.uint8)
        for j, off in enumerate(HALF_FIELDS.get(name, ())):
            anyraw[10:, off:off + 2] = np.frombuffer(
                (rng.standard_normal(n - 10) * 0.01).astype(np.float16).tobytes(), np.uint8).reshape(-1, 2)
        anyraw = edge_halves_new(anyraw, name).reshape(-1, max(1, 256 // block) * size)
        out[f"{name}.any.raw"] = anyraw
        out[f"{name}.any.y"] = dequantize(anyraw, Q[name])
    for i, name in enumerate(DEQUANT_ONLY_NEW):
        block, size = gguf.GGML_QUANT_SIZES[Q[name]]
        per_row = max(1, 256 // block)
        n = 48 * per_row if block < 256 else 48
        if name == "NVFP4":
            raw = np.random.default_rng(200 + i).integers(0, 256, (n, size), dtype=np.uint8)
        else:
            raw = raw_blocks(name, n, seed=200 + i)
        raw = edge_halves_new(raw, name).reshape(-1, per_row * size)
        out[f"{name}.raw"] = raw
        with np.errstate(all="ignore"):
            out[f"{name}.y"] = dequantize(raw, Q[name])
    out["versions"] = np.array(f"gguf {metadata.version('gguf')}; "
                               f"numpy {np.__version__}")
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(out)} arrays)")


if __name__ == "__main__":
    main()
