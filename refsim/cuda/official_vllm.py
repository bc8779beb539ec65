"""vLLM's Marlin kernel on FP8 and NVFP4 weights (two compiled instantiations) on any inputs, through refsim.ptx.

Spec
----
kernels       ``official/vllm_marlin_fp.ptx.gz``: the PTX nvcc 13.0.88 (``-arch=sm_80 -ptx -std=c++17
              --expt-relaxed-constexpr``) produced from vLLM 0.33.0's ``marlin_template.h`` with the two
              explicit instantiations of ``official/vllm_marlin_fp/vllm_marlin_fp.cu`` (provenance in
              ``official/README.md``): ``Marlin<kFloat16, kFE4M3fn, kFloat16, kFloat16, 256, 1, 8, 8,
              false, 4, -1, false>`` (fp8, per-channel) and ``Marlin<kFloat16, kFE2M1f, kFloat16,
              kFE4M3fn, 256, 1, 8, 8, false, 4, 1, false>`` (nvfp4).
host loop     as ``marlin_mm`` with thread_m_blocks fixed at 1: the rows come in at most two launches
              (:func:`refsim.emulator.vllm_marlin_fp_kernel.row_launches`: ``16 * (M // 16)`` rows as
              ``parallel = M // 16`` chunks of 16, the kernel's own split, then the ``M % 16`` tail, A and C
              as row views); ``sms`` blocks per launch (None: one per tile, so every column tile is one
              slice), 256 threads, 96 KiB dynamic shared memory (also the ``max_shared_mem``
              argument), zeroed locks and fp32 C_tmp (one entry, and one 16 x 128 tile, per block and
              per tile), ``has_bias`` and ``use_atomic_add`` false, ``use_fp32_reduce`` as given,
              ``lda = K``.
arguments     (A, B, C, C_tmp, b_bias, a_scales, scales, global_scale, zp, prob_m, prob_n, prob_k, lda,
              locks, has_bias, use_atomic_add, use_fp32_reduce, max_shared_mem); the unused pointers get
              small zeroed buffers.
inputs        those of :func:`refsim.emulator.vllm_marlin_fp_kernel.vllm_marlin_fp_gemm` (same checks);
              never modified.

    A (M, K) fp16, B, s[, g] from refsim.formats.marlin_fp (prepare_fp8, prepare_nvfp4)
        └─► entry Marlin<..., b_type, ..., s_type, ..., group_blocks, ...> ─► refsim.ptx ─► C (M, N) fp16
"""

from __future__ import annotations

import functools
import gzip

import numpy as np

from refsim._validate import MAX_ELEMENTS, require_bounded
from refsim.cuda import launch
from refsim.cuda.official import DATA_DIR
from refsim.ptx.replay import scalar_argument

__all__ = ["PTX_FILE", "ENTRIES", "SHARED_BYTES", "ptx_text", "vllm_marlin_fp_gemm"]

PTX_FILE = "vllm_marlin_fp.ptx.gz"
_SIG = "EEEvPK4int4S3_PS1_S4_S3_PKfS3_S6_S3_iiiiPibbbi"
#: kind -> mangled ``.entry`` name (ScalarType ids: kFloat16 1125899906910725, kFE4M3fn 2814749767172868,
#: kFE2M1f 562949953487106)
ENTRIES = {
    "fp8": "_ZN6marlin6MarlinILl1125899906910725ELl2814749767172868ELl1125899906910725ELl1125899906910725"
           "ELi256ELi1ELi8ELi8ELb0ELi4ELin1ELb0" + _SIG,
    "nvfp4": "_ZN6marlin6MarlinILl1125899906910725ELl562949953487106ELl1125899906910725ELl2814749767172868"
             "ELi256ELi1ELi8ELi8ELb0ELi4ELi1ELb0" + _SIG,
}
SHARED_BYTES = 96 * 1024
THREADS = 256


@functools.lru_cache(maxsize=1)
def ptx_text() -> str:
    """The PTX of the two instantiations (read once)."""
    return gzip.decompress((DATA_DIR / PTX_FILE).read_bytes()).decode()


def vllm_marlin_fp_gemm(kind: str, A: np.ndarray, B: np.ndarray, s: np.ndarray,
                        global_scale: np.ndarray | None = None, *, arch: str = "sm_80", sms: int | None = None,
                        fp32_reduce: bool = False, options: dict | None = None) -> np.ndarray:
    """vLLM's Marlin kernel (``kind`` "fp8" or "nvfp4", compiled PTX) on new inputs through refsim.ptx:
    float16 (M, N). Inputs, ``sms`` and ``fp32_reduce`` as for
    :func:`refsim.emulator.vllm_marlin_fp_kernel.vllm_marlin_fp_gemm`; the host loop in the module spec.
    options: as for :meth:`refsim.ptx.Module.launch`."""
    from refsim.emulator import vllm_marlin_fp_kernel as em

    kind, A, B, s, global_scale, k, n = em.check_inputs(kind, A, B, s, global_scale, arch)
    sms, fp32_reduce = em._check_geometry(sms, fp32_reduce)
    m = A.shape[0]
    A, B, s = np.ascontiguousarray(A), np.ascontiguousarray(B), np.ascontiguousarray(s)
    g = np.ones(1, np.float32) if global_scale is None else np.ascontiguousarray(global_scale)
    C = np.zeros((m, n), np.float16)                                     # (M, N), written through row views
    u32 = lambda v: scalar_argument("u32", int(v).to_bytes(4, "little"))    # noqa: E731
    u8 = lambda v: scalar_argument("u8", int(v).to_bytes(1, "little"))      # noqa: E731
    n_tiles = n // em.THREAD_N
    launches = []
    for start, rows, parallel in em.row_launches(m):
        blocks = parallel * n_tiles if sms is None else sms
        slots = require_bounded("locks", blocks + parallel * n_tiles + 1, MAX_ELEMENTS, what="lock count")
        locks = np.zeros(slots, np.int32)                                # indexed by locks_off
        c_tmp = np.zeros(require_bounded("C_tmp", slots * 16 * em.THREAD_N, MAX_ELEMENTS), np.float32)
        unused = np.zeros(64, np.float32)                                # bias, a_scales, zp: never read
        args = (A[start:start + rows], B, C[start:start + rows], c_tmp, unused, unused, s, g, unused,
                u32(rows), u32(n), u32(k), u32(k), locks, u8(0), u8(0), u8(int(fp32_reduce)), u32(SHARED_BYTES))
        launches.append((launch.Launch(ENTRIES[kind], blocks, THREADS, SHARED_BYTES), args))
    launch.run(ptx_text(), launches, backend="ptx", arch=arch, options=options)
    return C
