"""MX (MXFP4/6/8) and NVFP4: scales, packed codes and dequantized values equal to torchao 0.18.0's
(goldens in data/), the block-by-block reference equal to the vectorised path, the rules by hand, refusals."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import mx
from refsim.testing import assert_bitexact, examples

GOLDENS = np.load(Path(__file__).parent / "data" / "fp8_mx_goldens.npz")
MX_KINDS = [k for k in mx.KINDS if k != "nvfp4"]
PTS = float(GOLDENS["nvfp4_per_tensor_scale"][0])


@pytest.mark.parametrize("kind", MX_KINDS)
def test_mx_quantize_and_dequantize_equal_torchao(kind):
    q = mx.quantize(GOLDENS["mx_x"], kind)
    assert_bitexact(q.scales, GOLDENS[f"mx_{kind}_scales"], name="scales")
    assert_bitexact(q.codes, GOLDENS[f"mx_{kind}_codes"], name="codes")
    assert_bitexact(q.dequantize(), GOLDENS[f"mx_{kind}_deq"], name="dequantized")


@pytest.mark.parametrize("label,t", [("", None), ("_pts", PTS)])
def test_nvfp4_quantize_and_dequantize_equal_torchao(label, t):
    q = mx.quantize(GOLDENS["mx_x"], "nvfp4", per_tensor_scale=t)
    assert_bitexact(q.scales, GOLDENS[f"nvfp4{label}_scales"], name="scales")
    assert_bitexact(q.codes, GOLDENS[f"nvfp4{label}_codes"], name="codes")
    assert_bitexact(q.dequantize(), GOLDENS[f"nvfp4{label}_deq"], name="dequantized")


def test_per_tensor_scale_equals_torchaos():
    x = GOLDENS["mx_x"]
    assert mx.per_tensor_scale(float(np.max(np.abs(x[np.isfinite(x)])))) == PTS


@pytest.mark.parametrize("kind", list(mx.KINDS))
def test_reference_equals_quantize_on_the_golden_special_rows(kind):
    x = GOLDENS["mx_x"][6:]                                     # heavy tails, zeros, NaN, Inf, ties, tiny
    t = PTS if kind == "nvfp4" else None
    a, b = mx.quantize(x, kind, t), mx.quantize_reference(x, kind, t)
    assert_bitexact(b.scales, a.scales, name="scales")
    assert_bitexact(b.codes, a.codes, name="codes")


@settings(max_examples=examples(30), deadline=None)
@given(bits=arrays(np.uint32, st.tuples(st.integers(1, 2), st.sampled_from([32, 64])),
                   elements=st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0, 0x80000000, 0x7F800000]))),
       kind=st.sampled_from(list(mx.KINDS)), scaled=st.booleans())
def test_reference_equals_quantize_on_any_float32_bits(bits, kind, scaled):
    x = bits.view(np.float32)
    t = 0.375 if kind == "nvfp4" and scaled else None
    a, b = mx.quantize(x, kind, t), mx.quantize_reference(x, kind, t)
    assert_bitexact(b.scales, a.scales, name="scales")
    assert_bitexact(b.codes, a.codes, name="codes")


def test_pack_fp4_puts_the_even_element_in_the_low_nibble_and_unpack_inverts_it():
    assert mx.pack_fp4(np.array([0x1, 0xA], np.uint8))[0] == 0xA1
    b = np.arange(256, dtype=np.uint8)
    assert_bitexact(mx.pack_fp4(mx.unpack_fp4(b)), b)


def test_e8m0_reads_powers_of_two_and_255_as_nan():
    s = mx.e8m0_to_float32(np.array([0, 127, 254, 255], np.uint8))
    assert s[:3].view(np.uint32).tolist() == [0x00400000, 0x3F800000, 0x7F000000] and np.isnan(s[3])


# ---- the rules, worked by hand -------------------------------------------------------------------
def _block(*values, n=32):
    x = np.zeros(n, np.float32)
    x[:len(values)] = values
    return x


def test_mxfp4_scale_is_floor_log2_amax_minus_2_and_elements_round_to_nearest_even():
    q = mx.quantize(_block(7.0, 0.25, 0.75, 5.0, -0.0, -1.5), "mxfp4")
    assert q.scales.tolist() == [127]                           # floor(log2 7) = 2, 2 - 2 + 127
    c = mx.unpack_fp4(q.codes)[:6].tolist()
    assert c == [0x7, 0x0, 0x2, 0x6, 0x8, 0xB]                  # 7 saturates to 6; ties 0.25->0, 0.75->1, 5->4


def test_mxfp8_e4m3_scale_and_code():
    q = mx.quantize(_block(1.0, -0.5), "mxfp8_e4m3")
    assert q.scales.tolist() == [119]                           # 0 - 8 + 127: scale 2^-8
    assert q.codes[:2].tolist() == [0x78, 0xF0]                 # 256 and -128 in e4m3


def test_all_zero_block_gets_scale_code_0_and_zero_codes():
    q = mx.quantize(_block(), "mxfp6_e3m2")
    assert q.scales.tolist() == [0] and not q.codes.any()
    assert_bitexact(q.dequantize(), np.zeros(32, np.float32))


def test_nan_block_gets_scale_255_zero_elements_and_dequantizes_to_nan():
    q = mx.quantize(_block(np.nan, 3.0, -2.0), "mxfp8_e5m2")
    assert q.scales.tolist() == [255]
    assert q.codes[:3].tolist() == [0x7F, 0x00, 0x80]           # NaN (torch's code), +0, -0
    assert np.isnan(q.dequantize()).all()


def test_inf_block_keeps_a_finite_scale_and_saturates():
    q = mx.quantize(_block(np.inf, 1.0), "mxfp4")
    assert q.scales.tolist() == [253]                           # exponent field 255 - 127 = 128; 128 - 2 + 127
    assert mx.unpack_fp4(q.codes)[:2].tolist() == [0x7, 0x0]


def test_nvfp4_block_scale_in_e4m3_and_the_per_tensor_scale():
    x = _block(6.0, 3.0, -1.0, n=16)
    q = mx.quantize(x, "nvfp4")
    assert q.scales.tolist() == [0x38]                          # 6 / 6 = 1.0 in e4m3
    assert mx.unpack_fp4(q.codes)[:3].tolist() == [0x7, 0x5, 0xA]
    q = mx.quantize(x, "nvfp4", per_tensor_scale=0.5)
    assert q.scales.tolist() == [0x40]                          # 1.0 / 0.5 = 2.0 in e4m3
    assert_bitexact(q.dequantize(), x)                          # 6 * (0.5 * 2), 3, -1: exact


# ---- refusals ---------------------------------------------------------------------------------------
def test_bad_arguments_are_refused_with_named_errors():
    x = np.ones((2, 32), np.float32)
    with pytest.raises(ShapeError, match="multiple"):
        mx.quantize(np.ones((2, 48), np.float32), "mxfp4")
    with pytest.raises(ShapeError):
        mx.quantize(np.array(1.0, np.float32), "nvfp4")          # 0-d
    with pytest.raises(DtypeError):
        mx.quantize(x.astype(np.float64), "mxfp8_e4m3")
    with pytest.raises(FormatRuleError, match="kind"):
        mx.quantize(x, "mxfp3")
    with pytest.raises(FormatRuleError, match="only nvfp4"):
        mx.quantize(x, "mxfp4", per_tensor_scale=1.0)
    with pytest.raises(FormatRuleError, match="float32"):
        mx.quantize(x, "nvfp4", per_tensor_scale=0.1)           # 0.1 is no float32 value
    with pytest.raises(FormatRuleError):
        mx.quantize(x, "nvfp4", per_tensor_scale=-1.0)
    with pytest.raises(NonFiniteError):
        mx.quantize(x, "nvfp4", per_tensor_scale=float("nan"))
    with pytest.raises(FormatRuleError):
        mx.per_tensor_scale(0.0)
    with pytest.raises(ShapeError, match="codes"):
        mx.MXQuant("mxfp4", (2, 32), np.zeros((2, 32), np.uint8), np.zeros((2, 1), np.uint8))
    with pytest.raises(ShapeError, match="even"):
        mx.pack_fp4(np.zeros(3, np.uint8))
    with pytest.raises(DtypeError):
        mx.dequantize(x)
