"""Oracle: fp32 FMA emulation vs exact rationals, kernel order, plain-loop twin, float64 bound."""

from fractions import Fraction

import numpy as np
import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.qigen import oracle as O
from refsim.testing import assert_bitexact


def test_fma_is_correctly_rounded_where_float64_double_rounding_fails():
    a = np.float32(1 + 2**-12)
    c = np.float32(2**-70)
    # exact a*a + c = 1 + 2^-11 + 2^-24 + 2^-70: just above the fp32 tie, so it rounds up
    expected = np.float32(1 + 2**-11 + 2**-23)
    naive = np.float32(np.float64(a) * np.float64(a) + np.float64(c))
    assert naive != expected  # the shortcut the brief warns about really is wrong here
    assert_bitexact(O.fma32(a, a, c), np.array(expected), name="fma32")
    assert_bitexact(np.array(O.fma32_reference(a, a, c)), np.array(expected), name="fma32_reference")


def test_fma_matches_exact_rational_rounding_on_random_and_edge_values():
    rng = np.random.default_rng(0)
    n = 400
    a = rng.standard_normal(n).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(n) * 1e-7)).astype(np.float32)  # cancellation
    c[::7] = rng.standard_normal(len(c[::7])).astype(np.float32)
    a[:3] = [0.0, -0.0, 1e-30]
    b[:3] = [5.0, 3.0, 1e-30]
    c[:3] = [-0.0, -0.0, 1e-38]
    got = O.fma32(a, b, c)
    want = np.array([O.fma32_reference(*t) for t in zip(a, b, c)], dtype=np.float32)
    assert_bitexact(got, want, name="fma32 vs rationals")


def test_fma_reference_against_a_directly_computed_rational():
    a, b, c = np.float32(3.0), np.float32(1 / 3), np.float32(-1.0)
    exact = Fraction(3) * Fraction(float(np.float32(1 / 3))) - 1  # tiny negative
    assert float(O.fma32_reference(a, b, c)) == float(np.float32(float(exact)))


def test_kernel_order_matches_qigen_unroll_rule():
    assert O.chunk_order(4, 2) == [6, 7, 4, 5, 2, 3, 0, 1]
    assert O.chunk_order(2, 2) == [14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1]
    assert O.chunk_order(4, 1) == [7, 6, 5, 4, 3, 2, 1, 0]
    assert O.chunk_order(3) == list(range(32))
    order = O.kernel_k_order(32, 4, 2)
    assert sorted(order) == list(range(32)) and list(order[8:16]) == [14, 15, 12, 13, 10, 11, 8, 9]
    with pytest.raises(FormatRuleError, match="unroll"):
        O.chunk_order(4, 3)


def _problem(rng, m, k, n, bits, gs, bias=True):
    groups = k // (gs or k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
    s = (rng.random((groups, n)) * 0.05 + 0.01).astype(np.float32)
    z = rng.integers(0, 2**bits, size=(groups, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    return x, q, s, z, b


@pytest.mark.parametrize("bits,gs", [(4, None), (3, 32), (2, 32), (4, 64)])
def test_oracle_matches_plain_loop_twin(bits, gs):
    rng = np.random.default_rng(bits)
    x, q, s, z, b = _problem(rng, 2, 64, 8, bits, gs)
    inputs = [a.copy() for a in (x, q, s, z, b)]
    got = O.qgemv_oracle(x, q, s, z, b, bits, gs)
    assert_bitexact(got, O.qgemv_oracle_reference(x, q, s, z, b, bits, gs), name="oracle vs reference")
    for before, after in zip(inputs, (x, q, s, z, b)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("bits,gs", [(4, None), (4, 128), (3, None), (2, 64)])
def test_oracle_within_derived_fp32_error_bound_of_exact_product(bits, gs):
    rng = np.random.default_rng(10 + bits)
    x, q, s, z, b = _problem(rng, 3, 512, 40, bits, gs)
    got = O.qgemv_oracle(x, q, s, z, b, bits, gs).astype(np.float64)
    groups = 512 // (gs or 512)
    w = (q.astype(np.float64).reshape(groups, -1, 40) - z[:, None, :]) * s[:, None, :]  # (G, gs, N)
    exact = x.astype(np.float64) @ w.reshape(512, 40) + b  # float64 error << fp32 bound
    bound = O.error_bound(x, q, s, z, b, gs)
    assert np.all(np.abs(got - exact) <= bound)
    assert np.any(np.abs(got - exact) > 0)  # the check is not vacuous


def test_oracle_depends_on_the_fma_order():
    rng = np.random.default_rng(3)
    x, q, s, z, b = _problem(rng, 4, 256, 32, 4, None)
    u2 = O.qgemv_oracle(x, q, s, z, b, 4, None, unroll=2)
    u1 = O.qgemv_oracle(x, q, s, z, b, 4, None, unroll=1)
    assert np.any(u1.view(np.uint32) != u2.view(np.uint32))


def test_oracle_rejects_bad_input():
    rng = np.random.default_rng(0)
    x, q, s, z, b = _problem(rng, 1, 64, 8, 4, None)
    with pytest.raises(FormatRuleError, match="bit-width"):
        O.qgemv_oracle(x, q, s, z, b, 5, None)
    with pytest.raises(ShapeError, match="group_size"):
        O.qgemv_oracle(x, q, s, z, b, 4, 48)
    with pytest.raises(FormatRuleError, match="codes"):
        O.qgemv_oracle(x, q | 16, s, z, b, 4, None)
    xn = x.copy()
    xn[0, 3] = np.nan
    with pytest.raises(FormatRuleError, match="finite"):
        O.qgemv_oracle(xn, q, s, z, b, 4, None)


@pytest.mark.parametrize("acc,expected", [(1, 2.0**24), (2, 2.0**24 + 16), (4, 2.0**24 + 24)])
def test_accumulators_split_the_chain_round_robin_and_combine_by_tree(acc, expected):
    # 4-bit, unroll 2: the first FMA of the chunk is row 6. x[6] = 2^24, every other x = 1,
    # q = 1, s = 1, z = 0. One chain: 2^24 + 1 rounds back to 2^24 (tie to even) 31 times.
    # A = 2: chain 0 = 2^24 (+15 lost ones), chain 1 = 16 -> 2^24 + 16 exactly.
    # A = 4: chain 0 = 2^24, chains 1..3 = 8 each -> (2^24 + 8) + (8 + 8) = 2^24 + 24.
    k = 32
    x = np.ones((1, k), dtype=np.float32)
    x[0, 6] = 2.0**24
    q = np.ones((k, 1), dtype=np.uint8)
    s = np.ones((1, 1), dtype=np.float32)
    z = np.zeros((1, 1), dtype=np.float32)
    want = np.array([[expected]], dtype=np.float32)
    assert_bitexact(O.qgemv_oracle(x, q, s, z, None, 4, None, accumulators=acc), want, name=f"A={acc}")
    assert_bitexact(O.qgemv_oracle_reference(x, q, s, z, None, 4, None, accumulators=acc), want,
                    name=f"reference A={acc}")


def test_combine_partials_is_the_pairwise_tree():
    # tree: (2^24 + 1) -> 2^24 (tie to even); (1 + 2) = 3; 2^24 + 3 -> 2^24 + 4 (tie to even).
    # Sequential left-to-right would give 2^24 + 1 -> 2^24, + 1 -> 2^24, + 2 = 2^24 + 2.
    a = [np.float32(2.0**24), np.float32(1), np.float32(1), np.float32(2)]
    got = O.combine_partials([np.array([v]) for v in a])
    assert_bitexact(got, np.array([2.0**24 + 4], dtype=np.float32), name="tree")
    with pytest.raises(FormatRuleError, match="accumulators"):
        O.combine_partials([np.zeros(1, np.float32)] * 3)


@pytest.mark.parametrize("acc", [2, 4])
def test_oracle_with_accumulators_equals_plain_loop_twin(acc):
    rng = np.random.default_rng(acc)
    k, n = 64, 3
    x = rng.standard_normal((2, k)).astype(np.float32)
    q = rng.integers(0, 8, (k, n)).astype(np.uint8)
    s = rng.random((2, n)).astype(np.float32)
    z = rng.integers(0, 8, (2, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    for bits in (3, 4):
        assert_bitexact(O.qgemv_oracle(x, q, s, z, b, bits, 32, accumulators=acc),
                        O.qgemv_oracle_reference(x, q, s, z, b, bits, 32, accumulators=acc), name=f"{bits}-bit")
    with pytest.raises(FormatRuleError, match="accumulators"):
        O.qgemv_oracle(x, q, s, z, b, 4, 32, accumulators=3)
