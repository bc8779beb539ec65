"""Atom group GEMM emulation: equals the format module's independent value-level oracle when fused,
and the fused/unfused flag changes bits where the FFMA rounding matters; properties: the exact product
whenever no step can round, and the fast group sums equal the mma slabs bit for bit (extremes, native path)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import atom_kernel as atk
from refsim.emulator import atom_kernel as ek
from refsim.errors import FormatRuleError
from refsim.formats import atom
from refsim.testing import assert_bitexact, examples


def _problem(seed, m=4, k=512, n=64, keeper=128):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-2, 3, (m, k))).astype(np.float16)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float16)
    a = atom.quantize_activations(x, "kernel", keeper=keeper)
    wq = atom.quantize_weights(w, "kernel", keeper=keeper)
    return a, wq


def test_fused_emulation_equals_the_format_oracle():
    for seed in range(3):
        a, w = _problem(seed)
        assert_bitexact(ek.atom_group_gemm(a, w, fused=True), atom.atom_gemm(a, w), f"seed {seed}")
    a, w = _problem(7, m=2, k=512, n=8)            # body 384: the official kernel's smallest
    assert_bitexact(ek.atom_group_gemm(a, w), atom.atom_gemm_reference(a, w), "plain loop")


def test_without_keeper_channels():
    a, w = _problem(3, keeper=0)
    assert_bitexact(ek.atom_group_gemm(a, w), atom.atom_gemm(a, w))


def test_contraction_flag_matters_somewhere():
    diffs = 0
    for seed in range(20):  # the fp32 difference rarely survives the final fp16 rounding (seed 25: once)
        a, w = _problem(10 + seed, m=8, k=1024, n=128)
        fused = ek.atom_group_gemm(a, w, fused=True)
        unfused = ek.atom_group_gemm(a, w, fused=False)
        diffs += int((fused.view(np.uint16) != unfused.view(np.uint16)).sum())
    assert diffs > 0


def test_scale_selection_follows_the_half2_pairs():
    idx = ek.weight_scale_index(20, 6)
    assert idx[0].tolist() == [0, 0, 2, 2, 4, 4]          # tile rows 0..7: the pair's .x (column 2p)
    assert idx[8].tolist() == [1, 1, 3, 3, 5, 5]          # tile rows 8..15: the pair's .y (column 2p+1)
    assert idx[16].tolist() == idx[0].tolist() and idx[19].tolist() == idx[3].tolist()


def test_unequal_pair_scales_are_modelled_and_match_the_plain_loop_twin():
    rng = np.random.default_rng(5)
    m, n, kb, keeper = 18, 6, 384, 32
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8),
                             (rng.random((m, 3)) * 0.1 + 0.01).astype(np.float16),
                             rng.integers(-128, 128, (m, keeper)).astype(np.int8),
                             (rng.random(m) * 0.01 + 0.001).astype(np.float16))
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8),
                         (rng.random((3, n)) * 0.1 + 0.01).astype(np.float16),   # pairs differ
                         rng.integers(-128, 128, (keeper, n)).astype(np.int8),
                         (rng.random(n) * 0.01 + 0.001).astype(np.float16))
    got = ek.atom_group_gemm(a, w)
    assert_bitexact(got, ek.atom_group_gemm_reference(a, w), name="D")
    # tile rows 0..7 see the even column's scales in both columns of a pair, rows 8..15 the odd one's:
    # there the kernel equals the format's per-column oracle on the pair-equalised scales
    rows = np.arange(m) % 16 < 8
    for keep, lo in ((0, rows), (1, ~rows)):
        s4 = np.repeat(w.scale4[:, keep::2], 2, axis=1)
        s8 = np.repeat(w.scale8[keep::2], 2)
        ref = atom.atom_gemm(a, atom.AtomWeights(w.q4, s4, w.q8, s8))
        assert_bitexact(got[lo], ref[lo], name=f"rows using scale column 2p+{keep}")


def test_kernel_mode_keeper_scales_are_pair_equal():
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((384, 8)) * 0.05).astype(np.float16)
    wq = atom.quantize_weights(w, "kernel", keeper=128)
    assert np.array_equal(wq.scale8[0::2].view(np.uint16), wq.scale8[1::2].view(np.uint16))
    tail = np.abs(w[256:].astype(np.float32)).reshape(128, 4, 2).max(axis=(0, 2))   # per pair absmax
    assert np.array_equal(wq.scale8[0::2], (tail / np.float32(127)).astype(np.float16))
    ref = atom.quantize_weights_reference(w, "kernel", keeper=128)
    assert_bitexact(wq.q8, ref.q8, name="q8")
    assert_bitexact(wq.scale8, ref.scale8, name="scale8")


# --------------------------------------------------------------------------- properties (hypothesis)
@settings(max_examples=examples(20))
@given(m=st.integers(1, 4), groups=st.integers(3, 4), keeper=st.sampled_from([0, 128]),
       seed=st.integers(0, 2**16), fused=st.booleans())
def test_atom_exact_inputs_give_the_exact_product(m, groups, keeper, seed, fused):
    rng = np.random.default_rng(seed)
    n, kb = 16, 128 * groups
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8),
                             (2.0 ** rng.integers(-6, -2, (m, groups))).astype(np.float16),
                             rng.integers(-8, 9, (m, keeper)).astype(np.int8),
                             (2.0 ** rng.integers(-6, -2, m)).astype(np.float16))
    s4 = np.repeat((2.0 ** rng.integers(-6, -2, (groups, n // 2))), 2, axis=1).astype(np.float16)
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), s4,
                         rng.integers(-8, 9, (keeper, n)).astype(np.int8),
                         np.repeat(2.0 ** rng.integers(-6, -2, n // 2), 2).astype(np.float16))  # pair-equal
    # exact value: integer dot products (|p| <= 8192 per group, 8704 tail) times power-of-two scale
    # products in [2^-12, 2^-6]: |value| < 2^9 on the grid 2^-12, so every fp32 partial sum is exact
    exact = np.zeros((m, n))
    for g in range(groups):
        sl = slice(128 * g, 128 * (g + 1))
        p = a.q4[:, sl].astype(np.int64) @ w.q4[sl].astype(np.int64)
        exact += p * (a.scale4[:, g, None].astype(np.float64) * w.scale4[g][None, :].astype(np.float64))
    exact += (a.q8.astype(np.int64) @ w.q8.astype(np.int64)) * (a.scale8[:, None].astype(np.float64) *
                                                                 w.scale8[None, :].astype(np.float64))
    assert np.array_equal(exact.astype(np.float32).astype(np.float64), exact)  # premise
    expected = exact.astype(np.float16)  # one rounding of the exact value
    assert_bitexact(atk.atom_group_gemm(a, w, fused=fused), expected + np.float16(0))


def _f16_bits(rng, shape, finite=True):
    """Random fp16 bit patterns (every class: subnormals, huge values); Inf/NaN mapped to finite."""
    u = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    if finite:
        u[(u & 0x7C00) == 0x7C00] &= 0xBFFF
    return u.view(np.float16)


@settings(max_examples=examples(60))
@given(m=st.integers(1, 40), n2=st.integers(1, 20), groups=st.integers(1, 4), group=st.sampled_from([64, 128, 192]),
       keeper=st.sampled_from([0, 32, 128]), fused=st.booleans(), extreme=st.booleans(),
       native=st.sampled_from([None, False]), seed=st.integers(0, 2**32 - 1))
def test_atom_fast_group_sums_equal_the_mma_slabs_bit_for_bit(m, n2, groups, group, keeper, fused, extreme, native,
                                                              seed):
    """The BLAS group sums of :func:`atom_group_gemm`, with the compiled epilogue (native=None, when a
    compiler exists) or the NumPy one (False), give the bits of the slab-by-slab ``integer_mma.mma_int`` form for
    any codes (extreme: every code at the range ends) and any finite scales."""
    rng = np.random.default_rng(seed)
    groups = max(groups, -(-384 // group))            # the official kernel's body rule: K - keeper >= 384
    n, kb = 2 * n2, group * groups

    def codes(shape, lo, hi):
        return (rng.choice([lo, hi], shape) if extreme else rng.integers(lo, hi + 1, shape)).astype(np.int8)

    a = atom.AtomActivations(codes((m, kb), -8, 7), _f16_bits(rng, (m, groups)), codes((m, keeper), -128, 127),
                             _f16_bits(rng, m))
    w = atom.AtomWeights(codes((kb, n), -8, 7), _f16_bits(rng, (groups, n)), codes((keeper, n), -128, 127),
                         _f16_bits(rng, n))
    assert_bitexact(atk.atom_group_gemm(a, w, fused=fused, native=native), atk.atom_group_gemm_slabs(a, w, fused=fused),
                    f"m={m} n={n} groups={groups}x{group} keeper={keeper}")


def test_fused_must_be_a_bool_in_every_form():
    import pytest

    from refsim.errors import FormatRuleError

    rng = np.random.default_rng(0)
    a = atom.quantize_activations(rng.standard_normal((16, 512)).astype(np.float16), "kernel")
    w = atom.quantize_weights(rng.standard_normal((512, 8)).astype(np.float16), "kernel")
    for fn in (ek.atom_group_gemm, ek.atom_group_gemm_slabs):
        with pytest.raises(FormatRuleError, match=r"fused: must be True or False"):
            fn(a, w, fused=np.array([True, False]))


@pytest.mark.parametrize("k", [256, 384])        # body 128 and 256 with the keeper of 128
def test_a_body_the_official_kernel_reads_out_of_bounds_for_is_refused(k):
    a, w = _problem(1, m=2, k=k, n=8)
    for run in (ek.atom_group_gemm, ek.atom_group_gemm_slabs, ek.atom_group_gemm_reference):
        with pytest.raises(FormatRuleError, match=rf"DenseLayerGEMM_i4 kernel's prologue.*got {k - 128}$"):
            run(a, w)
