"""GGUF ternary types worked by hand: TQ1_0's base-3 byte and its wrapping 8-bit trit extraction, TQ2_0's
crumb order and its unused code 3, the quantizer's roundf and stored amax; every TQ1_0 byte value against
the base-3 rule; refusals. (The gguf package's goldens are checked through refsim.formats.gguf in
test_gguf.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import gguf_ternary as T

F32 = np.float32


def block(qs: bytes, d: float) -> np.ndarray:
    return np.frombuffer(qs + np.float16(d).tobytes(), np.uint8).reshape(1, -1)


def test_one_tq1_0_byte_worked_by_hand():
    qs = bytearray(53 - 1)
    qs[0] = 188                                                # trits (2, 0, 1, 2, 1): 178 -> ceil(178*256/243)
    y = T.dequantize_blocks(block(bytes(qs), 0.5), "TQ1_0")[0]
    assert [y[32 * k] for k in range(5)] == [0.5, -0.5, 0.0, 0.5, 0.0]


def test_every_tq1_0_byte_written_by_the_quantizer_reads_back_its_five_trits():
    for v in range(243):                                       # every base-3 number of 5 trits
        trits = [v // 3 ** (4 - k) % 3 for k in range(5)]
        byte = (v * 256 + 242) // 243
        got = [((byte * 3 ** k) % 256 * 3) >> 8 for k in range(5)]
        assert got == trits, v
        qs = bytearray(52)
        qs[0] = byte
        y = T.dequantize_blocks(block(bytes(qs), 1.0), "TQ1_0")[0]
        assert [int(y[32 * k]) for k in range(5)] == [t - 1 for t in trits]


def test_tq2_0_crumb_order_and_code_3():
    qs = bytearray(64)
    qs[0] = 0b11_10_01_00                                      # element 0: -1, 32: 0, 64: +1, 96: code 3 -> +2
    qs[32] = 0b10                                              # element 128: +1
    y = T.dequantize_blocks(block(bytes(qs), 2.0), "TQ2_0")[0]
    assert (y[0], y[32], y[64], y[96], y[128], y[1]) == (-2.0, 0.0, 2.0, 4.0, 2.0, -2.0)


def test_quantize_uses_roundf_and_stores_amax():
    x = np.zeros((1, 256), F32)
    x[0, :6] = [4.0, -4.0, 2.0, -2.0, 1.9999998, 0.5]          # x/amax = 1, -1, 0.5 -> 1, -0.5 -> -1, ...
    for qtype in ("TQ1_0", "TQ2_0"):
        raw = T.quantize_blocks(x, qtype)
        assert np.frombuffer(raw[0, -2:].tobytes(), "<f2")[0] == 4.0
        y = T.dequantize_blocks(raw, qtype)[0]
        assert y[:6].tolist() == [4.0, -4.0, 4.0, -4.0, 0.0, 0.0]   # 1.9999998/4 < 0.5 rounds to 0
    below_half = np.zeros((1, 256), F32)
    below_half[0, :2] = [1.0, np.nextafter(F32(0.5), F32(0))]  # roundf(0.49999997) = 0; floor(v + 0.5) gives 1
    assert T.dequantize_blocks(T.quantize_blocks(below_half, "TQ2_0"), "TQ2_0")[0, 1] == 0.0
    zero = T.quantize_blocks(np.zeros((1, 256), F32), "TQ2_0")
    assert zero[0, :64].tolist() == [0b01010101] * 64 and zero[0, 64:].tolist() == [0, 0]


def test_refusals_name_the_rule():
    with pytest.raises(ShapeError, match="blocks"):
        T.dequantize_blocks(np.zeros((1, 53), np.uint8), "TQ1_0")
    with pytest.raises(DtypeError, match="blocks"):
        T.dequantize_blocks(np.zeros((1, 66), np.int8), "TQ2_0")
    with pytest.raises(FormatRuleError, match="qtype"):
        T.dequantize_blocks(np.zeros((1, 66), np.uint8), "Q4_0")
    with pytest.raises(NonFiniteError, match="x"):
        T.quantize_blocks(np.full((1, 256), np.inf, F32), "TQ1_0")
    with pytest.raises(ShapeError, match="x"):
        T.quantize_blocks(np.zeros((1, 32), F32), "TQ2_0")
    tiny = np.zeros((2, 256), F32)
    tiny[1, 3] = 1e-45                                           # 1 / amax overflows float32
    for f in (T.quantize_blocks, T.quantize_blocks_reference):
        with pytest.raises(FormatRuleError, match="1/amax"):
            f(tiny, "TQ1_0")
