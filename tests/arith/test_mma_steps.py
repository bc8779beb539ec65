"""The emulators' k16 fast path: bit for bit the integer T-FDPA datapath of
:mod:`refsim.arith.tensor_core` on finite operands, including zeros, -0, subnormals and wide
exponents. (Its compiled twin is tested against it in tests/native/test_emulators.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import mma_steps as ms
from refsim.arith import tensor_core as tc
from refsim.errors import NonFiniteError
from refsim.testing import assert_bitexact


@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_fast_fp32_path_equals_chained_fdpa(arch):
    # the kernel emulations use mma_k16_f32 (float64 integer-valued arithmetic); it must equal the
    # integer implementation bit for bit: zeros, -0, fp16 subnormals, wide exponents, fp32-subnormal C
    rng = np.random.default_rng(5)
    A = (rng.standard_normal((40, 16, 16)) * 2.0 ** rng.integers(-26, 8, (40, 16, 16))).astype(np.float16)
    B = (rng.standard_normal((40, 16, 8)) * 2.0 ** rng.integers(-26, 8, (40, 16, 8))).astype(np.float16)
    A[:5, :, :4] = 0
    B[5:10, 3] = -0.0
    C = (rng.standard_normal((40, 16, 8)) * 2.0 ** rng.integers(-140, 20, (40, 16, 8))).astype(np.float32)
    C[10] = -0.0
    C[11] = 0.0
    A[10:12], B[10:12] = 0, -0.0  # all products -0: C = -0 must stay -0, C = +0 stays +0
    a, bT = ms.MmaOperand(A), ms.MmaOperand(np.ascontiguousarray(np.swapaxes(B, -1, -2)))
    got = ms.mma_k16_f32(arch, a.values[:, :, None, :], a.exps[:, :, None, :],
                         bT.values[:, None, :, :], bT.exps[:, None, :, :], C)
    assert_bitexact(got, tc.mma_m16n8k16(arch, A, B, C), arch)


def test_operand_refuses_non_finite_values():
    with pytest.raises(NonFiniteError, match="operand: the fast mma path needs finite fp16 values"):
        ms.MmaOperand(np.array([[1.0, np.inf]], np.float16))
