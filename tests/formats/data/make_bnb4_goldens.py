"""Make bnb4_goldens.npz: bitsandbytes' own NF4/FP4 quantize_4bit / dequantize_4bit on fixed inputs.

Run by hand, in an environment that has bitsandbytes and torch (never a dependency of refsim; the
tests read only the .npz)::

    pip install torch==2.13.0 bitsandbytes==0.50.2 numpy
    python tests/formats/data/make_bnb4_goldens.py

It runs on the CPU: quantize_4bit is bitsandbytes' "default" torch kernel (bucketize against the
float32 midpoints of the code table), dequantize_4bit its C++ CPU kernel (libbitsandbytes_cpu), and
the double quantization of absmax its C++ CPU 8-bit blockwise kernel. Each case ``<name>`` stores:

    <name>.x           the input (float32 or float16), the shape the library saw
    <name>.packed      uint8 ((n + 1) // 2,)  quantize_4bit's packed codes, flattened
    <name>.absmax      float32 (blocks,)      per-block absmax (no double quantization)
    <name>.qabsmax, <name>.absmax2, <name>.code2, <name>.offset   (double quantization)
    <name>.f32, <name>.f16, <name>.bf16      dequantize_4bit in each dtype (bf16 as uint16 bits)
    <name>.meta        int64 [blocksize, kind (0 nf4, 1 fp4), double_quant]

plus ``nf4_code`` / ``fp4_code`` (get_4bit_type), ``dynamic_map`` (create_dynamic_map()) and
``versions`` (a string).
"""

from __future__ import annotations

from pathlib import Path

import bitsandbytes as bnb
import bitsandbytes.functional as F
import numpy as np
import torch

OUT = Path(__file__).with_name("bnb4_goldens.npz")


def blocks(blocksize: int, seed: int = 0) -> np.ndarray:
    """float32 (B, blocksize): one row per kind of block (the row order is the case's block order)."""
    rng = np.random.default_rng(seed)
    nf4 = F.get_4bit_type("nf4", device="cpu").numpy()
    fp4 = np.sort(F.get_4bit_type("fp4", device="cpu").numpy())
    mids = np.concatenate([(nf4[:-1] + nf4[1:]) / np.float32(2), (fp4[:-1] + fp4[1:]) / np.float32(2)])
    rows = [rng.standard_normal(blocksize) * s for s in (1.0, 1.0, 1.0, 1e-3, 1e4, 0.02)]
    rows.append(np.zeros(blocksize))                                   # a block of zeros
    rows.append(np.full(blocksize, 0.5))                               # constant blocks
    rows.append(np.full(blocksize, -3.0))
    out = rng.standard_normal(blocksize) * 0.01
    out[blocksize // 3] = 300.0                                        # one huge outlier
    rows.append(out)
    rows.append(rng.standard_normal(blocksize) * 1e-39)                # subnormal float32 scale
    tie = np.resize(np.concatenate([mids, -mids]), blocksize)          # exact midpoints, absmax 1
    tie[0] = 1.0
    rows.append(tie)
    tie2 = tie.copy()
    tie2[0] = -1.0                                                     # absmax from a negative value
    rows.append(tie2)
    rows.append(rng.uniform(-1, 1, blocksize))
    return np.stack(rows).astype(np.float32)


def partial_block(kind: str) -> np.ndarray:
    """float32 (1, 64 * 40 + 33): 40 full blocks of normals, then a partial block of 33 values on or one ulp
    beside the code table's midpoints times its absmax 0.37 (the torch kernel divides a partial block by its
    absmax where it multiplies a full one by the reciprocal: one rounding apart, so codes at midpoints differ)."""
    rng = np.random.default_rng(11)
    code = np.sort(F.get_4bit_type(kind, device="cpu").numpy())
    mids = (code[:-1] + code[1:]) / np.float32(2)
    am = np.float32(0.37)
    tail = (rng.choice(mids, 33) * am).astype(np.float32)
    tail[1::3] = np.nextafter(tail[1::3], np.float32(np.inf))
    tail[2::3] = np.nextafter(tail[2::3], np.float32(-np.inf))
    tail[0] = am
    return np.concatenate([rng.standard_normal(64 * 40).astype(np.float32), tail])[None, :]


def run(name: str, x: np.ndarray, kind: str, blocksize: int, double_quant: bool, out: dict) -> None:
    t = torch.from_numpy(x.copy())
    packed, st = F.quantize_4bit(t, blocksize=blocksize, compress_statistics=double_quant, quant_type=kind)
    out[f"{name}.x"] = x
    out[f"{name}.packed"] = packed.numpy().reshape(-1).copy()
    out[f"{name}.meta"] = np.array([blocksize, ("nf4", "fp4").index(kind), int(double_quant)], np.int64)
    if double_quant:
        out[f"{name}.qabsmax"] = st.absmax.numpy().copy()
        out[f"{name}.absmax2"] = st.state2.absmax.numpy().copy()
        out[f"{name}.code2"] = st.state2.code.numpy().copy()
        out[f"{name}.offset"] = np.array(st.offset.item(), np.float32)
    else:
        out[f"{name}.absmax"] = st.absmax.numpy().copy()
    for tag, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        st.dtype = dt
        y = F.dequantize_4bit(packed, st).contiguous()
        bits = y.view(torch.int16).numpy().view(np.uint16) if dt == torch.bfloat16 else y.numpy()
        out[f"{name}.{tag}"] = bits.copy()


def main() -> None:
    out: dict = {}
    rng = np.random.default_rng(7)
    for kind in ("nf4", "fp4"):
        for bs in (32, 64, 128):
            x = blocks(bs, seed=bs)
            run(f"{kind}_b{bs}_f32", x, kind, bs, False, out)
        run(f"{kind}_b64_f16", blocks(64, 1).astype(np.float16), kind, 64, False, out)
        run(f"{kind}_b4096", (rng.standard_normal((1, 4096)) * 0.05).astype(np.float32), kind, 4096, False, out)
        run(f"{kind}_odd", (rng.standard_normal((3, 45))).astype(np.float32), kind, 64, False, out)  # partial, odd
        # double quantization: 300 blocks of 32 -> nested blocks of 256 and 44 absmax values
        dq = (rng.standard_normal((300, 32)) * rng.uniform(0.001, 2.0, (300, 1))).astype(np.float32)
        dq[5] = 0.0                                                     # a zero block among them
        run(f"{kind}_dq", dq, kind, 32, True, out)
        run(f"{kind}_dq_mixed", np.tile(blocks(64, 3), (2, 1)), kind, 64, True, out)
        run(f"{kind}_dq_one_block", blocks(64, 4)[:1], kind, 64, True, out)  # absmax - mean == 0
        run(f"{kind}_partial", partial_block(kind), kind, 64, False, out)
    out["nf4_code"] = F.get_4bit_type("nf4", device="cpu").numpy()
    out["fp4_code"] = F.get_4bit_type("fp4", device="cpu").numpy()
    out["dynamic_map"] = F.create_dynamic_map().numpy()
    out["versions"] = np.array(f"bitsandbytes {bnb.__version__}; torch {torch.__version__}; numpy {np.__version__}; "
                               f"quantize_4bit: default (torch) kernel on CPU; dequantize: C++ CPU kernel")
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(out)} arrays)")


if __name__ == "__main__":
    main()
