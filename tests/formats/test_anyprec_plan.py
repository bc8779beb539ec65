"""Kernel arithmetic reference: right lookups, right products, launch shape, constraints."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import anyprec_plan as ak
from refsim.formats import bitplane as bp


def _problem(m, n, k, p, b, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 1 << p, size=(n, k), dtype=np.uint8)
    lut = np.sort(rng.standard_normal((n, 1 << b)), axis=1).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    return codes, bp.pack(codes, p), lut, x


@pytest.mark.parametrize("m, bits", [(1, 3), (1, 4), (2, 4), (1, 6), (3, 8)])
def test_kernel_sum_equals_x_times_dequantized_weights(m, bits):
    n = 4 if m == 1 else 16
    codes, q, lut, x = _problem(m, n, 1056, 8, bits)  # one full chunk + a 32-weight tail
    got = ak.matmul_reference(x, q, lut, bits)
    W = np.take_along_axis(lut, (codes >> (8 - bits)).astype(np.intp), axis=1).astype(np.float64)
    want = x.astype(np.float64) @ W.T
    # each product is exact in float64; the sums differ only by float64 reassociation:
    # |err| <= K * 2**-52 * sum |terms|
    bound = 1056 * 2.0**-52 * (np.abs(x.astype(np.float64)) @ np.abs(W).T)
    assert np.all(np.abs(got - want) <= bound)


def test_every_weight_is_looked_up_once_with_its_own_code_and_activation():
    codes, q, lut, x = _problem(1, 4, 1312, 4, 3, seed=2)
    trace = []
    ak.matmul_reference(x, q, lut, 3, trace=trace)
    seen = {}
    for r, i, t, j, s, (k0, k1), how in trace:
        kind, ia, ib = how
        assert kind == "pair"  # 3-bit always merges
        seen.setdefault(r, []).extend([k0, k1])
    for r in range(4):
        assert sorted(seen[r]) == list(range(1312))
    # the pair index of (w_2s, w_2s+4) is (code << 3) | code' for s in {0, 1}
    r, i, t, j, s, (k0, k1), (kind, ia, ib) = trace[0]
    assert (ia >> 3) == codes[r, k0] >> 1 and (ib >> 3) == codes[r, k1] >> 1


def test_launch_plan_follows_the_dispatcher():
    p1 = ak.plan(1, 4096, 11008, 8)
    assert (p1.grid, p1.block, p1.ksplit, p1.chunks, p1.tail_lanes) == (1024, (32, 4, 3), 3, 11, 24)
    p2 = ak.plan(4, 4096, 4096, 4)
    assert (p2.grid, p2.multi_row, p2.uses_pair_table, p2.ksplit) == (256, 4, True, 1)
    # shared memory table from the official source (bits: M = 1 / M >= 2)
    table = {3: (1024, 4096), 4: (128, 16384), 5: (256, 1024), 6: (512, 2048), 7: (1024, 4096),
             8: (2048, 8192)}
    for b, (one, many) in table.items():
        assert ak.lut_shared_bytes(b, 1) == one and ak.lut_shared_bytes(b, 2) == many


def test_bytes_and_work_counts():
    nb = ak.bytes_read(1, 4096, 4096, 3)
    assert (nb.weights, nb.tables, nb.activations, nb.output) == (3 * 4096 * 512, 4096 * 16, 8192, 8192)
    w = ak.chunk_work(3, 1)
    assert (w.weight_loads, w.bitwise_ops, w.lookups, w.hfma2) == (3, 45, 16, 16)
    assert ak.chunk_work(4, 1).bitwise_ops == 52 and ak.chunk_work(4, 2).bitwise_ops == 40


def test_constraints_raise():
    with pytest.raises(ShapeError, match="N % 16"):
        ak.plan(2, 4100, 4096, 4)
    with pytest.raises(ShapeError, match="N % 4"):
        ak.plan(1, 4098, 4096, 4)
    with pytest.raises(FormatRuleError, match="1..8"):
        ak.plan(9, 4096, 4096, 4)
    with pytest.raises(FormatRuleError, match="bit-width"):
        ak.plan(1, 4096, 4096, 2)
    with pytest.raises(ShapeError, match="multiple of 32"):
        ak.plan(1, 4096, 4100, 4)
    codes, q, lut, x = _problem(1, 4, 64, 4, 4)
    with pytest.raises(FormatRuleError, match="stored planes"):
        ak.matmul_reference(x, q, np.zeros((4, 32), np.float16), 5)


def test_orin_must_be_a_bool():
    with pytest.raises(FormatRuleError, match=r"orin: must be True or False; got array"):
        ak.plan(1, 4096, 8192, 8, orin=np.array([True, False]))
    with pytest.raises(FormatRuleError, match=r"orin: must be True or False; got 1"):
        ak.plan(1, 4096, 8192, 8, orin=1)
