"""refsim.formats.hopper_w4a16: the packed word of each consumer thread is its wgmma A fragment in the
nibble order FasterTransformer's converter reads, every code lies in one nibble, bad shapes are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import dequant_tricks as dq
from refsim.formats import hopper_w4a16 as hw
from refsim.testing import examples


def test_a_hand_worked_word():
    # thread l = 5 (warp 0, g = 1, c = 1) of column tile 0, k16 step 0: rows r = 1 and 9, columns k = 2, 3, 10, 11;
    # elements e0..e7 = (1,2) (1,3) (9,2) (9,3) (1,10) (1,11) (9,10) (9,11) (row = n, column = k) get codes 1..8
    q = np.zeros((128, 64), np.uint8)
    for code, (n, k) in enumerate([(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)], start=1):
        q[k, n] = code
    wp = hw.pack(q)
    assert wp.shape == (8, 128) and wp.dtype == np.uint32
    # nibbles 0..7 hold e0 e2 e4 e6 e1 e3 e5 e7 = 1 3 5 7 2 4 6 8
    assert hex(int(wp[0, 5])) == "0x86427531"
    assert np.count_nonzero(wp) == 1


def _fragment_from_isa(q: np.ndarray, j: int, t: int, lane_word: int) -> np.ndarray:
    """The 8 values (q - 8) of thread ``lane_word``'s A registers a0..a3 (low half first), from the PTX ISA's
    wgmma .m64nNk16 f16 A layout written out: warp w = l // 32, g = l % 32 // 4, c = l % 4; register r half e
    holds row 16 w + g + 8 (r % 2), column 2 c + 8 (r // 2) + e."""
    w, g, c = lane_word // 32, lane_word % 32 // 4, lane_word % 4
    out = []
    for r in range(4):
        for e in range(2):
            row, col = 16 * w + g + 8 * (r % 2), 2 * c + 8 * (r // 2) + e
            out.append(int(q[16 * t + col, 64 * j + row]) - 8)
    return np.array(out, np.float16)


@settings(max_examples=examples(10), deadline=None, database=None)
@given(st.sampled_from([(128, 64), (256, 128)]), st.integers(0, 2**32 - 1))
def test_every_word_converts_into_its_threads_a_registers(kn, seed):
    k, n = kn
    q = np.random.default_rng(seed).integers(0, 16, (k, n)).astype(np.uint8)
    wp = hw.pack(q)
    regs = dq.ft_int4_to_fp16(wp)                                   # (rows, 128, 4) half2 words
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).astype(np.uint16).view(np.float16)   # (rows, 128, 4, 2)
    rng = np.random.default_rng(seed ^ 1)
    for _ in range(6):
        j, t, lane = int(rng.integers(n // 64)), int(rng.integers(k // 16)), int(rng.integers(128))
        got = halves[j * (k // 16) + t, lane].reshape(8)
        assert np.array_equal(got.view(np.uint16), _fragment_from_isa(q, j, t, lane).view(np.uint16))
    assert np.array_equal(hw.unpack(wp, k, n), q)


def test_every_code_lies_in_exactly_one_nibble():
    k, n = 128, 64
    ones = hw.pack(np.ones((k, n), np.uint8))
    assert np.all(ones == 0x11111111)                                # every nibble of every word is used once
    q = np.zeros((k, n), np.uint8)
    q[77, 50] = 15
    assert np.count_nonzero(hw.pack(q)) == 1


@pytest.mark.parametrize("call, error, match", [
    (lambda: hw.pack(np.zeros((64, 64), np.uint8)), ShapeError, r"K: must be a positive multiple of 128.*got 64"),
    (lambda: hw.pack(np.zeros((128, 32), np.uint8)), ShapeError, r"N: must be a positive multiple of 64.*got 32"),
    (lambda: hw.pack(np.full((128, 64), 16, np.uint8)), FormatRuleError, r"4-bit codes must lie in \[0, 15\]; got 16"),
    (lambda: hw.unpack(np.zeros((8, 64), np.uint32), 128, 64), ShapeError, r"wp: shape must be \(8, 128\)"),
    (lambda: hw.check_kn(128.0, 64), FormatRuleError, r"K: must be an integer"),
])
def test_bad_shapes_and_codes_are_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()
