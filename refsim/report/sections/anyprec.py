"""Report section: Any-Precision LLM (bitplanes, transposes, seed + upscale, memory, kernel)."""

from __future__ import annotations

import numpy as np

from refsim.formats import anyprec_plan as ak
from refsim.formats import anyprec_memory as mem
from refsim.formats import bit_transpose as bt
from refsim.formats import bitplane as bp
from refsim.quant import upscale as up
from refsim.report import Check
from refsim.testing import assert_bitexact

TITLE = "Any-Precision LLM"
ORDER = 40


def _worked_example() -> str:
    codes = np.zeros((1, 1024), np.uint8)
    codes[0, 0:8] = [3, 14, 4, 14, 6, 0, 13, 9]
    codes[0, 256:264] = [8, 1, 1, 6, 13, 15, 8, 6]
    codes[0, 512:520] = [10, 7, 13, 1, 12, 8, 2, 5]
    codes[0, 768:776] = [10, 5, 9, 9, 3, 6, 7, 12]
    assert_bitexact(bp.pack(codes, 4)[:, 0, 0].view(np.uint32),
                    np.array([0x538EACB1, 0x7A1D6947, 0xD815C28E, 0x836C717A], np.uint32), name="plane words")
    return "p=4 lane-0 words 0x538eacb1 0x7a1d6947 0xd815c28e 0x836c717a (spec §2)"


def _prefixes() -> str:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 256, (8, 1312), dtype=np.uint8)  # tail chunk of 288
    q = bp.pack(codes, 8)
    for b in range(3, 9):
        assert_bitexact(bp.unpack(q[:b]), codes >> (8 - b), name=f"{b}-bit prefix")
    return "unpack(pack(c, 8)[:b]) == c >> (8-b) for b = 3..8, K = 1312"


def _transposes() -> str:
    rng = np.random.default_rng(1)
    for b in bt.TRANSPOSE_BITS:
        q = rng.integers(0, 2**32, (b, 512), dtype=np.uint32)
        ref = bt.codes_reference(q, b)
        assert_bitexact(bt.swar_to_codes(bt.transpose_swar(q, b), b), ref, name=f"{b}-bit SWAR transpose")
        assert_bitexact(bt.transpose_hd8x8(q, b), ref, name=f"{b}-bit HD 8x8 transpose")
    ops = {b: bt.ops_per_32_weights("swar", b) for b in range(3, 9)}
    if ops[4] != 40:
        raise AssertionError(f"4-bit SWAR ops {ops[4]} != 40 (paper)")
    return f"SWAR == HD 8x8 == reference for b=2..8; SWAR ops/32 weights {ops}"


def _quantizer() -> str:
    rng = np.random.default_rng(2)
    W = rng.standard_normal((96, 6)).astype(np.float32)
    G = rng.random((96, 6)).astype(np.float32)
    G[:, 1] = 0
    a = up.seed_and_upscale(W, G, 3, 8, random_state=0)
    b = up.seed_and_upscale_reference(W, G, 3, 8, random_state=0)
    for bits in range(3, 9):
        assert_bitexact(a.luts[bits], b.luts[bits], name=f"lut{bits} (vectorised vs reference)")
    errs = [float(np.sum(G * (W - a.dequantize(bits)) ** 2)) for bits in range(3, 9)]
    return "vectorised == per-channel loops; weighted error 3..8 bits: " + ", ".join(f"{e:.3g}" for e in errs)


def _memory() -> str:
    worst = 0.0
    for row in mem.memory_table():
        anyp, sep, _ = mem.PAPER_TABLE1[row.bits]
        worst = max(worst, abs(row.anyprec_bytes / 1e9 - anyp), abs(row.separate_bytes / 1e9 - sep))
    if worst > 0.1:
        raise AssertionError(f"Table 1 off by {worst:.3f} GB")
    return f"Llama-2-7B Table 1 within {worst:.3f} GB of the paper"


def checks() -> list[Check]:
    return [
        Check("bitplane worked example", _worked_example),
        Check("any-precision prefixes incl. tail chunk", _prefixes),
        Check("bit transposes agree; op counts", _transposes),
        Check("seed + upscale: vectorised vs loops", _quantizer),
        Check("memory Table 1", _memory),
    ]


def markdown(out_dir) -> str:
    lines = ["Table 1 (Llama-2-7B) from the format vs the paper:", "",
             "| bits | any-precision GB (paper) | separate GB (paper) | saving (paper) |", "|---|---|---|---|"]
    for row in mem.memory_table():
        anyp, sep, sav = mem.PAPER_TABLE1[row.bits]
        lines.append(f"| {','.join(map(str, row.bits))} | {row.anyprec_bytes / 1e9:.2f} ({anyp}) | "
                     f"{row.separate_bytes / 1e9:.2f} ({sep}) | {row.saving:.2f} ({sav}) |")
    lines += ["", "Per lane and 32 weights (fused kernel, M = 1 / M = 2):", "",
              "| bits | bitwise ops | lookups | weight bytes per GEMV 4096x4096 |", "|---|---|---|---|"]
    for b in range(3, 9):
        w1, w2 = ak.chunk_work(b, 1), ak.chunk_work(b, 2)
        lines.append(f"| {b} | {w1.bitwise_ops} / {w2.bitwise_ops} | {w1.lookups} / {w2.lookups} | "
                     f"{ak.bytes_read(1, 4096, 4096, b).weights} |")
    return "\n".join(lines)
