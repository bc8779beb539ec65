"""FP8 casts and scaling schemes: goldens from ml_dtypes, torch 2.13 and the compressed-tensors / DeepGEMM
lines (data/), the plain-loop reference equal to the vectorised path, the rules by hand, refusals."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import fp8
from refsim.testing import assert_bitexact, examples

GOLDENS = np.load(Path(__file__).parent / "data" / "fp8_mx_goldens.npz")


@pytest.mark.parametrize("kind", fp8.KINDS)
def test_cast_without_saturation_equals_ml_dtypes(kind):
    assert_bitexact(fp8.cast(GOLDENS["cast_x"], kind), GOLDENS[f"cast_{kind}"], name=kind)


@pytest.mark.parametrize("kind", fp8.KINDS)
def test_decode_equals_ml_dtypes_for_every_code(kind):
    assert_bitexact(fp8.decode(np.arange(256, dtype=np.uint8), kind), GOLDENS[f"decode_{kind}"], name=kind)


@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_float16_and_float64_inputs_equal_ml_dtypes(kind):
    assert_bitexact(fp8.cast(GOLDENS["cast16_x"], kind), GOLDENS[f"cast16_{kind}"], name="float16")
    assert_bitexact(fp8.cast(GOLDENS["cast64_x"], kind), GOLDENS[f"cast64_{kind}"], name="float64")


def test_saturating_e4m3_equals_torch_clamp_then_cast_and_torch_213s_own_cast():
    x = GOLDENS["cast_x"]
    assert_bitexact(fp8.cast(x, "e4m3", saturate=True), GOLDENS["torch_clamp_to_e4m3"], name="clamp + .to")
    assert_bitexact(fp8.cast(x, "e4m3", saturate=True), GOLDENS["torch_to_e4m3"], name=".to (saturates in 2.13)")


def test_e5m2_casts_equal_torch_apart_from_torchs_nan_code_0x7f():
    x = GOLDENS["cast_x"]
    torch_nan = np.where(np.signbit(x), 0xFF, 0x7F).astype(np.uint8)
    nan = np.isnan(x)
    for saturate, key in ((True, "torch_clamp_to_e5m2"), (False, "torch_to_e5m2")):
        ours = fp8.cast(x, "e5m2", saturate=saturate)
        assert_bitexact(np.where(nan, torch_nan, ours), GOLDENS[key], name=key)
        assert set(ours[nan] & 0x7F) == {0x7E}                  # ml_dtypes' NaN, documented difference


@pytest.mark.parametrize("scheme", fp8.SCHEMES)
def test_quantize_equals_the_defining_library(scheme):
    q = fp8.quantize(GOLDENS["fp8_x"], scheme)
    assert_bitexact(q.codes, GOLDENS[f"fp8_{scheme}_codes"], name="codes")
    assert_bitexact(q.scales, GOLDENS[f"fp8_{scheme}_scales"], name="scales")


def test_dequantize_equals_compressed_tensors():
    q = fp8.quantize(GOLDENS["fp8_x"], "tensor")
    assert_bitexact(q.dequantize()[:16], GOLDENS["fp8_tensor_deq16"])


@pytest.mark.parametrize("kind", fp8.KINDS)
@pytest.mark.parametrize("saturate", [False, True])
def test_cast_reference_equals_cast_on_the_golden_edges(kind, saturate):
    x = GOLDENS["cast_x"][2048:11066:4]
    assert_bitexact(fp8.cast_reference(x, kind, saturate), fp8.cast(x, kind, saturate))


@settings(max_examples=examples(25), deadline=None)
@given(x=arrays(np.float32, st.tuples(st.integers(1, 6), st.integers(1, 7)),
                elements=st.floats(-1e6, 1e6, width=32, allow_subnormal=True)),
       scheme=st.sampled_from(fp8.SCHEMES))
def test_quantize_reference_equals_quantize(x, scheme):
    a, b = fp8.quantize(x, scheme), fp8.quantize_reference(x, scheme)
    assert_bitexact(a.codes, b.codes, name="codes")
    assert_bitexact(a.scales, b.scales, name="scales")


@pytest.mark.parametrize("scheme", ["block128", "deepgemm_block128", "deepgemm_block128_ue8m0"])
def test_block_reference_equals_quantize_across_edge_tiles(scheme):
    x = GOLDENS["fp8_x"][:130, :129]                            # 2 x 2 tiles, the edge ones 2 and 1 wide
    a, b = fp8.quantize(x, scheme), fp8.quantize_reference(x, scheme)
    assert_bitexact(a.codes, b.codes, name="codes")
    assert_bitexact(a.scales, b.scales, name="scales")


# ---- the rules, worked by hand -------------------------------------------------------------------
def test_tensor_scale_is_amax_over_448_and_codes_divide_by_it():
    x = np.array([[896.0, 1.0, -3.0]], np.float32)
    q = fp8.quantize(x, "tensor")
    assert q.scales[0, 0] == 2.0                                 # 896 / 448
    assert list(q.codes[0]) == [0x7E, 0x30, 0xBC]                # 448, 0.5, -1.5
    assert_bitexact(q.dequantize(), x)


def test_channel_and_token_scales_follow_refsims_axes():
    x = np.array([[1.0, -8.0], [4.0, 2.0]], np.float32)
    assert_bitexact(fp8.quantize(x, "channel").scales, (np.array([[4.0, 8.0]], np.float32) / np.float32(448)))
    assert_bitexact(fp8.quantize(x, "token").scales, (np.array([[8.0], [4.0]], np.float32) / np.float32(448)))


def test_all_zero_groups_get_the_libraries_floors():
    x = np.zeros((2, 3), np.float32)
    assert fp8.quantize(x, "channel").scales.view(np.uint32).tolist() == [[0x34000000] * 3]   # eps 2^-23
    assert fp8.quantize(x, "block128").scales.view(np.uint32).tolist() == [[0x34000000]]
    assert fp8.quantize(x, "deepgemm_block128").scales[0, 0] == np.float32(np.float32(1e-4) / np.float32(448))
    assert not fp8.quantize(x, "deepgemm_block128").codes.any()


def test_compressed_tensors_scale_is_not_floored_above_zero():
    x = np.full((1, 2), np.float32(1e-9), np.float32)            # amax / 448 is far below eps, yet kept
    assert fp8.quantize(x, "tensor").scales[0, 0] == np.float32(np.float32(1e-9) / np.float32(448))


def test_negative_zero_becomes_positive_in_compressed_tensors_schemes_only():
    x = np.array([[-0.0, 1.0]], np.float32)
    for scheme in ("tensor", "channel", "token", "block128"):
        assert fp8.quantize(x, scheme).codes[0, 0] == 0x00, scheme   # x / s + zero point 0
    assert fp8.quantize(x, "deepgemm_block128").codes[0, 0] == 0x80


def test_ue8m0_scales_are_the_next_power_of_two():
    x = np.full((1, 1), np.float32(448 * 3), np.float32)       # s = 3 -> 4
    q = fp8.quantize(x, "deepgemm_block128_ue8m0")
    assert q.scales[0, 0] == 4.0 and q.codes[0, 0] == fp8.cast(np.array([336.0], np.float32), "e4m3")[0]


# ---- refusals ---------------------------------------------------------------------------------------
def test_bad_arguments_are_refused_with_named_errors():
    x = np.ones((4, 4), np.float32)
    with pytest.raises(FormatRuleError, match="kind"):
        fp8.cast(x, "e4m3fn")
    with pytest.raises(FormatRuleError, match="saturate"):
        fp8.cast(x, "e4m3", saturate=1)
    with pytest.raises(DtypeError):
        fp8.cast(np.ones(3, np.int8), "e4m3")
    with pytest.raises(DtypeError, match="float32"):
        fp8.quantize(x.astype(np.float64), "tensor")
    with pytest.raises(ShapeError):
        fp8.quantize(np.ones(4, np.float32), "tensor")
    with pytest.raises(ShapeError):
        fp8.quantize(np.ones((0, 4), np.float32), "channel")
    with pytest.raises(NonFiniteError):
        fp8.quantize(np.array([[1.0, np.inf]], np.float32), "block128")
    with pytest.raises(FormatRuleError, match="scheme"):
        fp8.quantize(x, "group")
    with pytest.raises(ShapeError, match="scales"):
        fp8.FP8Quant(np.zeros((4, 4), np.uint8), np.ones((1, 4), np.float32), "token")
    with pytest.raises(DtypeError):
        fp8.dequantize(x)
