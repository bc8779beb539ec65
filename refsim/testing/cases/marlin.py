"""Marlin FP16 x INT4 GEMM cases: ``kernel(A f16 (M,K), B i32 (K/16,2N), s f16 (G,N)) -> C f16 (M,N)``.

Legality: :func:`refsim.formats.stripes.marlin_tile_config` (the host code's ERR_PROB_SHAPE /
ERR_KERN_SHAPE checks: N % thread_n, K % thread_k, a compiled kernel for every launch of the host
M loop), ``refsim.formats.marlin.check_kn`` (K % 128, N % 128: the kernel's smallest tile),
group size 128 or per-channel (the only compiled ``group_blocks``).

Regimes are computed from the stripe plan for the check's SM count, including "partition differs
from sms=X" for the SM counts of common GPUs: a kernel planned for another GPU fails on a pinned
case. Probes cancel +X and -X at chosen places of the kernel next to a tiny or medium term::

    X = 2^14, weight 7s (code 15): X*w exact in fp16
    t = 2^-10: lost next to X*w in fp32        u = 2^-1: survives fp32, lost in an fp16 carry
    inside one mma: +X -X t t at k 0..3        across k-warps: at k 0, 16, 32, 48
    across slices:  +X t in k-tile 0, -X u in the last k-tile
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from refsim.emulator import marlin_kernel as mk
from refsim.errors import RefsimError
from refsim.formats import marlin, stripes
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, int4_weights, keep_columns, values

#: SM counts of the GPUs people run Marlin on, and small grids (a plan made for another GPU)
SM_COUNTS = (1, 2, 4, 8, 16, 20, 28, 30, 34, 40, 46, 56, 58, 60, 64, 66, 68, 72, 76, 80, 82, 84, 92,
             98, 100, 104, 108, 114, 120, 128, 132, 142, 144, 170)

_X, _T, _U = 2.0**14, 2.0**-10, 2.0**-1    # big; tiny (lost next to X w in fp32); medium (lost in an fp16 carry)

_POOL_MKN = [(1, 128, 128), (1, 256, 256), (16, 256, 256), (17, 128, 256), (1, 1024, 1024), (1, 2048, 2048),
             (1, 768, 1536), (2, 2048, 1024), (8, 3072, 1024), (32, 512, 512), (48, 256, 768), (64, 512, 512),
             (80, 256, 512), (128, 256, 256), (200, 128, 256), (256, 256, 256), (1, 4096, 2048), (16, 1024, 2048),
             (1, 4096, 4096), (64, 2048, 512), (200, 1024, 256), (256, 1024, 512)]


@lru_cache(maxsize=8192)
def _iters(m, n, k, gs, sms):
    return tuple(la.iters for la in stripes.stripes(m, n, k, sms, gs).launches)


def _plan_key(case, sms):
    plan = stripes.stripes(case["m"], case["n"], case["k"], sms, case["group_size"])
    return tuple(tuple(tuple((s.k_tile_start, s.k_tile_count, s.slice_idx) for s in b) for b in la.blocks if b)
                 for la in plan.launches)


def _swap_nibbles(B):
    u = B.view(np.uint32)
    return (((u & np.uint32(0x0F0F0F0F)) << np.uint32(4)) | ((u >> np.uint32(4)) & np.uint32(0x0F0F0F0F))).view(np.int32)


def _cancellation(inputs, group_size, terms):
    """Marlin inputs that amplify an order or precision difference into a large output one.

    ``terms``: (k, activation, code) triples; every column of A is zero except those k, B holds the
    given code at those k rows (code 15: weight 7s, code 9: weight s), every group with group 0's
    scales (see the module docstring for X, t, u)."""
    A, B, s = inputs
    q, scales = marlin.unpack(B, s)
    q = q.copy()
    scales = np.repeat(scales[:1], scales.shape[0], axis=0)
    Ap = np.zeros_like(A)
    for k, a, code in terms:
        Ap[:, k] = a
        q[k] = code
    return (Ap,) + marlin.pack(q, scales, group_size)


class MarlinCases(Format):
    name = "marlin"
    signature = "kernel(A f16 (M,K), B i32 (K/16,2N), s f16 (G,N)) -> C f16 (M,N)"
    inputs = ("A", "B", "s")
    fields = {"m": (1, 2, 8, 16, 17, 32, 48, 64, 80, 128, 200, 256),
              "k": (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 11008),
              "n": (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 11008),
              "group_size": (128, None), "kind": DATA_KINDS, "seed": None}
    shape_fields = ("m", "k", "n", "group_size")
    default_max_size = 1 << 25
    pinned_pool = tuple({"m": m, "k": k, "n": n, "group_size": g} for m, k, n in _POOL_MKN for g in (128, None))
    hints = (("slices in the column's reduction", 1,
              "the global reduction across slices (columns a single block computes match)"),)

    def legal(self, case):
        gs = case["group_size"]
        if gs is not None and case["k"] % gs:
            raise RefsimError(f"group_size: must divide K={case['k']}; got {gs}")
        marlin.check_kn(case["k"], case["n"])                     # the packed layout: K % 128, N % 128
        stripes.marlin_tile_config(case["m"], case["n"], case["k"], gs)

    def cost(self, case):
        return case["m"] * case["k"] * case["n"]

    def regimes(self, case, sms):
        m, n, k, gs = case["m"], case["n"], case["k"], case["group_size"]
        plan = stripes.stripes(m, n, k, sms, gs)
        cfg = plan.config
        out = {f"tile k{cfg.thread_k} x n{cfg.thread_n}, {'per-channel' if gs is None else 'group 128'}"}
        if len(plan.launches) > 1:
            out.add("several host launches (M split)")
        if m % 16:
            out.add("partial m-block (M % 16 != 0)")
        for la in plan.launches:
            out.add(f"{la.thread_m_blocks} m-block(s) per problem")
            if la.parallel > 1:
                out.add("parallel 64-row problems in one launch")
            counts = [s.slice_count for stripe in la.blocks for s in stripe]
            out.add("several slices per column" if max(counts) > 1 else "one slice per column")
            if any(len(stripe) > 1 for stripe in la.blocks):
                out.add("a stripe crossing columns")
            per = [i for i in la.iterations_per_block if i]
            if per[-1] < la.iters:
                out.add("partial last stripe")
            out.add("idle SMs" if la.idle_sms else "every SM busy")
        out |= {f"plan branch {b}" for b in stripes.plan_branches(m, n, k, sms, gs)}
        own = _iters(m, n, k, gs, sms)
        out |= {f"partition differs from sms={x}" for x in SM_COUNTS if x != sms and _iters(m, n, k, gs, x) != own}
        return out

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        B, s = marlin.pack(*int4_weights(rng, case["k"], case["n"], case["group_size"]), case["group_size"])
        A = values(rng, case["kind"], (case["m"], case["k"])).astype(np.float16)
        return A, B, s

    def emulate(self, inputs, arch, sms):
        return mk.marlin_gemm(*inputs, arch=arch, sms=sms)

    def locate(self, case, inputs, idx, arch, sms):
        return str(mk.provenance(case["m"], case["n"], case["k"], idx[0], idx[1], group_size=case["group_size"],
                                 sms=sms))

    def structure(self, case, inputs, shape, sms):
        m, n = shape
        plan = stripes.stripes(case["m"], case["n"], case["k"], sms, case["group_size"])
        cfg = plan.config
        rows, cols = np.indices(shape)
        slices = np.zeros(shape, np.int64)
        for la in plan.launches:
            for p in range(la.parallel):
                r = mk._problem_rows(la, p, m)
                per_tile = np.array([len(la.reduction_order(p, nt)) for nt in range(la.n_tiles)], np.int64)
                slices[r.start:r.stop] = np.repeat(per_tile, cfg.thread_n)[None, :]
        within = cols % cfg.thread_n
        return {
            "slices in the column's reduction": slices,
            "n-tile": cols // cfg.thread_n,
            "n-warp": within // 64,
            "16-column sub-tile": (within % 64) // 16,
            "lane": 4 * (rows % 8) + (cols % 8) // 2,
            "register": 2 * ((rows % 16) // 8) + cols % 2,
            "m-block (16 rows)": rows // 16,
            "column mod 8": cols % 8,
            "column mod 16": cols % 16,
            "column mod 64": cols % 64,
        }

    def probes(self, case, inputs):
        A, B, s = inputs
        k, gs = case["k"], case["group_size"]
        cfg = stripes.marlin_tile_config(case["m"], case["n"], k, gs)
        tk, wk = cfg.thread_k, cfg.warps_k
        kk = np.arange(k)
        out = [
            Probe("k 0..15 only (one mma per column: no k-warp, slice or global reduction)",
                  (keep_columns(A, kk < 16), B, s),
                  "the tensor-core arithmetic inside one mma.m16n8k16 (accumulation model, operands, dequantized "
                  "weights)"),
            Probe("cancellation inside one mma (+X, -X, t, t at k 0..3)",
                  _cancellation(inputs, gs, [(0, _X, 15), (1, -_X, 15), (2, _T, 9), (3, _T, 9)]),
                  "the accumulation inside one mma: the tensor core aligns the products to the largest one and "
                  "truncates (T-FDPA), an fp32 FMA chain does not"),
            Probe(f"k 0..{16 * wk - 1} only (one mma per k-warp, then thread_block_reduce)",
                  (keep_columns(A, kk < 16 * wk), B, s),
                  f"thread_block_reduce: how the {wk} k-warps' fp32 partials are added (association, precision)"),
        ]
        if wk == 4:
            out.append(Probe("cancellation across k-warps (+X, -X, t, t in k-warps 0..3)",
                             _cancellation(inputs, gs, [(0, _X, 15), (16, -_X, 15), (32, _T, 9), (48, _T, 9)]),
                             "thread_block_reduce's association: the kernel adds the k-warps as a0 + (a1 + (a3 + "
                             "a2)) in fp32"))
        out.append(Probe(f"k-tile 0 only (k 0..{tk - 1}: the k-warps' mma chains, one slice)",
                         (keep_columns(A, kk < tk), B, s),
                         "the k-warps' mma chains over the k16 blocks of a tile (which blocks, in which order)"))
        if k > tk:
            out.append(Probe(f"cancellation across slices (+X, t in k-tile 0; -X, u in the last k-tile {k // tk - 1})",
                             _cancellation(inputs, gs, [(0, _X, 15), (16, _T, 9), (k - tk, -_X, 15),
                                                        (k - tk + 16, _U, 9)]),
                             "the global reduction: a column's slices are carried through C in fp16, bottom (last "
                             "k-tiles) first; an fp32 carry or another slice order changes the bits"))
        if gs is not None:
            for g in range(k // gs):
                out.append(Probe(f"group {g} only (k {128 * g}..{128 * g + 127})",
                                 (keep_columns(A, (kk >= 128 * g) & (kk < 128 * (g + 1))), B, s),
                                 f"the weights or scale of quantization group {g}", family="quantization group"))
        return out

    def known_bugs(self, case, inputs, arch, sms):
        """The few layout classes first, then the partitions of the other SM counts (nearest first)."""
        yield ("nibble order", "the two nibbles of every byte of B swapped (low/high nibble read in the wrong order)",
               lambda inp: mk.marlin_gemm(inp[0], _swap_nibbles(inp[1]), inp[2], arch=arch, sms=sms))
        G = inputs[2].shape[0]
        for g, src in [(g, g - 1) for g in range(1, G)] + [(g, g + 1) for g in range(G - 1)]:
            def alt(inp, g=g, src=src):
                s2 = inp[2].copy()
                s2[g] = inp[2][src]
                return mk.marlin_gemm(inp[0], inp[1], s2, arch=arch, sms=sms)
            yield ("scale of a group", f"group {g}'s scales taken from group {src}", alt)
        own = _plan_key(case, sms)
        by_plan: dict = {}
        for other in SM_COUNTS[1:]:       # not sms=1: one block per column looks like an fp32 global reduction
            by_plan.setdefault(_plan_key(case, other), []).append(other)
        groups = sorted((counts for key, counts in by_plan.items() if key != own),
                        key=lambda counts: min(abs(x - sms) for x in counts))
        for counts in groups:
            names = f"sms={counts[0]}" if len(counts) == 1 else f"sms in {counts} (one partition on this case)"
            yield ("partition", f"the stripe partition of {names} instead of sms={sms} (grid or plan made for "
                                "another SM count)",
                   lambda inp, o=counts[-1]: mk.marlin_gemm(*inp, arch=arch, sms=o))

    def linear(self, case, inputs):
        """``C = A @ ((q - 8) s)``: grouped weights are dequantized to fp16 (one rounding each);
        per-channel the sum is rounded to fp16 and then multiplied by the fp16 scale (two roundings)."""
        A, B, s = inputs
        q, scales = marlin.unpack(B, s)
        gs = case["group_size"]
        g_of_k = np.zeros(case["k"], np.int64) if gs is None else np.arange(case["k"]) // gs
        w = (q.astype(np.float64) - 8.0) * scales.astype(np.float64)[g_of_k]
        return Linear(A.astype(np.float64), w, terms=case["k"], pre=0 if gs is None else 1,
                      post=2 if gs is None else 1)
