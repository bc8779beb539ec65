"""Host side of ``mixed_2_4_16.cu``: the 2/4/16-bit GEMV with the fused outlier SpMV, equal to
:func:`refsim.emulator.mixed_2_4_16_kernel.mixed_gemv` bit for bit (spec block in the .cu file).

    Packed2416 p, x (K,) fp16
        └─► validate (the emulator's checks) ─► two_idx / four_idx = K-order indices of the 2-/4-bit
            groups (from p.group_bits) ─► launch grid ceil(N/4), block 128 ─► y (N,) fp16
"""

from __future__ import annotations

import numpy as np

from refsim.cuda import build, launch
from refsim.cuda.launch import Launch
from refsim.emulator import mixed_2_4_16_kernel as ek
from refsim.formats import mixed_2_4_16 as m24

__all__ = ["SOURCE", "ENTRY_POINTS", "mixed_gemv", "group_ranks"]

SOURCE = "mixed_2_4_16"
ENTRY_POINTS = {"mixed_gemv": "refsim.emulator.mixed_2_4_16_kernel.mixed_gemv"}


def group_ranks(group_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int32 (n2,), int32 (n4,): the K-order group index of the j-th 2-bit / u-th 4-bit group.
    group_bits: uint8 (G,) of 2s and 4s (:func:`refsim.formats.mixed_2_4_16.check_group_bits`)."""
    four = m24.check_group_bits(group_bits) == 4
    return np.flatnonzero(~four).astype(np.int32), np.flatnonzero(four).astype(np.int32)


def _nonempty(a: np.ndarray, dtype) -> np.ndarray:
    """The array as a C-contiguous buffer of ``dtype``; one zero element stands in for an empty one
    (the kernel never reads it: every loop over it has zero trips)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.size else np.zeros(1, dtype)


def mixed_gemv(p, x: np.ndarray, *, backend: str = "ptx", arch: str = "sm_80",
               options: dict | None = None) -> np.ndarray:
    """Run ``mixed_2_4_16.cu``: float16 (N,), what :func:`refsim.emulator.mixed_2_4_16_kernel.mixed_gemv`
    returns. p: :class:`refsim.formats.mixed_2_4_16.Packed2416`; x float16 (K,), finite.
    backend "ptx" (CPU, exact) or "gpu"; ``options`` go to :meth:`refsim.ptx.Module.launch`.
    Inputs are not modified."""
    x, k, n = ek.check_inputs(p, x)
    two_idx, four_idx = group_ranks(p.group_bits)
    n_units = p.w_main.shape[1]
    y = np.zeros(n, np.float16)
    args = (_nonempty(p.w_main, np.uint32), _nonempty(p.w_side, np.uint32), _nonempty(p.meta2, np.uint16),
            _nonempty(p.meta4, np.uint8), _nonempty(p.s2, np.float16), _nonempty(p.z2, np.uint16),
            _nonempty(two_idx, np.int32), _nonempty(four_idx, np.int32), _nonempty(p.row_ptr, np.int32),
            _nonempty(p.col, np.uint16), _nonempty(p.val, np.float16), np.ascontiguousarray(x), y,
            np.int32(n), np.int32(n_units), np.int32(two_idx.size), np.int32(four_idx.size),
            np.int32(p.meta2.shape[1]))
    launch.run(build.ptx(SOURCE), [(Launch("mixed_gemv", -(-n // 4), 128), args)], backend=backend, arch=arch,
               options=options)
    return y
