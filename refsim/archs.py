"""The GPU architectures refsim knows and their hardware facts: one table, read by every layer above.

Spec
----
table           ``ARCHS``: ``"sm_XY"`` -> :class:`ArchFacts`, oldest first. The list of architecture names
                anywhere in refsim (the PTX engine's archs, the tensor-core models, the performance model's
                per-SM limits, the CUDA kernels' archs) is drawn from this table; which of them have a
                tensor-core model is refsim.arith's business, the launch-shape CHECK is refsim.ptx's
                (:func:`refsim.ptx.check_launch_shape`), the facts live here.
facts           per block: threads, block and grid dimensions, shared memory with and without the opt-in
                attribute, static shared memory; per SM: shared memory, resident warps, resident blocks.
source          CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (every
                number below: maximum threads per block, block and grid dimensions, shared memory per
                SM and per thread block, resident warps and blocks per SM; 48 KiB per block without
                ``cudaFuncAttributeMaxDynamicSharedMemorySize``). The 48 KiB static ceiling is ptxas's
                ("uses too much shared data (0x... bytes, 0xc000 max)").
units           bytes and counts; the unit is in each field's name.

    arch   CC   shared/block  shared/SM  warps/SM  blocks/SM     (KiB; opt-in maximum per block)
    sm_70  7.0       96          96         64        32         Volta
    sm_75  7.5       64          64         32        16         Turing
    sm_80  8.0      163         164         64        32         Ampere GA100
    sm_86  8.6       99         100         48        16         Ampere GA10x
    sm_87  8.7      163         164         48        16         Orin
    sm_89  8.9       99         100         48        24         Ada
    sm_90  9.0      227         228         64        32         Hopper
    sm_120 12.0      99         100         48        24         Blackwell GB20x (RTX 50x0, RTX PRO)

                (sm_120's row as NVIDIA's libcu++ ``cuda/__device/arch_traits.h`` transcribes the guide's 12.0
                column: 100 KiB shared per SM less the 1 KiB reserved per block, 1536 threads, 24 blocks.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from refsim._validate import require_fields

__all__ = ["ArchFacts", "ARCHS", "ARCH_SPECIFIC", "base_arch", "parse_sm"]

_KIB = 1024


def parse_sm(arch) -> int | None:
    """``"sm_80"`` (or ``"sm_90a"``, ``"sm_100f"``) -> 80; None for anything not named like an SM architecture."""
    m = re.fullmatch(r"sm_(\d+)[af]?", arch) if isinstance(arch, str) else None
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class ArchFacts:
    """The hardware limits of one architecture (bytes and counts; module spec for the source)."""

    name: str                                  # "sm_80"
    max_shared_bytes_per_block: int            # static + dynamic, with the opt-in attribute
    max_shared_bytes_per_sm: int               # what the SM's L1/shared carve-out gives shared memory at most
    max_warps_per_sm: int                      # resident warps
    max_ctas_per_sm: int                       # resident thread blocks
    shared_bytes_without_opt_in: int = 48 * _KIB   # static + dynamic a launch gets by default
    max_static_shared_bytes: int = 48 * _KIB   # ptxas refuses more static shared memory
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)

    def __post_init__(self):
        require_fields(self)  # Python ints and strs, whatever NumPy scalars came in

    @property
    def sm(self) -> int:
        """The architecture number (``sm_86`` -> 86)."""
        return parse_sm(self.name)

    @property
    def compute_capability(self) -> str:
        """``"8.6"`` for ``sm_86`` (the guide's and the driver's name for it)."""
        return f"{self.sm // 10}.{self.sm % 10}"


#: Every architecture refsim knows, oldest first (the table of the module spec).
ARCHS: dict[str, ArchFacts] = {f.name: f for f in (
    ArchFacts("sm_70", 96 * _KIB, 96 * _KIB, max_warps_per_sm=64, max_ctas_per_sm=32),
    ArchFacts("sm_75", 64 * _KIB, 64 * _KIB, max_warps_per_sm=32, max_ctas_per_sm=16),
    ArchFacts("sm_80", 163 * _KIB, 164 * _KIB, max_warps_per_sm=64, max_ctas_per_sm=32),
    ArchFacts("sm_86", 99 * _KIB, 100 * _KIB, max_warps_per_sm=48, max_ctas_per_sm=16),
    ArchFacts("sm_87", 163 * _KIB, 164 * _KIB, max_warps_per_sm=48, max_ctas_per_sm=16),
    ArchFacts("sm_89", 99 * _KIB, 100 * _KIB, max_warps_per_sm=48, max_ctas_per_sm=24),
    ArchFacts("sm_90", 227 * _KIB, 228 * _KIB, max_warps_per_sm=64, max_ctas_per_sm=32),
    ArchFacts("sm_120", 99 * _KIB, 100 * _KIB, max_warps_per_sm=48, max_ctas_per_sm=24),
)}


#: Architecture-specific targets -> the architecture whose facts (and arithmetic) they have. PTX ISA,
#: "Target Directives: .target": a target with the ``a`` suffix (``.target sm_90a``, ``nvcc -arch=sm_90a``)
#: adds the features of exactly that architecture (on sm_90a: ``wgmma``, ``setmaxnreg``; on sm_120a: the
#: block-scaled ``mma.sync`` kinds) and runs on no other; its hardware limits are its architecture's. Every
#: place refsim takes an architecture name accepts these through :func:`base_arch`.
ARCH_SPECIFIC: dict[str, str] = {"sm_90a": "sm_90", "sm_120a": "sm_120"}


def base_arch(arch) -> str | None:
    """The :data:`ARCHS` name behind ``arch``: itself when it is in the table, ``"sm_90"`` for
    ``"sm_90a"``, ``"sm_120"`` for ``"sm_120a"`` (:data:`ARCH_SPECIFIC`); None for anything else (not a
    name refsim knows)."""
    if not isinstance(arch, str):
        return None
    return arch if arch in ARCHS else ARCH_SPECIFIC.get(arch)
