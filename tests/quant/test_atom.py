"""Tests of refsim.quant.atom: Atom's GPTQ (pair-shared sym 4-bit quantizer, keeper rows INT8)
against a plain OBS loop and against the official scale convention derived by hand; the pipeline
(reorder invariance, W4A16 / W4A4 paths) and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import atom as A
from refsim.quant import atom as QA
from refsim.quant.gptq import hessian
from refsim.testing import assert_bitexact


def _layer(seed=0, k=96, n=6, t=200):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((t, k)).astype(np.float32) * rng.uniform(0.1, 3.0, k).astype(np.float32)
    W = rng.standard_normal((k, n)).astype(np.float32)
    return W, X


def test_atom_gptq_matches_plain_obs_loop():
    W, X = _layer(0)
    H = hessian(X)
    fast = QA.atom_gptq(W, H, keeper=32, group_size=32, blocksize=32)
    slow = QA.atom_gptq_reference(W, H, keeper=32, group_size=32)
    # same algorithm, different float32 summation order (lazy batch vs immediate updates)
    assert (fast.q4 != slow.q4).mean() <= 0.01
    assert (fast.q8 != slow.q8).mean() <= 0.01
    np.testing.assert_allclose(fast.scale4, slow.scale4, rtol=1e-5)


def _weights_equal_bitwise(a, b, what):
    for f in ("q4", "scale4", "q8", "scale8"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {f} {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        assert_bitexact(x.view(np.uint8), y.view(np.uint8), name=f"{what}: {f}")


def _gptq_case(seed, k, n, dead=()):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2 * k, k)).astype(np.float32) * rng.uniform(0.1, 3.0, k).astype(np.float32)
    W = rng.standard_normal((k, n)).astype(np.float32)
    H = hessian(X)
    for d in dead:                                   # inputs never seen in calibration
        H[d, :] = 0.0
        H[:, d] = 0.0
    return W, H


# shapes where the blocked loop and the plain OBS loop do the same float32 operations:
# blocksize 1 (every update is the one-product "gemm" of a single row, group starts read fully
# updated weights), and one block without keeper rows and one group (only intra-block updates)
@pytest.mark.parametrize("k, n, keeper, group, blocksize, dead", [
    (96, 6, 32, 32, 1, ()),
    (72, 8, 8, 16, 1, (3,)),
    (40, 2, 0, None, 1, ()),
    (50, 10, 10, 8, 1, (0, 49)),
    (64, 4, 0, None, 128, ()),
    (48, 12, 0, None, 64, (5,)),
])
def test_atom_gptq_equals_plain_obs_loop_bit_for_bit(k, n, keeper, group, blocksize, dead):
    W, H = _gptq_case(k + n, k, n, dead)
    fast = QA.atom_gptq(W, H, keeper=keeper, group_size=group, blocksize=blocksize, clip=0.9)
    slow = QA.atom_gptq_reference(W, H, keeper=keeper, group_size=group, clip=0.9)
    _weights_equal_bitwise(fast, slow, f"K={k} N={n} keeper={keeper} group={group} blocksize={blocksize}")


def _lazy_batch_twin(W, H, keeper, group, clip, blocksize):
    """The first vectorised form of atom_gptq, column orientation (paper's W (N, K)): one outer
    product per quantized column updates the rest of its block, one gemm the later blocks."""
    Wt, U = QA._prepare(W, H, 0.01)
    k = W.shape[0]
    body = k - keeper
    codes, scales = np.zeros((W.shape[1], body), np.int8), []
    for i1 in range(0, body, blocksize):
        i2 = min(i1 + blocksize, body)
        W1 = Wt[:, i1:i2].copy()
        Err1 = np.zeros_like(W1)
        for i in range(i2 - i1):
            col = i1 + i
            if col % group == 0:
                scale = QA._pair_params(Wt[:, col:min(col + group, body)].T, clip)
                scales.append(scale)
            w = W1[:, i]
            q = np.clip(np.rint(w / scale) + np.float32(8), 0, 15)
            err = ((w - (scale * (q - np.float32(8))).astype(np.float32)) / U[col, col]).astype(np.float32)
            W1[:, i:] -= np.outer(err, U[col, col:i2])
            Err1[:, i] = err
            codes[:, col] = (q - 8).astype(np.int8)
        Wt[:, i2:] -= Err1 @ U[i1:i2, i2:]
    q8, s8 = A._quantize_rows_sim(np.ascontiguousarray(Wt[:, body:]), 127, 1.0)
    return A.AtomWeights(np.ascontiguousarray(codes.T), np.stack(scales).astype(np.float32),
                         np.ascontiguousarray(q8.T), s8.astype(np.float32))


# the general case (several blocks, groups starting inside a block or spanning blocks, keeper
# rows): the row-oriented loop keeps the bits of the column-oriented one
@pytest.mark.parametrize("k, n, keeper, group, blocksize", [
    (96, 6, 32, 32, 32), (300, 8, 44, 64, 128), (200, 4, 8, 16, 50), (130, 6, 2, 128, 32),
    (64, 2, 16, 16, 7),
])
def test_atom_gptq_keeps_the_bits_of_the_column_oriented_lazy_batch(k, n, keeper, group, blocksize):
    W, H = _gptq_case(k * n, k, n, dead=(1,))
    fast = QA.atom_gptq(W, H, keeper=keeper, group_size=group, blocksize=blocksize)
    twin = _lazy_batch_twin(W, H, keeper, group, 0.85, blocksize)
    _weights_equal_bitwise(fast, twin, f"K={k} N={n} keeper={keeper} group={group} blocksize={blocksize}")


def test_shared_calibration_gives_the_layers_of_separate_calls():
    W, X = _layer(9, k=96, n=8)
    cal = QA.calibrate(X)
    configs = [QA.AtomConfig(keeper=32, group_size=32), QA.AtomConfig(keeper=16, group_size=16, percdamp=0.1),
               QA.AtomConfig(reorder=False, keeper=32, group_size=32),
               QA.AtomConfig(keeper=32, group_size=32, weight_method="rtn"),
               QA.AtomConfig(reorder=False, keeper=0, group_size=None, weight_method="rtn")]
    for cfg in configs + configs:                   # second pass: everything comes from the cache
        shared, alone = QA.quantize_layer(W, cal, cfg), QA.quantize_layer(W, X, cfg)
        assert_bitexact(shared.idx, alone.idx, name=f"{cfg} idx")
        assert_bitexact(shared.W_hat, alone.W_hat, name=f"{cfg} W_hat")
        _weights_equal_bitwise(shared.weights, alone.weights, str(cfg))
    with pytest.raises(ShapeError, match="X_calib"):
        QA.quantize_layer(W, QA.calibrate(X[:, :64]))


def test_first_group_scale_is_two_clip_absmax_over_15():
    # no update precedes group 0, so its parameters come from the original weights:
    # Quantizer_GPTQ sym: xmin = -absmax, scale = (xmax - xmin) * clip / 15 = 2 * clip * absmax / 15
    W, X = _layer(1)
    W[:32, 2:4] = np.abs(W[:32, 2:4])             # pair 1 has no negative value in group 0
    wq = QA.atom_gptq(W, hessian(X), keeper=32, group_size=32, blocksize=32)
    blk = W[:32, 0:2]
    amax = np.float32(np.abs(blk).max())
    expected = np.float32(np.float32(amax - (-amax)) * np.float32(0.85)) / np.float32(15)
    assert_bitexact(wq.scale4[0, 0], np.float32(expected), name="pair 0")
    assert_bitexact(wq.scale4[0, 1], np.float32(expected), name="pair 0 shared")
    # quirk: all-positive pair keeps xmin = 0, scale = clip * xmax / 15
    xmax = np.float32(W[:32, 2:4].max())
    quirk = np.float32(np.float32(xmax) * np.float32(0.85)) / np.float32(15)
    assert_bitexact(wq.scale4[0, 2], np.float32(quirk), name="all-positive pair")
    assert wq.q4.min() >= -8 and wq.q4.max() <= 7


def test_gptq_fake_quant_has_at_most_16_values_per_pair_group_and_int8_tail():
    W, X = _layer(2)
    wq = QA.atom_gptq(W, hessian(X), keeper=32, group_size=32, blocksize=32)
    deq = A.dequantize_weights(wq, np.float32)
    for g in range(2):
        for p in range(3):
            assert np.unique(deq[32 * g:32 * g + 32, 2 * p:2 * p + 2]).size <= 16
    assert np.all(np.abs(wq.q8).max(axis=0) == 127)


def test_gptq_beats_rtn_on_the_calibration_data():
    W, X = _layer(3)
    errs = {}
    for method in QA.WEIGHT_METHODS:
        cfg = QA.AtomConfig(keeper=32, group_size=32, weight_method=method, quantize_activations=False)
        errs[method] = QA.layer_output_error(QA.quantize_layer(W, X, cfg), W, X)
    assert errs["gptq"] < errs["rtn"]


def test_pipeline_output_does_not_depend_on_channel_order_bookkeeping():
    W, X = _layer(4)
    layer = QA.quantize_layer(W, X, QA.AtomConfig(keeper=32, group_size=32, weight_method="rtn"))
    assert sorted(layer.idx.tolist()) == list(range(96))
    # independent path: quantize the reordered activations, scatter them back, multiply in
    # the original order with W_hat (original order)
    x_r = A.permute(X, layer.idx, axis=1)
    x_hat = A.unpermute(A.dequantize_activations(A.quantize_activations(x_r, group_size=32, keeper=32)),
                        layer.idx, axis=1)
    expected = x_hat.astype(np.float64) @ layer.W_hat.astype(np.float64)
    np.testing.assert_allclose(layer.forward(X), expected, rtol=1e-5, atol=1e-5)
    plain = QA.quantize_layer(W, X, QA.AtomConfig(reorder=False, keeper=32, group_size=32, weight_method="rtn"))
    assert_bitexact(plain.idx, np.arange(96, dtype=np.int64), name="identity index")


def test_outlier_channels_and_reorder_reduce_w4a4_error():
    # planted activation outliers: keeping them in INT8 at the end must help W4A4
    W, X = _layer(5)
    X[:, [5, 40, 70]] *= 30.0
    base = QA.AtomConfig(reorder=False, keeper=0, group_size=None, weight_method="rtn", w_clip=1.0, a_clip=1.0)
    atom = QA.AtomConfig(reorder=True, keeper=32, group_size=32, weight_method="rtn", w_clip=1.0, a_clip=1.0)
    e_base = QA.layer_output_error(QA.quantize_layer(W, X, base), W, X)
    e_atom = QA.layer_output_error(QA.quantize_layer(W, X, atom), W, X)
    assert e_atom < 0.5 * e_base


def test_bad_input_raises_named_errors():
    W, X = _layer(6)
    with pytest.raises(FormatRuleError, match="weight_method"):
        QA.quantize_layer(W, X, QA.AtomConfig(weight_method="awq"))
    with pytest.raises(ShapeError, match="keeper"):
        QA.quantize_layer(W, X, QA.AtomConfig(keeper=96))
    with pytest.raises(ShapeError, match="X_calib"):
        QA.quantize_layer(W, X[:, :64])
    with pytest.raises(FormatRuleError, match="positive definite"):
        QA.atom_gptq(W, -hessian(X), keeper=32, group_size=32)
    with pytest.raises(ShapeError, match="even"):
        QA.atom_gptq(W[:, :5], hessian(X), keeper=32, group_size=32)
    W0, X0 = W.copy(), X.copy()
    QA.quantize_layer(W, X, QA.AtomConfig(keeper=32, group_size=32))
    assert_bitexact(W, W0, name="W")
    assert_bitexact(X, X0, name="X")


def test_fp16_keeper_keeps_tail_unquantized_and_int8_is_close():
    W, X = _layer(7)
    fp16 = QA.AtomConfig(keeper=32, group_size=32, weight_method="rtn", keeper_precision="fp16")
    int8 = QA.AtomConfig(keeper=32, group_size=32, weight_method="rtn")
    l16, l8 = QA.quantize_layer(W, X, fp16), QA.quantize_layer(W, X, int8)
    tail = l16.idx[-32:]
    assert_bitexact(l16.W_hat[tail], W[tail].astype(np.float16).astype(np.float32), name="fp16 tail")
    assert not np.array_equal(l8.W_hat[tail], l16.W_hat[tail])
    e16, e8 = QA.layer_output_error(l16, W, X), QA.layer_output_error(l8, W, X)
    assert e16 <= e8 < 1.2 * e16          # Atom: INT8 outliers cost almost nothing (Table 4)
    with pytest.raises(FormatRuleError, match="keeper_precision"):
        QA.quantize_layer(W, X, QA.AtomConfig(keeper_precision="fp16"))


def test_kernel_path_agrees_with_simulation_up_to_fp16_effects():
    # with the activation clip off, simulation and CUDA arithmetic differ by fp16 rounding of x,
    # of the scales and of the output, x*(1/s) vs x/s, and ties: each can move a code by one
    # step for values near a rounding boundary (a fraction ~ 7 * 2**-11 of them), so the two
    # paths differ by a small fraction of the quantization error itself, never by more
    W, X = _layer(8, k=192, n=8)
    layer = QA.quantize_layer(W, X, QA.AtomConfig(keeper=64, group_size=64, a_clip=1.0))
    exact = X.astype(np.float64) @ W.astype(np.float64)
    sim = layer.forward(X).astype(np.float64)
    ker = layer.forward_kernel(X).astype(np.float64)
    assert ker.shape == sim.shape
    assert np.linalg.norm(ker - sim) < 0.25 * np.linalg.norm(sim - exact)
    with pytest.raises(FormatRuleError, match="forward_kernel"):
        QA.quantize_layer(W, X, QA.AtomConfig(keeper=64, group_size=64, quantize_activations=False)).forward_kernel(X)


def test_calibration_reorder_flag_must_be_a_bool():
    cal = QA.calibrate(np.ones((4, 128), np.float32))
    for method in (cal.index, cal.hessian):
        with pytest.raises(FormatRuleError, match=r"reorder: must be True or False; got array"):
            method(np.array([True, False]))
    with pytest.raises(FormatRuleError, match=r"reorder: must be True or False; got 1"):
        cal.factor(1, 0.01)


def test_a_layer_record_whose_weights_disagree_with_w_hat_or_its_config_is_refused():
    rng = np.random.default_rng(0)
    lay = QA.quantize_layer(rng.standard_normal((128, 8)).astype(np.float32),
                            rng.standard_normal((64, 128)).astype(np.float32),
                            QA.AtomConfig(keeper=0, group_size=64, weight_method="rtn"))
    with pytest.raises(ShapeError, match=r"weights: must hold K=256 rows"):
        QA.AtomLayer(np.arange(256), lay.weights, np.zeros((256, 8), np.float32), lay.config)
    with pytest.raises(ShapeError, match=r"weights.scale4: must have one row per group of 32 INT4 rows; got 2"):
        QA.AtomLayer(lay.idx, lay.weights, lay.W_hat, QA.AtomConfig(keeper=0, group_size=32, weight_method="rtn"))
