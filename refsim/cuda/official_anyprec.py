"""The official Any-Precision LLM GEMV (``matmul_kbit_32``) on any inputs, with ``main.cu``'s dispatch.

Spec
----
kernels       every instantiation ``matmul_kbit`` can launch: ``matmul_kbit_32<maxm, bits, false>`` for
              maxm = M in 1..8 and bits in 3..8, and ``matmul_kbit_32<1, bits, true>`` (K-split) for
              bits 7 and 8 — 50 entries in ``official/anyprec_matmul_kbit_32.ptx.gz``, the PTX nvcc 13.0.88
              (``-arch=sm_80 -ptx``) produced from the official ``matmul.cuh`` with those explicit
              instantiations (provenance in ``official/README.md``).
dispatch      ``main.cu``'s ``matmul_kbit``: multi_row = 1 if M == 1 else 4; use_ksplit = M == 1 and
              K > 4096 and bits >= 7 (a non-Orin GPU); grid N / (4 * multi_row), block (32, 4, ksplit),
              ksplit = ceil(K / 4096); arguments (I, W, M, N, K, C, O). The same rule as
              :func:`refsim.formats.anyprec_plan.plan`, which this launcher reads.
result        float16 (M, N): what the official kernel writes, bit for bit, through refsim.ptx. A K-split
              launch adds its slices with fp16 ``atomicAdd`` in shared memory; refsim.ptx lands them in
              thread order unless ``options={"atomic_order": ...}`` says otherwise
              (:func:`refsim.testing.admissible.ptx_admissible` runs every order).
inputs        those of :func:`refsim.emulator.anyprec_kernel.anyprec_gemv` (checked by the same rule);
              never modified.

    x (M, K) fp16, qweight int32 (p, N, K/32), lut fp16 (N, 2**bits)
        └─► plan (main.cu's dispatch) ─► entry matmul_kbit_32<M, bits, ksplit> ─► refsim.ptx ─► O (M, N) fp16
"""

from __future__ import annotations

import functools
import gzip

import numpy as np

from refsim._validate import native_contiguous, require_bits, require_int
from refsim.cuda import launch
from refsim.cuda.launch import Launch
from refsim.cuda.official import DATA_DIR
from refsim.formats import anyprec_plan as ak

__all__ = ["PTX_FILE", "entry_name", "launch_of", "ptx_text", "anyprec_gemv"]

PTX_FILE = "anyprec_matmul_kbit_32.ptx.gz"


def entry_name(m: int, bits: int, ksplit: bool) -> str:
    """The mangled ``.entry`` name of ``matmul_kbit_32<m, bits, ksplit>`` (m 1..8, bits 3..8; ksplit only with m == 1)."""
    m = require_int("m", m, minimum=1)
    bits = require_bits(bits, ak.SUPPORTED_BITS)
    if m > ak.MAX_M or (ksplit and m != 1):
        from refsim.errors import FormatRuleError

        raise FormatRuleError(f"m: the official kernels are instantiated for 1..{ak.MAX_M} (K-split only for 1); "
                              f"got m={m}, ksplit={bool(ksplit)}")
    return f"_Z14matmul_kbit_32ILi{m}ELi{bits}ELb{int(bool(ksplit))}EEvPK6__halfPKjjjjS2_PS0_"


@functools.lru_cache(maxsize=1)
def ptx_text() -> str:
    """The PTX of the 50 official instantiations (read once)."""
    return gzip.decompress((DATA_DIR / PTX_FILE).read_bytes()).decode()


def launch_of(m: int, n: int, k: int, bits: int) -> Launch:
    """``main.cu``'s launch for one (M, N, K, bits): entry, grid N / (4 multi_row), block (32, 4, ksplit)."""
    p = ak.plan(m, n, k, bits)
    return Launch(entry_name(m, bits, p.ksplit > 1), p.grid, (32, 4, p.ksplit), 0)


def anyprec_gemv(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int, *, backend: str = "ptx",
                 arch: str = "sm_80", options: dict | None = None) -> np.ndarray:
    """What the official ``matmul_kbit`` writes: float16 (M, N) (module spec).

    x float16 (M, K), 1 <= M <= 8, finite; qweight int32 (p, N, K/32) bitplanes; lut float16 (N, 2**bits);
    N % 4 == 0 (M == 1) or N % 16 == 0 (M >= 2), else the kernel leaves rows unwritten and refsim refuses.
    backend "ptx" (CPU) or "gpu"; ``options``: :meth:`refsim.ptx.Module.launch` keywords."""
    x, qweight, lut, m, n, k, bits = ak.checked_inputs(x, qweight, lut, bits)
    out = np.zeros((m, n), np.float16)
    args = (native_contiguous(x), native_contiguous(qweight).view(np.uint32), np.uint32(m), np.uint32(n),
            np.uint32(k), native_contiguous(lut), out)
    launch.run(ptx_text(), [(launch_of(m, n, k, bits), args)], backend=backend, arch=arch, options=options)
    return out
