"""GPTQ -> Marlin repack (refsim.formats.gptq_marlin) against a test-only transliteration of vLLM's
``gptq_marlin_repack`` kernel (commit 0794945f839b0e07a15212ae4c23e711b63d6d23) and against Marlin's
own ``pack`` of the (row-permuted) codes; refusals name the rule."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import gptq, gptq_marlin, marlin
from refsim.testing import assert_bitexact


def _vllm_repack_4bit(qweight: np.ndarray, perm, k: int, n: int) -> np.ndarray:
    """Test-only transliteration of the repack kernel's per-thread behaviour (4-bit): for each
    16x64 tile, warp w < 4 and lane, read the 8 codes straight out of the GPTQ words."""
    words = qweight.view(np.uint32)
    out = np.zeros((k // 16, n * 16 // 8), dtype=np.uint32)
    for kt in range(k // 16):
        for nt in range(n // 64):
            for w in range(4):
                for th in range(32):
                    tc_col, tc_row = th // 4, (th % 4) * 2
                    cur_n = 64 * nt + w * 16 + tc_col
                    vals = [0] * 8
                    for i, off in enumerate((0, 1, 8, 9)):
                        src_k = 16 * kt + tc_row + off
                        if perm is not None:
                            src_k = int(perm[src_k])
                        pos = src_k % 8
                        vals[i] = (int(words[src_k // 8, cur_n]) >> (4 * pos)) & 0xF
                        vals[4 + i] = (int(words[src_k // 8, cur_n + 8]) >> (4 * pos)) & 0xF
                    res = 0
                    for i, idx in enumerate((0, 2, 4, 6, 1, 3, 5, 7)):
                        res |= vals[idx] << (4 * i)
                    out[kt, nt * 128 + th * 4 + w] = res
    return out.view(np.int32)


@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_repack_matches_vllm_kernel_and_pack_of_permuted_codes(act_order):
    rng = np.random.default_rng(21)
    k, n, gs = 128, 256, 32
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    qweight = gptq.pack_qweight(q, 4)
    perm = None
    if act_order:
        g_idx = rng.permutation(np.repeat(np.arange(k // gs), gs)).astype(np.int32)  # act-order groups
        perm = gptq_marlin.act_order_perm(g_idx)
        assert np.all(np.diff(g_idx[perm]) >= 0)  # groups become contiguous runs of rows
    qweight0 = qweight.copy()
    b = gptq_marlin.repack_gptq(qweight, k, perm, zeros=np.full((k // gs, n), 8))
    assert_bitexact(qweight, qweight0, name="qweight unmodified")
    assert_bitexact(b, _vllm_repack_4bit(qweight, perm, k, n), name="B vs vLLM repack")
    q_rows = q if perm is None else q[perm]
    assert_bitexact(b, marlin._nibbles_to_words(marlin.permute_weights(q_rows)), name="B vs pack(q[perm])")


def test_gptq_repack_equals_layer_pack_on_legal_marlin_shape():
    rng = np.random.default_rng(22)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    b = gptq_marlin.repack_gptq(gptq.pack_qweight(q, 4), 256, zeros=np.full((2, 256), 8))
    b2, _ = marlin.pack(q, np.ones((2, 256), np.float16), 128)
    assert_bitexact(b, b2, name="B")


def test_gptq_repack_rejects_bad_perm_and_shapes():
    qweight = gptq.pack_qweight(np.zeros((128, 256), np.uint8), 4)
    z8 = np.full((1, 256), 8)
    with pytest.raises(FormatRuleError, match="perm: must be a permutation"):
        gptq_marlin.repack_gptq(qweight, 128, np.zeros(128, np.int32), zeros=z8)
    with pytest.raises(ShapeError, match=r"perm: shape must be \(128,\)"):
        gptq_marlin.repack_gptq(qweight, 128, np.arange(32), zeros=z8)
    # N = 64 is a legal GPTQ shape that Marlin's unpack rejects: refused up front
    with pytest.raises(ShapeError, match="N: must be a positive multiple of 128"):
        gptq_marlin.repack_gptq(gptq.pack_qweight(np.zeros((128, 64), np.uint8), 4), 128, zeros=np.full((1, 64), 8))


def test_gptq_repack_refuses_asymmetric_zero_points_with_the_reason():
    qweight = gptq.pack_qweight(np.zeros((128, 256), np.uint8), 4)
    zeros = np.full((1, 256), 8)
    zeros[0, 5] = 7  # one asymmetric column: repacking would shift it by -s
    with pytest.raises(FormatRuleError, match=r"symmetric.*first zeros\[0, 5\] = 7"):
        gptq_marlin.repack_gptq(qweight, 128, zeros=zeros)
