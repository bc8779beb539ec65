"""Property: the compiled emulator kernel gives the NumPy path's bits for any finite operands,
any accumulator, any architecture, and (through the Marlin emulation) any partition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import marlin_kernel as mk
from refsim.emulator import native
from refsim.emulator import tensor_core as tc
from refsim.formats import marlin
from refsim.testing import assert_bitexact, examples

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
    a, b = tc.MmaOperand(A), tc.MmaOperand(B)
    assert_bitexact(tc.mma_k16_f32_steps(arch, a, b, kb, acc, native=True),
                    tc.mma_k16_f32_steps(arch, a, b, kb, acc, native=False), arch)


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
