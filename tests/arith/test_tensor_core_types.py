"""bf16, tf32 and fp8 tensor-core models: every measured H100 output, the neighbouring models the data
rules out, the worked examples of the module docstring, the plain-loop twin, errors.

The measured bits are the H100 probes (refsim/data/tensor_core_hw/README.md); expected values of the
directed vectors are worked out by hand in the comments from the T-FDPA rule.
"""

from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
import ml_dtypes
import numpy as np
import pytest

from refsim.arith import hw_samples as hw
from refsim.arith import tensor_core as tc
from refsim.arith import tensor_core_types as tt
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import assert_bitexact, examples


@functools.lru_cache(maxsize=None)
def probes():
    return hw.load_probes()


def model_d(kernel: str, arch: str = "sm_90", tiles=slice(None)) -> np.ndarray:
    """What refsim computes for the probe kernel's tiles (fp16 kernels through refsim.arith.tensor_core)."""
    shape, a, b = hw.PROBES[kernel]
    p = probes()[kernel]
    if a == "f16":
        f = tc.mma_m16n8k16 if shape == "m16n8k16" else tc.mma_m16n8k8
        return f(arch, p.A[tiles].view(np.float16), p.B[tiles].view(np.float16), p.C[tiles])
    return tt.mma(arch, shape, a, b, p.A[tiles], p.B[tiles], p.C[tiles])


def mismatches(got: np.ndarray, kernel: str) -> int:
    return int((got.view(np.uint32) != probes()[kernel].D.view(np.uint32)).sum())


# ---------------------------------------------------------------------------------------------- hardware


@pytest.mark.parametrize("kernel", sorted(hw.PROBES))
def test_every_h100_probe_output_equals_the_sm90_model(kernel):
    # 144 tiles x 128 outputs = 18,432 raw-bit comparisons per kernel, every input category included
    p = probes()[kernel]
    assert p.D.size == 18432
    assert_bitexact(model_d(kernel), p.D, f"{kernel} on the H100")


def test_f16_control_equals_refsims_sm90_model_on_all_18432_outputs():
    # the control kernel of the probe set: refsim's sm_90 fp16 model, validated before on other data
    p = probes()["f16_k16_f32"]
    assert_bitexact(tc.mma_m16n8k16("sm_90", p.A.view(np.float16), p.B.view(np.float16), p.C), p.D, "control")
    assert mismatches(tc.mma_m16n8k16("sm_80", p.A.view(np.float16), p.B.view(np.float16), p.C), "f16_k16_f32") > 0


@pytest.mark.parametrize("kernel", ["bf16_k16_f32", "tf32_k8_f32_lowbits", "e4m3_k32_f32", "e5m2_k32_f32"])
def test_reference_twin_equals_the_hardware_on_one_tile_per_category(kernel):
    shape, a, b = hw.PROBES[kernel]
    p = probes()[kernel]
    for tile in range(0, 144, 16):
        got = tt.mma_reference("sm_90", shape, a, b, p.A[tile], p.B[tile], p.C[tile])
        assert_bitexact(got, p.D[tile], f"{kernel} tile {tile}")


def _neighbours(kernel):
    """Models next to the chosen one: F +- 1, other block lengths, the e_zero of a neighbour, the
    Ampere/Ada row. Each must miss measured outputs, or the data would not pin that parameter."""
    shape, a, b = hw.PROBES[kernel]
    m = tt.model_for("sm_90", shape, a, b)
    out = {f"F={m.frac_bits + d}": dataclasses.replace(m, frac_bits=m.frac_bits + d) for d in (-1, 1)}
    out.update({f"L={L}": dataclasses.replace(m, block=L) for L in (4, 8, 16)
                if L != m.block and L <= int(shape.split("k")[1])})
    out["sm_80 row"] = dataclasses.replace(tt.model_for("sm_80", shape, a, b))
    return out


@pytest.mark.parametrize("kernel", ["bf16_k16_f32", "bf16_k8_f32", "tf32_k8_f32", "tf32_k8_f32_lowbits"])
def test_neighbouring_parameters_miss_measured_outputs(kernel):
    shape, a, b = hw.PROBES[kernel]
    p = probes()[kernel]
    for name, m in _neighbours(kernel).items():
        assert mismatches(tt.mma_with_model(m, a, b, p.A, p.B, p.C), kernel) > 100, name


def test_bf16_zero_term_alignment_is_e_zero_minus_133():
    # only the subnormal tiles (products down to 2^-266, C = 0) see where a zero C aligns
    p = probes()["bf16_k16_f32"]
    m = tt.model_for("sm_90", "m16n8k16", "bf16", "bf16")
    for e_zero in (-132, -134):
        got = tt.mma_with_model(dataclasses.replace(m, e_zero=e_zero), "bf16", "bf16", p.A, p.B, p.C)
        assert mismatches(got, "bf16_k16_f32") > 0, e_zero


def test_bf16_subnormal_operands_are_kept_not_flushed():
    p = probes()["bf16_k16_f32"]
    ftz = lambda x: np.where((x & 0x7F80) == 0, x & 0x8000, x).astype(np.uint16)  # noqa: E731  (keeps the sign)
    assert ((p.A & 0x7F80) == 0).sum() > 1000
    assert mismatches(tt.mma("sm_90", "m16n8k16", "bf16", "bf16", ftz(p.A), ftz(p.B), p.C), "bf16_k16_f32") > 500


def test_bf16_negative_sums_rounded_to_zero_are_plus_zero_on_the_h100():
    # subnormal tiles: outputs whose exact value c + sum(a*b) is negative yet below the fp32 grid;
    # the H100 writes +0 for them (the sign of S does not survive a zero magnitude)
    p = probes()["bf16_k16_f32"]
    A, B = p.A.view(ml_dtypes.bfloat16), p.B.view(ml_dtypes.bfloat16)
    found = 0
    for t, i, j in np.argwhere(p.D == 0):
        exact = Fraction(float(p.C[t, i, j])) + sum(Fraction(float(A[t, i, k])) * Fraction(float(B[t, k, j]))
                                                    for k in range(16))
        if exact < 0:
            found += 1
            assert p.D[t, i, j].view(np.uint32) == 0, (t, i, j)
    assert found >= 10


def test_tf32_operands_are_truncated_not_rounded_nor_read_whole():
    p = probes()["tf32_k8_f32_lowbits"]
    m = tt.model_for("sm_90", "m16n8k8", "tf32", "tf32")
    assert ((p.A & 0x1FFF) != 0).mean() > 0.9                      # the low bits really are set
    u = p.A.astype(np.int64), p.B.astype(np.int64)
    keep = [x >> 13 for x in u]                                    # round to nearest even instead
    rne = [((k + (((x & 0x1FFF) > 0x1000) | (((x & 0x1FFF) == 0x1000) & (k & 1)))) << 13).astype(np.uint32)
           for x, k in zip(u, keep)]
    assert mismatches(tt.mma_with_model(m, "tf32", "tf32", rne[0], rne[1], p.C), "tf32_k8_f32_lowbits") > 1000
    # read whole: the fp32 operands with all 23 fraction bits in the same datapath
    full = tc.Terms(*(np.broadcast_to(f, (144, 16, 8, 8)) if isinstance(f, np.ndarray) else f
                      for f in tc.ieee_terms(p.A[:, :, None, :], 8, 23)))
    fullb = tc.Terms(*(np.broadcast_to(f, (144, 16, 8, 8)) if isinstance(f, np.ndarray) else f
                       for f in tc.ieee_terms(np.swapaxes(p.B, 1, 2)[:, None, :, :], 8, 23)))
    whole = tc.fdpa_terms(25, -133, full, fullb, tc.ieee_terms(p.C.view(np.uint32), 8, 23), "f32").view(np.float32)
    assert mismatches(whole, "tf32_k8_f32_lowbits") > 1000
    # an fp32 NaN whose payload lies in the ignored bits is read as Inf: such tiles exist and match
    payload_only = ((p.A & 0x7F800000) == 0x7F800000) & ((p.A & 0x7FE000) == 0) & ((p.A & 0x1FFF) != 0)
    assert payload_only.any()


@pytest.mark.parametrize("kernel", ["e4m3_k32_f32", "e5m2_k32_f32"])
def test_fp8_on_sm90_is_two_fp16_hmmas_over_the_k_and_2_split_then_an_fadd(kernel):
    shape, a, b = hw.PROBES[kernel]
    p = probes()[kernel]
    A16, B16 = tt.fp8_to_f16(p.A, a), tt.fp8_to_f16(p.B, b)
    zero = np.zeros_like(p.C)
    s0 = (np.arange(32) & 2) == 0
    first = tc.mma_m16n8k16("sm_90", A16[..., s0], B16[:, s0], zero)
    assert_bitexact(p.C + tc.mma_m16n8k16("sm_90", A16[..., ~s0], B16[:, ~s0], first), p.D, kernel)
    # what the data rules out: contiguous k halves; C chained into the HMMAs (no FADD); one fused
    # 32-product block with F = 25 (MMA-Sim's Hopper mma model); the sm_89 (Ada QMMA) model
    lo = tc.mma_m16n8k16("sm_90", A16[..., :16], B16[:, :16], zero)
    assert mismatches(p.C + tc.mma_m16n8k16("sm_90", A16[..., 16:], B16[:, 16:], lo), kernel) > 500
    chained = tc.mma_m16n8k16("sm_90", A16[..., ~s0], B16[:, ~s0], tc.mma_m16n8k16("sm_90", A16[..., s0], B16[:, s0], p.C))
    assert mismatches(chained, kernel) > 500
    fused = dataclasses.replace(tt.model_for("sm_90", shape, a, b), datapath="fdpa", block=32)
    assert mismatches(tt.mma_with_model(fused, a, b, p.A, p.B, p.C), kernel) > 500
    assert mismatches(tt.mma("sm_89", shape, a, b, p.A, p.B, p.C), kernel) > 10000


@pytest.mark.parametrize("kernel", sorted(k for k in hw.PROBES if k != "tf32_k8_f32_lowbits"))
def test_small_integer_tiles_are_exact_on_the_hardware(kernel):
    # the sanity tiles (0..15) hold small integers: the H100's D is C + A @ B exactly, so the logical
    # tiles (and with them the fragment maps) are the ones the hardware multiplied
    shape, a, _ = hw.PROBES[kernel]
    p = probes()[kernel]
    dec = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2}
    if a == "tf32":
        A, B = p.A[:16].view(np.float32), p.B[:16].view(np.float32)
    else:
        A, B = p.A[:16].view(dec[a]), p.B[:16].view(dec[a])
    exact = p.C[:16].astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    assert_bitexact(p.D[:16], exact.astype(np.float32), kernel)


# ---------------------------------------------------------------------------------------------- worked examples


def test_bf16_example_one_block_of_16_keeps_products_on_the_2_pow_minus_25_grid():
    one, a12, a13 = (np.array(v, ml_dtypes.bfloat16).view(np.uint16) for v in (1.0, 2.0**-12, 2.0**-13))
    A = np.zeros((16, 16), np.uint16)
    B = np.zeros((16, 8), np.uint16)
    A[:, 0], B[0, :] = one, one
    A[:, 8:12], B[8:12, :] = a12, a13                           # four products 2^-25 in k8..11
    C = np.zeros((16, 8), np.float32)
    assert_bitexact(tt.mma("sm_90", "m16n8k16", "bf16", "bf16", A, B, C), np.full((16, 8), 1 + 2.0**-23, np.float32))
    assert_bitexact(tt.mma("sm_80", "m16n8k16", "bf16", "bf16", A, B, C), np.full((16, 8), 1.0, np.float32))


def test_tf32_example_low_bits_are_dropped():
    A = np.zeros((16, 8), np.uint32)
    B = np.zeros((8, 8), np.uint32)
    A[0, 0] = 0x3F801800                                         # 1 + 2^-11 + 2^-12 as fp32
    B[0, 0] = np.float32(1).view(np.uint32)
    D = tt.mma("sm_90", "m16n8k8", "tf32", "tf32", A, B, np.zeros((16, 8), np.float32))
    assert D[0, 0] == np.float32(1.0)


def test_fp8_example_the_k_and_2_split_decides_which_tiny_product_survives():
    A = np.zeros((16, 32), np.uint8)
    B = np.zeros((32, 8), np.uint8)
    e = lambda v: np.array(v, ml_dtypes.float8_e4m3fn).view(np.uint8)  # noqa: E731
    A[0, 0], B[0, 0] = e(256.0), e(256.0)                        # +2^16 at k = 0 (S0)
    A[0, 2], B[2, 0] = e(-256.0), e(256.0)                       # -2^16 at k = 2 (S1)
    A[0, 18], B[18, 0] = e(2.0**-9), e(2.0**-9)                  # 2^-18 at k = 18 (S1)
    D = tt.mma("sm_90", "m16n8k32", "e4m3", "e4m3", A, B, np.zeros((16, 8), np.float32))
    assert D[0, 0] == 0                                          # contiguous halves would give 2^-18
    assert D.view(np.uint32)[0, 0] == 0                          # and it is +0


def test_fp8_example_the_final_fadd_rounds_to_nearest():
    A = np.zeros((16, 32), np.uint8)
    B = np.zeros((32, 8), np.uint8)
    A[0, 0] = np.array(3 * 2.0**-9, ml_dtypes.float8_e4m3fn).view(np.uint8)
    B[0, 0] = np.array(2.0**-9, ml_dtypes.float8_e4m3fn).view(np.uint8)
    C = np.full((16, 8), 128.0, np.float32)
    D = tt.mma("sm_90", "m16n8k32", "e4m3", "e4m3", A, B, C)     # 128 + 0.75 ulp(128)
    assert D[0, 0] == np.float32(128 + 2.0**-16)


def test_sm89_fp8_example_keeps_13_fraction_bits():
    # the assumed Ada model: c = 1, one product 2^-14 (2^-7 x 2^-7): grid 2^-13 at E = 0 drops it
    A = np.zeros((16, 32), np.uint8)
    B = np.zeros((32, 8), np.uint8)
    A[0, 0] = B[0, 0] = np.array(2.0**-7, ml_dtypes.float8_e4m3fn).view(np.uint8)
    C = np.full((16, 8), 1 + 2.0**-20, np.float32)               # c itself is cut to 13 bits too
    D = tt.mma("sm_89", "m16n8k32", "e4m3", "e4m3", A, B, C)
    assert D[0, 0] == 1.0 and D[1, 0] == 1.0
    assert not tt.model_for("sm_89", "m16n8k32", "e4m3", "e4m3").verified


# ---------------------------------------------------------------------------------------------- API


def test_ml_dtypes_and_raw_bits_give_the_same_result():
    p = probes()["bf16_k16_f32"]
    raw = tt.mma("sm_90", "m16n8k16", "bf16", "bf16", p.A[:4], p.B[:4], p.C[:4])
    typed = tt.mma("sm_90", "m16n8k16", "bf16", "bf16", p.A[:4].view(ml_dtypes.bfloat16),
                   p.B[:4].view(ml_dtypes.bfloat16), p.C[:4])
    assert_bitexact(typed, raw)
    q = probes()["tf32_k8_f32"]
    assert_bitexact(tt.mma("sm_90", "m16n8k8", "tf32", "tf32", q.A[:4].view(np.float32), q.B[:4], q.C[:4]),
                    q.D[:4])


def test_mixed_fp8_operands_use_each_operands_format():
    rng = np.random.default_rng(7)
    A = rng.integers(0, 0x78, (16, 32)).astype(np.uint8)         # finite, non-negative e4m3 codes
    B = rng.integers(0, 0x7C, (32, 8)).astype(np.uint8)          # finite, non-negative e5m2 codes
    C = np.zeros((16, 8), np.float32)
    for arch in ("sm_89", "sm_90"):
        got = tt.mma(arch, "m16n8k32", "e4m3", "e5m2", A, B, C)
        assert_bitexact(got, tt.mma_reference(arch, "m16n8k32", "e4m3", "e5m2", A, B, C), arch)
        assert not np.array_equal(got, tt.mma(arch, "m16n8k32", "e4m3", "e4m3", A, B, C))


def test_fp8_to_f16_is_exact_for_every_code():
    for t, dt in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)):
        codes = np.arange(256, dtype=np.uint8)
        got = tt.fp8_to_f16(codes, t)
        want = codes.view(dt).astype(np.float32)
        finite = np.isfinite(want)
        assert_bitexact(got[finite].astype(np.float32), want[finite], t)
        assert np.isnan(got[np.isnan(want)]).all() and (np.isinf(got) == np.isinf(want)).all()


def test_inputs_are_not_modified_and_leading_axes_broadcast():
    p = probes()["e4m3_k32_f32"]
    A, B, C = p.A[:3].copy(), p.B[0].copy(), p.C[:3].copy()
    D = tt.mma("sm_90", "m16n8k32", "e4m3", "e4m3", A, B, C)
    assert_bitexact(A, p.A[:3])
    assert_bitexact(B, p.B[0])
    assert D.shape == (3, 16, 8)
    assert_bitexact(D[1], tt.mma("sm_90", "m16n8k32", "e4m3", "e4m3", A[1], B, C[1]))


def test_bad_input_errors_name_the_rule():
    A, B, C = np.zeros((16, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((16, 8), np.float32)
    with pytest.raises(FormatRuleError, match=r"arch: must be one of \['sm_89', 'sm_90'\]; got 'sm_80'"):
        tt.mma("sm_80", "m16n8k32", "e4m3", "e4m3", np.zeros((16, 32), np.uint8), np.zeros((32, 8), np.uint8), C)
    with pytest.raises(FormatRuleError, match=r"shape: must be one of \['m16n8k8'\]; got 'm16n8k16'"):
        tt.mma("sm_90", "m16n8k16", "tf32", "tf32", A, B, C)
    with pytest.raises(FormatRuleError, match=r"btype: must be of atype's family \(bf16\); got e4m3"):
        tt.mma("sm_90", "m16n8k16", "bf16", "e4m3", A, B, C)
    with pytest.raises(FormatRuleError, match=r"atype: must be one of"):
        tt.mma("sm_90", "m16n8k16", "f64", "f64", A, B, C)
    with pytest.raises(DtypeError, match=r"A: dtype must be uint16 \(raw bf16 bits\) or ml_dtypes.bfloat16; got float16"):
        tt.mma("sm_90", "m16n8k16", "bf16", "bf16", A.view(np.float16), B, C)
    with pytest.raises(DtypeError, match="C: dtype must be float32"):
        tt.mma("sm_90", "m16n8k16", "bf16", "bf16", A, B, C.astype(np.float16))
    with pytest.raises(ShapeError, match=r"B: trailing shape must be \(16, 8\)"):
        tt.mma("sm_90", "m16n8k16", "bf16", "bf16", A, B[:8], C)
    with pytest.raises(FormatRuleError, match="block: must divide K = 16; got 5"):
        tt.mma_with_model(dataclasses.replace(tt.model_for("sm_90", "m16n8k16", "bf16", "bf16"), block=5),
                          "bf16", "bf16", A, B, C)


# --------------------------------------------------------------------------- properties (hypothesis)
ROWS = sorted(tt.MODELS.values(), key=lambda m: (m.family, m.shape, m.arch))

NAMES = {"bf16": ("bf16",), "tf32": ("tf32",), "fp8": ("e4m3", "e5m2")}

K = {"m16n8k16": 16, "m16n8k8": 8, "m16n8k32": 32}

FINITE_TOP = {"bf16": 0x7F7F, "tf32": 0x7F7FFFFF, "e4m3": 0x7E, "e5m2": 0x7B}   # largest finite code


@st.composite
def operand(draw, t: str, shape: tuple[int, int]):
    """Raw bits of type t: finite codes of either sign, a few positions overwritten by any code
    (Inf, NaN, -0, subnormals); tf32 with arbitrary low 13 bits."""
    top = FINITE_TOP[t]
    sign = 1 << {"bf16": 15, "tf32": 31, "e4m3": 7, "e5m2": 7}[t]
    dtype = tt.TYPES[t][2]
    x = draw(hnp.arrays(np.int64, shape, elements=st.integers(0, top)))
    x = x | np.where(draw(hnp.arrays(bool, shape)), sign, 0)
    for _ in range(draw(st.integers(0, 3))):
        r, c = draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1))
        x[r, c] = draw(st.integers(0, 2 * sign - 1))
    return x.astype(dtype)


@st.composite
def instructions(draw):
    m = draw(st.sampled_from(ROWS))
    a, b = draw(st.sampled_from(NAMES[m.family])), draw(st.sampled_from(NAMES[m.family]))
    k = K[m.shape]
    A = draw(operand(a, (16, k)))
    B = draw(operand(b, (k, 8)))
    scale = draw(st.sampled_from([1.0, 2.0**-120, 2.0**40, 2.0**100]))
    C = draw(hnp.arrays(np.float32, (16, 8), elements=st.floats(-1e4, 1e4, width=32))) * np.float32(scale)
    if draw(st.booleans()):
        C[draw(st.integers(0, 15)), draw(st.integers(0, 7))] = draw(st.sampled_from([np.inf, -np.inf, np.nan, -0.0]))
    return m, a, b, A, B, C.astype(np.float32)


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None)
@given(instructions())
def test_model_equals_the_exact_rational_reference(case):
    m, a, b, A, B, C = case
    got = tt.mma(m.arch, m.shape, a, b, A, B, C)
    assert_bitexact(got, tt.mma_reference(m.arch, m.shape, a, b, A, B, C), f"{m.arch} {m.shape} {a}.{b}")


SMALL = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


@settings(max_examples=examples(25), deadline=None)
@given(st.sampled_from(ROWS), st.data())
def test_model_is_exact_when_nothing_can_round(m, data):
    # integers in [-3, 3] and |C| <= 1000: every product, term and partial sum is an integer below
    # 2^13, exact on every grid and in every output format (e8m13 included)
    a, b = data.draw(st.sampled_from(NAMES[m.family])), data.draw(st.sampled_from(NAMES[m.family]))
    k = K[m.shape]
    Ai = data.draw(hnp.arrays(np.int64, (16, k), elements=st.integers(-3, 3)))
    Bi = data.draw(hnp.arrays(np.int64, (k, 8), elements=st.integers(-3, 3)))
    Ci = data.draw(hnp.arrays(np.int64, (16, 8), elements=st.integers(-1000, 1000)))
    enc = lambda x, t: (x.astype(np.float32) if t == "tf32" else x.astype(np.float32).astype(SMALL[t]))  # noqa: E731
    D = tt.mma(m.arch, m.shape, a, b, enc(Ai, a), enc(Bi, b), Ci.astype(np.float32))
    exact = (Ci + Ai @ Bi).astype(np.float32)
    assert_bitexact(D, np.where(exact == 0, np.float32(0), exact), f"{m.arch} {m.shape} {a}.{b}")
