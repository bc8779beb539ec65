"""The compiled emulator kernel against the NumPy path it accelerates, bit for bit (pinned cases and
hypothesis-drawn operands, accumulators, architectures and partitions), and the
fallback when no compiler is present."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.arith import hw_samples as hw
from refsim.arith import mma_steps, tensor_core as tc
from refsim.emulator import marlin_kernel as mk
from refsim.formats import marlin
from refsim.native import emulators as native
from refsim.testing import assert_bitexact, examples

needs_native = pytest.mark.skipif(not native.available(), reason=f"no compiled kernels: {native.status()}")


def _adversarial_f16(rng, shape):
    """fp16 values over the whole exponent range: subnormals, zeros of both signs, large values."""
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-26, 14, shape)).astype(np.float16)
    x[rng.random(shape) < 0.1] = 0.0
    x[rng.random(shape) < 0.1] = -0.0
    x[rng.random(shape) < 0.05] = np.float16(2.0**-24) * rng.integers(-3, 4)
    return x


def _adversarial_acc(rng, shape):
    c = (rng.standard_normal(shape) * 2.0 ** rng.integers(-149, 60, shape)).astype(np.float32)
    c[rng.random(shape) < 0.1] = 0.0
    c[rng.random(shape) < 0.1] = -0.0
    return c


@needs_native
@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_compiled_k16_step_equals_numpy_path(arch):
    rng = np.random.default_rng(11)
    R, K, N, W = 5, 96, 1100, 4                           # N spans two 512-column chunks and a tail
    A = _adversarial_f16(rng, (R, K))
    B = _adversarial_f16(rng, (K, N))
    A[1, :] = -0.0                                         # a row of negative-zero products
    B[:, 7] = 0.0
    acc = _adversarial_acc(rng, (W, R, N))
    a, b = mma_steps.MmaOperand(A), mma_steps.MmaOperand(B)
    kblocks = np.array([5, 0, 3, 2])
    got = mma_steps.mma_k16_f32_steps(arch, a, b, kblocks, acc, native=True)
    want = mma_steps.mma_k16_f32_steps(arch, a, b, kblocks, acc, native=False)
    assert_bitexact(got, want, f"compiled k16 step {arch}")


@needs_native
@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_compiled_k16_step_equals_the_integer_instruction_model(arch):
    # one k16 step of 16 rows x N columns is m16n8k16 per 8-column tile (tensor_core.mma_m16n8k16)
    rng = np.random.default_rng(12)
    A = _adversarial_f16(rng, (16, 32))
    B = _adversarial_f16(rng, (32, 64))
    C = _adversarial_acc(rng, (1, 16, 64))
    got = mma_steps.mma_k16_f32_steps(arch, mma_steps.MmaOperand(A), mma_steps.MmaOperand(B), np.array([1]), C, native=True)[0]
    tiles = B[16:32].reshape(16, 8, 8).transpose(1, 0, 2)                      # (N/8, K=16, 8)
    ctiles = C[0].reshape(16, 8, 8).transpose(1, 0, 2)                         # (N/8, M=16, 8)
    want = tc.mma_m16n8k16(arch, A[:, 16:32], tiles, ctiles).transpose(1, 0, 2).reshape(16, 64)
    assert_bitexact(got, want, f"compiled k16 step vs mma_m16n8k16 {arch}")


@needs_native
@pytest.mark.parametrize("gpu,arch", list(hw.GPUS))
def test_compiled_kernel_reproduces_the_hardware_rows(gpu, arch):
    # each finite fp32-output row (a, b of one hardware block, c) becomes one k-warp: its block sits
    # last in the k16 step, after blocks of -0 products, which pass any c through unchanged
    path = hw.available_path()
    if path is None:
        pytest.skip("hardware samples not present (source checkout needed)")
    a, b, c, d32, _ = hw.load(path)[gpu]
    ok = np.isfinite(a).all(1) & np.isfinite(b).all(1) & np.isfinite(c) & np.isfinite(d32)
    a, b, c, d32 = a[ok], b[ok], c[ok], d32[ok]
    rows, L = a.shape
    A = np.full((rows, 16), -0.0, np.float16)
    Bk = np.zeros((rows, 16), np.float16)
    A[:, 16 - L:], Bk[:, 16 - L:] = a, b
    Aop = mma_steps.MmaOperand(A.reshape(1, rows * 16))                                # (1, K)
    Bop = mma_steps.MmaOperand(Bk.reshape(rows * 16, 1))                               # (K, 1)
    got = mma_steps.mma_k16_f32_steps(arch, Aop, Bop, np.arange(rows), c.reshape(rows, 1, 1), native=True)
    assert rows > 100
    assert_bitexact(got.reshape(rows), d32, f"{gpu} hardware rows, compiled kernel")


@needs_native
@pytest.mark.parametrize("m,k,n,gs,sms,arch", [(16, 512, 1024, 128, 7, "sm_80"), (3, 256, 512, None, 108, "sm_90"),
                                                (20, 256, 256, 128, 4, "sm_89")])
def test_marlin_emulation_is_the_same_on_both_paths(m, k, n, gs, sms, arch):
    rng = np.random.default_rng(m + k)
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if gs is None else k // gs
    sc = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16)
    B, s = marlin.pack(q, sc, gs)
    A = (rng.standard_normal((m, k)) * 4).astype(np.float16)
    fast = mk._gemm(A, B, s, arch, sms, 16, None, None, native=True)
    ref = mk._gemm(A, B, s, arch, sms, 16, None, None, native=False)
    assert_bitexact(fast, ref, "Marlin compiled vs NumPy path")
    assert_bitexact(mk.marlin_gemm(A, B, s, arch=arch, sms=sms), ref, "marlin_gemm default path")


def test_without_a_compiler_the_numpy_path_runs_and_says_so(monkeypatch):
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, (256, 256)).astype(np.uint8)
    B, s = marlin.pack(q, (rng.random((2, 256)) * 0.02 + 0.001).astype(np.float16), 128)
    A = rng.standard_normal((2, 256)).astype(np.float16)
    ref = mk._gemm(A, B, s, "sm_80", 108, 16, None, None, native=False)
    monkeypatch.delenv("REFSIM_NATIVE", raising=False)      # the fallback must be the compiler's absence
    monkeypatch.setenv("CC", "refsim-no-such-compiler")
    native._library.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="NumPy paths"):
            assert not native.available()
        assert "refsim-no-such-compiler" in native.status()
        assert_bitexact(mk.marlin_gemm(A, B, s), ref, "marlin_gemm without a compiler")
    finally:
        monkeypatch.delenv("CC")
        native._library.cache_clear()


# ----------------------------------------------------------------------------------------------
# the fp16 fma-chain kernels of the Any-Precision and 2/4/16 GEMV emulators


@needs_native
def test_compiled_fp16_rounding_equals_numpys_float64_to_float16_cast():
    """The C kernels' r16 against NumPy's cast on every double class: random bit patterns (NaN
    payloads, Inf, double subnormals), scaled normals over the fp16 range and past it, every fp16
    midpoint and its two neighbours (the ties and the values just beside them), the overflow edge.
    NaN of any payload or sign becomes the GPU's canonical NaN 0x7FFF (NumPy keeps the payload)."""
    rng = np.random.default_rng(21)
    h = np.unique(rng.integers(0, 1 << 16, 200_000, dtype=np.uint32).astype(np.uint16).view(np.float16)
                  .astype(np.float64))
    h = h[np.isfinite(h)]
    mid = (h[:-1] + h[1:]) / 2
    edge = np.array([65504.0, 65519.99, 65520.0, 65535.9, 65536.0, 2.0**-14, 2.0**-24, 2.0**-25, 3 * 2.0**-26,
                     2.0**-25 + 2.0**-60, 2.0**-1074, 0.0])
    for name, v in (("bits", rng.integers(0, 1 << 64, 400_000, dtype=np.uint64).view(np.float64)),
                    ("scaled", rng.standard_normal(400_000) * 2.0 ** rng.integers(-40, 20, 400_000)),
                    ("fp16 values", h), ("midpoints", mid), ("above", np.nextafter(mid, np.inf)),
                    ("below", np.nextafter(mid, -np.inf)), ("edges", np.concatenate([edge, -edge]))):
        with np.errstate(all="ignore"):
            want = v.astype(np.float16)
        want = np.where(np.isnan(want), np.uint16(0x7FFF).view(np.float16), want).astype(np.float64)
        assert_bitexact(native.round_to_f16_values(v), want, name)


def _f16_any(rng, shape, finite=True):
    """fp16 bit patterns of every class (finite=False adds +-Inf and the default NaN)."""
    u = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    special = (u & 0x7C00) == 0x7C00
    u[special] &= 0xBFFF
    x = u.view(np.float16)
    if not finite:
        pick = rng.random(shape)
        with np.errstate(invalid="ignore"):
            x[pick < 0.02] = np.float16(np.inf) * np.float16(0.0)          # the NaN arithmetic produces
        x[(pick >= 0.02) & (pick < 0.04)] = np.inf
        x[(pick >= 0.04) & (pick < 0.06)] = -np.inf
    return x


@needs_native
@pytest.mark.parametrize("m, n, k, bits, scale", [
    (1, 4, 32, 3, 0.05), (1, 8, 1024, 4, 0.05), (2, 16, 1056, 8, 1.0), (8, 32, 3072, 5, 0.05),
    (3, 16, 2080, 4, 300.0),                 # partials overflow fp16: Inf and Inf - Inf = NaN in the chains
    (1, 8, 8192, 7, 0.05),                   # the K-split launch, 2 slices added from +0
])
def test_compiled_anyprec_equals_the_numpy_emulation(m, n, k, bits, scale):
    from refsim.emulator import anyprec_kernel as ak
    from refsim.formats import bitplane

    rng = np.random.default_rng(m * 1000 + k + bits)
    q = bitplane.pack(rng.integers(0, 1 << bits, (n, k)).astype(np.uint8), bits)
    lut = (rng.standard_normal((n, 1 << bits)) * scale).astype(np.float16)
    lut[:, 0] = 0.0
    lut[:, 1] = -0.0
    x = _adversarial_f16(rng, (m, k))
    order = "ascending" if k > 4096 else None
    fast = ak.anyprec_gemv(x, q, lut, bits, order, native=True)
    ref = ak.anyprec_gemv(x, q, lut, bits, order, native=False)
    assert_bitexact(fast, ref, f"anyprec m={m} n={n} k={k} bits={bits}")
    if scale > 100:
        assert not np.isfinite(ref.astype(np.float64)).all()      # premise: the specials were exercised
    assert_bitexact(ak.anyprec_gemv(x, q, lut, bits, order), ref, "default path")


@needs_native
@pytest.mark.parametrize("g, n", [(1, 1), (3, 17), (2, 256), (5, 300), (4, 513)])
def test_compiled_mixed_group_sums_equal_numpy_on_any_weights(g, n):
    """Any fp16 weights, including the +-Inf and NaN an overflowing s_hat produces; any finite x."""
    from refsim.emulator import mixed_2_4_16_kernel as mx

    rng = np.random.default_rng(g * 1000 + n)
    w = _f16_any(rng, (16 * g, n), finite=False)
    for x in (_f16_any(rng, 16 * g), _adversarial_f16(rng, 16 * g)):
        assert_bitexact(native.mixed_group_sums(w, x), mx.group_sums(w, x), f"G={g} N={n}")


@needs_native
def test_compiled_mixed_gemv_equals_the_numpy_emulation():
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.formats import mixed_2_4_16 as fmt
    from refsim.quant import mixed_2_4_16 as quant

    rng = np.random.default_rng(4)
    k, n = 640, 48
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((64, k))
    p = fmt.pack(quant.quantize(W, X.T @ X / 64 + np.eye(k), alpha=0.25, outlier_ratio=0.005))
    x = _adversarial_f16(rng, k)
    ref = mx.mixed_gemv(p, x, native=False)
    assert_bitexact(mx.mixed_gemv(p, x, native=True), ref, "mixed_gemv")
    assert_bitexact(mx.mixed_gemv(p, x), ref, "default path")
    assert_bitexact(mx.mixed_gemv_reference(p, x), ref, "plain-loop twin")


def test_without_a_compiler_the_gemv_emulators_run_their_numpy_paths(monkeypatch):
    from refsim.emulator import anyprec_kernel as ak
    from refsim.formats import bitplane

    rng = np.random.default_rng(5)
    q = bitplane.pack(rng.integers(0, 16, (16, 1088)).astype(np.uint8), 4)
    lut = (rng.standard_normal((16, 16)) * 0.05).astype(np.float16)
    x = rng.standard_normal((2, 1088)).astype(np.float16)
    ref = ak.anyprec_gemv(x, q, lut, 4, native=False)
    monkeypatch.delenv("REFSIM_NATIVE", raising=False)
    monkeypatch.setenv("CC", "refsim-no-such-compiler")
    native._library.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="NumPy paths"):
            assert not native.available()
        assert_bitexact(ak.anyprec_gemv(x, q, lut, 4), ref, "anyprec_gemv without a compiler")
    finally:
        monkeypatch.delenv("CC")
        native._library.cache_clear()


def test_forcing_the_compiled_gemv_path_without_a_compiler_names_the_reason(monkeypatch):
    from refsim.emulator import anyprec_kernel as ak
    from refsim.errors import ToolchainError
    from refsim.formats import bitplane

    q = bitplane.pack(np.zeros((4, 32), np.uint8), 3)
    lut = np.zeros((4, 8), np.float16)
    x = np.zeros((1, 32), np.float16)
    monkeypatch.setenv("REFSIM_NATIVE", "0")
    native._library.cache_clear()
    try:
        with pytest.raises(ToolchainError, match="REFSIM_NATIVE=0"):
            ak.anyprec_gemv(x, q, lut, 3, native=True)
        assert_bitexact(ak.anyprec_gemv(x, q, lut, 3), np.zeros((1, 4), np.float16), "NumPy path")
    finally:
        monkeypatch.delenv("REFSIM_NATIVE")
        native._library.cache_clear()


@needs_native
@pytest.mark.parametrize("fused", [True, False])
def test_compiled_atom_epilogue_equals_numpy_including_a_double_rounding_case(fused):
    """The accumulator itself (before the fp16 cast, which would hide it: 2^34 is Inf in fp16):
    acc = 2^24 * 2^10 = 2^34, then c = 12907490 times s = 1331 * 2^-24 adds exactly 2^10 + 6 * 2^-24
    (12907490 * 1331 = 2^34 + 6) -- the exact sum lies just above a float32 tie (ulp 2^11 at 2^34),
    a plain float64 sum (ulp 2^-18) lands on the tie and rounds to even (2^34); fma.rn.f32 gives
    2^34 + 2^11. Plus random groups with every scale class."""
    from refsim.emulator import atom_kernel as atk

    def numpy_acc(c, sa, sb):
        acc = np.zeros(c.shape[1:], np.float32)
        sel = atk.weight_scale_index(*c.shape[1:])
        for g in range(c.shape[0]):
            acc = atk._epilogue(acc, c[g], sa[:, g], sb[g], sel, fused)
        return acc

    assert 12907490 * 1331 == 2**34 + 6
    c = np.array([[[2**24, 2**24]], [[12907490, 12907490]]], np.int32)             # (G=2, M=1, N=2)
    sa = np.array([[2.0**10, 1331 * 2.0**-24]], np.float16)
    sb = np.ones((2, 2), np.float16)
    assert float(sa[0, 1]) == 1331 * 2.0**-24                                    # premise: exact fp16
    got = native.atom_epilogue(c, sa, sb, fused)
    assert_bitexact(got, numpy_acc(c, sa, sb), "directed")
    assert got[0, 0] == np.float32(2.0**34 + 2.0**11 if fused else 2.0**34)     # fused: one rounding of the exact value
    rng = np.random.default_rng(12)
    for g, m, n in ((1, 1, 2), (5, 17, 30), (3, 33, 64)):
        c = rng.integers(-(2**31), 2**31, (g, m, n), dtype=np.int64).astype(np.int32)
        c[:, :, ::3] = rng.integers(-9000, 9000, (g, m, c[:, :, ::3].shape[2]))
        sa, sb = _f16_any(rng, (m, g)), _f16_any(rng, (g, n))
        assert_bitexact(native.atom_epilogue(c, sa, sb, fused), numpy_acc(c, sa, sb), f"G={g} M={m} N={n}")


# --------------------------------------------------------------------------- properties (hypothesis)
pytestmark = pytest.mark.skipif(not native.available(), reason="no compiled emulator kernels (no C compiler)")


def _finite_f16(rng, shape):
    """Random fp16 bit patterns with the Inf/NaN exponent replaced: every finite class appears."""
    u = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    special = (u & 0x7C00) == 0x7C00
    u[special] &= 0xBFFF                                  # exponent 31 -> 15: a finite value
    return u.view(np.float16)


@settings(max_examples=examples(200))
@given(arch=st.sampled_from(["sm_70", "sm_80", "sm_90"]), r=st.integers(1, 5), n=st.integers(1, 40),
       w=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_compiled_k16_step_equals_numpy_on_any_finite_bits(arch, r, n, w, seed):
    rng = np.random.default_rng(seed)
    k = 16 * w
    A, B = _finite_f16(rng, (r, k)), _finite_f16(rng, (k, n))
    acc = rng.integers(0, 1 << 32, (w, r, n), dtype=np.uint64).astype(np.uint32)
    acc[(acc & 0x7F800000) == 0x7F800000] &= 0xBFFFFFFF   # finite accumulators, all classes
    acc = acc.view(np.float32)
    kb = rng.permutation(w)
    a, b = mma_steps.MmaOperand(A), mma_steps.MmaOperand(B)
    assert_bitexact(mma_steps.mma_k16_f32_steps(arch, a, b, kb, acc, native=True),
                    mma_steps.mma_k16_f32_steps(arch, a, b, kb, acc, native=False), arch)


@settings(max_examples=examples(40))
@given(m=st.integers(1, 20), k=st.sampled_from([128, 256, 512]), gs=st.sampled_from([128, None]),
       sms=st.integers(1, 40), seed=st.integers(0, 2**16), arch=st.sampled_from(["sm_80", "sm_90"]))
def test_marlin_emulation_is_the_same_on_both_paths_for_any_partition(m, k, gs, sms, seed, arch):
    rng = np.random.default_rng(seed)
    n = 256
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if gs is None else k // gs
    B, s = marlin.pack(q, (rng.random((g, n)) * 0.05 + 1e-3).astype(np.float16), gs)
    A = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-12, 6, (m, k))).astype(np.float16)
    assert_bitexact(mk._gemm(A, B, s, arch, sms, 16, None, None, native=True),
                    mk._gemm(A, B, s, arch, sms, 16, None, None, native=False), "Marlin paths")


@settings(max_examples=examples(60))
@given(m=st.integers(1, 8), n16=st.integers(1, 3), k32=st.integers(1, 80), bits=st.integers(3, 8),
       scale_exp=st.integers(-20, 10), seed=st.integers(0, 2**32 - 1))
def test_compiled_anyprec_equals_numpy_for_any_launch(m, n16, k32, bits, scale_exp, seed):
    """Any legal launch (tail chunks, every bit width, weights from tiny to overflowing), any finite x."""
    from refsim.emulator import anyprec_kernel as ak
    from refsim.formats import bitplane

    rng = np.random.default_rng(seed)
    n, k = (4 if m == 1 else 16) * n16, 32 * k32
    q = bitplane.pack(rng.integers(0, 1 << bits, (n, k)).astype(np.uint8), bits)
    lut = (rng.standard_normal((n, 1 << bits)) * 2.0**scale_exp).astype(np.float16)
    x = _finite_f16(rng, (m, k))
    assert_bitexact(ak.anyprec_gemv(x, q, lut, bits, native=True), ak.anyprec_gemv(x, q, lut, bits, native=False),
                    f"m={m} n={n} k={k} bits={bits}")


@settings(max_examples=examples(60))
@given(g=st.integers(1, 6), n=st.integers(1, 600), specials=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_compiled_mixed_group_sums_equal_numpy_on_any_bits(g, n, specials, seed):
    """Step 3 of the 2/4/16 GEMV on any fp16 weights (with +-Inf and the default NaN when
    ``specials``) and any finite activations: both paths, raw bits."""
    from refsim.emulator import mixed_2_4_16_kernel as mx

    rng = np.random.default_rng(seed)
    w = _finite_f16(rng, (16 * g, n))
    if specials:
        pick = rng.random(w.shape)
        with np.errstate(invalid="ignore"):
            w[pick < 0.03] = np.float16(np.inf) * np.float16(0.0)
        w[(pick >= 0.03) & (pick < 0.06)] = np.float16(np.inf) * rng.choice([-1, 1])
    x = _finite_f16(rng, 16 * g)
    assert_bitexact(native.mixed_group_sums(w, x), mx.group_sums(w, x), f"G={g} N={n}")


@settings(max_examples=examples(20))
@given(k=st.sampled_from([16, 128, 640, 1040]), n=st.sampled_from([16, 48]), alpha=st.sampled_from([0.0, 0.25, 1.0]),
       seed=st.integers(0, 2**16))
def test_mixed_gemv_and_dequantization_are_the_same_on_both_paths(k, n, alpha, seed):
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.formats import mixed_2_4_16 as fmt
    from refsim.quant import mixed_2_4_16 as quant

    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((k, n)) * 0.05 * 2.0 ** rng.integers(-4, 4, (k, n))).astype(np.float32)
    X = rng.standard_normal((32, k))
    p = fmt.pack(quant.quantize(W, X.T @ X / 32 + np.eye(k), alpha=alpha, outlier_ratio=0.005))
    assert_bitexact(mx.dequantized_weights(p), mx.dequantized_weights_reference(p), "dequantized weights")
    x = _finite_f16(rng, k)
    assert_bitexact(mx.mixed_gemv(p, x, native=True), mx.mixed_gemv(p, x, native=False), "mixed_gemv")


@settings(max_examples=examples(60))
@given(g=st.integers(1, 6), n=st.integers(1, 600), four=st.booleans(), specials=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_compiled_fused_dequantization_and_chains_equal_the_op_by_op_numpy_form(g, n, four, specials, seed):
    """Steps 2-3 fused in C (weights formed in registers) against ``fp16(q - z) * s_hat`` through
    :func:`refsim.arith.fp.f16_mul` then :func:`mixed_2_4_16_kernel.group_sums`: any codes, any
    zero points, any s_hat bits (with +-Inf, whose products with q == z give NaN, when ``specials``)."""
    from refsim.arith import fp
    from refsim.emulator import mixed_2_4_16_kernel as mx

    rng = np.random.default_rng(seed)
    top = 16 if four else 4
    q = rng.integers(0, top, (16 * g, n)).astype(np.uint8)
    zero = rng.integers(0, top, (g, n)).astype(np.uint8)
    s_hat = _finite_f16(rng, (g, n))
    if specials:
        s_hat[rng.random((g, n)) < 0.05] = np.float16(np.inf) * rng.choice([-1, 1])
    x = _finite_f16(rng, 16 * g)
    qz = q.astype(np.int32).reshape(g, 16, n) - zero.astype(np.int32)[:, None, :]
    w = fp.f16_mul(fp.cvt_int_to_f16(qz), s_hat[:, None, :]).reshape(16 * g, n)
    assert_bitexact(native.mixed_dense_group_sums(q, zero, s_hat, x), mx.group_sums(w, x), f"G={g} N={n}")


# ----------------------------------------------------------------------------------------------
# the wgmma twin: refsim.arith.wgmma's fp8 -> f32 path (and f16 -> f32 through the k16 twin)


def _fp8_codes(rng, shape, fmt: str, specials: bool):
    """fp8 codes over the whole range; with ``specials`` a few NaN (and Inf for e5m2) codes mixed in."""
    u = rng.integers(0, 256, shape).astype(np.uint8)
    nan = (u & 0x7F) == 0x7F if fmt == "e4m3" else (u & 0x7C) == 0x7C
    u = np.where(nan, u & 0xF0, u).astype(np.uint8)                  # finite everywhere first
    u[rng.random(shape) < 0.15] &= 0x80                               # zeros of both signs
    if specials:
        hot = rng.random(shape) < 0.01
        u[hot] = rng.choice(np.array([0x7F, 0xFF] if fmt == "e4m3" else [0x7C, 0xFC, 0x7E, 0xFF], np.uint8), hot.sum())
    return u


@needs_native
@pytest.mark.parametrize("a,b", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2")])
def test_compiled_wgmma_fp8_equals_the_numpy_definition(a, b):
    from refsim.arith import wgmma as w

    rng = np.random.default_rng(17)
    for trial in range(12):
        n = int(rng.choice([8, 24, 128, 256]))
        A = _fp8_codes(rng, (2, 64, 32), a, trial % 3 == 2)
        B = _fp8_codes(rng, (2, 32, n), b, trial % 3 == 2)
        C = _adversarial_acc(rng, (2, 64, n))
        if trial % 4 == 1:
            C[0, :3, :4] = [np.inf, -np.inf, np.nan, np.float32(2.0**-140)]
        if trial % 4 == 3:                       # all products -0 with C = -0 (the -0 rule), and +0
            A[1, :2] = 0x80
            B[1, :, :2] = 0x00
            C[1, 0, :2], C[1, 1, :2] = -0.0, 0.0
        sa, sb = int(rng.choice([1, -1])), int(rng.choice([1, -1]))
        kind = f"f32.{a}.{b}"
        want = w.wgmma(kind, A, B, C, scale_a=sa, scale_b=sb, native=False)
        got = w.wgmma(kind, A, B, C, scale_a=sa, scale_b=sb, native=True)
        assert_bitexact(got, want, f"{kind} trial {trial}")
        if trial % 4 == 3:        # every product is a zero whose sign is a's (-0 unless negated) ^ b's
            negative = (sa == 1) != (sb == -1)
            assert got[1, 0, 0].tobytes() == np.float32(-0.0 if negative else 0.0).tobytes()
            assert got[1, 1, 0].tobytes() == np.float32(0.0).tobytes()     # C = +0: +0


@needs_native
def test_compiled_wgmma_f16_equals_the_numpy_definition_and_specials_fall_back():
    from refsim.arith import wgmma as w

    rng = np.random.default_rng(18)
    for trial in range(6):
        n = int(rng.choice([8, 64, 256]))
        A, B = _adversarial_f16(rng, (2, 64, 16)), _adversarial_f16(rng, (2, 16, n))
        C = _adversarial_acc(rng, (2, 64, n))
        if trial % 2:
            A[0, 0, 0], C[1, 1, 1] = np.inf, np.nan         # the NumPy path runs these
        want = w.wgmma("f32.f16.f16", A, B, C, native=False)
        assert_bitexact(w.wgmma("f32.f16.f16", A, B, C, native=True), want, f"f16 trial {trial}")


def test_forcing_the_compiled_wgmma_without_a_compiler_names_the_reason(monkeypatch):
    from refsim.arith import wgmma as w
    from refsim.errors import ToolchainError

    A, B, C = np.zeros((64, 32), np.uint8), np.zeros((32, 8), np.uint8), np.zeros((64, 8), np.float32)
    monkeypatch.delenv("REFSIM_NATIVE", raising=False)
    monkeypatch.setenv("CC", "refsim-no-such-compiler")
    native._library.cache_clear()
    try:
        with pytest.warns(RuntimeWarning):
            with pytest.raises(ToolchainError, match="refsim-no-such-compiler"):
                w.wgmma("f32.e4m3.e4m3", A, B, C, native=True)
        assert_bitexact(w.wgmma("f32.e4m3.e4m3", A, B, C), C, "the NumPy path without a compiler")
    finally:
        monkeypatch.delenv("CC")
        native._library.cache_clear()


# --------------------------------------------------------------------------- integer mma (refsim_mma_int)
from refsim.arith import integer_mma as im  # noqa: E402

_INTS = ("s8", "u8", "s4", "u4")

# one output element: every A element a, every B element b, K products, C = c; then the result wrapped
# modulo 2^32 and with .satfinite, worked out by hand (2^31 = 2147483648)
_INT_EDGES = [
    # atype btype   a     b    K      c                wrapped        saturated
    ("s8", "s8", -128, -128, 16, 2**31 - 16 * 16384, -(2**31), 2**31 - 1),      # INT8 min squared lands on 2^31
    ("s8", "s8", 127, 127, 16, 2**31 - 1 - 16 * 16129, 2**31 - 1, 2**31 - 1),   # INT8 max: exactly 2^31 - 1
    ("s8", "s8", -128, 127, 16, -(2**31) + 16 * 16256, -(2**31), -(2**31)),     # exactly -2^31
    ("s8", "u8", -128, 255, 32, -(2**31) + 1, 2146439169, -(2**31)),            # -32640 * 32 past -2^31
    ("u8", "u8", 255, 255, 32, -(2**31), -2145402848, -2145402848),             # no overflow: C + 2080800
    ("s4", "s4", -8, -8, 64, 2**31 - 1, -2147479553, 2**31 - 1),                # 4096 past 2^31 - 1
    ("u4", "s4", 15, -8, 64, 0, -7680, -7680),
    ("s4", "u4", 7, 15, 64, -(2**31), -2147476928, -2147476928),                # 6720 above -2^31
    ("u4", "u4", 15, 15, 32, 2**31 - 7200, -(2**31), 2**31 - 1),                # 225 * 32 lands on 2^31
    ("u8", "u8", 255, 255, 40000, 0, -1693967296, 2**31 - 1),                   # the products alone pass 2^31
    ("u8", "u8", 255, 255, 40000, -(2**31), 453516352, 453516352),              # ... and C brings them back
]


@needs_native
@pytest.mark.parametrize("atype,btype,a,b,k,c,wrapped,saturated", _INT_EDGES)
def test_compiled_integer_mma_equals_mma_int_on_the_int32_edges(atype, btype, a, b, k, c, wrapped, saturated):
    A, B, C = np.full((1, k), a, np.int16), np.full((k, 1), b, np.int16), np.full((1, 1), c, np.int32)
    for sat, want in ((False, wrapped), (True, saturated)):
        got = native.mma_int(A, B, C, sat)
        assert_bitexact(got, np.full((1, 1), want, np.int32), f"{atype}.{btype} K={k} C={c} sat={sat}")
        assert_bitexact(got, im.mma_int(A, B, C, atype=atype, btype=btype, satfinite=sat), "vs mma_int")


@needs_native
@pytest.mark.parametrize("atype,btype", [(x, y) for x in _INTS for y in _INTS if (x[1] == "4") == (y[1] == "4")])
def test_compiled_integer_mma_on_tiles_of_edge_values_equals_the_plain_loop(atype, btype):
    # three m16n8k64 instructions at once, A and B from each type's extremes, 0 and +-1, C near +-2^31
    rng = np.random.default_rng(5)
    edges = {t: [v for v in (*im.INT_RANGES[t], 0, 1, -1) if im.INT_RANGES[t][0] <= v <= im.INT_RANGES[t][1]]
             for t in _INTS}
    A = rng.choice(edges[atype], (3, 16, 64)).astype(np.int8 if atype[0] == "s" else np.uint8)
    B = rng.choice(edges[btype], (3, 64, 8)).astype(np.int8 if btype[0] == "s" else np.uint8)
    C = rng.choice(np.array([-(2**31), -(2**31) + 1, -(2**31) + 4000, -1, 0, 1, 2**31 - 4000, 2**31 - 2, 2**31 - 1],
                            np.int64), (3, 16, 8)).astype(np.int32)
    A[1], B[1] = max(edges[atype], key=abs), max(edges[btype], key=abs)            # every product at its largest
    for sat in (False, True):
        got = native.mma_int(A, B, C, sat)
        for t in range(3):
            assert_bitexact(got[t], im.mma_int_reference(A[t], B[t], C[t], atype=atype, btype=btype, satfinite=sat),
                            f"{atype}.{btype} tile {t} sat={sat}")


def _int_values(rng, t: str, shape) -> np.ndarray:
    """Values of type ``t`` from random bits: each element's low 4 or 8 bits, sign-extended for s4/s8."""
    bits = 4 if t[1] == "4" else 8
    v = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.int64) & ((1 << bits) - 1)
    return np.where((t[0] == "s") & (v >= 1 << (bits - 1)), v - (1 << bits), v)


@settings(max_examples=examples(100), deadline=None)
@given(atype=st.sampled_from(_INTS), btype=st.sampled_from(_INTS), t=st.integers(1, 3), m=st.integers(1, 16),
       n=st.integers(1, 8), k=st.integers(1, 80), sat=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_compiled_integer_mma_equals_mma_int_on_any_bits(atype, btype, t, m, n, k, sat, seed):
    rng = np.random.default_rng(seed)
    A, B = _int_values(rng, atype, (t, m, k)), _int_values(rng, btype, (t, k, n))
    C = rng.integers(0, 1 << 32, (t, m, n), dtype=np.uint64).astype(np.uint32).view(np.int32)
    near = rng.random((t, m, n)) < 0.3                    # about a third of C within 2^20 of +-2^31: sums wrap
    x = C[near].astype(np.int64) & 0xFFFFF
    C[near] = np.where(rng.integers(0, 2, x.size) == 1, 2**31 - 1 - x, -(2**31) + x)
    assert_bitexact(native.mma_int(A, B, C, sat), im.mma_int(A, B, C, atype=atype, btype=btype, satfinite=sat),
                    f"{atype}.{btype} sat={sat}")
