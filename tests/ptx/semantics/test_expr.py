"""refsim.ptx.semantics.expr: one wrapped-integer expression, two executors' forms — the NumPy
function on values worked by hand, and the C text (which tests/ptx/compiled runs against it)."""

from __future__ import annotations

import numpy as np

from refsim.ptx.semantics.expr import ZERO, numpy_fn, src, c


def test_numpy_function_wraps_modulo_the_width():
    a16, b16 = np.array([0xFFFF, 0x8000, 3], np.uint16), np.array([2, 0x8000, 5], np.uint16)
    (d,) = numpy_fn(src(0) + src(1), 16)(a16, b16)
    assert d.dtype == np.uint16 and d.tolist() == [1, 0, 8]
    (d,) = numpy_fn(src(0) - src(1), 16)(a16, b16)
    assert d.tolist() == [0xFFFD, 0, 0xFFFE]                          # 3 - 5 = -2
    (d,) = numpy_fn(ZERO - src(0), 64)(np.array([1, 1 << 63], np.uint64))
    assert d.tolist() == [2**64 - 1, 1 << 63]                          # neg MIN = MIN
    (d,) = numpy_fn(~src(0), 32)(np.array([0x0F0F0000], np.uint32))
    assert d.dtype == np.uint32 and d.tolist() == [0xF0F0FFFF]


def test_bitwise_and_nested_expressions():
    e = (src(0) & src(1)) ^ ~src(2)
    assert e.sources() == 3 and (ZERO - src(0)).sources() == 1
    (d,) = numpy_fn(e, 16)(np.array([0xFF00], np.uint16), np.array([0x0FF0], np.uint16), np.array([0x00FF], np.uint16))
    assert d.tolist() == [0x0F00 ^ 0xFF00]


def test_c_text_widens_each_source_and_casts_the_result():
    assert c(src(0) + src(1), 32, ["a", "b"]) == "((uint32_t)((uint64_t)a + (uint64_t)b))"
    assert c(ZERO - src(0), 16, ["a"]) == "((uint16_t)(0 - (uint64_t)a))"
    assert c(~src(0), 64, ["a"]) == "((uint64_t)(~(uint64_t)a))"
    assert c((src(0) & src(1)) ^ ~src(2), 16, ["a", "b", "x"]) == \
        "((uint16_t)(((uint64_t)a & (uint64_t)b) ^ ~(uint64_t)x))"


def test_the_low_half_of_a_product_is_the_same_bits_signed_or_unsigned():
    # -1 * -1 = 1 (signed) and 0xFFFF * 0xFFFF = 0xFFFE0001 (unsigned): low 16 bits 0x0001 both
    (d,) = numpy_fn(src(0) * src(1) + src(2), 16)(np.array([0xFFFF], np.uint16), np.array([0xFFFF], np.uint16),
                                                  np.array([0xFFFF], np.uint16))
    assert d.tolist() == [0]                                          # 1 + 0xFFFF wraps
    assert c(src(0) * src(1) + src(2), 32, ["a", "b", "c"]) == "((uint32_t)(((uint64_t)a * (uint64_t)b) + (uint64_t)c))"


def test_comparisons_read_the_bits_signed_or_unsigned_and_select_picks():
    from refsim.ptx.semantics.expr import compare, numpy_pred, select

    a, b = np.array([0xFFFF, 1, 5], np.uint16), np.array([1, 0xFFFF, 5], np.uint16)
    assert numpy_pred(compare("<", src(0), src(1), signed=True), 16)(a, b).tolist() == [True, False, False]  # -1 < 1
    assert numpy_pred(compare("<", src(0), src(1)), 16)(a, b).tolist() == [False, True, False]  # 65535 > 1
    assert numpy_pred(compare(">=", src(0), src(1)), 16)(a, b).tolist() == [True, False, True]
    smin = select(compare("<", src(0), src(1), signed=True), src(0), src(1))
    (d,) = numpy_fn(smin, 16)(a, b)
    assert d.tolist() == [0xFFFF, 0xFFFF, 5]                          # min(-1, 1), min(1, -1), 5
    relu = select(compare("<", smin, ZERO, signed=True), ZERO, smin)
    (d,) = numpy_fn(relu, 64)(np.array([2**64 - 3, 7], np.uint64), np.array([4, 9], np.uint64))
    assert d.tolist() == [0, 7]                                       # min(-3, 4) = -3 -> 0
    (d,) = numpy_fn(select(src(2), src(0), src(1)), 32)(np.array([7, 7], np.uint32), np.array([9, 9], np.uint32),
                                                       np.array([True, False]))
    assert d.tolist() == [7, 9]
    assert c(smin, 32, ["a", "b"]) == ("((uint32_t)((rt_sext((uint64_t)a, 32) < rt_sext((uint64_t)b, 32)) ? "
                                       "(uint64_t)a : (uint64_t)b))")
    from refsim.ptx.semantics.expr import c_pred
    assert c_pred(compare("<=", src(0), src(1)), 32, ["a", "b"]) == "((uint8_t)((uint64_t)a <= (uint64_t)b))"


def test_shift_right_by_a_constant_and_plain_int_constants():
    e = (src(0) >> 8) & 0x1F                                          # shfl's segment mask c[12:8]
    assert e.sources() == 1
    (d,) = numpy_fn(e, 32)(np.array([0x1F1F, 0xFFFFFFFF, 0x00FF], np.uint32))
    assert d.tolist() == [0x1F, 0x1F, 0]
    assert c(e, 32, ["c"]) == "((uint32_t)(((uint64_t)c >> 8) & 31))"
    (d,) = numpy_fn(src(0) - 3, 16)(np.array([1], np.uint16))
    assert d.tolist() == [0xFFFE]                                     # 1 - 3 wraps


def test_a_call_runs_its_numpy_and_writes_its_c_twin_and_compound_comparisons_are_parenthesised():
    from refsim.ptx.semantics.expr import call, compare, const, select

    swap = call(lambda x: (x >> np.uint64(8)) | ((x & np.uint64(0xFF)) << np.uint64(8)), "rt_swap({0})", src(0) + const(1))
    (d,) = numpy_fn(swap, 16)(np.array([0x12FF, 0xFFFF], np.uint16))
    assert d.tolist() == [0x0013, 0x0000]                              # 0x1300 swapped; 0xFFFF + 1 wraps to 0
    assert c(swap, 16, ["a"]) == "((uint16_t)((uint64_t)rt_swap((uint64_t)a + 1)))"
    assert c(call(lambda x: x, None, src(0)), 32, ["a"]) is None      # no C twin: no C
    flush = select(compare("==", src(0) & const(0x7F800000), ZERO), src(0) & const(0x80000000), src(0))
    assert c(flush, 32, ["a"]) == ("((uint32_t)((((uint64_t)a & 2139095040) == 0) ? "
                                   "((uint64_t)a & 0x80000000ull) : (uint64_t)a))")
    (d,) = numpy_fn(flush, 32)(np.array([0x80000001, 0x00800000, 0x7FFFFF], np.uint32))
    assert d.tolist() == [0x80000000, 0x00800000, 0]


def test_shifts_by_a_constant_and_a_narrower_result():
    from refsim.ptx.semantics.expr import const

    a = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFF], np.uint64)
    (hi,) = numpy_fn(src(0) >> 48, 64, out=16)(a)
    assert hi.dtype == np.uint16 and hi.tolist() == [0x0123, 0xFFFF]
    (b,) = numpy_fn(src(0) >> 8, 32, out=8)(np.array([0x11223344], np.uint32))
    assert b.dtype == np.uint8 and b.tolist() == [0x33]
    (d,) = numpy_fn((src(0) & const(0xFF)) << 24 | src(1), 32)(np.array([0x1AB], np.uint32), np.array([5], np.uint32))
    assert d.dtype == np.uint32 and d.tolist() == [0xAB000005]
    (d,) = numpy_fn(src(0) << 16, 32)(np.array([0x12345678], np.uint32))
    assert d.tolist() == [0x56780000]                                  # the bits shifted past 32 wrap away
    assert c(src(0) >> 16, 32, ["v"], out=16) == "((uint16_t)((uint64_t)v >> 16))"
    assert c((src(0) & const(0xFF)) << 24, 32, ["p"]) == "((uint32_t)(((uint64_t)p & 255) << 24))"


def test_a_wide_constant_is_an_unsigned_64_bit_c_literal():
    from refsim.ptx.semantics.expr import const

    assert c(src(0) - const(1 << 32), 64, ["a"]) == "((uint64_t)((uint64_t)a - 0x100000000ull))"
    assert c(src(0) + const(2**31 - 1), 32, ["a"]) == "((uint32_t)((uint64_t)a + 2147483647))"
    (d,) = numpy_fn(src(0) - const(1 << 32), 64)(np.array([0x10], np.uint64))
    assert d.tolist() == [0xFFFFFFFF00000010]                          # below the constant: wraps mod 2^64


def test_a_comparison_of_compound_operands_is_parenthesised_in_c():
    from refsim.ptx.semantics.expr import c_pred, compare

    # C's == binds before | : without the parentheses "x | y == 0" would be "x | (y == 0)"
    e = compare("==", src(0) | src(1), ZERO)
    assert c_pred(e, 32, ["a", "b"]) == "((uint8_t)(((uint64_t)a | (uint64_t)b) == 0))"
