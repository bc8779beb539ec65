"""wgmma models: the kind table against the PTX ISA's lists, hand-worked outputs of every kind (the FP8
reduced-precision accumulation included), imm-scale and scale-d, the plain-loop twin, refusals.

Expected values are worked out by hand in the comments from the T-FDPA rule of the module spec; none is
computed by the code under test.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
import ml_dtypes
import numpy as np
import pytest

from refsim.arith import wgmma as w
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import assert_bitexact, examples

DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn,
      "e5m2": ml_dtypes.float8_e5m2}
CDT = {"f32": np.float32, "f16": np.float16, "s32": np.int32}


def zeros(kind: w.WgmmaKind, n: int = 8):
    """A (64, K), B (K, N), C (64, N) of +0 in the kind's dtypes (filled in by each test)."""
    a_dt = DT.get(kind.a, np.int64)
    b_dt = DT.get(kind.b, np.int64)
    return (np.zeros((64, kind.k), np.float32).astype(a_dt), np.zeros((kind.k, n), np.float32).astype(b_dt),
            np.zeros((64, n), CDT[kind.d]))


def bits32(x) -> int:
    return int(np.float32(x).view(np.uint32))


# --------------------------------------------------------------------------- the kind table


def test_the_kind_table_is_the_ptx_isa_list():
    kinds = {k.types: k for k in w.modelled()}
    # f16 (d f16, f32), bf16, tf32, fp8 4 combinations x (f16, f32), s8/u8 4 combinations, b1
    assert sorted(kinds) == sorted(
        ["f16.f16.f16", "f32.f16.f16", "f32.bf16.bf16", "f32.tf32.tf32"]
        + [f"{d}.{a}.{b}" for d in ("f16", "f32") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")]
        + [f"s32.{a}.{b}" for a in ("s8", "u8") for b in ("s8", "u8")] + ["s32.b1.b1"])
    assert {t: kinds[t].k for t in ("f32.f16.f16", "f32.bf16.bf16", "f32.tf32.tf32", "f16.e5m2.e4m3",
                                    "s32.u8.s8", "s32.b1.b1")} == {
        "f32.f16.f16": 16, "f32.bf16.bf16": 16, "f32.tf32.tf32": 8, "f16.e5m2.e4m3": 32, "s32.u8.s8": 32,
        "s32.b1.b1": 256}
    assert kinds["f32.bf16.bf16"].ns == tuple(range(8, 257, 8)) and len(kinds["f32.bf16.bf16"].ns) == 32
    # integer and b1: 8, 16, 24, 32, then steps of 16 (no 40, 56, ...)
    assert kinds["s32.s8.s8"].ns == (8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256)
    assert kinds["s32.b1.b1"].ns == kinds["s32.s8.s8"].ns
    assert all(k.archs == ("sm_90",) for k in kinds.values()) and w.PTX_TARGET == "sm_90a"
    # no hardware data of refsim's own: only the exact integer kinds are confirmed
    assert sorted(t for t, k in kinds.items() if k.verified) == sorted(
        [f"s32.{a}.{b}" for a in ("s8", "u8") for b in ("s8", "u8")] + ["s32.b1.b1"])
    assert not any(m.verified for f, m in w.MODELS.items() if f not in ("int8", "b1"))


def test_instruction_text_and_datapath_parameters():
    assert w.kind_of("f32.e4m3.e5m2").ptx(256) == "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2"
    assert w.kind_of("s32.u8.s8").ptx(24, satfinite=True) == "wgmma.mma_async.sync.aligned.m64n24k32.satfinite.s32.u8.s8"
    assert w.kind_of("s32.b1.b1").ptx(8) == "wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.and.popc"
    # f16/bf16/tf32: the sm_90 mma.sync block; fp8: 13 fraction bits, e8m13 output
    assert [(m.frac_bits, m.e_zero_f32, m.e_zero_f16, m.out_f32) for m in (w.model("f32.f16.f16"),
            w.model("f32.tf32.tf32"), w.model("f16.e4m3.e4m3"))] == [
        (25, -133, -22, "f32"), (25, -133, -22, "f32"), (13, -133, -22, "e8m13")]


# --------------------------------------------------------------------------- hand-worked outputs


def test_f16_one_block_of_16_keeps_products_an_ampere_chain_drops():
    # row 0: a = [1, 0 x7, 2^-12 x4 at k = 8..11, 0 ...], column 0: b = [1, 0 x7, 2^-13 x4, 0 ...], c = 0
    # one block, E = 0, grid 2^-25: four products 2^-25 survive: S = 1 + 2^-23 -> D = 1 + 2^-23 (RZ, exact)
    k = w.kind_of("f32.f16.f16")
    A, B, C = zeros(k)
    A[0, 0], B[0, 0] = 1, 1
    A[0, 8:12], B[8:12, 0] = 2.0**-12, 2.0**-13
    D = w.wgmma(k, A, B, C)
    assert bits32(D[0, 0]) == bits32(1 + 2.0**-23)
    assert not D[1:].any() and not D[0, 1:].any()


def test_f16_accumulator_rounds_to_nearest_even():
    # c = 1 (f16), products 2^-11 (2^-6 * 2^-5) and 2^-12 (2^-6 * 2^-6): E = 0, grid 2^-25, S = 1 + 0.75 ulp
    # of f16 at 1 (2^-10) -> RNE gives 1 + 2^-10 = 0x3C01 (toward zero would give 0x3C00)
    k = w.kind_of("f16.f16.f16")
    A, B, C = zeros(k)
    A[0, :2], B[:2, 0], C[0, 0] = 2.0**-6, [2.0**-5, 2.0**-6], 1
    assert int(w.wgmma(k, A, B, C)[0, 0].view(np.uint16)) == 0x3C01


def test_bf16_and_tf32_operands():
    # bf16: a = [1, 2^-12 x4], b = [1, 2^-13 x4]: as f16 above, D = 1 + 2^-23
    k = w.kind_of("f32.bf16.bf16")
    A, B, C = zeros(k, 16)
    A[5, 0], B[0, 9] = 1, 1
    A[5, 1:5], B[1:5, 9] = 2.0**-12, 2.0**-13
    assert bits32(w.wgmma(k, A, B, C)[5, 9]) == bits32(1 + 2.0**-23)
    # tf32: A[0, 0] = 0x3F801800 = 1 + 2^-11 + 2^-12 in fp32; the tensor core reads 1 (13 low bits dropped)
    k = w.kind_of("f32.tf32.tf32")
    A = np.zeros((64, 8), np.uint32)
    B = np.zeros((8, 8), np.uint32)
    A[0, 0], B[0, 0] = 0x3F801800, bits32(1.0)
    assert bits32(w.wgmma(k, A, B, np.zeros((64, 8), np.float32))[0, 0]) == bits32(1.0)


def test_fp8_accumulation_keeps_13_fraction_bits_where_fp32_keeps_25():
    # e4m3, c = 1: p0 = 2^-6 * 2^-6 = 2^-12 (2^-6 is e4m3's smallest normal), p1 = 2^-7 * 2^-7 = 2^-14
    # (2^-7 = 4 * 2^-9, a subnormal). E = 0, grid 2^(0 - 13): p0 is on the grid, p1 below it and dropped:
    # S = 1 + 2^-12, e8m13 holds it -> D = 1 + 2^-12 = 0x3F800800. fp32 accumulation (F = 25, the f16/bf16
    # datapath) keeps p1 too: 1 + 2^-12 + 2^-14 = 0x3F800A00.
    k = w.kind_of("f32.e4m3.e4m3")
    A, B, C = zeros(k)
    A[0, 0], B[0, 0], A[0, 1], B[1, 0], C[0, 0] = 2.0**-6, 2.0**-6, 2.0**-7, 2.0**-7, 1
    d = bits32(w.wgmma(k, A, B, C)[0, 0])
    assert d == 0x3F800800 and bits32(1 + 2.0**-12 + 2.0**-14) == 0x3F800A00 != d


def test_fp8_output_keeps_13_fraction_bits_of_c():
    # e5m2 x e4m3, products all 0, c = 1 + 2^-20 (fp32): E = 0, grid 2^-13: c truncated to 1 -> D = 1
    k = w.kind_of("f32.e5m2.e4m3")
    A, B, C = zeros(k)
    C[3, 4] = 1 + 2.0**-20
    D = w.wgmma(k, A, B, C)
    assert bits32(D[3, 4]) == bits32(1.0)
    # c = 2^-30 * (1 + 2^-13 + 2^-20) alone: E = -30, the grid keeps 1 + 2^-13; e8m13 keeps 13 fraction bits
    # -> D = 2^-30 (1 + 2^-13)
    C[3, 4] = np.float32(2.0**-30 * (1 + 2.0**-13 + 2.0**-20))
    assert bits32(w.wgmma(k, A, B, C)[3, 4]) == bits32(2.0**-30 * (1 + 2.0**-13))


def test_fp8_f16_accumulator():
    # e4m3, c = 1 (f16), products 2^-11 (2^-6 * 2^-5) and 2^-12: E = 0, grid 2^-13 keeps both:
    # S = 1 + 0.75 * 2^-10 -> RNE 1 + 2^-10 = 0x3C01
    k = w.kind_of("f16.e4m3.e4m3")
    A, B, C = zeros(k)
    A[0, :2], B[:2, 0], C[0, 0] = 2.0**-6, [2.0**-5, 2.0**-6], 1
    assert int(w.wgmma(k, A, B, C)[0, 0].view(np.uint16)) == 0x3C01


def test_imm_scale_negates_and_scale_d_drops_c():
    k = w.kind_of("f32.bf16.bf16")
    A, B, C = zeros(k)
    A[0, 0], B[0, 0], C[0, 0] = 1, 1, 0.5
    assert float(w.wgmma(k, A, B, C, scale_a=-1)[0, 0]) == -0.5          # -1 + 0.5
    assert float(w.wgmma(k, A, B, C, scale_a=-1, scale_b=-1)[0, 0]) == 1.5
    C[:] = 100
    D = w.wgmma(k, A, B, C, scale_d=False)                                 # D = A.B: 1 at (0, 0), +0 elsewhere
    assert float(D[0, 0]) == 1 and bits32(D[1, 1]) == 0
    # the sign of an all-zero sum: A = +0 negated gives products -0; with c = -0 refsim writes -0
    A[0, 0] = 0
    C[:] = -0.0
    assert bits32(w.wgmma(k, A, B, C, scale_a=-1)[0, 0]) == 0x80000000
    assert bits32(w.wgmma(k, A, B, C)[0, 0]) == 0                          # products +0: +0


def test_integer_kinds_wrap_or_saturate_and_b1_counts():
    k = w.kind_of("s32.s8.s8")
    A = np.full((64, 32), 127, np.int8)
    B = np.full((32, 8), 127, np.int8)
    C = np.full((64, 8), 2**31 - 10, np.int32)
    # 32 * 127 * 127 = 516128; C + 516128 = 2^31 + 516118: wraps to -2^31 + 516118, or clamps to 2^31 - 1
    assert int(w.wgmma(k, A, B, C)[0, 0]) == -(2**31) + 516118
    assert int(w.wgmma(k, A, B, C, satfinite=True)[0, 0]) == 2**31 - 1
    assert int(w.wgmma(k, A, B, C, scale_d=False)[0, 0]) == 516128
    kb = w.kind_of("s32.b1.b1")
    A = np.zeros((64, 256), np.uint8)
    B = np.zeros((256, 8), np.uint8)
    A[0, :10], B[5:20, 0] = 1, 1                   # AND is 1 at k = 5..9: popc 5
    assert int(w.wgmma(kb, A, B, np.full((64, 8), 7, np.int32))[0, 0]) == 12


def test_leading_axes_broadcast_and_inputs_are_not_modified():
    k = w.kind_of("f32.f16.f16")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 64, 16)).astype(np.float16)
    B = rng.standard_normal((16, 24)).astype(np.float16)
    C = rng.standard_normal((64, 24)).astype(np.float32)
    keep = A.copy(), B.copy(), C.copy()
    D = w.wgmma(k, A, B, C)
    assert D.shape == (3, 64, 24)
    for t in range(3):
        assert_bitexact(D[t], w.wgmma(k, A[t], B, C), f"instruction {t}")
    assert all(np.array_equal(x, y) for x, y in zip((A, B, C), keep))


# --------------------------------------------------------------------------- the exact-rational twin

FAMILY_KINDS = [k for k in w.modelled() if k.d != "s32"]


@st.composite
def float_bits(draw, t: str, shape):
    """Raw bits of type t: mostly finite of both signs, a few arbitrary codes (Inf, NaN, -0, subnormals)."""
    top = {"f16": 0x7BFF, "bf16": 0x7F7F, "tf32": 0x7F7FFFFF, "e4m3": 0x7E, "e5m2": 0x7B}[t]
    sign = {"f16": 15, "bf16": 15, "tf32": 31, "e4m3": 7, "e5m2": 7}[t]
    x = draw(hnp.arrays(np.int64, shape, elements=st.integers(0, top)))
    x = x | np.where(draw(hnp.arrays(bool, shape)), 1 << sign, 0)
    for _ in range(draw(st.integers(0, 3))):
        x[draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1))] = draw(st.integers(0, (2 << sign) - 1))
    return x.astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[{"tf32": 32, "f16": 16, "bf16": 16}.get(t, 8)])


@st.composite
def instructions(draw):
    kind = draw(st.sampled_from(FAMILY_KINDS))
    n = draw(st.sampled_from([8, 16]))
    A = draw(float_bits(kind.a, (64, kind.k)))
    B = draw(float_bits(kind.b, (kind.k, n)))
    cdt = CDT[kind.d]
    scale = draw(st.sampled_from([1.0, 2.0**-20, 2.0**10] if kind.d == "f16" else [1.0, 2.0**-120, 2.0**40]))
    with np.errstate(over="ignore"):          # f16 C beyond 65504 becomes +-inf: wanted, a C the model must pass on
        C = (draw(hnp.arrays(np.float64, (64, n), elements=st.floats(-100, 100))) * scale).astype(cdt)
    if draw(st.booleans()):
        C[draw(st.integers(0, 63)), draw(st.integers(0, n - 1))] = draw(st.sampled_from([np.inf, np.nan, -0.0]))
    flags = dict(scale_d=draw(st.booleans()), scale_a=draw(st.sampled_from([1, -1])),
                 scale_b=draw(st.sampled_from([1, -1])))
    return kind, A, B, C, flags


@pytest.mark.slow
@settings(max_examples=examples(12), deadline=None)
@given(instructions())
def test_model_equals_the_exact_rational_reference(case):
    kind, A, B, C, flags = case
    assert_bitexact(w.wgmma(kind, A, B, C, **flags), w.wgmma_reference(kind, A, B, C, **flags), kind.types)


@pytest.mark.parametrize("types", ["f16.f16.f16", "f32.tf32.tf32", "f32.e5m2.e4m3", "f16.e4m3.e5m2"])
def test_model_equals_the_reference_on_one_spread_instruction_per_datapath(types):
    kind = w.kind_of(types)
    rng = np.random.default_rng(1)
    mag = lambda shape, lo, hi: rng.choice([-1, 1], shape) * 2.0 ** rng.uniform(lo, hi, shape)  # noqa: E731
    A = mag((64, kind.k), -10, 6).astype(DT[kind.a])
    B = mag((kind.k, 8), -10, 6).astype(DT[kind.b])
    C = mag((64, 8), -12, 8).astype(CDT[kind.d])
    assert_bitexact(w.wgmma(kind, A, B, C, scale_b=-1), w.wgmma_reference(kind, A, B, C, scale_b=-1), types)


def test_integer_twins_agree():
    rng = np.random.default_rng(2)
    for types in ("s32.u8.s8", "s32.b1.b1"):
        kind = w.kind_of(types)
        hi = 2 if kind.a == "b1" else 128
        A = rng.integers(0, hi, (64, kind.k)).astype(np.uint8)
        B = rng.integers(-hi + 1 if kind.b == "s8" else 0, hi, (kind.k, 16)).astype(np.int16)
        C = rng.integers(-2**31, 2**31, (64, 16)).astype(np.int32)
        assert_bitexact(w.wgmma(kind, A, B, C), w.wgmma_reference(kind, A, B, C), types)


# --------------------------------------------------------------------------- refusals


def test_bad_shapes_kinds_and_operands_are_refused_by_name():
    k = w.kind_of("f32.f16.f16")
    A, B, C = zeros(k)
    with pytest.raises(ShapeError, match=r"N: wgmma f32.f16.f16 takes N in \[8, 16, "):
        w.wgmma(k, A, np.zeros((16, 12), np.float16), np.zeros((64, 12), np.float32))
    with pytest.raises(ShapeError, match=r"A: trailing shape must be \(64, 16\)"):
        w.wgmma(k, A[:32], B, C[:32])
    with pytest.raises(ShapeError, match=r"B: trailing shape must be \(16, N\)"):
        w.wgmma(k, A, B[:8], C)
    with pytest.raises(ShapeError, match=r"C: trailing shape must be \(64, 8\)"):
        w.wgmma(k, A, B, C[:, :4])
    with pytest.raises(DtypeError, match="C: dtype must be float32"):
        w.wgmma(k, A, B, C.astype(np.float16))
    with pytest.raises(DtypeError, match="A: dtype must be uint16"):
        w.wgmma(k, A.astype(np.float32), B, C)
    with pytest.raises(FormatRuleError, match="types: must be one of"):
        w.kind_of("f16.bf16.bf16")                       # bf16 has an f32 accumulator only
    with pytest.raises(ShapeError, match=r"N: wgmma s32.s8.s8 takes N in .*; got 40"):
        w.wgmma("s32.s8.s8", np.zeros((64, 32), np.int8), np.zeros((32, 40), np.int8), np.zeros((64, 40), np.int32))
    with pytest.raises(FormatRuleError, match="satfinite: only s8/u8 wgmma takes .satfinite"):
        w.wgmma(k, A, B, C, satfinite=True)
    with pytest.raises(FormatRuleError, match="scale_a: integer wgmma .* has no imm-scale operand"):
        w.wgmma("s32.s8.s8", np.zeros((64, 32), np.int8), np.zeros((32, 8), np.int8), np.zeros((64, 8), np.int32),
                scale_a=-1)
    with pytest.raises(FormatRuleError, match="scale_b: imm-scale must be 1 or -1; got 2"):
        w.wgmma(k, A, B, C, scale_b=2)
    with pytest.raises(FormatRuleError, match=r"B: u8 values must lie in \[0, 255\]; got -1"):
        w.wgmma_reference("s32.s8.u8", np.zeros((64, 32), np.int8), np.full((32, 8), -1, np.int16),
                          np.zeros((64, 8), np.int32))
    with pytest.raises(FormatRuleError, match=r"A: b1 values must lie in \[0, 1\]; got 2"):
        w.wgmma("s32.b1.b1", np.full((64, 256), 2, np.uint8), np.zeros((256, 8), np.uint8), np.zeros((64, 8), np.int32))
    with pytest.raises(FormatRuleError, match="kind: must be a WgmmaKind"):
        w.wgmma(3, A, B, C)
    with pytest.raises(ShapeError, match="the reference takes one instruction"):
        w.wgmma_reference(k, A[None], B, C)


# --------------------------------------------------------------------------- the shared-datapath assumption


@pytest.mark.parametrize("types", ["f32.f16.f16", "f16.f16.f16", "f32.bf16.bf16", "f32.tf32.tf32"])
def test_f16_bf16_tf32_wgmma_is_the_sm90_mma_sync_block_on_every_16_row_slice(types):
    # the stated assumption, held in code: each 16 x 8 slice of a wgmma equals the H100-verified sm_90 mma.sync
    # of the same rows and columns (m16n8k16 for f16/bf16, m16n8k8 for tf32)
    from refsim.arith import tensor_core as tc
    from refsim.arith import tensor_core_types as tct

    kind = w.kind_of(types)
    rng = np.random.default_rng(5)
    mag = lambda shape: rng.choice([-1, 1], shape) * 2.0 ** rng.uniform(-12, 4, shape)  # noqa: E731
    A, B = mag((64, kind.k)).astype(DT[kind.a]), mag((kind.k, 16)).astype(DT[kind.b])
    C = mag((64, 16)).astype(CDT[kind.d])
    D = w.wgmma(kind, A, B, C)
    for r in range(0, 64, 16):
        for c in range(0, 16, 8):
            a, b, cc = A[r:r + 16], B[:, c:c + 8], C[r:r + 16, c:c + 8]
            if kind.a == "f16":
                want = tc.mma_m16n8k16("sm_90", a, b, cc)
            else:
                want = tct.mma("sm_90", f"m16n8k{kind.k}", kind.a, kind.b, a, b, cc)
            assert_bitexact(D[r:r + 16, c:c + 8], want, f"{types} rows {r}.. columns {c}..")


def test_fp8_wgmma_is_not_the_sm90_mma_sync_lowering():
    # mma.sync fp8 on sm_90 runs as two f16 HMMAs (F = 25) and an FADD; the wgmma model keeps 13 bits. On the
    # hand-worked tile of test_fp8_accumulation_keeps_13_fraction_bits_where_fp32_keeps_25 the two differ:
    # mma.sync keeps 2^-14 (1 + 2^-12 + 2^-14 = 0x3F800A00), wgmma drops it (0x3F800800)
    from refsim.arith import tensor_core_types as tct

    k = w.kind_of("f32.e4m3.e4m3")
    A, B, C = zeros(k)
    A[0, 0], B[0, 0], A[0, 1], B[1, 0], C[0, 0] = 2.0**-6, 2.0**-6, 2.0**-7, 2.0**-7, 1
    sync = tct.mma("sm_90", "m16n8k32", "e4m3", "e4m3", A[:16], B, C[:16])
    assert (bits32(sync[0, 0]), bits32(w.wgmma(k, A, B, C)[0, 0])) == (0x3F800A00, 0x3F800800)
