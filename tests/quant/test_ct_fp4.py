"""refsim.quant.ct_fp4: the NVFP4A16 / MXFP4A16 weights llm-compressor 0.14.0.1 saved (tests/io/data/
ct_float_llmcompressor.npz, every linear of a one-layer Llama) reproduced bit for bit, and the rules that
separate them from other FP4 quantizers, worked by hand."""

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.quant import ct_fp4
from refsim.testing import assert_bitexact

GOLDENS = np.load(Path(__file__).parents[1] / "io" / "data" / "ct_float_llmcompressor.npz")
NAMES = [k[: -len(".w_bf16")] for k in GOLDENS.files if k.endswith(".w_bf16")]
PRESET = {"nvfp4": "NVFP4A16", "mxfp4": "MXFP4A16"}


def _W(name):
    """refsim (K, N) float32 of the golden's torch (N, K) bf16 bits."""
    return np.ascontiguousarray(GOLDENS[f"{name}.w_bf16"].view(ml_dtypes.bfloat16).astype(np.float32).T)


def test_fused_groups_are_llm_compressors_sibling_sets():
    assert len(NAMES) == 7 and json.loads(str(GOLDENS["versions"]))["llmcompressor"] == "0.14.0.1"
    p = "model.layers.0."
    assert ct_fp4.fused_groups(NAMES) == [[p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"],
                                          [p + "mlp.gate_proj", p + "mlp.up_proj"]]
    assert ct_fp4.fused_groups([p + "self_attn.q_proj", p + "self_attn.k_proj"]) == []   # v_proj absent


@pytest.mark.parametrize("kind", list(PRESET))
def test_every_layer_equals_what_llm_compressor_saved(kind):
    gs = {}
    if kind == "nvfp4":
        for group in ct_fp4.fused_groups(NAMES):
            g = ct_fp4.global_scale(max(float(np.abs(_W(n)).max()) for n in group))
            gs.update({n: g for n in group})
    for name in NAMES:
        packed, scale, glob = ct_fp4.quantize_weight(_W(name), kind, gs.get(name))
        pre = f"{PRESET[kind]}.{name}"
        assert_bitexact(packed, GOLDENS[f"{pre}.weight_packed"], name=f"{name} weight_packed")
        assert_bitexact(scale, GOLDENS[f"{pre}.weight_scale"], name=f"{name} weight_scale")
        if kind == "nvfp4":
            assert_bitexact(glob, GOLDENS[f"{pre}.weight_global_scale"], name=f"{name} weight_global_scale")
        else:
            assert glob is None


def test_the_fused_group_shares_the_largest_members_global_scale():
    q, k, v = (f"model.layers.0.self_attn.{x}_proj" for x in "qkv")
    own = [ct_fp4.global_scale(float(np.abs(_W(n)).max()))[0] for n in (q, k, v)]
    saved = [GOLDENS[f"NVFP4A16.{n}.weight_global_scale"][0] for n in (q, k, v)]
    assert len(set(own)) == 3 and len(set(saved)) == 1 and saved[0] == min(own)


def test_global_scale_is_a_reciprocal_then_a_product():
    # 448 * 6 / 3.5 is 768 exactly; torch computes 2688 * float32(1 / 3.5) = 768.00006 (0x44400001)
    assert ct_fp4.global_scale(3.5).view(np.uint32)[0] == 0x44400001
    assert ct_fp4.global_scale(0.0)[0] == np.float32(1.0)           # 2688 / tiny overflows: the library's 1.0


def test_zero_blocks_and_signed_zeros_follow_the_library():
    W = np.zeros((32, 2), np.float32)                               # (K, N): row 0 zero, row 1 worked values
    W[0, 1], W[1, 1], W[2, 1] = 6.0, -0.0, -0.01                    # block amax 6: nvfp4 scale 1 * g
    packed, scale, _ = ct_fp4.quantize_weight(W, "nvfp4", np.array([1.0], np.float32))
    assert scale[0].tolist() == [0x20, 0x20]                       # a zero block gets e4m3 0.125
    assert scale[1, 0] == 0x38                                      # 1.0 = 6 / 6 * g
    assert packed[1, 0] == 0x07 and packed[1, 1] == 0x08            # 6.0 -> 0x7; -0.0 -> +0; -0.01 -> -0 (0x8)
    packed, scale, _ = ct_fp4.quantize_weight(W, "mxfp4")
    assert scale[:, 0].tolist() == [0, 127]                         # amax 0 -> 0; amax 6 -> 2^(2) / 2^2 -> 127
    assert packed[1, 0] == 0x07 and packed[1, 1] == 0x08


def test_mx_scale_goes_up_a_binade_from_a_mantissa_of_one_point_seven_five():
    W = np.zeros((32, 2), np.float32)
    W[0] = [1.75, 1.7499999]
    _, scale, _ = ct_fp4.quantize_weight(W, "mxfp4")
    assert scale[:, 0].tolist() == [126, 125]                       # 127 + log2(2) - 2, 127 + log2(1) - 2


def test_bad_arguments_are_refused_with_named_errors():
    W = np.ones((32, 4), np.float32)
    with pytest.raises(FormatRuleError, match="kind"):
        ct_fp4.quantize_weight(W, "mxfp6")
    with pytest.raises(ShapeError, match="multiple of the nvfp4 block 16"):
        ct_fp4.quantize_weight(np.ones((24, 4), np.float32), "nvfp4")
    with pytest.raises(NonFiniteError):
        ct_fp4.quantize_weight(np.full((16, 2), np.inf, np.float32), "nvfp4")
    with pytest.raises(DtypeError):
        ct_fp4.quantize_weight(W.astype(np.float16), "mxfp4")
    with pytest.raises(FormatRuleError, match="MXFP4 has no global scale"):
        ct_fp4.quantize_weight(W, "mxfp4", np.ones(1, np.float32))
    with pytest.raises(FormatRuleError, match="gscale"):
        ct_fp4.quantize_weight(W, "nvfp4", np.ones(2, np.float32))
    with pytest.raises(FormatRuleError, match="amax"):
        ct_fp4.global_scale(float("nan"))
