"""Write tests/io/data/tiny.gguf and tiny_gguf_dequantized.npz with the gguf package (run by hand; CI reads the files).

    pip install gguf==0.19.0 numpy
    python tests/io/data/make_gguf.py

tiny.gguf: a llama-named file of five tensors: blk.0.attn_q.weight Q4_0 [64, 4] and blk.0.ffn_down.weight
Q8_0 [64, 2] (quantized by gguf.quants.quantize from seeded normal values), blk.0.attn_k.weight Q4_K
[256, 2] and blk.0.ffn_up.weight Q6_K [256, 1] (seeded random bytes with finite fp16 super-block scales:
the package has no k-quant quantizer), blk.0.attn_v.weight F16 [32, 2], and blk.0.attn_norm.weight F32
[64] (unquantized: not a layer). tiny_gguf_dequantized.npz: gguf.quants.dequantize of each quantized
tensor (float32, torch (N, K) orientation) and the versions.
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
