"""Tests for refsim.formats.marlin.

Three independent witnesses of the layout:
1. ``_official_pack`` below: a plain NumPy transliteration, written for this test, of the loop
   behaviour of ``marlin.Layer.pack`` / ``_get_perms`` (IST-DASLab/marlin ``marlin/__init__.py``,
   commit 2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c): it takes fake-quantized fp16 weights and
   re-quantizes them exactly as the official code does.
2. The PTX ``mma.m16n8k16`` B-fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k16
   with floating point type": b0/b1 hold (row 2t + {0,1}, col g) and (row 2t + 8 + {0,1}, col g))
   pushed through the emulated Marlin ``dequant`` bit trick.
3. The plain-loop ``pack_reference`` (closed-form table).

Properties on hypothesis-drawn legal shapes: pack round-trips and equals the plain loop; dequantize
is code times scale elementwise.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from refsim.arith.exact import round_to_float
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import dequant_tricks as dt
from refsim.formats import marlin
from refsim.quant import marlin as marlin_quant
from refsim.testing import assert_bitexact


# ---------------------------------------------------------------------------------------------
# Independent transliteration of the official pack (test-only)
# ---------------------------------------------------------------------------------------------
def _official_perms():
    perm = []
    for i in range(32):
        perm1 = []
        col = i // 4
        for block in [0, 1]:
            for row in [2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1]:
                perm1.append(16 * row + col + 8 * block)
        for j in range(4):
            perm.extend([p + 256 * j for p in perm1])
    perm = np.array(perm).reshape((-1, 8))[:, [0, 2, 4, 6, 1, 3, 5, 7]].ravel()
    scale_perm = []
    for i in range(8):
        scale_perm.extend([i + 8 * j for j in range(8)])
    scale_perm_single = []
    for i in range(4):
        scale_perm_single.extend([2 * i + j for j in [0, 1, 8, 9, 16, 17, 24, 25]])
    return perm, np.array(scale_perm), np.array(scale_perm_single)


def _official_pack(weight_nk: np.ndarray, scales_ng: np.ndarray, k: int, n: int, groupsize: int):
    """Layer.pack(linear, scales) with linear.weight (N, K) fp16 and scales (N, G) fp16.

    ``groupsize`` is the Layer's attribute: K for per-channel (the constructor maps -1 to K).
    torch fp16 division rounds the float quotient to fp16; torch.round is half-to-even.
    """
    perm, scale_perm, scale_perm_single = _official_perms()
    tile, maxq = 16, 15
    s = scales_ng.T
    w = weight_nk.T
    if groupsize != k:
        w = w.reshape((-1, groupsize, n)).transpose(1, 0, 2).reshape((groupsize, -1))
        s = s.reshape((1, -1))
    w = np.round((w / s).astype(np.float16).astype(np.float64)).astype(np.int64)
    w += (maxq + 1) // 2
    w = np.clip(w, 0, maxq)
    if groupsize != k:
        w = w.reshape((groupsize, -1, n)).transpose(1, 0, 2).reshape((k, n))
        s = s.reshape((-1, len(scale_perm)))[:, scale_perm]
    else:
        s = s.reshape((-1, len(scale_perm_single)))[:, scale_perm_single]
    s = s.reshape((-1, n))
    w = w.reshape((k // tile, tile, n // tile, tile)).transpose(0, 2, 1, 3).reshape((k // tile, n * tile))
    res = w.reshape((-1, perm.size))[:, perm].reshape(w.shape)
    q = np.zeros((res.shape[0], res.shape[1] // 8), dtype=np.uint32)
    res = res.astype(np.uint32)
    for i in range(8):
        q |= res[:, i::8] << np.uint32(4 * i)
    return q.astype(np.int32), s


def _gen_quant4(k, n, group_size, rng):
    """gen_quant4 of the official test.py: fake-quantized Wq (K, N) fp16, scales (G, N) fp16, codes."""
    w = rng.standard_normal((k, n)).astype(np.float16)
    scales = marlin_quant.compute_scales(w, group_size)
    q = marlin_quant.quantize(w, scales, group_size)
    gs = k if group_size is None else group_size
    wq = ((q.astype(np.float32) - 8) * np.repeat(scales, gs, axis=0).astype(np.float32)).astype(np.float16)
    return wq, scales, q


SHAPES = [(128, 256, None), (128, 256, 128), (256, 256, 128), (256, 512, None), (384, 768, 128)]


@pytest.mark.parametrize("k,n,group_size", SHAPES)
def test_pack_is_bit_identical_to_official_layer_pack(k, n, group_size):
    rng = np.random.default_rng(k * 7 + n + (group_size or 0))
    wq, scales, q = _gen_quant4(k, n, group_size, rng)
    b, s = marlin.pack(q, scales, group_size)
    # Layer(groupsize=128) with K=128 has self.groupsize == self.k: the per-channel branch
    layer_groupsize = k if group_size is None else group_size
    b_off, s_off = _official_pack(wq.T.copy(), scales.T.copy(), k, n, layer_groupsize)
    assert_bitexact(b, b_off, name="B")
    assert_bitexact(s, s_off, name="s")
    # and requantizing the official test's fake-quantized weights gives back the same codes
    assert_bitexact(marlin_quant.quantize(wq, scales, group_size), q, name="requantized codes")


def test_k128_group128_is_packed_like_per_channel():
    rng = np.random.default_rng(5)
    q = rng.integers(0, 16, (128, 256), dtype=np.uint8)
    scales = (rng.random((1, 256)) + 0.5).astype(np.float16)
    b_g, s_g = marlin.pack(q, scales, 128)
    b_c, s_c = marlin.pack(q, scales, None)
    assert_bitexact(b_g, b_c, name="B")
    assert_bitexact(s_g, s_c, name="s")
    assert_bitexact(s_g[0, :32], scales[0, marlin.scale_perm_single()], name="single perm")


def test_perm_generators_equal_the_official_loops():
    perm, sp, sps = _official_perms()
    assert_bitexact(marlin.weight_perm(), perm.astype(np.int64), name="perm")
    assert_bitexact(marlin.scale_perm(), sp.astype(np.int64), name="scale_perm")
    assert_bitexact(marlin.scale_perm_single(), sps.astype(np.int64), name="scale_perm_single")


@pytest.mark.parametrize("gen,size", [(marlin.weight_perm, 1024), (marlin.scale_perm, 64), (marlin.scale_perm_single, 32)])
def test_every_permutation_is_inverted_exhaustively(gen, size):
    p = gen()
    assert sorted(p.tolist()) == list(range(size))
    inv = marlin.inverse_perm(p)
    x = np.arange(size)
    assert_bitexact(x[p][inv], x, name="x[p][inv]")
    assert_bitexact(x[inv][p], x, name="x[inv][p]")


def test_layout_derived_from_mma_b_fragment_ownership():
    """Each lane's int4 (4 words, one per 16x16 sub-tile j) dequantized by the kernel's bit trick
    must give exactly the B fragments the PTX ISA assigns to that lane for the two n8 MMAs."""
    k, n = 128, 256
    rng = np.random.default_rng(11)
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    b, _ = marlin.pack(q, np.ones((1, n), np.float16), None)
    words = b.view(np.uint32)
    for kb in range(k // 16):
        for nb in range(n // 64):
            for lane in range(32):
                g, t = lane // 4, lane % 4  # PTX: groupID, threadID_in_group
                for j in range(4):
                    frags = dt.marlin_dequant(words[kb, 128 * nb + 4 * lane + j])  # 4 half2 regs
                    lo, hi = dt.halves(frags)
                    for half in range(2):  # first / second n8 MMA of sub-tile j
                        col = 64 * nb + 16 * j + 8 * half + g
                        for reg in range(2):  # b0: rows 2t, 2t+1; b1: rows 2t+8, 2t+9
                            row = 16 * kb + 2 * t + 8 * reg
                            got = (float(lo[2 * half + reg]), float(hi[2 * half + reg]))
                            assert got == (int(q[row, col]) - 8, int(q[row + 1, col]) - 8)


def test_spec_worked_example_word_position():
    # B[0,5]: w=5 -> lane 1, j=1 -> t=1, g=0 -> nibbles are Q[2,16], Q[10,16], Q[2,24], Q[10,24],
    # Q[3,16], Q[11,16], Q[3,24], Q[11,24]
    q = np.zeros((128, 256), dtype=np.uint8)
    for (r, c), v in zip([(2, 16), (10, 16), (2, 24), (10, 24), (3, 16), (11, 16), (3, 24), (11, 24)],
                         [9, 7, 10, 8, 11, 7, 10, 12]):
        q[r, c] = v
    b, _ = marlin.pack(q, np.ones((1, 256), np.float16), None)
    assert int(b.view(np.uint32)[0, 5]) == 0xCA7B8A79


@pytest.mark.parametrize("k,n,group_size", [(128, 256, None), (256, 256, 128)])
def test_vectorised_functions_agree_with_plain_loop_references(k, n, group_size):
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    scales = (rng.standard_normal((marlin._scale_rows(k, group_size), n)) * 0.1).astype(np.float16)
    b, s = marlin.pack(q, scales, group_size)
    br, sr = marlin.pack_reference(q, scales, group_size)
    assert_bitexact(b, br, name="B")
    assert_bitexact(s, sr, name="s")
    q1, s1 = marlin.unpack(b, s)
    q2, s2 = marlin.unpack_reference(b, s)
    assert_bitexact(q1, q2, name="q")
    assert_bitexact(s1, s2, name="scales")
    assert_bitexact(q1, q, name="round trip q")
    assert_bitexact(s1, scales, name="round trip scales")
    assert_bitexact(marlin.dequantize(b, s), marlin.dequantize_reference(b, s), name="dequantize")


def test_dequantize_grouped_is_fp16_product_and_per_channel_is_unscaled():
    rng = np.random.default_rng(4)
    k, n = 256, 256
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    scales = (rng.random((2, n)) * 0.02 + 1e-3).astype(np.float16)
    b, s = marlin.pack(q, scales, 128)
    got = marlin.dequantize(b, s)
    # exact rational product, rounded once to fp16 (independent of the float32 shortcut)
    for kk, nn in [(0, 0), (5, 17), (130, 200), (255, 255), (127, 64)]:
        exact = (int(q[kk, nn]) - 8) * Fraction(float(scales[kk // 128, nn]))
        assert got[kk, nn] == round_to_float(exact, np.float16)
    b1, s1 = marlin.pack(q, scales[:1], None)
    assert_bitexact(marlin.dequantize(b1, s1), (q.astype(np.float16) - np.float16(8)), name="per-channel operand")


@pytest.mark.parametrize("group_size", [None, 128])
def test_reference_gemm_matches_exact_rational_sum(group_size):
    rng = np.random.default_rng(6)
    m, k, n = 2, 256, 256
    a = rng.standard_normal((m, k)).astype(np.float16)
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    rows = 1 if group_size is None else k // group_size
    scales = (rng.random((rows, n)) * 0.05 + 0.01).astype(np.float16)
    b, s = marlin.pack(q, scales, group_size)
    c = marlin.reference_gemm(a, b, s)
    for mm, nn in [(0, 0), (1, 100), (0, 255)]:
        if group_size is None:  # integer weights, then two output roundings
            exact = sum(Fraction(float(a[mm, kk])) * (int(q[kk, nn]) - 8) for kk in range(k))
            acc16 = round_to_float(exact, np.float16)
            expected = round_to_float(Fraction(float(acc16)) * Fraction(float(scales[0, nn])), np.float16)
        else:  # fp16-rounded scaled weights, one rounding of the exact sum
            wq = [round_to_float((int(q[kk, nn]) - 8) * Fraction(float(scales[kk // 128, nn])), np.float16)
                  for kk in range(k)]
            exact = sum(Fraction(float(a[mm, kk])) * Fraction(float(wq[kk])) for kk in range(k))
            expected = round_to_float(exact, np.float16)
        assert_bitexact(c[mm, nn], expected, name=f"C[{mm},{nn}]")


def test_pack_does_not_modify_inputs():
    rng = np.random.default_rng(8)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    scales = rng.random((2, 256)).astype(np.float16)
    q0, s0 = q.copy(), scales.copy()
    b, s = marlin.pack(q, scales, 128)
    marlin.unpack(b, s)
    assert_bitexact(q, q0, name="q")
    assert_bitexact(scales, s0, name="scales")


@pytest.mark.parametrize(
    "q_shape,s_shape,gs,q_dtype,s_dtype,err,match",
    [
        ((192, 256), (1, 256), None, np.uint8, np.float16, ShapeError, "K: must be a positive multiple of 128"),
        ((128, 320), (1, 320), None, np.uint8, np.float16, ShapeError, "N: must be a positive multiple of 128"),
        ((256, 256), (4, 256), 64, np.uint8, np.float16, FormatRuleError, r"supports only 128 or None \(per-channel\); got 64"),
        ((256, 256), (2, 256), 128, np.int32, np.float16, DtypeError, "q: dtype must be uint8"),
        ((256, 256), (2, 256), 128, np.uint8, np.float32, DtypeError, "scales: dtype must be float16"),
        ((256, 256), (1, 256), 128, np.uint8, np.float16, ShapeError, r"scales: shape must be \(2, 256\)"),
        ((256, 256), (2, 256), None, np.uint8, np.float16, ShapeError, r"scales: shape must be \(1, 256\)"),
    ],
)
def test_pack_rejects_illegal_input_with_named_rule(q_shape, s_shape, gs, q_dtype, s_dtype, err, match):
    with pytest.raises(err, match=match):
        marlin.pack(np.zeros(q_shape, q_dtype), np.ones(s_shape, s_dtype), gs)


def test_pack_rejects_codes_above_15_and_nonfinite_scales():
    q = np.zeros((128, 256), np.uint8)
    q[3, 4] = 16
    with pytest.raises(FormatRuleError, match=r"codes must lie in \[0, 15\]; got 16"):
        marlin.pack(q, np.ones((1, 256), np.float16), None)
    s = np.ones((1, 256), np.float16)
    s[0, 7] = np.inf
    with pytest.raises(NonFiniteError, match="scales"):
        marlin.pack(np.zeros((128, 256), np.uint8), s, None)
    with pytest.raises(FormatRuleError, match="got True"):
        marlin.pack(np.zeros((128, 256), np.uint8), np.ones((1, 256), np.float16), True)


def test_unpack_rejects_scale_rows_that_are_not_one_or_k_over_128():
    b = np.zeros((256 // 16, 512), np.int32)
    with pytest.raises(ShapeError, match="s: must have 1 row or K/128=2 rows; got 4 rows"):
        marlin.unpack(b, np.ones((4, 256), np.float16))


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def marlin_problems(draw):
    """Only legal Marlin shapes: K % 128 == 0, N % 128 == 0, group 128 or per-channel."""
    k = 128 * draw(st.integers(1, 3))
    n = 256 * draw(st.integers(1, 2))
    group_size = draw(st.sampled_from([None, 128]))
    seed = draw(st.integers(0, 2**31 - 1))
    return k, n, group_size, seed


def _draw_inputs(k, n, group_size, seed):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    rows = 1 if group_size is None else k // group_size
    scales = (rng.standard_normal((rows, n)) * 0.05).astype(np.float16)
    return q, scales


# edge cases: the K = 128 / group 128 corner, the smallest per-channel shape
@pytest.mark.slow
@example((128, 256, 128, 0))
@example((128, 256, None, 1))
@given(marlin_problems())
def test_pack_roundtrips_and_matches_plain_loop(problem):
    k, n, group_size, seed = problem
    q, scales = _draw_inputs(k, n, group_size, seed)
    b, s = marlin.pack(q, scales, group_size)
    br, sr = marlin.pack_reference(q, scales, group_size)
    assert_bitexact(b, br, name="B")
    assert_bitexact(s, sr, name="s")
    q2, s2 = marlin.unpack(b, s)
    assert_bitexact(q2, q, name="q")
    assert_bitexact(s2, scales, name="scales")


@given(marlin_problems())
def test_dequantize_equals_code_times_scale_elementwise(problem):
    k, n, group_size, seed = problem
    q, scales = _draw_inputs(k, n, group_size, seed)
    b, s = marlin.pack(q, scales, group_size)
    w = marlin.effective_weights(b, s)
    gs = k // scales.shape[0]
    rng = np.random.default_rng(seed)
    for kk, nn in zip(rng.integers(0, k, 8), rng.integers(0, n, 8)):
        expected = np.float16(np.float32(int(q[kk, nn]) - 8) * np.float32(scales[kk // gs, nn]))
        assert_bitexact(w[kk, nn], expected, name=f"W[{kk},{nn}]")


# ------------------------------------------------------------------ the public rule checks
def test_the_layout_rules_accept_the_official_shapes_and_name_what_they_refuse():
    assert marlin.CODE_BIAS == 8 and marlin.MAX_CODE == 15          # q in [0, 15] means q - 8
    assert marlin.check_kn(128, 256) is None and marlin.check_kn(np.int64(4096), 11264) is None
    for k, n, name in ((64, 256, "K"), (128, 64, "N"), (0, 256, "K")):
        with pytest.raises(ShapeError, match=f"^{name}: "):
            marlin.check_kn(k, n)
    assert marlin.check_group_size(None) is None and marlin.check_group_size(np.int32(128)) == 128
    with pytest.raises(FormatRuleError, match="group_size"):
        marlin.check_group_size(64)
    s = np.ones((2, 256), np.float16)
    assert marlin.check_scales(s, 256, 256, 128) is s
    for bad, err in ((s.astype(np.float32), DtypeError), (s[:1], ShapeError),
                     (np.full((2, 256), np.inf, np.float16), NonFiniteError)):
        with pytest.raises(err, match="^scales: "):
            marlin.check_scales(bad, 256, 256, 128)
    assert marlin.check_scales(s[:1], 256, 256, None).shape == (1, 256)


@pytest.mark.parametrize("group_size", [128, None])
def test_n128_packs_and_unpacks_the_kernels_smallest_tile(group_size):
    """N = 128 is the kernel's thread_n for M <= 16 (the official Layer constructor asks 256, a packer's
    rule): the layout works per 64 columns, so it round-trips and equals the plain-loop packer."""
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, (256, 128)).astype(np.uint8)
    s = (rng.random((2 if group_size else 1, 128)) + 0.5).astype(np.float16)
    B, S = marlin.pack(q, s, group_size)
    assert B.shape == (16, 256)
    ref = marlin.pack_reference(q, s, group_size)
    assert_bitexact(B, ref[0], name="B")
    assert_bitexact(S, ref[1], name="s")
    q2, s2 = marlin.unpack(B, S)
    assert_bitexact(q2, q, name="q")
    assert_bitexact(s2, s, name="scales")
