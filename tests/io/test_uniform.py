"""refsim.io.uniform: the integer codes every uniform format shares, and the conversions that keep them.

``UniformCodes`` checks its own shapes; ``codes_of(to_X(u))`` gives back u's codes, zeros, group map and
scale values for every target that can hold them; a target that cannot is refused with each reason
named (bits, K/N multiples, act-order, v1's 'zero - 1', Marlin's symmetry and group size), and a scale
that would round in the target's dtype is refused, never rounded. Small layers (K = N = 32), worked by hand.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import gptq as gptq_format
from refsim.io import uniform
from refsim.io.uniform import UniformCodes, codes_of, exact_cast, to_awq, to_ct, to_gptq, to_marlin
from refsim.testing import assert_bitexact

K = N = 32


def _codes(*, bits=4, gs=16, sym=True, desc_act=False, k=K, n=N, scale=0.5, seed=0) -> UniformCodes:
    rng = np.random.default_rng(seed)
    G = 1 if gs is None else k // gs
    q = rng.integers(0, 1 << bits, (k, n), dtype=np.uint8)
    zeros = np.full((G, n), 1 << (bits - 1), np.uint8) if sym else rng.integers(0, 1 << bits, (G, n), dtype=np.uint8)
    g_idx = gptq_format.default_g_idx(k, gs)
    if desc_act:
        g_idx = rng.permutation(g_idx).astype(np.int32)
    return UniformCodes("layer", q, np.full((G, n), scale, np.float16), zeros, g_idx.astype(np.int32), bits, gs, sym,
                        desc_act)


def _same_codes(a: UniformCodes, b: UniformCodes):
    assert_bitexact(a.q, b.q, "q")
    assert_bitexact(a.zeros, b.zeros, "zeros")
    assert_bitexact(a.g_idx, b.g_idx, "g_idx")
    assert_bitexact(a.scales.astype(np.float32), b.scales.astype(np.float32), "scales")
    assert (a.bits, a.group_size, a.sym, a.desc_act) == (b.bits, b.group_size, b.sym, b.desc_act)


@pytest.mark.parametrize("target", [to_gptq, to_awq, to_ct], ids=["gptq", "awq", "ct"])
@pytest.mark.parametrize("sym", [True, False], ids=["sym", "asym"])
def test_each_target_gives_back_the_same_codes_zeros_groups_and_scales(target, sym):
    u = _codes(sym=sym)
    if not sym:
        u = UniformCodes(u.name, u.q, u.scales, np.maximum(u.zeros, 1), u.g_idx, 4, 16, False, False)  # v1-storable
    _same_codes(codes_of(target(u)), u)


def test_act_order_survives_gptq_ct_and_marlin():
    u = _codes(desc_act=True)
    for target in (to_gptq, to_ct):
        _same_codes(codes_of(target(u)), u)
    big = _codes(desc_act=True, k=256, n=256, gs=128)
    _same_codes(codes_of(to_marlin(big)), big)
    assert to_marlin(big).perm is not None and to_marlin(_codes(k=256, n=256, gs=128)).perm is None


def test_compressed_tensors_stores_signed_codes_transposed():
    u = _codes(bits=4)
    ct = to_ct(u)
    # code q is stored as q - 8 in an int8 (N, K) array: code 0 -> -8, code 15 -> 7
    assert ct.q.dtype == np.int8 and ct.q.shape == (N, K)
    assert_bitexact(ct.q, (u.q.T.astype(np.int16) - 8).astype(np.int8))
    assert int(ct.q[u.q.T == 0].min()) == -8 and int(ct.q[u.q.T == 15].max()) == 7
    assert ct.g_idx is None and ct.actorder is None
    assert to_ct(_codes(desc_act=True)).actorder == "group"
    assert to_ct(u, np.float32).scale.dtype == np.float32


def test_exact_cast_keeps_values_that_survive_and_refuses_those_that_would_round():
    s = np.array([0.5, 1.0, 3.0, 2.0**-14], np.float32)
    out = exact_cast("l", s, np.float16)
    assert out.dtype == np.float16 and out.tolist() == [0.5, 1.0, 3.0, 2.0**-14]
    assert exact_cast("l", s.astype(np.float16), np.float16).dtype == np.float16
    # 1 + 2**-11 needs 11 fraction bits: float16 has 10
    with pytest.raises(FormatRuleError, match=r"l: scales must be exactly representable in float16 for this target .1 are not.; "
                                              r"got 1.00048828125"):
        exact_cast("l", np.array([1.0, 1 + 2.0**-11], np.float32), np.float16)
    # 1 + 2**-8 is a float16 but needs 8 fraction bits: bfloat16 has 7
    with pytest.raises(FormatRuleError, match="exactly representable in bfloat16"):
        exact_cast("l", np.array([1 + 2.0**-8], np.float16), ml_dtypes.bfloat16)
    with pytest.raises(FormatRuleError, match="exactly representable in float16"):
        exact_cast("l", np.array([70000.0], np.float32), np.float16)          # overflows to inf
    with pytest.raises(DtypeError, match="scales: dtype must be bfloat16, float16, float32 or float64; got int32"):
        exact_cast("l", np.array([1], np.int32), np.float16)


@pytest.mark.parametrize("u, target, reason", [
    (_codes(bits=3), to_awq, r"cannot convert to awq: bits=3 \(AWQ GEMM is 4-bit\)"),
    (_codes(desc_act=True), to_awq, r"act-order \(AWQ reads groups as consecutive rows\)"),
    (_codes(n=12, gs=16), to_awq, "N=12 is not a multiple of 8"),
    (_codes(k=48, n=12, gs=16), to_gptq, r"K=48, N=12 \(GPTQ packs multiples of 32\)"),
])
def test_targets_that_cannot_hold_the_codes_are_refused_with_the_reason(u, target, reason):
    with pytest.raises(FormatRuleError, match=reason):
        target(u)


def test_gptq_v1_refuses_a_zero_point_of_zero():
    u = _codes(sym=False)
    assert (u.zeros == 0).any()
    with pytest.raises(FormatRuleError, match="a zero point is 0, which v1's 'zero - 1' cannot store"):
        to_gptq(u, "gptq")
    _same_codes(codes_of(to_gptq(u, "gptq_v2")), u)


def test_marlin_reasons_lists_every_rule_the_codes_break():
    assert uniform.marlin_reasons(_codes(k=256, n=256, gs=128)) == []
    assert uniform.marlin_reasons(_codes(k=256, n=256, gs=None)) == []
    assert uniform.marlin_reasons(_codes(bits=8, gs=32, k=64, n=64)) == [
        "bits=8 (Marlin is 4-bit)", "group_size=32 (Marlin supports 128 or per-channel)",
        "K=64 is not a multiple of 128", "N=64 is not a multiple of 256"]
    u = _codes(k=128, n=256, gs=128)
    z = u.zeros.copy()
    z[0, :3] = 7
    asym = UniformCodes("layer", u.q, u.scales, z, u.g_idx, 4, 128, False, False)
    assert uniform.marlin_reasons(asym) == [
        "asymmetric zero points (3 of 256 differ from 8; Marlin's format is symmetric, (q - 8) * s)"]
    with pytest.raises(FormatRuleError, match="cannot repack to Marlin: asymmetric zero points .* --requantize"):
        to_marlin(asym)
    # --requantize is suggested only where it can help: it cannot change K or N
    with pytest.raises(FormatRuleError, match=r"N=64 is not a multiple of 256\)?$"):
        to_marlin(_codes(bits=8, gs=32, k=64, n=64))
    assert uniform.requantize_hint(128, 256).startswith(" (use --requantize")
    assert uniform.requantize_hint(384, 384) == uniform.requantize_hint(64, 256) == ""
    # act-order groups of unequal size: g_idx puts 129 rows in group 0 of a K=256, gs=128 layer
    u = _codes(k=256, n=256, gs=128, desc_act=True)
    g = u.g_idx.copy()
    g[np.flatnonzero(g == 1)[0]] = 0
    uneven = UniformCodes("layer", u.q, u.scales, u.zeros, g, 4, 128, True, True)
    assert uniform.marlin_reasons(uneven) == ["act-order groups do not all hold exactly group_size rows"]


def test_uniform_codes_check_their_shapes():
    u = _codes()
    with pytest.raises(ShapeError, match="zeros"):
        UniformCodes("l", u.q, u.scales, u.zeros[:1], u.g_idx, 4, 16, True, False)
    with pytest.raises(ShapeError, match="g_idx"):
        UniformCodes("l", u.q, u.scales, u.zeros, u.g_idx[:-1], 4, 16, True, False)
    with pytest.raises(ShapeError, match="group_size: must divide K=32; got 12"):
        UniformCodes("l", u.q, u.scales, u.zeros, u.g_idx, 4, 12, True, False)
    with pytest.raises(FormatRuleError, match="bits"):
        UniformCodes("l", u.q, u.scales, u.zeros, u.g_idx, 5, 16, True, False)
    assert (u.k, u.n) == (K, N)


def test_codes_of_refuses_anything_but_a_uniform_layer():
    with pytest.raises(FormatRuleError, match="uniform layer"):
        codes_of(_codes())


def test_uniform_codes_refuse_codes_zeros_and_groups_outside_their_ranges():
    from refsim.errors import FormatRuleError, ShapeError
    from refsim.io.uniform import UniformCodes

    k, n = 64, 8
    args = dict(name="L", q=np.zeros((k, n), np.uint8), scales=np.ones((2, n), np.float16),
                zeros=np.full((2, n), 8, np.uint8), g_idx=(np.arange(k) // 32).astype(np.int32), bits=4,
                group_size=32, sym=True, desc_act=False)
    UniformCodes(**args)
    for change, err, match in [
        (dict(q=np.full((k, n), 16, np.uint8)), FormatRuleError, r"q: 4-bit codes must lie in \[0, 15\]; got 16"),
        (dict(zeros=np.full((2, n), 16, np.uint8), sym=False), FormatRuleError, r"zeros: 4-bit codes .*got 16"),
        (dict(zeros=np.full((2, n), 3, np.uint8)), FormatRuleError, r"zeros: every zero point must be 8 when sym; got 3"),
        (dict(g_idx=np.full(k, 2, np.int32)), FormatRuleError, r"g_idx: entries must lie in \[0, 1\]"),
        (dict(group_size=16), ShapeError, r"scales: must have 4 rows \(K=64, group_size=16\); got 2"),
        (dict(group_size=9), ShapeError, r"group_size: must divide K=64; got 9"),
    ]:
        with pytest.raises(err, match=match):
            UniformCodes(**{**args, **change})
