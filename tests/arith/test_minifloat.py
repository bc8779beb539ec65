"""The minifloat format table: one definition, shared by refsim.arith and refsim.formats."""

from __future__ import annotations

import pytest

from refsim.arith import minifloat as arith_mf
from refsim.errors import FormatRuleError
from refsim.formats import minifloat as formats_mf


def test_formats_reexports_the_same_table():
    assert formats_mf.FORMATS is arith_mf.FORMATS and formats_mf.MiniFloat is arith_mf.MiniFloat


def test_rows():
    rows = {n: (f.exp_bits, f.man_bits, f.bias, f.max_value, f.has_inf, f.nan, f.bits)
            for n, f in arith_mf.FORMATS.items()}
    assert rows == {
        "e4m3": (4, 3, 7, 448.0, False, "all_ones", 8), "e5m2": (5, 2, 15, 57344.0, True, "ieee", 8),
        "e4m3fnuz": (4, 3, 8, 240.0, False, "0x80", 8), "e5m2fnuz": (5, 2, 16, 57344.0, False, "0x80", 8),
        "e3m2": (3, 2, 3, 28.0, False, "none", 6), "e2m3": (2, 3, 1, 7.5, False, "none", 6),
        "e2m1": (2, 1, 1, 6.0, False, "none", 4)}
    assert arith_mf.FORMATS["e2m1"].sign_bit == 0x8 and arith_mf.FORMATS["e3m2"].sign_bit == 0x20


def test_a_row_refuses_a_wrong_field_type():
    with pytest.raises(FormatRuleError):
        arith_mf.MiniFloat("x", "4", 3, 7, 448.0, False, "none", "float8_e4m3fn")
