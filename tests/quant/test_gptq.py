"""GPTQ algorithm: error below RTN, act-order/static-group semantics, independent special cases."""

import numpy as np
import pytest
import threadpoolctl

from refsim.errors import FormatRuleError
from refsim.formats import gptq as gptq_format
from refsim.formats.uniform import quantize
from refsim.quant.gptq import HessianAccumulator, IntegerGrid, gptq_quantize, hessian, layer_output_error
from refsim.quant.rtn import rtn_quantize
from refsim.testing import assert_bitexact


def correlated_layer(seed=0, k=128, n=64, t=512):
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((k, k)) * 0.3 + np.eye(k)
    X = (rng.standard_normal((t, k)) @ mix).astype(np.float32)
    X[:, :4] *= 8  # a few strong input channels, as in LLM activations
    W = rng.standard_normal((k, n)).astype(np.float32)
    return X, W


@pytest.mark.parametrize("bits", [3, 4])
@pytest.mark.parametrize("group_size,act_order", [(None, False), (32, False), (32, True), (64, True)])
def test_gptq_layer_output_error_is_below_rtn_on_correlated_inputs(bits, group_size, act_order):
    X, W = correlated_layer(bits)
    H = hessian(X)
    g = gptq_quantize(W, H, bits, group_size=group_size, act_order=act_order)
    r = rtn_quantize(W, bits, group_size=group_size, clip_grid=None)
    assert layer_output_error(X, W, g.W_hat) < 0.9 * layer_output_error(X, W, r.dequantize())


def test_with_a_diagonal_hessian_gptq_is_exactly_round_to_nearest():
    # H = c*I: U is diagonal, every error update is zero, so GPTQ must reproduce RTN code for code.
    _, W = correlated_layer(1)
    H = 3.0 * np.eye(W.shape[0])
    g = gptq_quantize(W, H, 4, group_size=None)
    r = quantize(W, 4, scheme="gptq_asym", granularity="channel")
    assert_bitexact(g.q, r.q, name="codes")
    assert_bitexact(g.scales, r.scale, name="scales")


def test_with_diagonal_hessian_and_groups_aligned_to_blocks_gptq_equals_grouped_rtn():
    _, W = correlated_layer(2, k=256)
    g = gptq_quantize(W, np.eye(256), 3, group_size=128, sym=True)
    r = quantize(W, 3, scheme="gptq_sym", granularity="group", group_size=128)
    assert_bitexact(g.q, r.q)
    assert_bitexact(g.zeros, r.zero)


def test_groups_longer_than_a_block_read_the_later_rows_of_the_global_weights():
    # group 256 over blocks of 64: each group's parameters need rows of three later blocks; with a
    # diagonal H no update moves them, so the parameters and codes are grouped RTN's exactly.
    _, W = correlated_layer(7, k=512)
    g = gptq_quantize(W, 2.0 * np.eye(512), 4, group_size=256, blocksize=64)
    r = quantize(W, 4, scheme="gptq_asym", granularity="group", group_size=256)
    assert_bitexact(g.scales, r.scale)
    assert_bitexact(g.q, r.q)


def test_act_order_g_idx_is_inverse_permutation_over_group_size():
    X, W = correlated_layer(3)
    H = hessian(X)
    g = gptq_quantize(W, H, 4, group_size=32, act_order=True)
    perm = np.argsort(-np.diag(H), kind="stable")
    assert np.array_equal(g.perm, perm)
    assert np.array_equal(g.g_idx, (np.argsort(perm) // 32).astype(np.int32))
    # processing order: the first 32 processed rows (perm[:32]) all read scale row 0
    assert set(g.g_idx[perm[:32]].tolist()) == {0}


def test_static_groups_use_original_order_g_idx_and_original_weight_ranges():
    X, W = correlated_layer(4)
    H = hessian(X)
    g = gptq_quantize(W, H, 4, group_size=32, act_order=True, static_groups=True)
    assert np.array_equal(g.g_idx, (np.arange(128) // 32).astype(np.int32))
    r = quantize(W, 4, scheme="gptq_asym", granularity="group", group_size=32)
    assert_bitexact(g.scales, r.scale)  # parameters from the untouched weights


def test_dead_input_channels_get_zero_weights():
    X, W = correlated_layer(5)
    X[:, 7] = 0
    g = gptq_quantize(W, hessian(X), 4, group_size=None, sym=True)
    assert np.all(g.W_hat[7] == 0)


def test_w_hat_equals_the_packed_checkpoint_dequantized_within_one_fp16_rounding():
    X, W = correlated_layer(6)
    g = gptq_quantize(W, hessian(X), 4, group_size=32, act_order=True)
    ck = g.checkpoint()
    deq = gptq_format.dequantize(ck).astype(np.float64)
    s16 = ck.scales.astype(np.float64)[g.g_idx]
    # fp16 scale rounding (rel 2^-11) times |q - z| <= 15 steps, plus the fp16 product rounding
    bound = np.abs(g.W_hat) * 2.0**-11 + 15 * s16 * 2.0**-11 + 1e-12
    assert (np.abs(deq - g.W_hat) <= bound).all()
    q, _, zeros, g_idx = gptq_format.unpack(ck)
    assert_bitexact(q, g.q)


def test_non_positive_definite_hessian_raises_a_clear_error():
    W = np.ones((32, 32), np.float32)
    H = -np.eye(32)
    H[0, 0] = 1.0
    with pytest.raises(FormatRuleError, match="positive definite after dampening"):
        gptq_quantize(W, H, 4, group_size=None, percdamp=0.0)


def test_upper_cholesky_of_inverse_factors_the_damped_inverse():
    from refsim.quant.gptq import upper_cholesky_of_inverse

    X, _ = correlated_layer(8, k=64, t=256)
    H = hessian(X)
    U = upper_cholesky_of_inverse(H, 0.01).astype(np.float64)
    assert np.array_equal(U, np.triu(U)) and (np.diag(U) > 0).all()
    Hd = H + 0.01 * np.mean(np.diag(H)) * np.eye(64)
    resid = U.T @ U @ Hd - np.eye(64)
    # float32 factorisation: backward-stable, so the residual is bounded by ~K * eps32 * cond(Hd)
    assert np.abs(resid).max() < 64 * 2.0**-23 * np.linalg.cond(Hd)


def test_hessian_counts_samples_not_tokens():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8))
    acc = HessianAccumulator(8)
    acc.add_batch(x[:1])
    acc.add_batch(x[1:])
    direct = 2.0 / 2 * sum(xi.T @ xi for xi in x)
    assert np.allclose(acc.H, direct, rtol=1e-12, atol=0)
    assert acc.nsamples == 2
    assert np.allclose(hessian(x[0]), 2.0 * x[0].T @ x[0], rtol=1e-12)  # 2-D input = one sample


def test_gptq_does_not_modify_its_inputs():
    X, W = correlated_layer(7)
    H = hessian(X)
    W0, H0 = W.copy(), H.copy()
    gptq_quantize(W, H, 4, group_size=32, act_order=True)
    assert_bitexact(W, W0)
    assert_bitexact(H, H0)


def test_static_groups_with_the_output_columns_split_in_two_halves():
    # N >= 512 splits the output columns over two threads; each half must read its own columns of
    # the static (N,) group parameters (this raised a broadcast error before)
    X, _ = correlated_layer(9, k=64, t=256)
    W = np.random.default_rng(9).standard_normal((64, 600)).astype(np.float32)
    g = gptq_quantize(W, hessian(X), 4, group_size=32, act_order=True, static_groups=True)
    r = quantize(W, 4, scheme="gptq_asym", granularity="group", group_size=32)
    assert_bitexact(g.scales, r.scale)
    assert_bitexact(g.zeros, r.zero)


def _loop_inputs(seed, k, n, bits, group_size, act_order, static_groups, sym, blocksize):
    from refsim.formats.uniform import find_params
    from refsim.quant.gptq import upper_cholesky_of_inverse

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2 * k, k)).astype(np.float32)
    X[:, 1] = 0  # a dead input: its weights are zeroed and H[1, 1] = 1 before the loop
    H = hessian(X)
    W = rng.standard_normal((k, n)).astype(np.float32)
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    W[dead] = 0.0
    scheme = "gptq_sym" if sym else "gptq_asym"
    params = lambda rows: find_params(rows, bits, scheme)  # noqa: E731
    static = None
    if static_groups:
        static = [params(W[i:i + group_size]) for i in range(0, k, group_size)]
    perm = np.argsort(-np.diag(H), kind="stable") if act_order else np.arange(k)
    U = upper_cholesky_of_inverse(H[np.ix_(perm, perm)], 0.01)
    return W[perm], dict(U=U, perm=perm, grid=IntegerGrid(bits), group_size=group_size, static=static,
                         params=params, blocksize=blocksize)


@pytest.mark.parametrize("k,n,bits,group_size,act_order,static_groups,sym,blocksize", [
    (256, 96, 4, 128, False, False, False, 128),
    (256, 96, 2, 32, True, False, True, 128),
    (192, 80, 3, None, True, False, False, 64),
    (256, 64, 8, 64, True, True, False, 128),
    (320, 72, 4, 160, False, False, True, 48),   # groups longer than a block, ragged last block
    (200, 40, 4, 40, True, False, False, 128),   # K not a multiple of the block
])
def test_fast_column_loop_is_bit_equal_to_the_readable_reference(k, n, bits, group_size, act_order,
                                                                 static_groups, sym, blocksize):
    from refsim.quant.gptq import _column_loop, _column_loop_reference

    W, kw = _loop_inputs(k, k, n, bits, group_size, act_order, static_groups, sym, blocksize)
    with threadpoolctl.threadpool_limits(limits=1):
        fast = _column_loop(W, **kw)
        ref = _column_loop_reference(W, **kw)
    assert_bitexact(fast[0], ref[0], name="codes")
    assert_bitexact(fast[1], ref[1], name="losses")
    assert len(fast[2]) == len(ref[2])
    for a, b in zip(fast[2] + fast[3], ref[2] + ref[3]):
        assert_bitexact(a, b)


def test_fast_column_loop_half_away_rounding_is_bit_equal_to_the_reference():
    # ties need exact half steps: diagonal H (no updates move w), half-integer weights, and every
    # group holding 0 and 15 (scale 1, zero 0), so w / scale = 2.5, 3.5, ... occur many times
    from refsim.formats.uniform import find_params
    from refsim.quant.gptq import _column_loop, _column_loop_reference, upper_cholesky_of_inverse

    k, n = 128, 64
    W = (np.random.default_rng(3).integers(0, 31, (k, n)) / 2).astype(np.float32)
    W[0::32], W[1::32] = 0.0, 15.0
    kw = dict(U=upper_cholesky_of_inverse(2.0 * np.eye(k), 0.01), perm=np.arange(k),
              grid=IntegerGrid(4, "half_away"), group_size=32, static=None,
              params=lambda rows: find_params(rows, 4, "gptq_asym", rounding="half_away"), blocksize=128)
    with threadpoolctl.threadpool_limits(limits=1):
        fast, ref = _column_loop(W, **kw), _column_loop_reference(W, **kw)
    assert_bitexact(fast[0], ref[0])
    assert_bitexact(fast[1], ref[1])
    assert (ref[0][W == 2.5] == 3).all()  # the ties were there and rounded away from zero


@pytest.mark.parametrize("group_size,act_order,static_groups", [
    (32, False, False), (32, True, False), (32, True, True), (None, True, False)])
def test_w_hat_equals_the_plain_gathered_dequantization(group_size, act_order, static_groups):
    X, W = correlated_layer(10)
    g = gptq_quantize(W, hessian(X), 4, group_size=group_size, act_order=act_order, static_groups=static_groups)
    plain = (g.q.astype(np.float32) - g.zeros.astype(np.float32)[g.g_idx]) * g.scales[g.g_idx]
    assert_bitexact(g.W_hat, plain)


@pytest.mark.parametrize("k", [5, 300, 600])
def test_factor_of_the_permuted_hessian_without_forming_it_is_bit_equal(k):
    # act-order folds the permutation into the tiled copy; the factor must be that of H[perm][:, perm]
    from refsim.quant.gptq import _upper_cholesky_of_inverse, upper_cholesky_of_inverse

    X, _ = correlated_layer(11, k=k, t=2 * k)
    H = hessian(X)
    perm = np.random.default_rng(k).permutation(k)
    assert_bitexact(_upper_cholesky_of_inverse(H, 0.01, perm), upper_cholesky_of_inverse(H[np.ix_(perm, perm)], 0.01))


@pytest.mark.parametrize("flag", ["sym", "act_order", "static_groups"])
def test_bool_flags_must_be_bools_not_arrays(flag):
    W = np.zeros((64, 8), np.float32)
    with pytest.raises(FormatRuleError, match=rf"{flag}: must be True or False; got array"):
        gptq_quantize(W, np.eye(64), 4, group_size=32, **{flag: np.array([True, False])})
