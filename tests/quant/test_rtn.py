import numpy as np

from refsim.formats.uniform import quantize
from refsim.quant.gptq import hessian
from refsim.quant.rtn import rtn_quantize
from refsim.testing import assert_bitexact


def _layer(seed=0):
    rng = np.random.default_rng(seed)
    W = rng.standard_t(3, (128, 32)).astype(np.float32)  # heavy tails: clipping pays off
    X = (rng.standard_normal((256, 128)) @ (np.eye(128) + 0.2 * rng.standard_normal((128, 128)))).astype(np.float32)
    return X, W


def test_without_a_grid_rtn_is_plain_uniform_quantization():
    _, W = _layer()
    r = rtn_quantize(W, 4, group_size=32, clip_grid=None)
    u = quantize(W, 4, scheme="gptq_asym", granularity="group", group_size=32)
    assert_bitexact(r.quant.q, u.q)
    assert np.all(r.clip_ratio == 1.0)


def test_grid_search_never_increases_each_groups_error():
    _, W = _layer(1)
    plain = rtn_quantize(W, 3, group_size=32, clip_grid=None).dequantize()
    searched = rtn_quantize(W, 3, group_size=32).dequantize()
    e_plain = ((plain - W) ** 2).reshape(4, 32, 32).sum(axis=1)
    e_search = ((searched - W) ** 2).reshape(4, 32, 32).sum(axis=1)
    assert (e_search <= e_plain * (1 + 1e-6)).all()
    assert e_search.sum() < e_plain.sum()


def test_hessian_weighted_search_lowers_layer_output_error_per_channel():
    X, W = _layer(2)
    H = hessian(X)
    plain = rtn_quantize(W, 3, group_size=None, clip_grid=None).dequantize()
    weighted = rtn_quantize(W, 3, group_size=None, H=H).dequantize()

    def out_err(Wh):
        return float(np.linalg.norm(X @ (W - Wh)))

    assert out_err(weighted) < out_err(plain)
