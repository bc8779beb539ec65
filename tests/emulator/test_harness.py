"""check_kernel: passes a correct kernel, and reports a wrong one with location and ULP distance."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.emulator import anyprec_kernel as ak
from refsim.emulator import harness
from refsim.emulator import marlin_kernel as mk
from refsim.emulator import tensor_core as tc
from refsim.errors import FormatRuleError
from refsim.formats import marlin


def test_emulator_as_kernel_passes_for_every_format():
    harness.check_kernel(lambda A, B, s: mk.marlin_gemm(A, B, s, sms=108), "marlin", max_examples=4)
    harness.check_kernel(lambda A, B, C: tc.mma_m16n8k16("sm_90", A, B, C), "mma_m16n8k16", arch="sm_90",
                         max_examples=8)
    harness.check_kernel(lambda A, B, C: tc.mma_m16n8k16("sm_80", A, B, C), "mma_m16n8k16_f16", max_examples=8)
    harness.check_kernel(lambda A, B, C: tc.mma_int(A, B, C), "mma_s4", max_examples=8)
    harness.check_kernel(lambda x, q, lut: ak.anyprec_gemv(x, q, lut, q.shape[0]), "anyprec", max_examples=4)


def test_anyprec_kernel_with_a_sequential_reduction_is_caught():
    # a GEMV that sums each row left to right in fp16 (no lanes, no tree)
    def sequential(x, q, lut):
        from refsim.formats import bitplane

        W = np.take_along_axis(lut, bitplane.unpack(q).astype(np.int64), axis=1)  # (N, K)
        out = np.zeros((x.shape[0], W.shape[0]), np.float16)
        for k in range(x.shape[1]):
            out = (out + x[:, k:k + 1] * W[:, k][None, :]).astype(np.float16)
        return out

    with pytest.raises(harness.KernelMismatch, match="shfl_down tree"):
        harness.check_kernel(sequential, "anyprec", max_examples=10, shrink=False)


def test_naive_fp64_mma_is_caught_with_lane_and_ulp():
    def naive(A, B, C):  # RN(c + exact dot) in float64: not what a tensor core does
        return (C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(naive, "mma_m16n8k16", max_examples=20)
    msg = str(info.value)
    assert "register c" in msg and "of lane" in msg and "ULP" in msg and "k 0..7, k 8..15" in msg
    # shrinking: zeros, ones and small integers are exact for both, so the minimal failing case is
    # the first data kind with rounding, with the seed shrunk to 0
    assert "'kind': 'normal'" in msg and "'seed': 0" in msg


def test_marlin_kernel_with_wrong_reduction_order_is_caught_and_located():
    # a "kernel" that ignores the striped partition (as if one SM did everything): it differs only
    # where the fp16 carries of the global reduction round, so the report must name the slices
    def one_sm(A, B, s):
        return mk.marlin_gemm(A, B, s, sms=1)

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(one_sm, "marlin", sms=108, max_examples=12, shrink=False)
    msg = str(info.value)
    assert "lane" in msg and "slice_idx" in msg and "ULP" in msg and "written by block" in msg


def test_wrong_dtype_is_reported():
    def f32_out(A, B, s):
        return mk.marlin_gemm(A, B, s).astype(np.float32)

    with pytest.raises(harness.KernelMismatch, match="kernel returned dtype float32"):
        harness.check_kernel(f32_out, "marlin", max_examples=2, shrink=False)


def test_kernel_gets_copies_of_the_inputs():
    def vandal(A, B, C):
        D = tc.mma_int(A, B, C)
        A[:] = 0
        return D

    harness.check_kernel(vandal, "mma_s4", max_examples=3)


def test_unknown_format_lists_valid_ones():
    with pytest.raises(FormatRuleError, match="fmt: must be one of"):
        harness.check_kernel(lambda *a: None, "awq")


def test_pack_used_by_the_harness_is_the_marlin_format():
    A, B, s = harness.FORMATS["marlin"].make({"m": 1, "k": 128, "n": 256, "group_size": None,
                                              "kind": "ones", "seed": 0})
    q, scales = marlin.unpack(B, s)
    assert q.shape == (128, 256) and scales.shape == (1, 256) and A.shape == (1, 128)
