"""GPTQ on float grids against llm-compressor 0.14.0.1's GPTQModifier, bit for bit (no llm-compressor import).

Goldens: tests/quant/data/gptq_float_llmcompressor.npz (make_gptq_float.py beside it: versions, model, the
calibration set). Each case starts from the Hessian llm-compressor accumulated for the layer and the layer's
original float32 weights.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl

from refsim.errors import FormatRuleError
from refsim.formats import mx as mx_format
from refsim.quant import ct_fp4
from refsim.quant.gptq import _column_loop, _column_loop_reference, upper_cholesky_of_inverse
from refsim.quant.gptq_float import FloatGrid, gptq_quantize_float
from refsim.testing import assert_bitexact

DATA = Path(__file__).parent / "data" / "gptq_float_llmcompressor.npz"
CASES = ("FP8_DYNAMIC.None", "FP8_BLOCK.None", "NVFP4A16.None", "MXFP4A16.None", "NVFP4A16.weight",
         "NVFP4A16.static", "FP8_DYNAMIC.weight", "FP8_DYNAMIC.None.b32", "NVFP4A16.weight.b32")


@pytest.fixture(scope="module")
def golden():
    z = np.load(DATA)
    return {k: z[k] for k in z.files}


def layers(g):
    return [k[:-len(".w_bf16")] for k in g if k.endswith(".w_bf16")]


def weight(g, name):
    return (g[f"{name}.w_bf16"].astype(np.uint32) << 16).view(np.float32).T.copy()   # (K, N)


def test_goldens_name_the_library_versions_and_no_case_was_refused(golden):
    v = json.loads(str(golden["versions"]))
    assert (v["llmcompressor"], v["compressed_tensors"], v["torch"]) == ("0.14.0.1", "0.19.0", "2.13.0+cpu")
    assert json.loads(str(golden["missing"])) == []


@pytest.mark.parametrize("case,factor", [(c, "library") for c in CASES] + [
    ("NVFP4A16.None", "refsim"), ("MXFP4A16.None", "refsim"), ("NVFP4A16.weight", "refsim"),
    ("NVFP4A16.weight.b32", "refsim"), ("FP8_DYNAMIC.None", "refsim"), ("FP8_DYNAMIC.None.b32", "refsim")])
def test_gptq_float_reproduces_llm_compressor_bit_for_bit(golden, case, factor):
    # factor "library": torch's U from the run (the loop and the grids alone); "refsim": U from H here (OpenBLAS;
    # FP8_BLOCK and act-order FP8_DYNAMIC then move 1 and 5 of 40960 values by one code, so they are not listed)
    preset, actorder, *block = case.split(".")
    blocksize = int(block[0][1:]) if block else 128          # ".b32": 2-4 blocks per layer, the lazy updates
    names = layers(golden)
    for name in names:
        U = None
        if factor == "library":
            U = golden[f"{name}.U" if actorder == "None" else f"{name}.U_actorder"]
        W = weight(golden, name)
        gscale = None
        if preset == "NVFP4A16":
            group = [grp for grp in ct_fp4.fused_groups(names) if name in grp]
            members = group[0] if group else [name]
            gscale = ct_fp4.global_scale(max(float(np.abs(weight(golden, m)).max()) for m in members))
        r = gptq_quantize_float(W, golden[f"{name}.H"], preset, gscale=gscale, act_order=actorder != "None", U=U,
                                blocksize=blocksize)
        assert_bitexact(r.W_hat.T, golden[f"{case}.{name}.q"], name=f"{case} {name} W_hat")
        saved = {k[len(case) + len(name) + 2:]: v for k, v in golden.items()
                 if k.startswith(f"{case}.{name}.") and not k.endswith(".q")}
        mine = r.tensors()
        assert sorted(mine) == sorted(saved), (case, name)
        for t, v in saved.items():
            assert_bitexact(mine[t], v, name=f"{case} {name} {t}")


def test_gptq_moves_codes_away_from_round_to_nearest_on_the_goldens(golden):
    # the goldens exercise the error feedback: GPTQ's codes are not RTN's (which the same scales give)
    name = layers(golden)[0]
    W = weight(golden, name)
    r = gptq_quantize_float(W, golden[f"{name}.H"], "MXFP4A16")
    packed, _, _ = ct_fp4.quantize_weight(W, "mxfp4")
    assert (r.tensors()["weight_packed"] != packed).mean() > 0.2


@pytest.mark.parametrize("fmt,k,n,blocksize", [("e2m1", 96, 24, 32), ("e4m3", 80, 16, 128), ("e4m3", 130, 8, 64)])
def test_fast_rank1_loop_is_bit_equal_to_the_readable_reference(fmt, k, n, blocksize):
    rng = np.random.default_rng(k)
    X = rng.standard_normal((2 * k, k)).astype(np.float32)
    H = (X.T.astype(np.float64) @ X) / k
    W = rng.standard_normal((k, n)).astype(np.float32)
    zero = np.zeros(n, np.int32)
    static = [(np.full(n, 0.25 if fmt == "e2m1" else 0.01, np.float32) * (1 + g), zero) for g in range(k // 16 + 1)]
    kw = dict(U=upper_cholesky_of_inverse(H, 0.01), perm=np.arange(k), grid=FloatGrid(fmt), group_size=16,
              static=static, params=None, blocksize=blocksize, updates="rank1")
    with threadpoolctl.threadpool_limits(limits=1):
        fast, ref = _column_loop(W, **kw), _column_loop_reference(W, **kw)
    assert_bitexact(fast[0], ref[0], name="codes")
    assert_bitexact(fast[1], ref[1], name="losses")


def test_with_a_diagonal_hessian_gptq_float_is_round_to_nearest_but_for_negative_zeros():
    # U diagonal: no update moves a weight, so the codes are the RTN quantizer's -- except that the checkpoint
    # re-quantizes the fake-quantized W_hat, in which RTN's -0 (a small negative w) is the float -0.0, whose
    # torch.sign is 0: code 0x0 where RTN wrote 0x8
    W = np.random.default_rng(5).standard_normal((64, 32)).astype(np.float32)
    r = gptq_quantize_float(W, 2.0 * np.eye(64), "NVFP4A16")
    packed, scale, glob = ct_fp4.quantize_weight(W, "nvfp4")
    rtn = mx_format.unpack_fp4(packed)
    assert (rtn == 0x8).sum() > 10
    assert_bitexact(mx_format.unpack_fp4(r.tensors()["weight_packed"]), np.where(rtn == 0x8, np.uint8(0), rtn))
    assert_bitexact(r.codes.T, np.where(rtn == 0x8, np.uint8(0), rtn))
    assert_bitexact(r.weight_scale, scale)
    assert_bitexact(r.global_scale, glob)


def test_dead_inputs_get_zero_weights_and_inputs_are_not_modified():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((64, 32)).astype(np.float32)
    X[:, 3] = 0
    H = (X.T.astype(np.float64) @ X) * 2 / 64
    W = rng.standard_normal((32, 16)).astype(np.float32)
    W0, H0 = W.copy(), H.copy()
    r = gptq_quantize_float(W, H, "FP8_DYNAMIC", act_order=True)
    assert (r.W_hat[3] == 0).all()
    assert_bitexact(W, W0)
    assert_bitexact(H, H0)


def test_bad_arguments_are_refused_with_the_rule():
    W = np.ones((32, 8), np.float32)
    with pytest.raises(FormatRuleError, match="preset"):
        gptq_quantize_float(W, np.eye(32), "INT4")
    with pytest.raises(FormatRuleError, match="gscale"):
        gptq_quantize_float(W, np.eye(32), "FP8_DYNAMIC", gscale=np.ones(1, np.float32))
    with pytest.raises(FormatRuleError, match="positive definite"):
        gptq_quantize_float(W, -np.eye(32), "MXFP4A16")
