"""The one check of a launch shape against an architecture's limits (the facts: :mod:`refsim.archs`).

Spec
----
table           ``ARCHS`` / :class:`ArchFacts` are :mod:`refsim.archs`'s table, re-exported: every
                architecture refsim.ptx executes. refsim.ptx owns the CHECK; the facts live at the floor.
check           :func:`check_launch_shape` normalises ``grid``/``block`` to 3-tuples and checks them and the
                shared-memory request against the architecture's facts (a name from the table, or the
                :class:`ArchFacts` of a device: refsim.cuda's gpu backend passes its device's reported
                opt-in limit) before anything is allocated; a broken rule is a
                :class:`refsim.ptx.PtxLaunchError` naming the rule and the value received. refsim.cuda
                launches on both backends go through it.
source          CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (threads per
                block, block and grid dimensions, shared memory per block: 48 KiB without the opt-in
                attribute, the opt-in maximum with ``cudaFuncAttributeMaxDynamicSharedMemorySize``);
                ptxas refuses more than 48 KiB of *static* shared memory in one kernel
                ("uses too much shared data (..., 0xc000 max)"), so only dynamic memory can go above it.

Shared memory of one block, as a launch asks for it::

    0                 static (.shared variables, <= 48 KiB)     dynamic (.extern .shared, 16-byte aligned)
    |-----------------------------------------|---------------------------------------------|
    |<------------- at most 48 KiB without the opt-in attribute (needs_opt_in = False) ----->|
    |<------------- at most max_shared_bytes_per_block with it (e.g. 227 KiB on sm_90) ----------------->|
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import require_fields
from refsim.archs import ARCH_SPECIFIC, ARCHS, ArchFacts, base_arch, parse_sm
from refsim.ptx.errors import PtxLaunchError

__all__ = ["ArchFacts", "ARCHS", "LaunchShape", "check_launch_shape", "arch_facts", "base_arch", "handler_arch",
           "sm_number"]


def sm_number(arch: str) -> int:
    """``"sm_80"`` (or ``"sm_90a"``) -> 80; anything else -> :class:`PtxLaunchError`."""
    n = parse_sm(arch)
    if n is None:
        raise PtxLaunchError(f"arch: must look like 'sm_80'; got {arch!r}")
    return n


def arch_facts(arch: str) -> ArchFacts:
    """The :class:`ArchFacts` of ``arch`` (a name of :data:`ARCHS` or an architecture-specific target such
    as ``"sm_90a"``, which has its architecture's facts); anything else -> :class:`PtxLaunchError`."""
    base = base_arch(arch)
    if base is None:
        raise PtxLaunchError(f"arch: must be one of {list(ARCHS) + list(ARCH_SPECIFIC)}; got {arch!r}")
    return ARCHS[base]


def handler_arch(arch: str) -> str:
    """The architecture name the semantics handlers are built for: an architecture-specific target
    (``"sm_120a"``, ``"sm_90a"``: :data:`refsim.archs.ARCH_SPECIFIC`) as itself, because its extra
    instructions exist there only (``mma ... kind::mxf8f6f4``); any other known name as its
    :data:`ARCHS` row; ``"sm_80"`` for a name refsim does not know (a module's older ``.target``)."""
    if isinstance(arch, str) and arch in ARCH_SPECIFIC:
        return str(arch)
    return base_arch(arch) or "sm_80"


@dataclass(frozen=True)
class LaunchShape:
    """A checked launch shape: 3-tuples of positive ints and the shared memory of one block, with the
    facts it was checked against."""

    facts: ArchFacts
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int
    static_shared_bytes: int

    def __post_init__(self):
        require_fields(self)

    @property
    def arch(self) -> str:
        return self.facts.name

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def needs_opt_in(self) -> bool:
        """Whether the launch needs the kernel's max-dynamic-shared-memory attribute raised first."""
        return self.dynamic_shared_bytes + self.static_shared_bytes > self.facts.shared_bytes_without_opt_in


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def dims(name: str, v) -> tuple[int, int, int]:
    """``grid``/``block`` (an int or a tuple of 1..3 ints) as a 3-tuple of positive Python ints
    (missing dimensions are 1); anything else -> :class:`PtxLaunchError` naming ``name``."""
    if _is_int(v):
        v = (int(v),)
    if not isinstance(v, tuple) or not 1 <= len(v) <= 3 or not all(_is_int(x) for x in v):
        raise PtxLaunchError(f"{name}: must be an int or a tuple of 1 to 3 ints; got {v!r}")
    v = tuple(int(x) for x in v) + (1,) * (3 - len(v))
    if any(x < 1 for x in v):
        raise PtxLaunchError(f"{name}: every dimension must be >= 1; got {v}")
    return v


def check_launch_shape(arch: str | ArchFacts, grid, block, *, dynamic_shared_bytes=0,
                       static_shared_bytes=0) -> LaunchShape:
    """Check a launch against the limits of ``arch`` and normalise it.

    arch: one of :data:`ARCHS`, or the :class:`ArchFacts` of a device (a GPU reports its own opt-in
    shared-memory maximum; refsim.cuda's gpu backend checks against that).

    grid, block: an int or a tuple of 1 to 3 positive ints (missing dimensions are 1).
    dynamic_shared_bytes: the launch's dynamic shared memory (the ``.extern .shared`` array), bytes.
    static_shared_bytes: the kernel's ``.shared`` variables, bytes (ptxas's "smem" figure).
    Returns a :class:`LaunchShape`; ``needs_opt_in`` says whether a GPU launch must first raise the
    kernel's ``cudaFuncAttributeMaxDynamicSharedMemorySize`` (static + dynamic above 48 KiB).
    Raises :class:`refsim.ptx.PtxLaunchError` naming the rule: block above 1024 threads or a dimension
    above (1024, 1024, 64); grid above (2**31 - 1, 65535, 65535); static shared memory above 48 KiB;
    static + dynamic above the architecture's opt-in maximum.
    """
    facts = arch if isinstance(arch, ArchFacts) else arch_facts(arch)
    grid = dims("grid", grid)
    block = dims("block", block)
    bx, by, bz = facts.max_block_dims
    if block[0] * block[1] * block[2] > facts.max_threads_per_block or block[0] > bx or block[1] > by or block[2] > bz:
        raise PtxLaunchError(f"block: at most {facts.max_threads_per_block} threads and z <= {bz}; got {block}")
    gx, gy, gz = facts.max_grid_dims
    if grid[0] > gx or grid[1] > gy or grid[2] > gz:
        raise PtxLaunchError(f"grid: y and z must be <= {gy}, x < 2**31; got {grid}")
    for name, v in (("shared_bytes", dynamic_shared_bytes), ("static shared bytes", static_shared_bytes)):
        if not _is_int(v) or v < 0:
            raise PtxLaunchError(f"{name}: must be a non-negative int; got {v!r}")
    dyn, static = int(dynamic_shared_bytes), int(static_shared_bytes)
    if static > facts.max_static_shared_bytes:
        raise PtxLaunchError(f"static shared memory: at most {facts.max_static_shared_bytes} bytes in one kernel "
                             f"(ptxas refuses more; use dynamic shared memory); got {static}")
    limit = facts.max_shared_bytes_per_block
    if static + dyn > limit:
        raise PtxLaunchError(f"shared_bytes: static ({static}) + dynamic ({dyn}) shared memory must be <= {limit} "
                             f"bytes per block on {facts.name}; got {static + dyn}")
    return LaunchShape(facts, grid, block, dyn, static)
