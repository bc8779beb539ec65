"""Marlin's quantizer (refsim.quant.marlin): the official rounding and clamping, hand-worked; the
official ``gen_quant4`` round trip is tested with the layout in tests/formats/test_marlin.py."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.quant import marlin as mq


def test_quantize_rejects_zero_scales_and_matches_official_rounding():
    w = np.tile(np.array([7.5, -8.0, 0.5, 1.5], dtype=np.float16), (128, 64))  # (128, 256)
    s = np.ones((1, 256), np.float16)
    q = mq.quantize(w, s, None)
    # 7.5 -> round half even 8 -> code 16 -> clamped 15; -8 -> 0; 0.5 -> 0 -> 8; 1.5 -> 2 -> 10
    assert q[0, :4].tolist() == [15, 0, 8, 10]
    s0 = s.copy()
    s0[0, 3] = 0
    with pytest.raises(FormatRuleError, match="scales: must be non-zero"):
        mq.quantize(w, s0, None)


def test_the_worked_example_of_the_spec_block():
    # one group of 128 rows whose absmax is 1.5: s = fp16(1.5 * 2/15) = fp16(0.2) = 0.199951171875
    w = np.zeros((128, 256), np.float16)
    w[:5, 0] = [-1.5, -0.31, 0.0, 0.29, 1.5]
    s = mq.compute_scales(w, 128)
    assert s.shape == (1, 256) and float(s[0, 0]) == 0.199951171875 and float(s[0, 1]) == 0.0
    assert mq.quantize(w[:, :1].repeat(256, axis=1), np.full((1, 256), s[0, 0]), 128)[:5, 0].tolist() == [0, 6, 8, 9, 15]
