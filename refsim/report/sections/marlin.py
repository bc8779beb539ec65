"""Report section: Marlin format (layout, dequant bit trick, swizzle, stripes, 2:4)."""

from __future__ import annotations

import time

import numpy as np

from refsim.formats import dequant_tricks, marlin, sparse_marlin, stripes, swizzle
from refsim.report import Check
from refsim.testing import assert_bitexact

TITLE = "Marlin (FP16 x INT4)"
ORDER = 30

# SM counts for the partition table: A10, A100, RTX 4090, Orin, H100 SXM
_GPUS = (("A10", 72), ("A100", 108), ("RTX 4090", 128), ("Orin", 16), ("H100", 132))


def _roundtrip() -> str:
    rng = np.random.default_rng(0)
    for k, n, gs in [(128, 256, None), (128, 256, 128), (512, 512, 128)]:
        q = rng.integers(0, 16, (k, n), dtype=np.uint8)
        scales = (rng.random((1 if gs is None else k // gs, n)) + 0.1).astype(np.float16)
        b, s = marlin.pack(q, scales, gs)
        q2, s2 = marlin.unpack(b, s)
        assert_bitexact(q2, q, name=f"codes, K={k} N={n} group={gs}")
        assert_bitexact(s2, scales, name=f"scales, K={k} N={n} group={gs}")
    return "unpack(pack(q, s)) == (q, s) for 128x256 (per-channel, g128 corner) and 512x512 g128"


def _conformance() -> str:
    # reference-notes worked example: B[0,5] nibbles (LSB first) 9,7,10,8,11,7,10,12
    q = np.zeros((128, 256), np.uint8)
    for (r, c), v in zip([(2, 16), (10, 16), (2, 24), (10, 24), (3, 16), (11, 16), (3, 24), (11, 24)],
                         [9, 7, 10, 8, 11, 7, 10, 12]):
        q[r, c] = v
    b, _ = marlin.pack(q, np.ones((1, 256), np.float16), None)
    assert_bitexact(b.view(np.uint32)[0, 5:6], np.array([0xCA7B8A79], np.uint32), name="B[0,5]")
    perm = marlin.weight_perm()
    assert_bitexact(perm[:8], np.array([0, 128, 8, 136, 16, 144, 24, 152], perm.dtype), name="perm[:8]")
    return "B[0,5] = 0xca7b8a79; perm[:8] = 0,128,8,136,16,144,24,152 (official _get_perms)"


def _dequant() -> str:
    x = np.arange(1 << 16, dtype=np.uint32)
    q = x | (((x * np.uint32(40503)) & np.uint32(0xFFFF)) << np.uint32(16))
    lo, hi = dequant_tricks.halves(dequant_tricks.marlin_dequant(q))
    ref = dequant_tricks.int4_word_reference(q)
    assert_bitexact(lo, ref[:, 0::2], name="lop3/0x6400 dequant, low halves vs q - 8")
    assert_bitexact(hi, ref[:, 1::2], name="lop3/0x6400 dequant, high halves vs q - 8")
    return "lop3 0xEA + sub 0x6408 / fma 0x2C00,0xD480: exact on all 65536 half-word patterns"


def _swizzle() -> str:
    worst = 0
    for tk in (64, 128):
        for warp in range(8):
            worst = max(worst, swizzle.bank_wavefronts(swizzle.marlin_a_read_addresses(tk, warp), 16))
    plain = swizzle.bank_wavefronts(swizzle.marlin_a_read_addresses(64, 0, swizzled=False), 16)
    if worst != 4:
        raise AssertionError(f"swizzled ldmatrix.x4 needs {worst} wavefronts, expected 4")
    return f"A ldmatrix.x4: 4 wavefronts swizzled, {plain} unswizzled"


def _stripes() -> str:
    for _, sms in _GPUS:
        for m in (1, 64):
            for launch in stripes.stripes(m, 4096, 4096, sms, 128).launches:
                tiles = sorted((s.col_par, kt) for st in launch.blocks for s in st for kt in s.k_tiles)
                if tiles != [(c, kt) for c in range(launch.n_tiles * launch.parallel) for kt in range(launch.k_tiles)]:
                    raise AssertionError(f"coverage broken for M={m}, sms={sms}")
    return "each tile exactly once for M in {1, 64}, 4096x4096, on 16/72/108/128/132 SMs"


def _sparse() -> str:
    rng = np.random.default_rng(2)
    q = rng.integers(1, 16, (256, 256), dtype=np.uint8)
    b, meta, s = sparse_marlin.pack(q, np.ones((2, 256), np.float16), 128)
    q2, keep, _ = sparse_marlin.unpack(b, meta, s)
    assert_bitexact(keep, sparse_marlin.mask_2_4(q), name="2:4 mask from the metadata")
    return "2:4 pack/unpack: metadata reproduces the magnitude mask on 256x256"


def _bench() -> str:
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, (4096, 4096), dtype=np.uint8)
    scales = np.ones((32, 4096), np.float16)
    t0 = time.perf_counter()
    marlin.pack(q, scales, 128)
    dt = time.perf_counter() - t0
    return f"pack 4096x4096 g128: {dt:.3f} s"


def checks() -> list[Check]:
    return [
        Check("pack/unpack round trips", _roundtrip),
        Check("conformance words (official _get_perms / Layer.pack)", _conformance),
        Check("INT4->FP16 bit trick exact", _dequant),
        Check("A-tile swizzle conflict-free", _swizzle),
        Check("striped partition coverage", _stripes),
        Check("Sparse-Marlin 2:4 metadata", _sparse),
        Check("pack speed", _bench),
    ]


def markdown(out_dir) -> str:
    lines = ["Marlin stripes for M = 1 (tile 128x128) and M = 64 (tile 64x256), K = N = 4096, group 128:", "",
             "| GPU | SMs | M | iters | busy blocks | idle SMs | global reduction steps |",
             "|---|---|---|---|---|---|---|"]
    for name, sms in _GPUS:
        for m in (1, 64):
            (launch,) = stripes.stripes(m, 4096, 4096, sms, 128).launches
            lines.append(f"| {name} | {sms} | {m} | {launch.iters} | {launch.busy_blocks} | {launch.idle_sms} | "
                         f"{launch.global_reduction_steps} |")
    return "\n".join(lines)
