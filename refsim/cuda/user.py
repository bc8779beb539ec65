"""Your own ``.cu`` file as a Python function with an emulator-like signature, run like refsim's own kernels.

Spec
----
``user_kernel(path, kernel=..., launch=...)`` compiles ``path`` (a ``.cu`` file, through
:func:`refsim.ptx.compile`, cached; or a ``.ptx`` file as is) once, parses it once, and returns a
function ``f(*inputs, backend="ptx", options=None)``. Each call hands ``inputs`` to your ``launch``
function, which returns a :class:`LaunchPlan`: grid, block, the kernel's arguments in ``.param`` order
(NumPy arrays for pointers, NumPy scalars such as ``np.int32(M)`` for values) and ``out``, the array
(or tuple of arrays) among the arguments that ``f`` returns after the kernel wrote it. So the function
has the signature of the emulator you compare it with, and :func:`refsim.testing.check_kernel` (or an
``assert_bitexact`` of your own) can drive it. The launch goes through :func:`refsim.cuda.launch.run`,
the path of refsim's own kernels: ``backend="ptx"`` on a CPU through :mod:`refsim.ptx`, ``backend="gpu"``
on a GPU (``plan.options``, which configure refsim.ptx's checks, do not apply there).

``kernel`` is the ``.entry`` name: the ``extern "C"`` name, or a mangled C++ name; a name that is a
substring of exactly one entry (e.g. the unmangled template name) selects that entry.

    my_kernel.cu ──refsim.ptx.compile──► PTX ──► f(A, B, s) ─► launch(A, B, s) ─► LaunchPlan
                                                  │ refsim.cuda.launch.run(PTX, [(Launch, plan.args)])
                                                  └──────────────► returns plan.out

Example (a Marlin-style kernel, compared with refsim's Marlin emulator)::

    def plan(A, B, s):                       # the emulator's arguments: A (M, K) fp16, B, s
        C = np.zeros((A.shape[0], s.shape[1]), np.float16)
        return LaunchPlan(grid=108, block=256, args=(A, B, C, s, np.int32(A.shape[0]), ...), out=C,
                          shared_bytes=96 * 1024)
    my_marlin = user_kernel("my_marlin.cu", kernel="marlin_kernel", launch=plan)
    check_kernel(my_marlin, "marlin", arch="sm_80", sms=108)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from refsim._validate import require_fields
from refsim.cuda import launch as _launch
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["LaunchPlan", "user_kernel"]


@dataclass(frozen=True)
class LaunchPlan:
    """One launch of a user kernel: grid and block (int or tuple of up to 3), ``args`` in ``.param``
    order, ``out`` (the argument array, or tuple of them, the call returns), dynamic shared bytes."""

    grid: int | tuple[int, ...]
    block: int | tuple[int, ...]
    args: tuple
    out: object
    shared_bytes: int = 0
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        require_fields(self)  # a tuple and a Python int, whatever came in
        for name in ("grid", "block"):
            object.__setattr__(self, name, _launch._as_given(name, getattr(self, name)))
        object.__setattr__(self, "options", _launch.check_options(self.options))


def _ptx_text(path: Path, arch: str, options: tuple, include_dirs: tuple) -> str:
    if path.suffix == ".ptx":
        return path.read_text()
    from refsim import ptx

    return ptx.compile(path.read_text(), arch=arch, options=options,
                       include_dirs=(str(path.parent), *map(str, include_dirs)), source_name=str(path))


def _entry(names: tuple[str, ...], kernel: str) -> str:
    if kernel in names:
        return kernel
    hits = [n for n in names if kernel in n]
    if len(hits) == 1:
        return hits[0]
    raise FormatRuleError(f"kernel: must name one .entry of the file ({', '.join(names)}); got {kernel!r}"
                          + (f" (matches {len(hits)})" if hits else ""))


def user_kernel(path, *, kernel: str, launch: Callable[..., LaunchPlan], arch: str = "sm_80",
                options: tuple[str, ...] = (), include_dirs: tuple = ()) -> Callable:
    """Compile ``path`` (.cu or .ptx) and return ``f(*inputs, backend="ptx", options=None)`` running
    ``kernel`` as ``launch(*inputs)`` describes (see the module spec). ``options``/``include_dirs``
    go to nvcc; the per-call ``options`` dict goes to :meth:`refsim.ptx.Module.launch` (e.g.
    ``{"schedule": "random", "race": True}``). Errors: missing file ShapeError, unknown kernel
    FormatRuleError, no compiler ToolchainError, faults in the kernel the ``refsim.ptx`` errors."""
    path = Path(path)
    if not path.is_file():
        raise ShapeError(f"path: no such CUDA/PTX file: {str(path)!r}")
    if not callable(launch):
        raise FormatRuleError(f"launch: must be a function of the kernel's inputs returning a LaunchPlan; got {launch!r}")

    @functools.lru_cache(maxsize=None)
    def compiled() -> tuple[str, str]:
        text = _ptx_text(path, arch, tuple(options), tuple(include_dirs))
        return text, _entry(_launch.entries(text), kernel)

    def run(*inputs, backend: str = "ptx", options: dict | None = None):
        plan = launch(*inputs)
        if not isinstance(plan, LaunchPlan):
            raise FormatRuleError(f"launch: must return a refsim.cuda.LaunchPlan; got {type(plan).__name__}")
        text, entry = compiled()
        ptx_options = {**plan.options, **(options or {})} if backend == "ptx" else options
        _launch.run(text, [(_launch.Launch(entry, plan.grid, plan.block, plan.shared_bytes), plan.args)],
                    backend=backend, arch=arch, options=ptx_options)
        return plan.out

    run.__name__ = f"{path.stem}.{kernel}"
    run.__doc__ = (f"{kernel} of {path} through refsim.cuda.launch.run (backend 'ptx' or 'gpu'); inputs as its "
                   f"launch function takes them.")
    return run

