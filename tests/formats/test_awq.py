"""Tests of refsim.formats.awq: AutoAWQ's GEMM packing (interleaved order) against hand-built words and its
inverse; property: unpack inverts pack for any codes."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.formats import awq
from refsim.testing import assert_bitexact


def test_worked_example_word():
    assert int(awq.pack_columns(np.arange(8, dtype=np.uint8)[None]).view(np.uint32)[0, 0]) == 0x75316420


def test_reverse_order_is_the_documented_inverse():
    assert awq.AWQ_REVERSE_ORDER == (0, 4, 1, 5, 2, 6, 3, 7)


def test_every_code_in_every_nibble_slot_round_trips():
    q = np.array([[(c + s) % 16 for s in range(8)] for c in range(16)], np.uint8)  # (16, 8)
    packed = awq.pack_columns(q)
    assert_bitexact(packed, awq.pack_columns_reference(q))
    assert_bitexact(awq.unpack_columns(packed, 8), q)


def test_pack_and_reference_agree_on_random_matrix():
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, (24, 64)).astype(np.uint8)
    assert_bitexact(awq.pack_columns(q), awq.pack_columns_reference(q))


def test_checkpoint_dequantize_has_no_minus_one():
    k, n = 8, 8
    q = np.full((k, n), 5, np.uint8)
    ck = awq.pack(q, np.full((1, n), 0.5, np.float32), np.full((1, n), 3), group_size=None)
    assert_bitexact(awq.dequantize(ck), np.full((k, n), 1.0, np.float16))


def test_awq_scheme_quantizer_matches_autoawq_formula():
    from refsim.formats.uniform import quantize

    w = np.array([[-1.0, 0.5], [0.5, 1.5], [2.0, 3.5]], np.float32)  # column 1's range excludes 0
    uq = quantize(w, 4, scheme="awq", granularity="channel")
    s0 = np.float32(np.float32(3.0) / np.float32(15))
    assert uq.scale[0, 0] == s0 and uq.zero[0, 0] == 5  # -round(-1 / 0.2)
    s1 = np.float32(np.float32(3.0) / np.float32(15))
    assert uq.scale[0, 1] == s1 and uq.zero[0, 1] == 0  # -round(0.5 / 0.2) = -2, clamped to 0
    assert list(uq.q[:, 1]) == [2, 8, 15]  # round(w / s) + 0, the top saturating (round(17.5) = 18 -> 15)


# --------------------------------------------------------------------------- properties (hypothesis)
@given(st.integers(1, 5).flatmap(lambda r: st.integers(1, 4).flatmap(
    lambda w: arrays(np.uint8, (r, 8 * w), elements=st.integers(0, 15)))))
def test_awq_unpack_inverts_pack(q):
    assert_bitexact(awq.unpack_columns(awq.pack_columns(q), q.shape[1]), q)
