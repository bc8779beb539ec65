"""Real CUDA kernels, diffed bit for bit against refsim's emulators (design card, part three).

Each ``refsim/cuda/<name>.cu`` opens with a spec block (computation, launch shape, reduction order, the
emulator function it equals, a diagram); its host module ``refsim/cuda/<name>.py`` validates inputs,
launches it and returns what the emulator returns. ``backend="ptx"`` (the default) runs the kernel's
nvcc-compiled PTX on a CPU through :mod:`refsim.ptx`, so every CI run checks the real kernels;
``backend="gpu"`` runs the same PTX on a GPU through ``cuda.core`` (the ``gpu`` extra).

    kernel                       file              equals (bit for bit)
    anyprec_gemv                 anyprec.cu        refsim.emulator.anyprec_kernel.anyprec_gemv
    mixed_gemv                   mixed_2_4_16.cu   refsim.emulator.mixed_2_4_16_kernel.mixed_gemv
    gptq_gemv, awq_gemv          gptq_awq.cu       refsim.emulator.gptq_awq_kernel.gptq_gemv / awq_gemv
    atom_group_gemm              atom.cu           refsim.emulator.atom_kernel.atom_group_gemm
    marlin_gemm                  marlin.cu         refsim.emulator.marlin_kernel.marlin_gemm
    mma_probe                    mma.cu            refsim.cuda.mma.mma_reference (refsim.arith.tensor_core)
    hopper_w4a16_gemm            hopper_w4a16.cu   refsim.emulator.hopper_w4a16.hopper_w4a16_gemm (sm_90a: TMA,
                                                   mbarrier, wgmma; refsim.ptx refuses it until it runs them)
    wgmma_probe                  wgmma.cu          refsim.cuda.wgmma.wgmma_reference (refsim.arith.wgmma; sm_90a)

``kernels()`` lists them from the registry (:mod:`refsim.cuda.registry`); ``ptx(name, arch)`` returns a
file's PTX (committed copy, or compiled through :func:`refsim.ptx.compile`); ``user_kernel`` turns your own
``.cu`` into a callable. Every launch goes through :func:`refsim.cuda.launch.run` (one path, both
backends); ``refsim validate`` (:mod:`refsim.testing.validate`) runs them all on a GPU against refsim. The build,
the committed PTX, the GPU backend and how to test your own kernel: docs/cuda.md.
"""

from __future__ import annotations

from refsim.cuda.anyprec import anyprec_gemv
from refsim.cuda.atom import atom_group_gemm
from refsim.cuda.build import ptx
from refsim.cuda.gptq_awq import awq_gemv, gptq_gemv
from refsim.cuda.hopper_w4a16 import hopper_w4a16_gemm
from refsim.cuda.marlin import marlin_gemm
from refsim.cuda.mixed_2_4_16 import mixed_gemv
from refsim.cuda.mma import mma_probe
from refsim.cuda.registry import KernelEntry, entries
from refsim.cuda.user import LaunchPlan, user_kernel
from refsim.cuda.wgmma import wgmma_probe

__all__ = ["marlin_gemm", "anyprec_gemv", "atom_group_gemm", "mixed_gemv", "gptq_gemv", "awq_gemv", "mma_probe",
           "hopper_w4a16_gemm", "wgmma_probe", "ptx", "kernels",
           "KernelEntry", "user_kernel", "LaunchPlan"]


def kernels() -> tuple[KernelEntry, ...]:
    """Every kernel function of ``refsim.cuda``: (name, .cu source, emulator function it equals)."""
    return entries()
