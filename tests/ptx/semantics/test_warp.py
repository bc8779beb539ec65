"""Warp-level handlers: shfl clamp/segment rules, vote, and ldmatrix/mma fragment ownership against
index maps built here from the PTX ISA figures' formulas (g = lane >> 2 "groupID", t = lane % 4
"threadID_in_group"), then mma end to end against refsim.arith.tensor_core on whole matrices.

Sources: PTX ISA 9.x "Parallel Synchronization and Communication Instructions: shfl.sync" (pseudocode),
"vote.sync"; "Warp Level Matrix Multiply-Accumulate Instructions: ldmatrix" (fragment figures) and
"Matrix Fragments for mma.m16n8k8 / m16n8k16 / m16n8k32 / m16n8k64" (figures and their row/col formulas).
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import tensor_core, tensor_core_types
from refsim.ptx import PtxUnsupportedError
from refsim.ptx.semantics import Op, lookup
from refsim.ptx.semantics import warp
from refsim.testing import assert_bitexact

RNG = np.random.default_rng(32)
LANES = np.arange(32)


def shfl_op(mode):
    return lookup(Op("shfl", ("sync", mode), ("b32",)))


def width_c(width, clamp=31):
    """The c operand nvcc builds for __shfl_*_sync(..., width): segment mask ((32 - width) << 8) | clamp."""
    return ((32 - width) << 8) | clamp


# ---------------------------------------------------------------------------------------------
# shfl


@pytest.mark.parametrize("mode, b, c, lane, src, inrange", [
    ("down", 1, 0x1F, 30, 31, True), ("down", 1, 0x1F, 31, 31, False),          # past lane 31: own value
    ("down", 1, width_c(16), 15, 15, False), ("down", 1, width_c(16), 16, 17, True),   # width-16 segments
    ("down", 8, width_c(16), 7, 15, True), ("down", 8, width_c(16), 8, 8, False),
    ("up", 1, 0, 0, 0, False), ("up", 1, 0, 5, 4, True),                         # up: c = clamp 0
    ("up", 1, (16 << 8), 16, 16, False), ("up", 1, (16 << 8), 17, 16, True),     # width 16: segment start 16
    ("bfly", 16, 0x1F, 3, 19, True), ("bfly", 16, width_c(16), 3, 3, False),     # xor beyond the segment
    ("bfly", 1, width_c(8), 6, 7, True),
    ("idx", 5, 0x1F, 20, 5, True), ("idx", 37, 0x1F, 20, 5, True),               # b[4:0] only
    ("idx", 2, width_c(8), 13, 10, True), ("idx", 2, width_c(8), 31, 26, True),  # lane in its segment
    ("idx", 9, 7, 13, 13, False), ("idx", 5, 7, 13, 5, True),                   # clamp 7: j = 9 > 7 -> own lane
    ("idx", 9, 7 | (24 << 8), 13, 9, True),                                       # segment [8, 15]: clamp 8|7 = 15
])
def test_shfl_clamp_and_segment_rules(mode, b, c, lane, src, inrange):
    a = np.arange(100, 132, dtype=np.uint32)[None, :]                          # lane l holds 100 + l
    d, p = shfl_op(mode).fn(a, np.full((1, 32), b, np.uint32), np.full((1, 32), c, np.uint32), np.ones((1, 32), bool))
    assert int(d[0, lane]) == 100 + src and bool(p[0, lane]) is inrange


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
def test_shfl_matches_its_plain_loop_twin_on_random_operands(mode):
    W = 6
    a = RNG.integers(0, 2**32, (W, 32), dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 64, (W, 32)).astype(np.uint32)
    c = (RNG.integers(0, 32, (W, 1)) | (RNG.integers(0, 32, (W, 1)) << 8)).astype(np.uint32) * np.ones((1, 32), np.uint32)
    d, p = shfl_op(mode).fn(a, b, c, np.ones((W, 32), bool))
    for w in range(W):
        dr, pr = warp.shfl_reference(mode, [int(x) for x in a[w]], [int(x) for x in b[w]], [int(x) for x in c[w]])
        assert d[w].tolist() == dr and p[w].tolist() == pr


def test_shfl_butterfly_reduction_gives_every_lane_the_same_sum():
    v = np.arange(32, dtype=np.uint32)[None, :]
    for m in (16, 8, 4, 2, 1):
        other, _ = shfl_op("bfly").fn(v, np.uint32(m), np.uint32(0x1F), None)
        v = v + other
    assert v.tolist() == [[sum(range(32))] * 32]


# ---------------------------------------------------------------------------------------------
# vote


def test_vote_counts_active_lanes_only():
    a = np.zeros((2, 32), bool)
    a[0, ::2] = True
    a[1, :] = True
    active = np.ones((2, 32), bool)
    active[1, 16:] = False
    (ballot,) = lookup(Op("vote", ("sync", "ballot"), ("b32",))).fn(a, active)
    assert int(ballot[0, 0]) == 0x55555555 and int(ballot[1, 7]) == 0x0000FFFF
    run = lambda m: lookup(Op("vote", ("sync", m), ("pred",))).fn(a, active)[0][:, 0].tolist()  # noqa: E731
    assert run("all") == [False, True]        # lanes 16..31 of warp 1 are inactive and do not vote
    assert run("any") == [True, True]
    assert run("uni") == [False, True]


# ---------------------------------------------------------------------------------------------
# ldmatrix: the figure, lane by lane


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragments_follow_the_isa_figure(num, trans):
    W = 3
    rows = RNG.integers(0, 2**16, (W, num, 8, 8), dtype=np.uint64).astype(np.uint16)
    mods = ("sync", "aligned", "m8n8", f"x{num}") + (("trans",) if trans else ()) + ("shared",)
    h = lookup(Op("ldmatrix", mods, ("b16",)))
    (regs,) = h.fn(rows)
    assert regs.shape == (W, 32, num) and regs.dtype == np.uint32 and len(h.dst_types) == num
    for w in range(W):
        for lane in range(32):
            r, c = lane // 4, 2 * (lane % 4)        # "each thread receives one row's two consecutive elements"
            for j in range(num):
                m = rows[w, j].T if trans else rows[w, j]
                want = int(m[r, c]) | (int(m[r, c + 1]) << 16)
                assert int(regs[w, lane, j]) == want


def a_frag_m16n8k16(lane, i):
    """ISA figure for the m16n8k16 f16 A fragment: row = groupID (+8 for a2,a3,a6,a7),
    col = threadID_in_group * 2 + (i & 1) (+8 for a4..a7)."""
    g, t = lane >> 2, lane % 4
    return g + (8 if i in (2, 3, 6, 7) else 0), t * 2 + (i & 1) + (8 if i >= 4 else 0)


def test_ldmatrix_x4_of_a_row_major_tile_is_the_mma_a_fragment():
    A = RNG.integers(0, 2**16, (16, 16), dtype=np.uint64).astype(np.uint16)
    # lane l supplies the address of A[l % 16][8 * (l // 16)]: matrix i = lanes 8i..8i+7
    rows = np.stack([np.stack([A[l % 16, 8 * (l // 16):8 * (l // 16) + 8] for l in range(8 * i, 8 * i + 8)])
                     for i in range(4)])[None]                                   # (1, 4, 8, 8)
    (regs,) = lookup(Op("ldmatrix", ("sync", "aligned", "m8n8", "x4", "shared"), ("b16",))).fn(rows)
    for lane in range(32):
        for i in range(8):
            half = (int(regs[0, lane, i // 2]) >> (16 * (i % 2))) & 0xFFFF
            assert half == int(A[a_frag_m16n8k16(lane, i)])


# ---------------------------------------------------------------------------------------------
# mma fragment ownership: index maps from the figures' formulas

FIGURES = {  # (shape, atype) -> (A formula, n_a, B formula, n_b), formulas (g, t, i) -> (row, col)
    ("m16n8k16", "f16"): (lambda g, t, i: (g + 8 * (i in (2, 3, 6, 7)), 2 * t + (i & 1) + 8 * (i >= 4)), 8,
                          lambda g, t, i: (2 * t + (i & 1) + 8 * (i >= 2), g), 4),
    ("m16n8k8", "f16"): (lambda g, t, i: (g + 8 * (i >= 2), 2 * t + (i & 1)), 4,
                         lambda g, t, i: (2 * t + i, g), 2),
    ("m16n8k16", "s8"): (lambda g, t, i: (g + 8 * (i >= 4), 4 * t + (i & 3)), 8,
                         lambda g, t, i: (4 * t + i, g), 4),
    ("m16n8k32", "s8"): (lambda g, t, i: (g + 8 * (i in (4, 5, 6, 7, 12, 13, 14, 15)), 4 * t + (i & 3) + 16 * (i >= 8)), 16,
                         lambda g, t, i: (4 * t + (i & 3) + 16 * (i >= 4), g), 8),
    ("m16n8k32", "s4"): (lambda g, t, i: (g + 8 * (i >= 8), 8 * t + (i & 7)), 16,
                         lambda g, t, i: (8 * t + i, g), 8),
    ("m16n8k64", "s4"): (lambda g, t, i: (g + 8 * ((8 <= i < 16) or i >= 24), 8 * t + (i & 7) + 32 * (i >= 16)), 32,
                         lambda g, t, i: (8 * t + (i & 7) + 32 * (i >= 8), g), 16),
    ("m16n8k8", "tf32"): (lambda g, t, i: (g + 8 * (i in (1, 3)), t + 4 * (i >= 2)), 4,
                          lambda g, t, i: (t + 4 * i, g), 2),
    ("m16n8k32", "e4m3"): (lambda g, t, i: (g + 8 * (i in (4, 5, 6, 7, 12, 13, 14, 15)), 4 * t + (i & 3) + 16 * (i >= 8)), 16,
                           lambda g, t, i: (4 * t + (i & 3) + 16 * (i >= 4), g), 8),
}


def c_figure(g, t, i):
    """C/D of every m16n8 shape: row = groupID (+8 for c2, c3), col = threadID_in_group * 2 + (i & 1)."""
    return g + 8 * (i >= 2), 2 * t + (i & 1)


def figure_map(formula, n):
    return np.array([[formula(lane >> 2, lane % 4, i) for i in range(n)] for lane in range(32)])


@pytest.mark.parametrize("shape, atype", sorted(FIGURES))
def test_mma_fragment_layouts_equal_the_isa_figures(shape, atype):
    fa, na, fb, nb = FIGURES[(shape, atype)]
    la, lb, lc = warp.mma_fragments(shape, atype)
    np.testing.assert_array_equal(la.coords, figure_map(fa, na))
    np.testing.assert_array_equal(lb.coords, figure_map(fb, nb))
    np.testing.assert_array_equal(lc.coords, figure_map(c_figure, 4))


def _distribute(M, formula, n, bits):
    """Matrix (W, rows, cols) -> registers (W, 32, n * bits / 32), element i in register i*bits//32, low first."""
    W = M.shape[0]
    per = 32 // bits
    regs = np.zeros((W, 32, n // per), np.uint64)
    for lane in range(32):
        for i in range(n):
            r, c = formula(lane >> 2, lane % 4, i)
            regs[:, lane, i // per] |= (M[:, r, c].astype(np.int64) & ((1 << bits) - 1)).astype(np.uint64) << np.uint64(bits * (i % per))
    return regs.astype(np.uint32)


def _collect(regs, dtype, per):
    W = regs.shape[0]
    D = np.zeros((W, 16, 8), dtype)
    for lane in range(32):
        for i in range(4):
            r, c = c_figure(lane >> 2, lane % 4, i)
            word = regs[:, lane, i // per]
            D[:, r, c] = word.view(dtype) if per == 1 else ((word >> np.uint32(16 * (i % 2))) & 0xFFFF).astype(np.uint16).view(dtype)
    return D


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
@pytest.mark.parametrize("dtype, ctype", [("f32", "f32"), ("f16", "f16")])
def test_mma_m16n8k16_f16_end_to_end_equals_tensor_core(arch, dtype, ctype):
    W = 4
    A = (RNG.standard_normal((W, 16, 16)) * 4).astype(np.float16)
    B = (RNG.standard_normal((W, 16, 8)) * 4).astype(np.float16)
    cdt = np.float32 if ctype == "f32" else np.float16
    ddt = np.float32 if dtype == "f32" else np.float16
    C = (RNG.standard_normal((W, 16, 8)) * 100).astype(cdt)
    A[0, 3, 5], B[1, 2, 7], C[2, 9, 1] = np.inf, np.nan, -np.inf   # special values in 3 of 4 warps
    fa, na, fb, nb = FIGURES[("m16n8k16", "f16")]
    a = _distribute(A.view(np.uint16), fa, na, 16)
    b = _distribute(B.view(np.uint16), fb, nb, 16)
    c = _distribute(C.view(np.uint32 if ctype == "f32" else np.uint16), c_figure, 4, 32 if ctype == "f32" else 16)
    h = lookup(Op("mma", ("sync", "aligned", "m16n8k16", "row", "col"), (dtype, "f16", "f16", ctype)), arch=arch)
    assert len(h.src_types) == 4 + 2 + c.shape[-1]
    (d,) = h.fn(a, b, c)
    got = _collect(d, ddt, 1 if dtype == "f32" else 2)
    assert_bitexact(got, tensor_core.mma_m16n8k16(arch, A, B, C, ddt), f"mma {arch} {dtype}.{ctype}")
    (d_finite,) = h.fn(a[3:], b[3:], c[3:])                     # the all-finite warp alone: fast path for f32
    assert_bitexact(_collect(d_finite, ddt, 1 if dtype == "f32" else 2),
                    tensor_core.mma_m16n8k16(arch, A[3:], B[3:], C[3:], ddt), "finite warp")


def test_mma_m16n8k8_f16_is_one_tensor_core_block():
    W = 2
    A = (RNG.standard_normal((W, 16, 8)) * 4).astype(np.float16)
    B = (RNG.standard_normal((W, 8, 8)) * 4).astype(np.float16)
    C = (RNG.standard_normal((W, 16, 8)) * 100).astype(np.float32)
    fa, na, fb, nb = FIGURES[("m16n8k8", "f16")]
    h = lookup(Op("mma", ("sync", "aligned", "m16n8k8", "row", "col"), ("f32", "f16", "f16", "f32")))
    (d,) = h.fn(_distribute(A.view(np.uint16), fa, na, 16), _distribute(B.view(np.uint16), fb, nb, 16),
                _distribute(C.view(np.uint32), c_figure, 4, 32))
    want = np.empty((W, 16, 8), np.float32)
    for w in range(W):
        for i in range(16):
            for j in range(8):
                want[w, i, j] = tensor_core.fdpa_reference("sm_80", A[w, i], B[w, :, j], C[w, i, j:j + 1].reshape(()), np.float32)
    assert_bitexact(_collect(d, np.float32, 1), want, "mma.m16n8k8")


@pytest.mark.parametrize("shape, atype, btype", [("m16n8k16", "s8", "s8"), ("m16n8k32", "s8", "u8"),
                                                 ("m16n8k32", "u8", "u8"), ("m16n8k32", "s4", "s4"),
                                                 ("m16n8k64", "s4", "s4"), ("m16n8k64", "u4", "s4")])
@pytest.mark.parametrize("satfinite", [False, True])
def test_integer_mma_end_to_end_equals_exact_int32(shape, atype, btype, satfinite):
    W = 3
    K = int(shape.split("k")[1])
    rng = {"s8": (-128, 128), "u8": (0, 256), "s4": (-8, 8), "u4": (0, 16)}
    A = RNG.integers(*rng[atype], (W, 16, K))
    B = RNG.integers(*rng[btype], (W, K, 8))
    C = RNG.integers(-(2**31), 2**31, (W, 16, 8)).astype(np.int32)
    C[:, 0, :] = 2**31 - 1                                                      # overflow: wrap vs saturate
    fa, na, fb, nb = FIGURES[(shape, "s4" if atype in ("s4", "u4") else "s8")]
    bits = 4 if atype in ("s4", "u4") else 8
    mods = ("sync", "aligned", shape, "row", "col") + (("satfinite",) if satfinite else ())
    h = lookup(Op("mma", mods, ("s32", atype, btype, "s32")))
    (d,) = h.fn(_distribute(A, fa, na, bits), _distribute(B, fb, nb, bits), _distribute(C.view(np.uint32), c_figure, 4, 32))
    got = _collect(d, np.int32, 1)
    acc = C.astype(object) + np.einsum("wik,wkj->wij", A.astype(object), B.astype(object))
    want = np.vectorize(lambda v: max(min(v, 2**31 - 1), -(2**31)) if satfinite else (v + 2**31) % 2**32 - 2**31)(acc)
    assert_bitexact(got, want.astype(np.int32), f"mma {shape} {atype}.{btype}")


TYPE_CASES = [("m16n8k16", "bf16", "bf16"), ("m16n8k8", "bf16", "bf16"), ("m16n8k8", "tf32", "tf32"),
              ("m16n8k32", "e4m3", "e4m3"), ("m16n8k32", "e5m2", "e4m3")]


@pytest.mark.parametrize("shape, atype, btype", TYPE_CASES)
def test_mma_bf16_tf32_fp8_end_to_end_equal_tensor_core_types(shape, atype, btype):
    W = 3
    K = int(shape.split("k")[1])
    bits = {"bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8}[atype]
    dt = tensor_core_types.TYPES[atype][2]
    A = RNG.integers(0, 2**bits, (W, 16, K), dtype=np.uint64).astype(dt)       # any bit pattern
    B = RNG.integers(0, 2**bits, (W, K, 8), dtype=np.uint64).astype(dt)
    C = (RNG.standard_normal((W, 16, 8)) * 100).astype(np.float32)
    fa, na, fb, nb = FIGURES[(shape, "f16" if atype == "bf16" else "e4m3" if bits == 8 else atype)]
    for arch in sorted({m.arch for m in tensor_core_types.MODELS.values() if m.shape == shape
                        and m.family == {"bf16": "bf16", "tf32": "tf32"}.get(atype, "fp8")}):
        h = lookup(Op("mma", ("sync", "aligned", shape, "row", "col"), ("f32", atype, btype, "f32")), arch=arch)
        (d,) = h.fn(_distribute(A, fa, na, bits), _distribute(B, fb, nb, bits), _distribute(C.view(np.uint32), c_figure, 4, 32))
        assert_bitexact(_collect(d, np.float32, 1), tensor_core_types.mma(arch, shape, atype, btype, A, B, C),
                        f"mma {shape} {atype}.{btype} {arch}")


def test_mma_m16n8k8_f16_on_sm90_is_one_block_of_the_16_product_datapath():
    W = 2
    A = (RNG.standard_normal((W, 16, 8)) * 2.0 ** RNG.integers(-20, 10, (W, 16, 8))).astype(np.float16)
    B = (RNG.standard_normal((W, 8, 8)) * 4).astype(np.float16)
    C = (RNG.standard_normal((W, 16, 8)) * 100).astype(np.float32)
    fa, na, fb, nb = FIGURES[("m16n8k8", "f16")]
    h = lookup(Op("mma", ("sync", "aligned", "m16n8k8", "row", "col"), ("f32", "f16", "f16", "f32")), arch="sm_90")
    (d,) = h.fn(_distribute(A.view(np.uint16), fa, na, 16), _distribute(B.view(np.uint16), fb, nb, 16),
                _distribute(C.view(np.uint32), c_figure, 4, 32))
    for w in range(W):
        assert_bitexact(_collect(d, np.float32, 1)[w], tensor_core.mma_m16n8k8_reference("sm_90", A[w], B[w], C[w]))


def test_every_modelled_mma_kind_is_executed_at_its_archs_and_refused_elsewhere():
    for kind in tensor_core_types.modelled():
        mods = ("sync", "aligned", kind.shape, "row", "col")
        op = Op("mma", mods, (kind.d, kind.a, kind.b, kind.c))
        for arch in kind.archs:
            h = lookup(op, arch=arch)
            assert h.kind == "warp", kind.ptx
        for arch in sorted(set(warp.tensor_core.ARCHS) - set(kind.archs)):
            with pytest.raises(PtxUnsupportedError):
                lookup(op, arch=arch)
        assert str(op) == kind.ptx
        assert set(kind.verified) <= set(kind.archs)


@pytest.mark.parametrize("op, arch, fragment", [
    (Op("mma", ("sync", "aligned", "m16n8k16", "row", "col"), ("f16", "bf16", "bf16", "f16")), "sm_80", "f32 C and D"),
    (Op("mma", ("sync", "aligned", "m16n8k32", "row", "col"), ("f32", "e4m3", "e4m3", "f32")), "sm_80", "for sm_80"),
    (Op("mma", ("sync", "aligned", "m16n8k16", "row", "col"), ("f32", "tf32", "tf32", "f32")), "sm_90", "shape"),
    (Op("mma", ("sync", "aligned", "m8n8k4", "row", "col"), ("f64", "f64", "f64", "f64")), "sm_80", "f64"),
    (Op("mma", ("sync", "aligned", "m8n8k4", "row", "col"), ("f32", "f16", "f16", "f32")), "sm_80", "m16n8k16/m16n8k8"),
    (Op("mma", ("sync", "aligned", "m16n8k16", "row", "col"), ("f32", "f16", "f16", "f32")), "sm_70", "sm_70"),
    (Op("mma", ("sync", "aligned", "m16n8k16", "col", "row"), ("f32", "f16", "f16", "f32")), "sm_80", ".row.col"),
    (Op("shfl", ("up",), ("b32",)), "sm_80", "shfl.sync"),
    (Op("ldmatrix", ("sync", "aligned", "m8n8", "x3", "shared"), ("b16",)), "sm_80", "ldmatrix.sync"),
])
def test_unsupported_warp_instructions_are_refused_by_name(op, arch, fragment):
    with pytest.raises(PtxUnsupportedError) as err:
        lookup(op, arch=arch)
    assert str(err.value).startswith(str(op) + ":") and fragment in str(err.value)


def test_redux_sync_reduces_over_active_lanes_only():
    a = np.arange(32, dtype=np.uint32)[None, :].repeat(2, 0)
    a[1, 5] = 0xFFFFFFFF                                   # -1 as s32
    active = np.ones((2, 32), bool)
    active[0, 16:] = False
    run = lambda o, t: lookup(Op("redux", ("sync", o), (t,))).fn(a, active)[0][:, 0].tolist()  # noqa: E731
    assert run("add", "u32") == [sum(range(16)), (sum(range(32)) - 5 + 0xFFFFFFFF) & 0xFFFFFFFF]
    assert run("min", "s32") == [0, 0xFFFFFFFF] and run("min", "u32") == [0, 0]
    assert run("max", "u32") == [15, 0xFFFFFFFF] and run("max", "s32") == [15, 31]
    assert run("or", "b32") == [15, 0xFFFFFFFF] and run("xor", "b32")[0] == 0 and run("and", "b32")[0] == 0
