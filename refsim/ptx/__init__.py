"""refsim.ptx: execute nvcc-compiled PTX on a CPU, bit for bit, with refsim's exact fp and tensor-core models.

Public API::

    from refsim import ptx
    text = ptx.compile(cuda_source, arch="sm_80", options=(), include_dirs=())   # nvcc -ptx, cached
    m = ptx.Module(text)          # parse once; bad or unsupported PTX -> ptx.PtxError (line, column)
    m.kernels                     # tuple of .entry names (mangled)
    stats = m.launch(kernel, grid, block, args, arch="sm_80", shared_bytes=0,
                     schedule="lockstep", seed=0, max_warp_instructions=None)

Pointer arguments are NumPy arrays written back in place; value arguments are ints/floats
converted exactly. ``stats`` is a :class:`LaunchStats`. The execution model, scheduling, checking
modes (``race=True``, ``poison=True``) and caveats are in docs/ptx.md, with the module map (``module``,
``arch``, ``parse``, ``engine``, ``scheduler``, ``dispatch``, ``operands``, ``control``, ``barriers``,
``memory_ops``, ``checks``, ``memory``, ``toolchain``, ``semantics``). ``check_launch_shape`` is the one
launch-shape check other packages use; ``buffer_addresses`` says where ``launch(..., buffers=...)`` maps
extra global buffers; ``ARCHS`` re-exports the architecture table of :mod:`refsim.archs`.
"""

from refsim.ptx.arch import ARCHS, ArchFacts, LaunchShape, check_launch_shape
from refsim.ptx.engine import LaunchStats
from refsim.ptx.memory import buffer_addresses
from refsim.ptx.errors import *  # noqa: F401,F403
from refsim.ptx.errors import __all__ as _errors_all
from refsim.ptx.module import Module
from refsim.ptx.toolchain import compile, find_nvcc

__all__ = ["compile", "find_nvcc", "Module", "LaunchStats", "buffer_addresses", "ARCHS", "ArchFacts", "LaunchShape",
           "check_launch_shape", *_errors_all]
