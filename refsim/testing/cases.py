"""The formats :func:`refsim.testing.harness.check_kernel` knows: legal cases, inputs, structure.

Each format is one :class:`Format` value: the case space as data (the legal values of every field,
simplest first), the kernel's legality rule (the same function refsim's emulator enforces, never
a copy), the regimes a case exercises (so the pinned cases cover all of them), how to build the
inputs of a case, the emulator, and the diagnosis hooks (structure labels of every output
element, input probes that switch parts of the kernel off, and known bug classes replayed on the
emulator). docs/harness.md lists every rule and regime and how to add a format.

A case is a plain dict of Python scalars, e.g. ``{'m': 1, 'k': 2048, 'n': 2048, 'group_size': 128,
'kind': 'normal', 'seed': 7}``; ``make(case)`` rebuilds the same inputs from it on any machine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from refsim.arith import fragments as fr
from refsim.emulator import marlin_kernel as mk
from refsim.arith import tensor_core as tc
from refsim._validate import require_choice, require_instance, require_shape_arg
from refsim.errors import FormatRuleError, NonFiniteError, RefsimError
from refsim.formats import marlin, stripes

__all__ = ["Format", "FORMATS", "DATA_KINDS", "values"]

#: data kinds, simplest first (the shrinker walks toward the front)
DATA_KINDS = ("zeros", "ones", "small_integers", "normal", "wide_exponents")


def values(rng: np.random.Generator, kind: str, shape, scale: float = 1.0) -> np.ndarray:
    """float64 array of ``shape`` for a data kind (zeros, ones, small integers in [-3, 3], standard
    normal times ``scale``, or normal with exponents spread over 2^-14 .. 2^7).

    ``rng`` a ``numpy.random.Generator``; ``kind`` one of :data:`DATA_KINDS`; ``shape`` an int or a
    tuple of ints (element count at most 2**31 - 1); ``scale`` a finite real number."""
    require_instance("rng", rng, np.random.Generator)
    kind = require_choice("kind", kind, DATA_KINDS)
    shape = require_shape_arg("shape", shape)
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise FormatRuleError(f"scale: must be a real number; got {type(scale).__name__}")
    if not np.isfinite(scale):
        raise NonFiniteError(f"scale: must be finite; got {scale!r}")
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "ones":
        return np.ones(shape)
    if kind == "small_integers":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "normal":
        return rng.standard_normal(shape) * scale
    return rng.standard_normal(shape) * 2.0 ** rng.integers(-14, 8, shape)  # wide_exponents


@dataclass(frozen=True)
class Probe:
    """One diagnostic re-run: the inputs with part of the kernel switched off (zeros elsewhere)."""

    name: str          # what stays active, e.g. "k 0..15 only (one mma, no reductions)"
    inputs: tuple
    meaning: str       # what a mismatch that survives this probe points at
    family: str | None = None   # probes of one family (e.g. each quantization group alone) are read
                                # together: only a strict subset differing points at those members


@dataclass(frozen=True)
class Format:
    """Everything the harness needs about one kernel format (see the module docstring)."""

    name: str
    signature: str                                  # the kernel's call, for messages and docs
    n_inputs: int
    fields: dict                                    # field -> legal values, simplest first (seed: None)
    shape_fields: tuple                             # fields ``shapes=`` fixes (the rest are drawn)
    legal: Callable                                 # case -> None, or raises RefsimError (kernel rule)
    cost: Callable                                  # case -> multiply-adds (``max_size`` unit)
    default_max_size: int
    regimes: Callable                               # (case, sms) -> set of regime names
    make: Callable                                  # case -> tuple of input arrays
    emulate: Callable                               # (inputs, arch, sms) -> expected output
    locate: Callable                                # (case, inputs, idx, arch, sms) -> str
    structure: Callable                             # (case, inputs, shape, sms) -> {label: int array}
    probes: Callable = lambda case, inputs: []      # (case, inputs) -> [Probe]
    known_bugs: Callable = lambda case, inputs, arch, sms: []  # -> [(bug class, description, alt(inputs))]
    pinned_pool: tuple = field(default=())          # candidate shapes for the pinned cases
    pinned_kind: str = "normal"                     # data kind of the pinned cases (one that rounds)
    hints: tuple = ()                               # (label, value, meaning): outputs with that label
                                                    # value never differ, others do -> meaning


# ----------------------------------------------------------------------------------------------
# marlin
#
# legality: refsim.formats.stripes.marlin_tile_config (the host code's ERR_PROB_SHAPE /
# ERR_KERN_SHAPE checks: N % thread_n, K % thread_k, a compiled kernel for every launch),
# group_size 128 or None (the only compiled group_blocks), K % 128 when grouped.

_MARLIN_M = (1, 2, 8, 16, 17, 32, 48, 64, 80, 128, 200, 256)
_MARLIN_K = (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 11008)
_MARLIN_N = (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 11008)


def _marlin_legal(case):
    gs = case["group_size"]
    if gs is not None and case["k"] % gs:
        raise RefsimError(f"group_size: must divide K={case['k']}; got {gs}")
    marlin._check_kn(case["k"], case["n"])                     # the packed layout: K % 128, N % 256
    stripes.marlin_tile_config(case["m"], case["n"], case["k"], gs)


def _marlin_regimes(case, sms):
    plan = stripes.stripes(case["m"], case["n"], case["k"], sms, case["group_size"])
    cfg = plan.config
    grouping = "per-channel" if case["group_size"] is None else "group 128"
    out = {f"tile k{cfg.thread_k} x n{cfg.thread_n}, {grouping}"}
    if len(plan.launches) > 1:
        out.add("several host launches (M split)")
    if case["m"] % 16:
        out.add("partial m-block (M % 16 != 0)")
    for la in plan.launches:
        out.add(f"{la.thread_m_blocks} m-block(s) per problem")
        if la.parallel > 1:
            out.add("parallel 64-row problems in one launch")
        counts = [s.slice_count for stripe in la.blocks for s in stripe]
        out.add("several slices per column" if max(counts) > 1 else "one slice per column")
        if any(len(stripe) > 1 for stripe in la.blocks):
            out.add("a stripe crossing columns")
        per = [n for n in la.iterations_per_block if n]
        if per[-1] < la.iters:
            out.add("partial last stripe")
        out.add("idle SMs" if la.idle_sms else "every SM busy")
    return out


def _marlin_make(case):
    rng = np.random.default_rng(case["seed"])
    k, n, gs = case["k"], case["n"], case["group_size"]
    g = 1 if gs is None else k // gs
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    scales = (rng.random((g, n)) * 0.02 + 2.0**-10).astype(np.float16)
    B, s = marlin.pack(q, scales, gs)
    A = values(rng, case["kind"], (case["m"], k)).astype(np.float16)
    return A, B, s


def _marlin_emulate(inputs, arch, sms):
    return mk.marlin_gemm(*inputs, arch=arch, sms=sms)


def _marlin_locate(case, inputs, idx, arch, sms):
    return str(mk.provenance(case["m"], case["n"], case["k"], idx[0], idx[1], group_size=case["group_size"], sms=sms))


def _marlin_structure(case, inputs, shape, sms):
    m, n = shape
    plan = stripes.stripes(case["m"], case["n"], case["k"], sms, case["group_size"])
    cfg = plan.config
    rows, cols = np.indices(shape)
    slices = np.zeros(shape, np.int64)
    for la in plan.launches:
        for p in range(la.parallel):
            r = mk._problem_rows(la, p, m)
            per_tile = np.zeros(la.n_tiles, np.int64)
            for nt in range(la.n_tiles):
                per_tile[nt] = len(la.reduction_order(p, nt))
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


def _mask_k(A, keep):
    out = np.zeros_like(A)
    out[:, keep] = A[:, keep]
    return out


_X, _T, _U = 2.0**14, 2.0**-10, 2.0**-1    # big; tiny (lost next to X w in fp32); medium (lost in an fp16 carry)


def _cancellation(inputs, group_size, terms):
    """Marlin inputs that amplify an order or precision difference into a large output one.

    ``terms``: (k, activation, code) triples; every row of A is zero except those k, B holds the
    given code at those k rows (code 15: weight 7s, code 9: weight s), every group with group 0's
    scales. With X = 2^14 and w = 7s, X w is exact in fp16; a tiny term t s (t = 2^-10) is lost when
    added to X w in fp32 (below half an ulp) and a medium term u s (u = 2^-1, 2^9 t) survives fp32 but not
    an fp16 carry: so cancelling +X w and -X w in different places of the kernel gives different
    bits for each association, precision and accumulation model."""
    A, B, s = inputs
    q, scales = marlin.unpack(B, s)
    q = q.copy()
    scales = np.repeat(scales[:1], scales.shape[0], axis=0)
    Ap = np.zeros_like(A)
    for k, a, code in terms:
        Ap[:, k] = a
        q[k] = code
    return (Ap,) + marlin.pack(q, scales, group_size)


def _marlin_probes(case, inputs):
    A, B, s = inputs
    k, m, gs = case["k"], case["m"], case["group_size"]
    cfg = stripes.marlin_tile_config(m, case["n"], k, gs)
    tk, wk = cfg.thread_k, cfg.warps_k
    kk = np.arange(k)
    out = [
        Probe("k 0..15 only (one mma per column: no k-warp, slice or global reduction)", (_mask_k(A, kk < 16), B, s),
              "the tensor-core arithmetic inside one mma.m16n8k16 (accumulation model, operands, dequantized weights)"),
        Probe("cancellation inside one mma (+X, -X, t, t at k 0..3)", _cancellation(inputs, gs, [(0, _X, 15), (1, -_X, 15), (2, _T, 9), (3, _T, 9)]),
              "the accumulation inside one mma: the tensor core aligns the products to the largest one and "
              "truncates (T-FDPA), an fp32 FMA chain does not"),
        Probe(f"k 0..{16 * wk - 1} only (one mma per k-warp, then thread_block_reduce)",
              (_mask_k(A, kk < 16 * wk), B, s),
              f"thread_block_reduce: how the {wk} k-warps' fp32 partials are added (association, precision)"),
    ]
    if wk == 4:
        out.append(Probe("cancellation across k-warps (+X, -X, t, t in k-warps 0..3)",
                         _cancellation(inputs, gs, [(0, _X, 15), (16, -_X, 15), (32, _T, 9), (48, _T, 9)]),
                         "thread_block_reduce's association: the kernel adds the k-warps as a0 + (a1 + (a3 + a2)) "
                         "in fp32"))
    out.append(Probe(f"k-tile 0 only (k 0..{tk - 1}: the k-warps' mma chains, one slice)", (_mask_k(A, kk < tk), B, s),
                     "the k-warps' mma chains over the k16 blocks of a tile (which blocks, in which order)"))
    if k > tk:
        out.append(Probe(f"cancellation across slices (+X, t in k-tile 0; -X, u in the last k-tile {k // tk - 1})",
                         _cancellation(inputs, gs, [(0, _X, 15), (16, _T, 9), (k - tk, -_X, 15), (k - tk + 16, _U, 9)]),
                         "the global reduction: a column's slices are carried through C in fp16, bottom (last "
                         "k-tiles) first; an fp32 carry or another slice order changes the bits"))
    if gs is not None:
        for g in range(k // gs):
            keep = (kk >= 128 * g) & (kk < 128 * (g + 1))
            out.append(Probe(f"group {g} only (k {128 * g}..{128 * g + 127})", (_mask_k(A, keep), B, s),
                             f"the weights or scale of quantization group {g}", family="quantization group"))
    return out


#: SM counts of the GPUs people run Marlin on, and small grids (a plan made for another GPU)
_SM_COUNTS = (1, 2, 4, 8, 16, 20, 28, 30, 34, 40, 46, 56, 58, 60, 64, 66, 68, 72, 76, 80, 82, 84, 92,
              98, 100, 104, 108, 114, 120, 128, 132, 142, 144, 170)


def _swap_nibbles(B):
    u = B.view(np.uint32)
    return (((u & np.uint32(0x0F0F0F0F)) << np.uint32(4)) | ((u >> np.uint32(4)) & np.uint32(0x0F0F0F0F))).view(np.int32)


def _plan_key(case, sms):
    plan = stripes.stripes(case["m"], case["n"], case["k"], sms, case["group_size"])
    return tuple(tuple(tuple((s.k_tile_start, s.k_tile_count, s.slice_idx) for s in b) for b in la.blocks if b)
                 for la in plan.launches)


def _marlin_known_bugs(case, inputs, arch, sms):
    """(bug class, description, alt) with alt(inputs) -> what a kernel with that bug writes.
    The few layout classes first, then the partitions of the other SM counts."""
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
    for other in _SM_COUNTS[1:]:       # not sms=1: one block per column looks like an fp32 global reduction
        by_plan.setdefault(_plan_key(case, other), []).append(other)
    groups = sorted((counts for key, counts in by_plan.items() if key != own),
                    key=lambda counts: min(abs(x - sms) for x in counts))   # the nearest GPUs first
    for counts in groups:
        names = f"sms={counts[0]}" if len(counts) == 1 else f"sms in {counts} (one partition on this case)"
        yield ("partition", f"the stripe partition of {names} instead of sms={sms} (grid or plan made for "
                            "another SM count)",
               lambda inp, o=counts[-1]: mk.marlin_gemm(*inp, arch=arch, sms=o))


def _marlin_pool():
    shapes = [(1, 128, 128), (1, 256, 256), (16, 256, 256), (17, 128, 256), (1, 1024, 1024), (1, 2048, 2048),
              (1, 768, 1536), (2, 2048, 1024), (8, 3072, 1024), (32, 512, 512), (48, 256, 768), (64, 512, 512),
              (80, 256, 512), (128, 256, 256), (200, 128, 256), (256, 256, 256), (1, 4096, 2048), (16, 1024, 2048),
              (1, 4096, 4096), (64, 2048, 512), (200, 1024, 256), (256, 1024, 512)]
    return tuple({"m": m, "k": k, "n": n, "group_size": g} for m, k, n in shapes for g in (128, None))


MARLIN = Format(
    name="marlin",
    signature="kernel(A f16 (M,K), B i32 (K/16,2N), s f16 (G,N)) -> C f16 (M,N)",
    n_inputs=3,
    fields={"m": _MARLIN_M, "k": _MARLIN_K, "n": _MARLIN_N, "group_size": (128, None),
            "kind": DATA_KINDS, "seed": None},
    shape_fields=("m", "k", "n", "group_size"),
    legal=_marlin_legal,
    cost=lambda c: c["m"] * c["k"] * c["n"],
    default_max_size=1 << 25,
    regimes=_marlin_regimes,
    make=_marlin_make,
    emulate=_marlin_emulate,
    locate=_marlin_locate,
    structure=_marlin_structure,
    probes=_marlin_probes,
    known_bugs=_marlin_known_bugs,
    pinned_pool=_marlin_pool(),
    hints=(("slices in the column's reduction", 1,
            "the global reduction across slices (columns a single block computes match)"),),
)


# ----------------------------------------------------------------------------------------------
# single mma instructions (no shape: the instruction is the shape)


def _mma_make(acc_dtype):
    def make(case):
        rng = np.random.default_rng(case["seed"])
        A = values(rng, case["kind"], (16, 16)).astype(np.float16)
        B = values(rng, case["kind"], (16, 8)).astype(np.float16)
        C = values(rng, case["kind"], (16, 8)).astype(acc_dtype)
        return A, B, C
    return make


def _mma_locate(case, inputs, idx, arch, sms):
    lane, reg = fr.mma_m16n8k16_c().owner(*idx)
    L = tc.model(arch).block
    blocks = ", ".join(f"k {k0}..{k0 + L - 1}" for k0 in range(0, 16, L))
    lay = fr.mma_m16n8k16_a()
    a_lanes = sorted({lay.owner(idx[0], c)[0] for c in range(16)})
    return (f"D[{idx[0]}, {idx[1]}] is register c{reg} of lane {lane} (warp 0); chained {arch} blocks in order: "
            f"{blocks}; A row {idx[0]} comes from lanes {a_lanes}")


def _mma_structure(case, inputs, shape, sms):
    rows, cols = np.indices(shape)
    lay = fr.mma_m16n8k16_c()
    owner = np.array([[lay.owner(r, c) for c in range(shape[1])] for r in range(shape[0])])
    return {"lane": owner[..., 0], "register": owner[..., 1], "row": rows, "column": cols}


def _mma_probes(case, inputs):
    A, B, C = inputs
    first = np.zeros_like(A)
    first[:, :8] = A[:, :8]
    return [Probe("k 0..7 only (one sm_80 block, C added)", (first, B, C), "one hardware dot-product block"),
            Probe("C = 0", (A, B, np.zeros_like(C)), "the products and their alignment, without the accumulator")]


def _mma_format(name, acc_dtype, signature):
    return Format(
        name=name, signature=signature, n_inputs=3,
        fields={"kind": DATA_KINDS, "seed": None}, shape_fields=(), legal=lambda c: None,
        cost=lambda c: 16 * 16 * 8, default_max_size=1 << 12,
        regimes=lambda c, sms: {"one instruction"},
        make=_mma_make(acc_dtype), emulate=lambda inputs, arch, sms: tc.mma_m16n8k16(arch, *inputs),
        locate=_mma_locate, structure=_mma_structure, probes=_mma_probes,
        pinned_pool=({},),
    )


def _s4_make(case):
    rng = np.random.default_rng(case["seed"])
    kind = case["kind"]
    if kind == "zeros":
        A, B = np.zeros((16, 64), np.int8), np.zeros((64, 8), np.int8)
    elif kind == "ones":
        A, B = np.ones((16, 64), np.int8), np.ones((64, 8), np.int8)
    elif kind == "extremes":
        A = rng.choice(np.array([-8, 7], np.int8), (16, 64))
        B = rng.choice(np.array([-8, 7], np.int8), (64, 8))
    else:
        A, B = rng.integers(-8, 8, (16, 64)).astype(np.int8), rng.integers(-8, 8, (64, 8)).astype(np.int8)
    lo, hi = (2**31 - 4096, 2**31) if case["c_large"] else (-1000, 1000)
    C = rng.integers(lo, hi, (16, 8)).astype(np.int64).astype(np.int32)
    return A, B, C


def _s4_locate(case, inputs, idx, arch, sms):
    lane, reg = fr.mma_m16n8k64_c().owner(*idx)
    return f"D[{idx[0]}, {idx[1]}] is register c{reg} of lane {lane}; exact int32 sum over k 0..63, wrapping"


def _s4_structure(case, inputs, shape, sms):
    rows, cols = np.indices(shape)
    lay = fr.mma_m16n8k64_c()
    owner = np.array([[lay.owner(r, c) for c in range(shape[1])] for r in range(shape[0])])
    return {"lane": owner[..., 0], "register": owner[..., 1], "row": rows, "column": cols}


MMA_S4 = Format(
    name="mma_s4", signature="kernel(A i8 (16,64) in [-8,7], B i8 (64,8), C i32 (16,8)) -> D i32 (16,8)",
    n_inputs=3, fields={"c_large": (False, True), "kind": ("zeros", "ones", "small_integers", "extremes"),
                        "seed": None},
    shape_fields=("c_large",), legal=lambda c: None, cost=lambda c: 16 * 64 * 8, default_max_size=1 << 14,
    regimes=lambda c, sms: {"C near 2^31 (wrapping)" if c["c_large"] else "small C"},
    make=_s4_make, emulate=lambda inputs, arch, sms: tc.mma_int(*inputs), locate=_s4_locate,
    structure=_s4_structure,
    pinned_pool=({"c_large": True}, {"c_large": False}), pinned_kind="extremes",
)


# ----------------------------------------------------------------------------------------------
# any-precision GEMV
#
# legality: refsim.formats.anyprec_kernel.plan (1 <= M <= 8, K % 32, N % 4 at M = 1 else N % 16,
# bits 3..8); the K-split launch (M = 1, K > 4096, bits >= 7) combines slices with fp16 atomicAdd
# in an order the hardware does not fix: its expected output is the admissible set of every order.

_ANYPREC_K = (32, 64, 992, 1024, 1056, 2048, 2080, 3072, 4064, 4096, 8192, 11008)


def _anyprec_legal(case):
    from refsim.formats import anyprec_kernel as ak

    ak.plan(case["m"], case["n"], case["k"], case["bits"])          # checks M, N, K, bits


def _anyprec_regimes(case, sms):
    from refsim.formats import anyprec_kernel as ak

    p = ak.plan(case["m"], case["n"], case["k"], case["bits"])
    out = {f"multi_row {p.multi_row}", "pair lookup table" if p.uses_pair_table else "scalar lookup table",
           f"{p.tail_lanes} active lanes in the last chunk" if p.tail_lanes < 32 else "no K tail"}
    out.add("several chunks per lane" if p.chunks > 1 else "one chunk")
    if case["k"] // 1024 >= 2 and p.tail_lanes < 32:
        out.add("three or more chunks in lane 0, a K tail")
    out.add("several blocks" if p.grid > 1 else "one block")
    return out


def _anyprec_make(case):
    from refsim.formats import bitplane

    rng = np.random.default_rng(case["seed"])
    n, k, bits = case["n"], case["k"], case["bits"]
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = (values(rng, case["kind"], (n, 2**bits)) * 0.05).astype(np.float16)
    x = values(rng, case["kind"], (case["m"], k)).astype(np.float16)
    return x, bitplane.pack(codes, bits), lut


def _anyprec_emulate(inputs, arch, sms):
    from refsim.emulator import anyprec_kernel as ek

    from refsim.formats import anyprec_kernel as ak

    x, q, lut = inputs
    if ak.plan(x.shape[0], lut.shape[0], x.shape[1], q.shape[0]).ksplit > 1:
        return ek.anyprec_gemv_admissible(x, q, lut, q.shape[0])    # every order of the slices' atomicAdds
    return ek.anyprec_gemv(x, q, lut, q.shape[0])


def _anyprec_locate(case, inputs, idx, arch, sms):
    multi_row = 1 if case["m"] == 1 else 4
    l, r = idx
    block, within = divmod(r, 4 * multi_row)
    return (f"O[{l}, {r}]: block {block}, warp y={within % 4} (row slot h={within // 4}), lane 0 after the "
            f"shfl_down tree; 32 lanes x {-(-case['k'] // 1024)} chunks of two 16-step hfma2 chains")


def _anyprec_structure(case, inputs, shape, sms):
    multi_row = 1 if case["m"] == 1 else 4
    rows, cols = np.indices(shape)
    within = cols % (4 * multi_row)
    return {"batch row": rows, "block": cols // (4 * multi_row), "warp y": within % 4,
            "row slot h": within // 4, "output row mod 8": cols % 8}


def _anyprec_probes(case, inputs):
    from refsim.formats import anyprec_kernel as ak

    x, q, lut = inputs
    k = case["k"]
    out = []
    k0, k1 = ak.activation_index(k, 0, 0, 3, 0)
    lane0 = np.zeros_like(x)
    lane0[:, [k0, k1]] = x[:, [k0, k1]]
    out.append(Probe(f"one half2 of lane 0 (k {k0}, {k1}): one hfma2 step, the tree adds zeros", (lane0, q, lut),
                     "one hfma2 step (the weights looked up, the fused multiply-add)"))
    first = np.zeros_like(x)
    first[:, :min(k, 1024)] = x[:, :min(k, 1024)]
    out.append(Probe("chunk 0 only (every lane's chains, the shfl_down tree)", (first, q, lut),
                     "the per-lane hfma2 chains or the warp tree"))
    if k > 2048:
        # lane 0's first element in chunks 0, 1, 2 holds +X, v, -X (weight 1): an fp16 partial
        # absorbs v into X (fp16(2^10 + 2^-2) = 2^10) and ends at 0, an fp32 partial keeps v
        from refsim.formats import bitplane

        bits = case["bits"]
        codes = bitplane.unpack(q[:bits]).copy()                   # (N, K)
        lut1 = lut.copy()
        lut1[:, 1] = 1.0
        xs = np.zeros_like(x)
        for i, val in enumerate((2.0**10, 2.0**-2, -(2.0**10))):
            kk = ak.activation_index(k, i, 0, 3, 0)[0]
            xs[:, kk] = val
            codes[:, kk] = 1
        out.append(Probe("cancellation across chunks (+X, v, -X in lane 0's chunks 0, 1, 2)",
                         (xs, bitplane.pack(codes, bits), lut1),
                         "how a lane adds its chunk partials: fp16 __hadd, in chunk order"))
    if k % 1024 and k > 1024:
        tail = np.zeros_like(x)
        tail[:, k - k % 1024:] = x[:, k - k % 1024:]
        out.append(Probe(f"the tail chunk only (k {k - k % 1024}..{k - 1}, {(k % 1024) // 32} lanes)", (tail, q, lut),
                         "the tail chunk (lanes that break out, the activation index of a short chunk)"))
    return out


ANYPREC = Format(
    name="anyprec",
    signature="kernel(x f16 (M,K), qweight i32 (bits,N,K/32), lut f16 (N,2**bits)) -> O f16 (M,N)",
    n_inputs=3,
    fields={"m": (1, 2, 3, 4, 8), "k": _ANYPREC_K, "n": (4, 16, 32, 64, 256, 4096, 11008), "bits": (3, 4, 5, 6, 7, 8),
            "kind": DATA_KINDS, "seed": None},
    shape_fields=("m", "k", "n", "bits"),
    legal=_anyprec_legal,
    cost=lambda c: c["m"] * c["k"] * c["n"],
    default_max_size=1 << 20,
    regimes=_anyprec_regimes,
    make=_anyprec_make,
    emulate=_anyprec_emulate,
    locate=_anyprec_locate,
    structure=_anyprec_structure,
    probes=_anyprec_probes,
    pinned_pool=tuple({"m": m, "k": k, "n": n, "bits": b} for m, k, n, b in
                      [(1, 1056, 16, 3), (4, 2080, 32, 4), (1, 4064, 64, 8), (8, 32, 16, 5), (2, 1024, 16, 6),
                       (1, 8192, 32, 4), (3, 992, 16, 7)]),
)


# ----------------------------------------------------------------------------------------------
# 2/4/16-bit GEMV with its outlier SpMV (refsim's documented kernel design, no official code)
#
# legality: K a multiple of 16 (groups), N of 16 (second-order groups), K <= 2^16 (CSR columns),
# outlier_ratio <= MAX_OUTLIER_RATIO: refsim.formats.mixed_2_4_16._check_kn / quantize.


def _mixed_legal(case):
    from refsim.formats import mixed_2_4_16 as mixed

    mixed._check_kn(case["k"], case["n"])
    mixed._check_alpha_ratio(case["alpha"], case["outlier_ratio"])


def _mixed_regimes(case, sms):
    g = case["k"] // 16
    n4 = int(round(case["alpha"] * g))
    units = n4 + max(0, -(-(g - n4 - 3 * n4) // 4))
    out = {"outliers" if case["outlier_ratio"] > 0 else "no outliers"}
    out.add("lanes owning two or more units" if units > 32 else "at most one unit per lane")
    out.add({0.0: "2-bit only", 1.0: "4-bit only"}.get(case["alpha"], "mixed 2- and 4-bit groups"))
    return out


def _lowrank_hinv_diag(X: np.ndarray, percdamp: float = 0.01) -> np.ndarray:
    """diag(H_d^-1) float64 (K,) for H = X^T X / r + I (X float64 (r, K), r calibration rows)
    damped as the quantizer damps it (+ percdamp · mean diag H), without forming the (K, K) H:
    H_d = c I + U U^T with U = X^T / sqrt(r), c = 1 + damp, and by Woodbury
    H_d^-1 = (I - U (c I_r + U^T U)^-1 U^T) / c, so only an (r, r) system is solved (O(K r^2)
    instead of the K^3 Cholesky; equal to ``mixed.inverse_hessian_diag(H)`` up to rounding,
    tested). Layer-sized 2/4/16 cases (K = 11008) need no 1 GB Hessian."""
    r = X.shape[0]
    U = X.T / np.sqrt(r)                                               # (K, r)
    c = 1.0 + percdamp * (1.0 + float(np.mean(np.einsum("kr,kr->k", U, U))))
    V = np.linalg.solve(c * np.eye(r) + U.T @ U, U.T)                  # (r, K)
    return (1.0 - np.einsum("kr,rk->k", U, V)) / c


def _mixed_make(case):
    from refsim.formats import mixed_2_4_16 as mixed

    rng = np.random.default_rng(case["seed"])
    k, n = case["k"], case["n"]
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((64, k))                                   # low-rank calibration, damped below
    hd = _lowrank_hinv_diag(X)
    p = mixed.pack(mixed.quantize_hinv(W, hd, alpha=case["alpha"], outlier_ratio=case["outlier_ratio"]))
    x = values(rng, case["kind"], (k,)).astype(np.float16)
    return (x,) + tuple(getattr(p, f.name) for f in dataclasses.fields(p))


def _mixed_emulate(inputs, arch, sms):
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.formats import mixed_2_4_16 as mixed

    return mx.mixed_gemv(mixed.Packed2416(*inputs[1:]), inputs[0])


def _mixed_locate(case, inputs, idx, arch, sms):
    x, *packed = inputs
    from refsim.emulator import mixed_2_4_16_kernel as mx

    r = idx[0]
    units = mx.unit_groups(packed[6])
    row_ptr = packed[7]
    busy = sorted({u % 32 for u in range(len(units))})
    return (f"y[{r}]: warp {r} (one warp per output channel); lanes {busy[0]}..{busy[-1]} own the row's "
            f"{len(units)} 128-bit units round-robin (fp16 hfma2 chains per group of 16, fp32 lane sums), "
            f"fp32 shfl_down tree to lane 0, then lane 0 adds the row's {int(row_ptr[r + 1] - row_ptr[r])} "
            f"outliers in stored order and writes fp16(acc)")


def _mixed_structure(case, inputs, shape, sms):
    x, *packed = inputs
    counts = np.diff(packed[7].astype(np.int64))
    n = np.arange(shape[0])
    return {"outliers in the row": np.minimum(counts, 3), "channel mod 16 (second-order group)": n % 16}


def _mixed_probes(case, inputs):
    x, *packed = inputs
    val = packed[9]
    out = []
    if val.size:
        no_out = list(packed)
        no_out[9] = np.zeros_like(val)
        out.append(Probe("outlier values zeroed (dense part only)", (x,) + tuple(no_out),
                         "the dense 2/4-bit part (dequantization, hfma2 chains, lane sums, tree)"))
    g0 = np.zeros_like(x)
    g0[:16] = x[:16]
    out.append(Probe("group 0 only (k 0..15)", (g0,) + tuple(packed),
                     "one group: dequantization and the two hfma2 chains"))
    return out


MIXED_2_4_16 = Format(
    name="mixed_2_4_16",
    signature=("kernel(x f16 (K,), w_main u32 (N,U,4), w_side u32 (N,n4), meta2 u16 (N,T), meta4 u8 (N,n4), "
               "s2 f16 (G,N/16), z2 u16 (G,N/16), group_bits u8 (G,), row_ptr i32 (N+1,), col u16 (nnz,), "
               "val f16 (nnz,)) -> y f16 (N,)"),
    n_inputs=11,
    fields={"k": (16, 128, 192, 640, 1024, 2048, 4096, 11008), "n": (16, 32, 64, 128, 4096, 11008),
            "alpha": (0.0, 0.25, 1.0),
            "outlier_ratio": (0.0, 0.005), "kind": DATA_KINDS, "seed": None},
    shape_fields=("k", "n", "alpha", "outlier_ratio"),
    legal=_mixed_legal,
    cost=lambda c: c["k"] * c["n"],
    default_max_size=1 << 18,
    regimes=_mixed_regimes,
    make=_mixed_make,
    emulate=_mixed_emulate,
    locate=_mixed_locate,
    structure=_mixed_structure,
    probes=_mixed_probes,
    hints=(("outliers in the row", 0,
            "the outlier SpMV epilogue (rows without outliers match): the order or precision in which the "
            "outliers are added to the dense sum"),),
    pinned_pool=tuple({"k": k, "n": n, "alpha": a, "outlier_ratio": o} for k, n, a, o in
                      [(640, 32, 0.25, 0.005), (2048, 16, 0.25, 0.005), (128, 16, 0.0, 0.0), (192, 16, 1.0, 0.005),
                       (1024, 64, 0.25, 0.0)]),
)


# ----------------------------------------------------------------------------------------------
# Atom W4A4 group GEMM (efeslab/Atom Dense_layer_gemm_i4_o16, emulated by refsim.emulator.atom_kernel)
#
# legality: refsim.formats.atom._check_split / _check_gemm (INT4 body a multiple of the group of 128,
# N even: column pairs share a scale), the INT8 keeper tail in whole m16n8k32 slabs (a multiple of 32),
# N a multiple of the mma's n8.

_ATOM_FIELDS = ("a_q4", "a_scale4", "a_q8", "a_scale8", "w_q4", "w_scale4", "w_q8", "w_scale8")


def _atom_legal(case):
    from refsim.errors import ShapeError

    if case["keeper"] % 32:
        raise ShapeError(f"keeper: the INT8 tail runs in m16n8k32 slabs, a multiple of 32; got {case['keeper']}")
    if case["n"] % 8:
        raise ShapeError(f"N: must be a multiple of the mma's n8; got {case['n']}")
    from refsim.formats import atom

    atom._check_split(case["k4"] + case["keeper"], atom.GROUP, case["keeper"])


def _atom_make(case):
    from refsim.formats import atom

    rng = np.random.default_rng(case["seed"])
    k = case["k4"] + case["keeper"]
    x = values(rng, case["kind"], (case["m"], k)).astype(np.float32)
    w = (rng.standard_normal((k, case["n"])) * 0.05).astype(np.float32)
    a = atom.quantize_activations(x, "kernel", keeper=case["keeper"])
    wq = atom.quantize_weights(w, "kernel", keeper=case["keeper"])
    return (a.q4, a.scale4, a.q8, a.scale8, wq.q4, wq.scale4, wq.q8, wq.scale8)


def _atom_emulate(inputs, arch, sms):
    from refsim.emulator import atom_kernel as ak
    from refsim.formats import atom

    return ak.atom_group_gemm(atom.AtomActivations(*inputs[:4]), atom.AtomWeights(*inputs[4:]))


def _atom_locate(case, inputs, idx, arch, sms):
    lane, reg = fr.mma_m16n8k64_c().owner(idx[0] % 16, idx[1] % 8)
    g = case["k4"] // 128
    tail = f", then the INT8 tail ({case['keeper'] // 32} m16n8k32 slabs)" if case["keeper"] else ""
    return (f"D[{idx[0]}, {idx[1]}]: m16 tile {idx[0] // 16}, n8 tile {idx[1] // 8}, lane {lane}, register c{reg}; "
            f"{g} groups of two m16n8k64 s4 mma, each scaled by __hmul2(row scale, column-pair scale) and added "
            f"with FFMA in group order{tail}; fp16 at the end")


def _atom_structure(case, inputs, shape, sms):
    rows, cols = np.indices(shape)
    return {"m16 tile": rows // 16, "n8 tile": cols // 8, "column pair": cols // 2 % 4, "row mod 16": rows % 16}


def _atom_probes(case, inputs):
    a_q4, a_s4, a_q8, a_s8, *w = inputs
    out = []
    one = np.zeros_like(a_q4)
    one[:, :128] = a_q4[:, :128]
    out.append(Probe("INT4 group 0 only (no INT8 tail)", (one, a_s4, np.zeros_like(a_q8), a_s8, *w),
                     "one group: the two s4 mma (exact) and its epilogue (fp16 scale product, fp32 FFMA)"))
    if a_q8.shape[1]:
        out.append(Probe("INT8 tail only", (np.zeros_like(a_q4), a_s4, a_q8, a_s8, *w),
                         "the INT8 keeper tail: s8 m16n8k32 slabs and its epilogue"))
    return out


ATOM = Format(
    name="atom",
    signature=("kernel(a_q4 i8 (M,K4), a_scale4 f16 (M,K4/128), a_q8 i8 (M,keeper), a_scale8 f16 (M,), "
               "w_q4 i8 (K4,N), w_scale4 f16 (K4/128,N), w_q8 i8 (keeper,N), w_scale8 f16 (N,)) -> D f16 (M,N)"),
    n_inputs=8,
    fields={"m": (1, 4, 16, 33), "k4": (128, 256, 512, 1024, 2048, 4096, 11008),
            "n": (8, 16, 64, 256, 1024, 4096, 11008),
            "keeper": (0, 32, 128), "kind": DATA_KINDS, "seed": None},
    shape_fields=("m", "k4", "n", "keeper"),
    legal=_atom_legal,
    cost=lambda c: c["m"] * (c["k4"] + c["keeper"]) * c["n"],
    default_max_size=1 << 22,
    regimes=lambda c, sms: {"INT8 keeper tail" if c["keeper"] else "no INT8 tail",
                            "several groups" if c["k4"] > 128 else "one group",
                            "several m16 tiles, a partial one" if c["m"] > 16 and c["m"] % 16 else
                            ("a partial m16 tile" if c["m"] % 16 else "whole m16 tiles")},
    make=_atom_make,
    emulate=_atom_emulate,
    locate=_atom_locate,
    structure=_atom_structure,
    probes=_atom_probes,
    pinned_pool=tuple({"m": m, "k4": k, "n": n, "keeper": kp} for m, k, n, kp in
                      [(1, 128, 8, 0), (4, 512, 64, 128), (33, 256, 16, 32), (16, 1024, 64, 0)]),
)


FORMATS: dict[str, Format] = {f.name: f for f in (
    ANYPREC, ATOM, MARLIN,
    _mma_format("mma_m16n8k16", np.float32, "kernel(A f16 (16,16), B f16 (16,8), C f32 (16,8)) -> D f32 (16,8)"),
    _mma_format("mma_m16n8k16_f16", np.float16, "kernel(A f16 (16,16), B f16 (16,8), C f16 (16,8)) -> D f16 (16,8)"),
    MMA_S4, MIXED_2_4_16)}
