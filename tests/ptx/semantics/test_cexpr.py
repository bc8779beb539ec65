"""refsim.ptx.semantics.cexpr: the C-text helpers the families' C forms are written with, on values
worked by hand (the forms built from them run through both executors in tests/ptx/compiled)."""

from __future__ import annotations

from refsim.ptx.semantics import cexpr


def test_mask_and_cast_wrap_to_the_width():
    assert cexpr.mask(16) == "0xFFFFull"
    assert cexpr.mask(64) == "0xFFFFFFFFFFFFFFFFull"
    assert cexpr.cast(32, "a + b") == "((uint32_t)(a + b))"
    assert (cexpr.CT[1], cexpr.CT[8], cexpr.ST[16]) == ("uint8_t", "uint8_t", "int16_t")


def test_int_value_reads_signed_by_extension_and_unsigned_by_mask():
    assert cexpr.int_value("a", "s", 16) == "rt_sext((uint64_t)a, 16)"
    assert cexpr.int_value("a", "u", 8) == "((uint64_t)a & 0xFFull)"


def test_int_bits_extends_8_bit_results_to_32_bits():
    assert cexpr.int_bits("v", "u", 8) == ("((uint32_t)((uint64_t)(v) & 0xFF))", 32)
    signed = "((((uint64_t)(v) & 0xFF) & 0x80) ? (((uint64_t)(v) & 0xFF) | 0xFFFFFF00ull) : ((uint64_t)(v) & 0xFF))"
    assert cexpr.int_bits("v", "s", 8) == (f"((uint32_t){signed})", 32)
    assert cexpr.int_bits("v", "s", 16) == ("((uint16_t)((uint64_t)(v)))", 16)
