"""refsim.ptx.semantics.move: mov's pack and unpack forms (part 0 is the lowest bits), worked by hand,
unpack inverting pack over every 16-bit value, and the forms PTX does not have refused."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.move import mov_pack, mov_unpack


def test_pack_puts_part_zero_in_the_lowest_bits():
    h0, h1 = np.array([0xAAAA, 0x0001], np.uint16), np.array([0xBBBB, 0x8000], np.uint16)
    packed = mov_pack([h0, h1], 32)
    assert packed.dtype == np.uint32 and packed.tolist() == [0xBBBBAAAA, 0x80000001]
    b = [np.array([v], np.uint8) for v in (0x11, 0x22, 0x33, 0x44)]
    assert mov_pack(b, 32).tolist() == [0x44332211]
    r = [np.array([0x89ABCDEF], np.uint32), np.array([0x01234567], np.uint32)]
    assert mov_pack(r, 64).dtype == np.uint64 and mov_pack(r, 64).tolist() == [0x0123456789ABCDEF]
    assert mov_pack([np.array([0x12], np.uint8), np.array([0x34], np.uint8)], 16).tolist() == [0x3412]


def test_a_part_wider_than_its_field_gives_only_its_low_bits():
    # a 32-bit register read as .b16 is its low half (docs/ptx.md, operand widths)
    assert mov_pack([np.array([0x1234FFFF], np.uint32), np.array([0x5678], np.uint32)], 32).tolist() == [0x5678FFFF]


def test_unpack_splits_into_parts_lowest_first():
    lo, hi = mov_unpack(np.array([0x0123456789ABCDEF], np.uint64), 64, 2)
    assert (lo.dtype, lo.tolist(), hi.tolist()) == (np.uint32, [0x89ABCDEF], [0x01234567])
    assert [p.tolist() for p in mov_unpack(np.array([0x44332211], np.uint32), 32, 4)] == [[0x11], [0x22], [0x33], [0x44]]
    h = mov_unpack(np.array([0x01234567_89ABCDEF], np.uint64), 64, 4)
    assert h[0].dtype == np.uint16 and [int(p[0]) for p in h] == [0xCDEF, 0x89AB, 0x4567, 0x0123]


def test_unpack_inverts_pack_for_every_16_bit_value():
    v = np.arange(1 << 16, dtype=np.uint16)
    lo, hi = mov_unpack(v, 16, 2)
    assert (lo == (v & 0xFF)).all() and (hi == (v >> 8)).all()
    assert (mov_pack([lo, hi], 16) == v).all()


@pytest.mark.parametrize("width, n", [(8, 2), (32, 3), (16, 4), (128, 2), (64, 8)])
def test_forms_that_are_not_ptx_movs_are_refused(width, n):
    with pytest.raises(PtxUnsupportedError, match=rf"mov.b{width}: packing {n} parts is not a PTX mov form"):
        mov_pack([np.zeros(1, np.uint8)] * n, width)
    with pytest.raises(PtxUnsupportedError, match=rf"mov.b{width}: unpacking into {n} parts is not a PTX mov form"):
        mov_unpack(np.zeros(1, np.uint64), width, n)
