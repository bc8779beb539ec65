"""GGUF's 4-bit floats worked by hand: ggml's doubled e2m1 table, the halved E8M0 scale with no NaN code,
MXFP4's and NVFP4's nibble orders, UE4M3's ignored bit 7 and its 0x7F/0xFF bytes, the MXFP4 quantizer's
exponent, ties and wrap; every E8M0 and UE4M3 byte against ggml's bit construction; refusals. (The gguf
package's goldens are checked through refsim.formats.gguf in test_gguf.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import gguf_fp4 as F

F32 = np.float32


def test_kvalues_are_ggmls_doubled_e2m1_with_a_plus_zero():
    assert F.KVALUES_MXFP4.tolist() == [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]


def test_e8m0_half_equals_ggmls_bit_construction_for_every_byte():
    e = np.arange(256, dtype=np.uint8)
    bits = np.where(e < 2, np.uint32(0x00200000) << e.astype(np.uint32), (e.astype(np.uint32) - 1) << 23)
    assert F.e8m0_half(e).view(np.uint32).tolist() == bits.astype(np.uint32).tolist()
    assert F.e8m0_half(np.array([255], np.uint8))[0] == 2.0 ** 127     # no NaN scale in ggml


def test_ue4m3_half_for_every_byte():
    for u in range(256):
        ex, man = (u >> 3) & 15, u & 7                                  # ggml_ue4m3_to_fp32, transcribed
        raw = man * 2.0 ** -9 if ex == 0 else (1 + man / 8) * 2.0 ** (ex - 7)
        want = 0.0 if u in (0, 0x7F) else raw * 0.5
        assert F.ue4m3_half(np.array([u], np.uint8))[0] == want, hex(u)
    assert F.ue4m3_half(np.array([0xFF, 0x7F, 0xB8], np.uint8)).tolist() == [240.0, 0.0, 0.5]


def test_one_mxfp4_block_worked_by_hand():
    b = np.zeros((1, 17), np.uint8)
    b[0, 0], b[0, 1] = 127, 0xA7                                     # d = 2^(127-128)
    y = F.dequantize_blocks(b, "MXFP4")[0]
    assert (y[0], y[16], y[1]) == (6.0, -1.0, 0.0)
    b[0, 1] = 0x88                                                      # e2m1 -0 is ggml's +0
    assert F.dequantize_blocks(b, "MXFP4")[0, 0].view(np.uint32) == 0


def test_nvfp4_sub_blocks_and_nibble_order():
    b = np.zeros((1, 36), np.uint8)
    b[0, 0:4] = [0x38, 0x40, 0xFF, 0x7F]                                # e4m3 1.0, 2.0, (480), NaN -> 0
    b[0, 4], b[0, 12], b[0, 20], b[0, 28] = 0x72, 0x07, 0x01, 0x07
    y = F.dequantize_blocks(b, "NVFP4")[0]
    assert (y[0], y[8], y[16], y[24], y[32], y[48]) == (1.0, 6.0, 12.0, 0.0, 240.0, 0.0)


def test_mxfp4_quantizer_exponent_ties_and_wrap():
    x = np.zeros((3, 32), F32)
    x[0, :4] = [6.0, 0.75, -0.25, 5.0]             # amax 6: e = 2 - 2 + 127 = 127, d = 2^-1 * ... kv step 0.5
    x[1, 0] = 2.0 ** -130                          # floor(log2) - 2 + 127 = -5 -> 251 (gguf-py's wrap)
    q = F.quantize_blocks(x, "MXFP4")
    assert q[:, 0].tolist() == [127, 251, 0]
    c = np.concatenate([q[0, 1:] & 15, q[0, 1:] >> 4])
    # d = 2^-1: 0.75 = kv 1.5 lies between 1 and 2, tie -> index 1 (0.5); -0.25 between 0 and -1 -> index 0;
    # 5.0 = kv 10 between 8 and 12 -> index 6 (4.0)
    assert c[:4].tolist() == [7, 1, 0, 6]
    assert_refs = F.quantize_blocks_reference(x, "MXFP4")
    assert assert_refs.tolist() == q.tolist()


def test_refusals_name_the_rule():
    with pytest.raises(ShapeError, match="blocks"):
        F.dequantize_blocks(np.zeros((1, 18), np.uint8), "MXFP4")
    with pytest.raises(DtypeError, match="blocks"):
        F.dequantize_blocks(np.zeros((1, 36), np.float32), "NVFP4")
    with pytest.raises(FormatRuleError, match="qtype"):
        F.quantize_blocks(np.zeros((1, 32), F32), "NVFP4")
    with pytest.raises(NonFiniteError, match="x"):
        F.quantize_blocks(np.full((1, 32), np.nan, F32), "MXFP4")
    with pytest.raises(DtypeError, match="e"):
        F.e8m0_half(np.zeros(2, np.int32))
