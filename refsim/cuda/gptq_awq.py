"""Host side of ``gptq_awq.cu``: W4A16 dequant-GEMV for GPTQ and AWQ checkpoints, equal to
:func:`refsim.emulator.gptq_awq_kernel.gptq_gemv` / ``awq_gemv`` bit for bit (spec block in the .cu file).

    x (M, K) fp16 + GPTQCheckpoint (qweight (K/8, N), qzeros, scales, g_idx)  ─► gptq_gemv ─► (M, N) fp16
    x (M, K) fp16 + AWQCheckpoint  (qweight (K, N/8), qzeros, scales)         ─► awq_gemv  ─► (M, N) fp16
    launch: grid ceil(N / 128), block 128, a thread per output column
"""

from __future__ import annotations

import numpy as np

from refsim.cuda import build, launch
from refsim.cuda.launch import Launch
from refsim.emulator import gptq_awq_kernel as ek

__all__ = ["SOURCE", "ENTRY_POINTS", "gptq_gemv", "awq_gemv"]

SOURCE = "gptq_awq"
ENTRY_POINTS = {"gptq_gemv": "refsim.emulator.gptq_awq_kernel.gptq_gemv",
                "awq_gemv": "refsim.emulator.gptq_awq_kernel.awq_gemv"}
_BLOCK = 128


def _launch(kernel: str, n: int) -> Launch:
    return Launch(kernel, -(-n // _BLOCK), _BLOCK)


def gptq_gemv(x: np.ndarray, ckpt, *, backend: str = "ptx", arch: str = "sm_80",
              options: dict | None = None) -> np.ndarray:
    """Run ``gptq_gemv`` of gptq_awq.cu: float16 (M, N), what
    :func:`refsim.emulator.gptq_awq_kernel.gptq_gemv` returns. x float16 (M, K), M 1..8; ckpt a 4-bit
    :class:`refsim.formats.gptq.GPTQCheckpoint` ("gptq" v1 zeros read ``(field & 15) + 1``, "gptq_v2"
    as stored; any g_idx). backend "ptx" or "gpu"; ``options`` go to :meth:`refsim.ptx.Module.launch`."""
    W = ek.gptq_weights(ckpt)                      # validates the checkpoint (4-bit, type)
    k, n = W.shape
    x = ek.check_x(x, k)
    m = x.shape[0]
    y = np.zeros((m, n), np.float16)
    args = (np.ascontiguousarray(x), np.ascontiguousarray(ckpt.qweight), np.ascontiguousarray(ckpt.qzeros),
            np.ascontiguousarray(ckpt.scales), np.ascontiguousarray(ckpt.g_idx, dtype=np.int32), y,
            np.int32(m), np.int32(n), np.int32(k), np.int32(1 if ckpt.checkpoint_format == "gptq" else 0))
    launch.run(build.ptx(SOURCE), [(_launch("gptq_gemv", n), args)], backend=backend, arch=arch, options=options)
    return y


def awq_gemv(x: np.ndarray, ckpt, *, backend: str = "ptx", arch: str = "sm_80",
             options: dict | None = None) -> np.ndarray:
    """Run ``awq_gemv`` of gptq_awq.cu: float16 (M, N), what
    :func:`refsim.emulator.gptq_awq_kernel.awq_gemv` returns. x float16 (M, K), M 1..8, K % 8 == 0;
    ckpt an :class:`refsim.formats.awq.AWQCheckpoint`. backend "ptx" or "gpu"."""
    W = ek.awq_weights(ckpt)
    k, n = W.shape
    ek.check_w(W)
    x = ek.check_x(x, k)
    m = x.shape[0]
    y = np.zeros((m, n), np.float16)
    args = (np.ascontiguousarray(x), np.ascontiguousarray(ckpt.qweight), np.ascontiguousarray(ckpt.qzeros),
            np.ascontiguousarray(ckpt.scales), y, np.int32(m), np.int32(n), np.int32(k),
            np.int32(ckpt.group_size))
    launch.run(build.ptx(SOURCE), [(_launch("awq_gemv", n), args)], backend=backend, arch=arch, options=options)
    return y
