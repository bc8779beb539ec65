"""Integer tensor-core ``mma``: exact int32 dot products of 4- and 8-bit operands.

Spec
----
instruction     ``mma.sync.aligned.{m16n8k16, m16n8k32, m16n8k64}.row.col{.satfinite}.s32.atype.btype.s32``
                with atype, btype in ``s4 u4`` (k32, k64) or ``s8 u8`` (k16, k32); mixed signedness allowed.
operands        A integer (..., M, K) holding atype values, B (..., K, N) holding btype values, C int32
                (..., M, N); any integer container dtype (the range is checked, never wrapped):
                    s4 [-8, 7]   u4 [0, 15]   s8 [-128, 127]   u8 [0, 255]
operation       D = C + A @ B with every product and the sum exact (int64 inside), then one step
                to int32; any K is accepted (a kernel's K-long chain of instructions, one call).
overflow        wraps modulo 2^32 (two's complement), or with ``.satfinite`` clamps to
                [-2^31, 2^31 - 1] — PTX ISA 9.x, "mma", the ``.satfinite`` qualifier.
order           none: integer addition is associative, so one matmul in int64 is the hardware's result
                whatever order the tensor core sums in (the plain loop twin sums in k order).
compiled twin   ``refsim_mma_int`` of refsim/native/emulators.c (:func:`refsim.native.emulators.mma_int`):
                this order of operations in C (int64 products and sum, C added, then the wrap or the
                clamp); the compiled PTX executor's integer ``mma`` runs it. Pinned bit-equal to
                :func:`mma_int` by ``tests/native/test_emulators.py``.
fragments       which lane holds which element: :mod:`refsim.arith.fragments`
                (``mma_m16n8k64_s4_a`` etc.); the arithmetic here is on whole matrices.

One output element for m16n8k64 .s4 (K = 64 products of two 4-bit values, |a b| <= 64)::

    D[i, j] = wrap32( C[i, j] + a[i,0] b[0,j] + a[i,1] b[1,j] + ... + a[i,63] b[63,j] )
              |--int32--|   |-------------- exact, |sum| <= 4096 ---------------|
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (require_array, require_bool, require_choice, require_dtype, require_ndim)
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = ["INT_RANGES", "mma_int", "mma_int_reference"]


#: value range of each integer operand type, inclusive (PTX ``.s4 .u4 .s8 .u8``)
INT_RANGES = {"s4": (-8, 7), "u4": (0, 15), "s8": (-128, 127), "u8": (0, 255)}


def _check_int(A, B, C, atype, btype):
    """``(A, B, C)`` checked (at least 2-D, values in their type's range), as plain native arrays."""
    checked = []
    for name, x, t in (("A", A, atype), ("B", B, btype)):
        require_choice(f"{name} type", t, tuple(INT_RANGES))
        if not isinstance(x, np.ndarray) or not np.issubdtype(x.dtype, np.integer):
            raise DtypeError(f"{name}: dtype must be an integer type holding {t} values; got "
                             f"{getattr(x, 'dtype', type(x).__name__)}")
        x = _at_least_2d(name, require_array(name, x))
        checked.append(x)
        lo, hi = INT_RANGES[t]
        if x.size and (int(x.min()) < lo or int(x.max()) > hi):
            bad = int(x.min()) if int(x.min()) < lo else int(x.max())
            raise FormatRuleError(f"{name}: {t} values must lie in [{lo}, {hi}]; got {bad}")
    A, B = checked
    C = _at_least_2d("C", require_dtype("C", C, np.int32))
    if A.shape[-1] != B.shape[-2] or A.shape[-2] != C.shape[-2] or B.shape[-1] != C.shape[-1]:
        raise ShapeError(f"A, B, C: shapes must be (..., M, K), (..., K, N), (..., M, N); got "
                         f"{A.shape}, {B.shape}, {C.shape}")
    return A, B, C


def _at_least_2d(name: str, x: np.ndarray) -> np.ndarray:
    if x.ndim < 2:
        raise ShapeError(f"{name}: must be at least 2-D (..., rows, columns); got shape {x.shape}")
    return x


def mma_int(A: np.ndarray, B: np.ndarray, C: np.ndarray, *, atype: str = "s4", btype: str = "s4",
            satfinite: bool = False) -> np.ndarray:
    """Integer ``mma`` (e.g. ``m16n8k64.row.col.s32.s4.s4.s32``): D = C + A @ B exactly in int32.

    A integer (..., M, K) with values in the ``atype`` range, B (..., K, N) in ``btype``'s,
    C int32 (..., M, N). Overflow wraps modulo 2^32, or clamps to [-2^31, 2^31 - 1] with
    ``satfinite=True`` (PTX ``.satfinite``). Returns int32 (..., M, N).
    """
    A, B, C = _check_int(A, B, C, atype, btype)
    satfinite = require_bool("satfinite", satfinite)
    acc = C.astype(np.int64) + np.matmul(A.astype(np.int64), B.astype(np.int64))
    if satfinite:
        return np.clip(acc, -(2**31), 2**31 - 1).astype(np.int32)
    return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)


def mma_int_reference(A, B, C, *, atype: str = "s4", btype: str = "s4", satfinite: bool = False):
    """Plain-loop twin of :func:`mma_int` for 2-D operands, with Python integers."""
    A, B, C = _check_int(A, B, C, atype, btype)
    satfinite = require_bool("satfinite", satfinite)
    for name, x in (("A", A), ("B", B), ("C", C)):
        require_ndim(name, x, 2)
    M, K = A.shape
    N = B.shape[1]
    D = np.empty((M, N), np.int32)
    for i in range(M):
        for j in range(N):
            s = int(C[i, j]) + sum(int(A[i, k]) * int(B[k, j]) for k in range(K))
            if satfinite:
                s = min(max(s, -(2**31)), 2**31 - 1)
            else:
                s = (s + 2**31) % 2**32 - 2**31
            D[i, j] = s
    return D
