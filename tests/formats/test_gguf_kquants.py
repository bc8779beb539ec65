"""GGUF k-quants worked by hand: a Q4_K super-block, get_scale_min_k4's 6-bit unpacking over all byte
values, Q3_K's scale shuffle and inverted high bit, Q6_K's signed scales, IQ4_XS's split scales; refusals.
(The goldens made by the gguf package are checked through refsim.formats.gguf in test_gguf.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import gguf_kquants as K

F32 = np.float32


def f16(v: float) -> bytes:
    return np.float16(v).tobytes()


def test_one_q4_k_super_block_worked_by_hand():
    scales = bytes([2, 2, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0])       # sc0..3 = 2, m0..3 = 3, sc4..7 = m4..7 = 0
    qs = bytes([0x75] + [0] * 127)
    b = np.frombuffer(f16(1.0) + f16(0.5) + scales + qs, np.uint8).reshape(1, 144)
    y = K.dequantize_blocks(b, "Q4_K")[0]
    assert y[0] == 8.5 and y[32] == 12.5                         # 2*5 - 1.5 and 2*7 - 1.5
    assert y[1] == -1.5 and y[64] == 2 * 0 - 1.5 and y[128] == 0.0   # sub-block 4 has sc = m = 0


def test_scale_min_k4_equals_get_scale_min_k4_for_every_byte_value():
    rng = np.random.default_rng(0)
    b = rng.integers(0, 256, (64, 12), dtype=np.uint8)
    b[0] = 255
    sc, mn = K.scale_min_k4(b)
    for r in range(64):
        q = [int(v) for v in b[r]]
        for j in range(8):                                       # ggml's get_scale_min_k4, transcribed
            if j < 4:
                d, m = q[j] & 63, q[j + 4] & 63
            else:
                d, m = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)
            assert (sc[r, j], mn[r, j]) == (d, m)
    assert sc[0].tolist() == [63] * 8


def test_q3_k_subtracts_4_where_the_high_bit_is_clear():
    hmask = bytes([0x01] + [0] * 31)                             # element 0's bit (h = 0, j = 0) set
    scales = bytes([0x01] * 8 + [0x02] * 4)                      # scale 0: low 1 | (2 & 3) << 4 = 33 -> 1
    qs = bytes([0x03] + [0] * 63)
    b = np.frombuffer(hmask + qs + scales + f16(0.5), np.uint8).reshape(1, 110)
    y = K.dequantize_blocks(b, "Q3_K")[0]
    assert y[0] == 0.5 * 1 * 3                                   # q2 = 3, bit set: no -4
    assert y[1] == 0.5 * 1 * (0 - 4)                             # bit clear: -4


def test_q6_k_uses_signed_int8_scales():
    ql, qh = bytes([0x0F] + [0] * 127), bytes([0x03] + [0] * 63)  # element 0: 15 | 3 << 4 = 63 -> +31
    scales = bytes([0xFE] + [1] * 15)                            # -2
    b = np.frombuffer(ql + qh + scales + f16(1.0), np.uint8).reshape(1, 210)
    y = K.dequantize_blocks(b, "Q6_K")[0]
    assert y[0] == -2 * 31 and y[1] == -2 * -32 and y[16] == 1 * -32


def test_iq4_xs_joins_low_and_high_scale_bits():
    sh = (0b11 << 2).to_bytes(2, "little")                      # sub-block 1: high bits 3
    sl = bytes([0x5A, 0, 0, 0])                                  # sub-block 0 low 0xA, sub-block 1 low 0x5
    qs = bytes([0xFF] * 128)
    b = np.frombuffer(f16(1.0) + sh + sl + qs, np.uint8).reshape(1, 136)
    y = K.dequantize_blocks(b, "IQ4_XS")[0]
    assert y[0] == (0xA - 32) * 113 and y[32] == (0x35 - 32) * 113


def test_refusals_name_the_rule():
    with pytest.raises(ShapeError, match="blocks"):
        K.dequantize_blocks(np.zeros((1, 143), np.uint8), "Q4_K")
    with pytest.raises(DtypeError, match="blocks"):
        K.dequantize_blocks(np.zeros((1, 144), np.float32), "Q4_K")
    with pytest.raises(FormatRuleError, match="qtype"):
        K.dequantize_blocks(np.zeros((1, 144), np.uint8), "Q4_0")
    with pytest.raises(ShapeError, match="scales"):
        K.scale_min_k4(np.zeros((1, 11), np.uint8))
