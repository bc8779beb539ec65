"""refsim.formats.marlin_fp: vLLM Marlin's FP8 / NVFP4 layouts, bit tricks and scale bytes.

Exhaustive over every code of each element type; the layouts against their plain twins and against the
mma fragment positions they must feed; the prepared weights against refsim's own fp8 / e2m1 / e4m3
decoders of the source codes."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import fp8, marlin, marlin_fp as mf, minifloat


def _bits(x):
    return np.asarray(x).view(np.uint16)


ALL8 = np.arange(256, dtype=np.uint8)
ALL4 = np.arange(16, dtype=np.uint8)
NAN8 = (ALL8 & 0x7F) == 0x7F


def test_fp8_trick_equals_its_reference_for_all_codes():
    assert np.array_equal(_bits(mf.fp8_to_half(ALL8)), _bits(mf.fp8_to_half_reference(ALL8)))


def test_fp8_trick_is_the_fp8_decode_times_2_to_minus_8_except_nan_codes():
    v = mf.fp8_to_half(ALL8).astype(np.float64) * 2.0 ** 8
    ref = fp8.decode(ALL8, "e4m3").astype(np.float64)
    assert np.array_equal(v[~NAN8], ref[~NAN8])
    assert np.signbit(v[~NAN8]).tolist() == np.signbit(ref[~NAN8]).tolist()     # -0 stays -0
    assert v[NAN8].tolist() == [480.0, -480.0]                                   # the shift has no NaN case


def test_fp4_trick_equals_reference_and_e2m1_decode_for_all_codes():
    assert np.array_equal(_bits(mf.fp4_to_half(ALL4)), _bits(mf.fp4_to_half_reference(ALL4)))
    v = mf.fp4_to_half(ALL4).astype(np.float64) * 2.0 ** 14
    assert v.tolist() == [0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6]
    assert np.array_equal(v, minifloat.decode(ALL4, "e2m1").astype(np.float64))


def test_worked_examples_of_the_docstring():
    assert _bits(mf.fp8_to_half(np.array([0x44], np.uint8)))[0] == 0x2200
    assert _bits(mf.fp4_to_half(np.array([0x5], np.uint8)))[0] == 0x0A00


def test_word_tricks_give_the_element_tricks_in_fragment_order():
    rng = np.random.default_rng(0)
    w = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(np.int32)
    by = w.view(np.uint8).reshape(-1, 4)
    assert np.array_equal(mf.dequant_fp8_word(w), _bits(mf.fp8_to_half(by[:, [0, 2, 1, 3]])))
    nib = ((w.view(np.uint32)[:, None] >> (4 * np.array([0, 4, 1, 5, 2, 6, 3, 7], np.uint32))) & 0xF).astype(np.uint8)
    assert np.array_equal(mf.dequant_fp4_word(w), _bits(mf.fp4_to_half(nib)))


def _fragment_of(lane, j):
    """(row, col) of the 8 B-fragment elements lane feeds for sub-tile j: b0, b1 of the n8 half c, then c + 8."""
    t, g = lane % 4, lane // 4
    rows = (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)
    return [(r, 16 * j + g) for r in rows] + [(r, 16 * j + g + 8) for r in rows]


def test_fp8_layout_feeds_every_lane_its_mma_fragments():
    # codes = their own position (row * 64 + col) mod 256 would collide; use two tiles of ids per byte
    k, n = 16, 64
    pos = np.arange(k * n).reshape(k, n)
    B_lo = mf.pack_fp8_codes((pos % 256).astype(np.uint8))
    B_hi = mf.pack_fp8_codes((pos // 256).astype(np.uint8))
    for lane in range(32):
        for j in range(4):
            words = [8 * lane + 2 * j, 8 * lane + 2 * j + 1]          # frag_b0 (column c), frag_b1 (c + 8)
            got = []
            for word in words:
                for lo, hi in zip(B_lo[0, word:word + 1].view(np.uint8)[[0, 2, 1, 3]],
                                  B_hi[0, word:word + 1].view(np.uint8)[[0, 2, 1, 3]]):
                    got.append(divmod(int(lo) + 256 * int(hi), n))
            assert got == _fragment_of(lane, j)


def test_fp8_pack_equals_reference_and_unpack_inverts_it():
    q = np.random.default_rng(1).integers(0, 256, (48, 192)).astype(np.uint8)
    B = mf.pack_fp8_codes(q)
    assert B.shape == (3, 768) and B.dtype == np.int32
    assert np.array_equal(B, mf.pack_fp8_codes_reference(q))
    assert np.array_equal(mf.unpack_fp8_codes(B), q)


def test_fp4_layout_is_the_int4_marlin_layout():
    q = np.random.default_rng(2).integers(0, 16, (128, 128)).astype(np.uint8)
    B = mf.pack_fp4_codes(q)
    assert np.array_equal(B, marlin.pack(q, np.ones((1, 128), np.float16), None)[0])
    assert np.array_equal(mf.unpack_fp4_codes(B), q)


def test_s0e5m3_keeps_every_e4m3_scale_from_2_to_minus_6_and_zeroes_the_rest():
    codes = np.arange(0x7F, dtype=np.uint8)                                  # every non-negative, non-NaN e4m3
    s = minifloat.decode(codes, "e4m3").astype(np.float16)
    back = mf.s0e5m3_decode(mf.s0e5m3_encode(s)).astype(np.float64) * 2.0 ** -7
    keep = s.astype(np.float64) >= 2.0 ** -6
    assert np.array_equal(back[keep], s[keep].astype(np.float64))
    assert (back[~keep] == 0).all() and (~keep).sum() == 8                   # 0 and the 7 subnormals


def test_s0e5m3_refuses_negative_and_overflowing_scales():
    with pytest.raises(FormatRuleError, match="sign"):
        mf.s0e5m3_encode(np.array([-1.0], np.float16))
    with pytest.raises(NonFiniteError, match="overflows"):
        mf.s0e5m3_encode(np.array([1024.0], np.float16))


def test_prepared_fp8_dequantizes_to_the_fp8_decode_times_the_scale():
    rng = np.random.default_rng(3)
    q = rng.integers(0, 256, (128, 128)).astype(np.uint8)
    q[NAN8[q]] = 0x38
    sc = (rng.random((1, 128)) + 0.01).astype(np.float16)
    B, s = mf.prepare_fp8(q, sc)
    assert np.array_equal(marlin.unpermute_scales(s), (sc.astype(np.float32) * 256).astype(np.float16))
    ref = fp8.decode(q, "e4m3").astype(np.float64) * sc.astype(np.float64)
    assert np.array_equal(mf.dequantize("fp8", B, s), ref)


def test_prepared_nvfp4_dequantizes_to_e2m1_times_e4m3_times_the_tensor_scale():
    rng = np.random.default_rng(4)
    q = rng.integers(0, 16, (64, 128)).astype(np.uint8)
    s8 = rng.integers(0x08, 0x7F, (4, 128)).astype(np.uint8)                 # e4m3 2^-6 .. 448
    t = float(np.float32(0.0123))
    B, s, g = mf.prepare_nvfp4(q, s8, t)
    assert s.dtype == np.uint8 and s.shape == (4, 128) and g.dtype == np.float32
    ref = (minifloat.decode(q, "e2m1").astype(np.float64) * np.repeat(minifloat.decode(s8, "e4m3"), 16, axis=0) * t)
    assert np.array_equal(mf.dequantize("nvfp4", B, s, g), ref)


def test_nvfp4_kernel_operand_is_the_exact_product_of_the_two_tricks():
    rng = np.random.default_rng(5)
    q = rng.integers(0, 16, (32, 64)).astype(np.uint8)
    s8 = rng.integers(0x08, 0x7F, (2, 64)).astype(np.uint8)
    B, s, _ = mf.prepare_nvfp4(q, s8, 1.0)
    exact = (minifloat.decode(q, "e2m1").astype(np.float64) * 2.0 ** -14
             * np.repeat(minifloat.decode(s8, "e4m3").astype(np.float64), 16, axis=0) * 2.0 ** 7)
    assert np.array_equal(_bits(mf.kernel_operand("nvfp4", B, s)), _bits(exact.astype(np.float16)))
    # scales >= 2 after the 2^7 (vLLM's S0E5M3 rule): every product is a normal fp16, so the RN is exact
    assert np.array_equal(mf.kernel_operand("nvfp4", B, s).astype(np.float64), exact)


def test_bad_inputs_name_the_rule():
    with pytest.raises(ShapeError, match="multiple of 64"):
        mf.pack_fp8_codes(np.zeros((16, 32), np.uint8))
    with pytest.raises(FormatRuleError):
        mf.fp4_to_half(np.array([16], np.uint8))
    with pytest.raises(NonFiniteError, match="NaN"):
        mf.prepare_nvfp4(np.zeros((32, 64), np.uint8), np.full((2, 64), 0x7F, np.uint8), 1.0)
    with pytest.raises(NonFiniteError, match="overflows"):
        mf.prepare_fp8(np.zeros((16, 64), np.uint8), np.full((1, 64), 300, np.float16))
    with pytest.raises(FormatRuleError, match="global_scale"):
        mf.dequantize("nvfp4", *mf.prepare_nvfp4(np.zeros((32, 64), np.uint8), np.zeros((2, 64), np.uint8), 1.0)[:2])
