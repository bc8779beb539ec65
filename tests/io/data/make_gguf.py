"""Write tests/io/data/tiny.gguf and tiny_gguf_dequantized.npz with the gguf package (run by hand; CI reads the files).

    pip install gguf==0.19.0 numpy
    python tests/io/data/make_gguf.py

tiny.gguf: a llama-named file of five tensors: blk.0.attn_q.weight Q4_0 [64, 4] and blk.0.ffn_down.weight
Q8_0 [64, 2] (quantized by gguf.quants.quantize from seeded normal values), blk.0.attn_k.weight Q4_K
[256, 2] and blk.0.ffn_up.weight Q6_K [256, 1] (seeded random bytes with finite fp16 super-block scales:
the package has no k-quant quantizer), blk.0.attn_v.weight F16 [32, 2], and blk.0.attn_norm.weight F32
[64] (unquantized: not a layer). tiny_gguf_dequantized.npz: gguf.quants.dequantize of each quantized
tensor (float32, torch (N, K) orientation) and the versions.

more_types.gguf and more_types_gguf_dequantized.npz: the same for the types added later, one tensor each:
blk.0.attn_q.weight TQ1_0 [256, 2], blk.0.attn_k.weight TQ2_0 [256, 1], blk.0.attn_v.weight MXFP4 [64, 2]
(quantized by the package), blk.0.attn_output.weight NVFP4 [128, 1], blk.0.ffn_up.weight IQ2_XS [256, 1],
blk.0.ffn_gate.weight IQ3_S [256, 1], blk.0.ffn_down.weight IQ1_M [256, 1] (seeded random bytes whose
scales are finite: the package quantizes none of these).
"""

from __future__ import annotations

import platform
from importlib.metadata import version
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

HERE = Path(__file__).parent


def _kquant_bytes(rng, qtype: T, rows: int, cols: int) -> np.ndarray:
    """Random bytes of a k-quant tensor whose fp16 super-block scales (d, and dmin for Q4_K) are finite."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    scale = rng.uniform(0.001, 0.05, raw.shape[:2] + (2,)).astype(np.float16).view(np.uint8)
    if qtype == T.Q4_K:                        # d, dmin: the first 4 bytes of block_q4_K
        raw[..., 0:4] = scale.reshape(raw.shape[:2] + (4,))
    else:                                      # Q6_K: d is the last 2 bytes
        raw[..., size - 2:] = scale.reshape(raw.shape[:2] + (4,))[..., :2]
    return raw.reshape(rows, cols // block * size)


def _dequant_only_bytes(rng, qtype: T, rows: int, cols: int) -> np.ndarray:
    """Random bytes of an NVFP4 / IQ tensor whose scales are finite (fp16 d at bytes 0..1; IQ1_M's d in the top
    nibbles of its last 8 bytes; NVFP4's UE4M3 bytes kept below 0x7F)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
    d = rng.uniform(0.001, 0.05, raw.shape[0]).astype(np.float16).view(np.uint16)
    if qtype == T.NVFP4:
        raw[:, 0:4] = rng.integers(0x20, 0x60, (raw.shape[0], 4), dtype=np.uint8)
    elif qtype == T.IQ1_M:
        w = raw[:, size - 8:].copy().view("<u2") & np.uint16(0x0FFF)
        w |= ((d[:, None] >> np.array([0, 4, 8, 12], np.uint16)) & 15).astype(np.uint16) << 12
        raw[:, size - 8:] = w.view(np.uint8)
    else:
        raw[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, cols // block * size)


def write_more_types() -> None:
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(str(HERE / "more_types.gguf"), "llama")
    tensors = {
        "blk.0.attn_q.weight": (quants.quantize(rng.standard_normal((2, 256)).astype(np.float32), T.TQ1_0), T.TQ1_0),
        "blk.0.attn_k.weight": (quants.quantize(rng.standard_normal((1, 256)).astype(np.float32), T.TQ2_0), T.TQ2_0),
        "blk.0.attn_v.weight": (quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), T.MXFP4), T.MXFP4),
        "blk.0.attn_output.weight": (_dequant_only_bytes(rng, T.NVFP4, 1, 128), T.NVFP4),
        "blk.0.ffn_up.weight": (_dequant_only_bytes(rng, T.IQ2_XS, 1, 256), T.IQ2_XS),
        "blk.0.ffn_gate.weight": (_dequant_only_bytes(rng, T.IQ3_S, 1, 256), T.IQ3_S),
        "blk.0.ffn_down.weight": (_dequant_only_bytes(rng, T.IQ1_M, 1, 256), T.IQ1_M),
    }
    for name, (data, qtype) in tensors.items():
        w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = {name: quants.dequantize(data, qtype) for name, (data, qtype) in tensors.items()}
    out["versions"] = np.array(f"gguf {version('gguf')}, numpy {np.__version__}, "
                               f"Python {platform.python_version()}")
    np.savez(HERE / "more_types_gguf_dequantized.npz", **out)


def main() -> None:
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(HERE / "tiny.gguf"), "llama")
    tensors = {
        "blk.0.attn_q.weight": (quants.quantize(rng.standard_normal((4, 64)).astype(np.float32), T.Q4_0), T.Q4_0),
        "blk.0.ffn_down.weight": (quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), T.Q8_0), T.Q8_0),
        "blk.0.attn_k.weight": (_kquant_bytes(rng, T.Q4_K, 2, 256), T.Q4_K),
        "blk.0.ffn_up.weight": (_kquant_bytes(rng, T.Q6_K, 1, 256), T.Q6_K),
        "blk.0.attn_v.weight": (rng.standard_normal((2, 32)).astype(np.float16), None),
    }
    for name, (data, qtype) in tensors.items():
        w.add_tensor(name, data, raw_dtype=qtype)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = {name: (quants.dequantize(data, qtype) if qtype is not None else data.astype(np.float32))
           for name, (data, qtype) in tensors.items()}
    out["versions"] = np.array(f"gguf {version('gguf')}, numpy {np.__version__}, "
                               f"Python {platform.python_version()}")
    np.savez(HERE / "tiny_gguf_dequantized.npz", **out)


if __name__ == "__main__":
    main()
    write_more_types()
