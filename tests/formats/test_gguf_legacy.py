"""GGUF legacy blocks worked by hand: Q4_0's low/high nibble order, Q5's fifth-bit word, Q4_1's min,
Q8_0's roundf, IQ4_NL's table, the quantizers' tie and zero-block rules, BF16 rounding; refusals.
(The goldens made by the gguf package are checked through refsim.formats.gguf in test_gguf.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import gguf_legacy as L
from refsim.testing import assert_bitexact

F32 = np.float32


def block(*parts: bytes) -> np.ndarray:
    return np.frombuffer(b"".join(parts), np.uint8).reshape(1, -1).copy()


def f16(v: float) -> bytes:
    return np.float16(v).tobytes()


def test_one_q4_0_block_worked_by_hand():
    qs = bytes([0xF3] + [0x88] * 15)                     # byte 0: element 0 = 3 (low), element 16 = 15 (high)
    b = block(f16(0.5), qs)
    assert b[0, :2].tolist() == [0x00, 0x38]               # d = 0x3800 little-endian
    y = L.dequantize_blocks(b, "Q4_0")[0]
    assert y[0] == -2.5 and y[16] == 3.5                   # (3 - 8) * 0.5, (15 - 8) * 0.5
    assert set(y[1:16]) == {0.0} and set(y[17:]) == {0.0}  # code 8 is zero


def test_q5_0_takes_bit_j_of_the_little_endian_word_for_element_j():
    qh = (1 << 0 | 1 << 16 | 1 << 31).to_bytes(4, "little")
    y = L.dequantize_blocks(block(f16(1.0), qh, bytes(16)), "Q5_0")[0]
    assert y[0] == 0 and y[16] == 0 and y[31] == 0         # (16 | 0) - 16
    assert y[1] == -16 and y[15] == -16 and y[30] == -16


def test_q4_1_adds_the_min_after_the_product():
    y = L.dequantize_blocks(block(f16(0.25), f16(-1.0), bytes([0x21] * 16)), "Q4_1")[0]
    assert y[0] == 1 * 0.25 - 1.0 and y[16] == 2 * 0.25 - 1.0


def test_iq4_nl_reads_the_non_uniform_table():
    y = L.dequantize_blocks(block(f16(2.0), bytes([0xF0] * 16)), "IQ4_NL")[0]
    assert y[0] == -254.0 and y[16] == 226.0               # 2 * kvalues[0] = 2 * -127, 2 * kvalues[15]


def test_q4_0_quantizer_scales_by_the_signed_max_and_codes_by_truncation():
    x = np.zeros((1, 32), F32)
    x[0, 0], x[0, 1], x[0, 2] = -4.0, 1.0, 4.0           # max |x| = 4 first at -4: d = -4 / -8 = 0.5
    b = L.quantize_blocks(x, "Q4_0")[0]
    assert np.frombuffer(b[:2].tobytes(), "<f2")[0] == 0.5
    # id = 2: -4 -> trunc(-8 + 8.5) = 0; 1 -> trunc(2 + 8.5) = 10; 4 -> trunc(8 + 8.5) = 16 -> min 15; 0 -> 8
    assert [b[2] & 15, b[3] & 15, b[4] & 15, b[5] & 15] == [0, 10, 15, 8]


def test_all_zero_block_stores_negative_zero_d_and_code_8():
    b = L.quantize_blocks(np.zeros((1, 32), F32), "Q4_0")[0]
    assert b[:2].tolist() == [0x00, 0x80] and set(b[2:]) == {0x88}      # d = 0 / -8 = -0.0


def test_q8_0_rounds_halves_away_from_zero():
    x = np.zeros((1, 32), F32)
    x[0, :3] = [127.0, 2.5, -2.5]                          # d = 1, id = 1
    assert L.quantize_blocks(x, "Q8_0")[0, 2:5].view(np.int8).tolist() == [127, 3, -3]


def test_bf16_quantize_rounds_to_nearest_even():
    x = np.array([[np.uint32(0x3F808000).view(F32)], [np.uint32(0x3F818000).view(F32)]], F32)
    assert L.quantize_blocks(x, "BF16").view("<u2")[:, 0].tolist() == [0x3F80, 0x3F82]


def test_read_f16_widens_exactly_and_refuses_a_field_outside_the_block():
    b = block(f16(-0.000061035156), f16(65504.0))
    assert L.read_f16(b, 2).tolist() == [65504.0] and L.read_f16(b, 0)[0] == F32(np.float16(-0.000061035156))
    with pytest.raises(ShapeError, match="offset"):
        L.read_f16(b, 3)


def test_block_functions_refuse_bad_input_by_name():
    with pytest.raises(ShapeError, match="blocks"):
        L.dequantize_blocks(np.zeros((1, 17), np.uint8), "Q4_0")
    with pytest.raises(DtypeError, match="blocks"):
        L.dequantize_blocks(np.zeros((1, 18), np.int16), "Q4_0")
    with pytest.raises(FormatRuleError, match="qtype"):
        L.quantize_blocks(np.zeros((1, 32), F32), "IQ4_NL")
    with pytest.raises(ShapeError, match="x"):
        L.quantize_blocks(np.zeros((1, 31), F32), "Q4_0")
    assert_bitexact(L.dequantize_blocks(np.zeros((0, 18), np.uint8), "Q4_0"), np.zeros((0, 32), F32), name="empty")
