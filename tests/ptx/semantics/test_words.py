"""refsim.ptx.semantics.words: the integer word helpers of the handlers (bits, two's-complement
values, wrapping, type and modifier checks), worked by hand at the edges of each width."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.handler import Op
from refsim.ptx.semantics.words import (INT_TYPES, UINT, alu, check_mods, int_type, is_float, sval, ubits, value,
                                        wrap)


def test_ubits_masks_to_the_width_and_sval_reads_twos_complement():
    x = np.array([0xFFFE, 0x7FFF, 0x8000, 0x1_0001], np.uint64)
    assert ubits(x, 16).tolist() == [65534, 32767, 32768, 1] and ubits(x, 16).dtype == np.uint64
    assert sval(x, 16).tolist() == [-2, 32767, -32768, 1] and sval(x, 16).dtype == np.int64
    assert sval(np.array([0xFFFF_FFFF_FFFF_FFFF], np.uint64), 64).tolist() == [-1]
    assert sval(np.array([0x8000_0000], np.uint32), 32).tolist() == [-(2**31)]
    assert ubits(np.array([2**64 - 1], np.uint64), 64).tolist() == [2**64 - 1]


def test_wrap_reduces_modulo_two_to_the_width():
    assert wrap(np.array([-2 + 5, -1, 65536 + 7], np.int64), 16).tolist() == [3, 0xFFFF, 7]
    assert wrap(np.array([-1], np.int64), 16).dtype == np.uint16
    assert wrap(np.array([2**64 - 1], np.uint64), 32).tolist() == [0xFFFF_FFFF]
    assert wrap(np.array([-(2**63)], np.int64), 64).tolist() == [2**63]


def test_int_type_and_value_by_signedness():
    assert int_type(Op("add", (), ("s16",)), "s16") == ("s", 16)
    assert int_type(Op("add", (), ("b64",)), "b64") == ("b", 64)
    assert len(INT_TYPES) == 9 and set(UINT) == {16, 32, 64}
    with pytest.raises(PtxUnsupportedError, match=r"^add.f32: type .f32 is not an integer type of 16, 32 or 64 bits$"):
        int_type(Op("add", (), ("f32",)), "f32")
    with pytest.raises(PtxUnsupportedError, match="type .u8 is not an integer type"):
        int_type(Op("add", (), ("u8",)), "u8")
    x = np.array([0xFFFF_FFFF], np.uint32)
    assert value(x, "s", 32).tolist() == [-1] and value(x, "u", 32).tolist() == [2**32 - 1]
    assert value(x, "b", 32).tolist() == [2**32 - 1]


def test_check_mods_returns_the_modifiers_or_names_the_extra_ones_sorted():
    assert check_mods(Op("mul", ("lo",), ("s32",)), {"lo", "hi", "wide"}) == {"lo"}
    with pytest.raises(PtxUnsupportedError, match=r"^mul.sat.cc.s32: modifier\(s\) .cc, .sat not supported here$"):
        check_mods(Op("mul", ("sat", "cc"), ("s32",)), {"lo"})


def test_is_float_looks_at_the_last_type_and_alu_builds_an_elementwise_handler():
    assert is_float(Op("cvt", ("rn",), ("s32", "f32")))
    assert not is_float(Op("cvt", ("rn",), ("f32", "s32")))
    assert not is_float(Op("ret"))
    h = alu(lambda a: (a + 1,), ["u32"], ["u32"], "isa text")
    assert (h.kind, h.dst_types, h.src_types, h.isa, h.fn(1)) == ("alu", ("u32",), ("u32",), "isa text", (2,))
