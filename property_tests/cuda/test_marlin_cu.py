"""Property: refsim/cuda/marlin.cu, run through refsim.ptx, writes what the Marlin emulator writes, bit for
bit, for any legal shape, group mode, SM count and tensor-core model, on values chosen to make every
rounding of the reduction order visible; and the exact product wherever no partial sum can round.

Each case costs seconds in the interpreter; the example counts keep this file to
tens of seconds on the 2-core machine.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refsim.cuda import marlin as cm
from refsim.emulator import marlin_kernel as mk
from refsim.formats import marlin
from refsim.testing import assert_bitexact, check_kernel


_GAP = cm.engine_gap()
pytestmark = pytest.mark.skipif(_GAP is not None, reason=f"refsim.ptx cannot run marlin.cu yet: {_GAP}")

#: fp16 values that stress conversions and signs: +-0, the smallest and largest subnormals, the
#: smallest normal, values whose products and sums land on fp16 / fp32 rounding ties
_SPECIAL_A = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 1023 * 2.0**-24, 2.0**-14, 1.0, -1.0, 0.5, 1.5,
                       2049.0 / 2048, 3.0, -7.0], np.float64)


def _weights(rng, k, n, gs):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)                    # (K, N) codes
    g = 1 if gs is None else k // gs
    sc = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16)         # (G, N)
    return q, sc


def _mirrored(rng, A, q, k, gs):
    """Pair k16 blocks at random (inside a group when grouped, so both see the same scales): the
    second gets the first's weight rows and minus its activations, so large partial sums cancel and
    the output keeps the rounding errors of the order in which they were added."""
    span = 8 if gs is not None or rng.random() < 0.5 else k // 16       # k16 blocks per pairing domain
    m = A.shape[0]
    for d0 in range(0, k // 16, span):
        blocks = rng.permutation(np.arange(d0, d0 + span))
        for x, y in zip(blocks[0::2], blocks[1::2]):
            q[16 * y:16 * y + 16] = q[16 * x:16 * x + 16]
            big = rng.choice([-1.0, 1.0], (m, 16)) * 2.0 ** rng.uniform(4, 9, (m, 16))
            A[:, 16 * x:16 * x + 16] = big
            A[:, 16 * y:16 * y + 16] = -big


def _problem(rng, m, k, n, gs, values):
    q, sc = _weights(rng, k, n, gs)
    if values == "normal":
        A = rng.standard_normal((m, k))
    elif values == "mirrored":
        A = rng.standard_normal((m, k))
        _mirrored(rng, A, q, k, gs)
    elif values == "special":
        A = rng.choice(_SPECIAL_A, (m, k)) * (rng.random((m, k)) < 0.3)
    else:  # "integers": integer sums above 2048 make the fp16 conversions hit ties
        A = rng.integers(-16, 17, (m, k)).astype(np.float64)
    B, s = marlin.pack(q, sc, gs)
    return A.astype(np.float16), B, s


# M: the k128 x n128 tile (1..16), the k64 x n256 tile with 2..4 m-blocks, and two launches (65..70)
_M = st.one_of(st.integers(1, 20), st.integers(33, 40), st.integers(65, 70))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=_M, k=st.sampled_from([128, 256, 384, 512]), gs=st.sampled_from([128, None]), sms=st.integers(1, 12),
       arch=st.sampled_from(["sm_80", "sm_86", "sm_89", "sm_90"]),
       values=st.sampled_from(["normal", "mirrored", "special", "integers"]), seed=st.integers(0, 2**16))
def test_kernel_equals_the_emulator_for_any_shape_partition_and_values(m, k, gs, sms, arch, values, seed):
    A, B, s = _problem(np.random.default_rng(seed), m, k, 256, gs, values)
    assert_bitexact(cm.marlin_gemm(A, B, s, arch=arch, sms=sms), mk.marlin_gemm(A, B, s, arch=arch, sms=sms),
                    f"marlin.cu M={m} K={k} g={gs} sms={sms} {arch} {values}")


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 20), k=st.sampled_from([128, 256, 384]), gs=st.sampled_from([128, None]),
       sms=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_kernel_returns_the_exact_product_when_no_partial_sum_rounds(m, k, gs, sms, seed):
    A, B, s = _exact_problem(np.random.default_rng(seed), m, k, 256, gs)
    assert_bitexact(cm.marlin_gemm(A, B, s, sms=sms), marlin.reference_gemm(A, B, s) + np.float16(0),
                    f"exact product M={m} K={k} g={gs} sms={sms}")


def _exact_problem(rng, m, k, n, gs):
    """A in {-1, 0, 1} (sparse), power-of-two scales: every product and partial sum (fp32, the
    tensor-core grid, the fp16 carries) is a multiple of 2^-2 below 2^9, so nothing rounds and the
    kernel must return the exactly rounded product (refsim.formats.marlin.reference_gemm)."""
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)                     # (K, N)
    sc = (2.0 ** rng.integers(-2, 2, (1 if gs is None else k // gs, n))).astype(np.float16)
    A = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.08)).astype(np.float16)
    B, s = marlin.pack(q, sc, gs)
    if (np.abs(A.astype(np.float64)) @ np.abs(marlin.effective_weights(B, s).astype(np.float64))).max() >= 2**9:
        A = np.zeros_like(A)                                               # keep the premise
    return A, B, s


@pytest.mark.parametrize("sms", [5])
def test_kernel_passes_the_kernel_author_harness(sms):
    # the same check a kernel author runs on their own Marlin kernel (refsim.testing.check_kernel)
    check_kernel(lambda A, B, s: cm.marlin_gemm(A, B, s, sms=sms), "marlin", sms=sms, max_examples=2, shrink=False)
