"""Host side of ``anyprec.cu``: the Any-Precision bitplane GEMV, equal to
:func:`refsim.emulator.anyprec_kernel.anyprec_gemv` bit for bit (see the spec block in the .cu file).

    x (M, K) fp16, qweight int32 (p, N, K/32), lut fp16 (N, 2**bits)
        └─► validate (the emulator's own checks) ─► launch grid ceil(N/4), block 128,
            shared 4 * 2**bits * 2 bytes ─► out (M, N) fp16
"""

from __future__ import annotations

import numpy as np

from refsim._validate import native_contiguous, require_bits, require_int
from refsim.cuda import build, launch
from refsim.cuda.launch import Launch
from refsim.errors import FormatRuleError
from refsim.formats import anyprec_plan as ak

__all__ = ["SOURCE", "ENTRY_POINTS", "anyprec_gemv", "launch_of"]

SOURCE = "anyprec"
ENTRY_POINTS = {"anyprec_gemv": "refsim.emulator.anyprec_kernel.anyprec_gemv"}
_ROWS_PER_BLOCK = 4


def launch_of(n: int, bits: int) -> Launch:
    """The launch for N output rows at ``bits``: grid ceil(N/4), block 128, the block's 4 table rows."""
    n, bits = require_int("n", n, minimum=1), require_bits(bits, ak.SUPPORTED_BITS)
    return Launch("anyprec_gemv", -(-n // _ROWS_PER_BLOCK), 128, _ROWS_PER_BLOCK * (1 << bits) * 2)


def anyprec_gemv(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int,
                 ksplit_order: str | None = None, *, backend: str = "ptx", arch: str = "sm_80",
                 options: dict | None = None) -> np.ndarray:
    """Run ``anyprec.cu``: float16 (M, N), what
    :func:`refsim.emulator.anyprec_kernel.anyprec_gemv` returns for the same arguments.

    x float16 (M, K), 1 <= M <= 8, finite; qweight int32 (p, N, K/32) bitplanes
    (:mod:`refsim.formats.bitplane`); lut float16 (N, 2**bits); bits 3..8. When the official dispatcher
    would split K (M == 1, K > 4096, bits >= 7) ``ksplit_order="ascending"`` is required, as for the
    emulator: this kernel adds the slice totals in ascending order. backend "ptx" (CPU, exact) or
    "gpu"; ``options`` go to :meth:`refsim.ptx.Module.launch` (e.g. ``{"schedule": "random"}``).
    Inputs are not modified."""
    m, n, k, bits = ak.check_inputs(x, qweight, lut, bits)
    plan = ak.plan(m, n, k, bits)
    if plan.ksplit > 1 and ksplit_order != "ascending":
        raise FormatRuleError(
            f"ksplit_order: this launch splits K into {plan.ksplit} slices; the kernel adds them in "
            f"ascending order, say so with 'ascending'; got {ksplit_order!r}")
    chunks_per_slice = 4 if plan.ksplit > 1 else plan.chunks
    out = np.zeros((m, n), np.float16)
    args = (native_contiguous(x), native_contiguous(qweight), native_contiguous(lut), out,
            np.int32(m), np.int32(n), np.int32(k), np.int32(bits), np.int32(chunks_per_slice))
    launch.run(build.ptx(SOURCE), [(launch_of(n, bits), args)], backend=backend, arch=arch, options=options)
    return out
