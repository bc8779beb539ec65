"""Run one kernel of a ``refsim/cuda`` file: on a CPU through :mod:`refsim.ptx`, or on a real GPU.

Spec
----
backends      ``"ptx"`` (default): :class:`refsim.ptx.Module` parses the file's PTX once per (file, arch)
              and :meth:`~refsim.ptx.Module.launch` executes it with refsim's exact fp and tensor-core
              models; pointer arguments are NumPy arrays written back in place (device-buffer semantics).
              ``"gpu"``: the same PTX loaded by the CUDA driver through ``cuda.core`` (the ``gpu`` extra):
              every array is copied to a device buffer, the kernel runs on device 0, every array is copied
              back. Raises :class:`refsim.errors.ToolchainError` when ``cuda.core`` or a GPU/driver is
              missing. Not exercised on refsim's CPU-only CI.
arguments     ``args`` in ``.param`` order: C-contiguous NumPy arrays (pointers) or NumPy scalars
              (``np.int32(...)``: the scalar type is the parameter type, on both backends).
returns       the ``refsim.ptx`` launch statistics for ``"ptx"``, ``None`` for ``"gpu"``.

    host module (refsim.cuda.anyprec) ──► Launch(kernel, grid, block, shared_bytes) + args
                                            │ backend="ptx"                 │ backend="gpu"
                                  refsim.ptx.Module(ptx).launch      cuda.core: ObjectCode.from_ptx,
                                  (exact, any CPU)                   Buffer copies, launch on device 0
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from refsim._validate import require_choice
from refsim.cuda import build
from refsim.errors import FormatRuleError, ToolchainError

__all__ = ["BACKENDS", "Launch", "run", "run_on_gpu", "module"]

BACKENDS: tuple[str, ...] = ("ptx", "gpu")


@dataclass(frozen=True)
class Launch:
    """One launch: ``.entry`` name, grid and block (int or tuple of up to 3), dynamic shared bytes."""

    kernel: str
    grid: int | tuple[int, ...]
    block: int | tuple[int, ...]
    shared_bytes: int = 0


@functools.lru_cache(maxsize=None)
def module(source: str, arch: str = "sm_80"):
    """The parsed :class:`refsim.ptx.Module` of a registered kernel file (parsed once, cached)."""
    from refsim import ptx

    return ptx.Module(build.ptx(source, arch))


def check_options(options) -> dict:
    """The per-call ``options`` of every refsim.cuda runner: None or a dict of
    :meth:`refsim.ptx.Module.launch` keywords; returns a dict."""
    if options is not None and not isinstance(options, dict):
        raise FormatRuleError(f"options: must be a dict of refsim.ptx launch options (e.g. "
                              f"{{'schedule': 'random'}}) or None; got {type(options).__name__}")
    return options or {}


def run(source: str, launch: Launch, args: tuple, *, backend: str = "ptx", arch: str = "sm_80",
        options: dict | None = None):
    """Execute ``launch`` of kernel file ``source`` with ``args`` on ``backend`` (see the module spec).

    ``options`` (ptx backend only) is passed to :meth:`refsim.ptx.Module.launch`, e.g.
    ``{"schedule": "random", "seed": 3}``."""
    require_choice("backend", backend, BACKENDS)
    check_options(options)
    if backend == "ptx":
        return module(source, arch).launch(launch.kernel, launch.grid, launch.block, args, arch=arch,
                                           shared_bytes=launch.shared_bytes, **(options or {}))
    if options:
        raise ToolchainError(f"options: only the 'ptx' backend takes launch options; got {sorted(options)}")
    return run_on_gpu(build.ptx(source, arch), launch, args)


def _dim3(v) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


_GPU_DEFAULT_DYNAMIC_SHARED = 48 * 1024  # bytes a launch may use without cudaFuncSetAttribute (CUDA guide)


def run_on_gpu(ptx_text: str, launch: Launch, args: tuple) -> None:
    """Load ``ptx_text`` with the CUDA driver (``cuda.core``), copy every array argument to the device,
    launch on device 0, copy every array back in place. ToolchainError without cuda.core or a GPU.

    Dynamic shared memory above 48 KiB (six of marlin.cu's ten entries) needs the kernel's
    max-dynamic-shared-memory attribute raised first; that step has never run on a GPU here, so such
    a launch is refused with a ToolchainError instead of failing inside the driver."""
    if launch.shared_bytes > _GPU_DEFAULT_DYNAMIC_SHARED:
        raise ToolchainError(f"backend='gpu': {launch.kernel} needs {launch.shared_bytes} bytes of dynamic shared "
                             f"memory, above the {_GPU_DEFAULT_DYNAMIC_SHARED} a launch gets without raising the "
                             f"kernel's attribute, which refsim's GPU path does not do yet; use backend='ptx'")
    try:
        import cuda.core as cc
    except ImportError as err:
        raise ToolchainError("backend='gpu' needs cuda.core: pip install 'refsim[gpu]' "
                             f"(import failed: {err})") from err
    try:
        dev = cc.Device()
        dev.set_current()
    except Exception as err:  # cuda.core raises RuntimeError subclasses for a missing driver or device
        raise ToolchainError(f"backend='gpu' found no usable CUDA GPU/driver: {err}") from err
    stream = dev.create_stream()
    kernel = cc.ObjectCode.from_ptx(ptx_text.encode()).get_kernel(launch.kernel)
    pinned = cc.LegacyPinnedMemoryResource()
    staged = []  # (array, host buffer, device buffer)
    kargs = []
    for a in args:
        if isinstance(a, np.ndarray):
            n = max(a.nbytes, 1)
            host, devbuf = pinned.allocate(n), dev.allocate(n, stream=stream)
            view = np.from_dlpack(host).view(np.uint8)
            view[:a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            devbuf.copy_from(host, stream=stream)
            staged.append((a, host, devbuf))
            kargs.append(devbuf)
        else:
            kargs.append(a)
    config = cc.LaunchConfig(grid=_dim3(launch.grid), block=_dim3(launch.block), shmem_size=launch.shared_bytes)
    cc.launch(stream, config, kernel, *kargs)
    for a, host, devbuf in staged:
        devbuf.copy_to(host, stream=stream)
    stream.sync()
    for a, host, devbuf in staged:
        a.reshape(-1).view(np.uint8)[:] = np.from_dlpack(host).view(np.uint8)[:a.nbytes]
    return None
