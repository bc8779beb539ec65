"""The one launch path of ``refsim.cuda``: every kernel call, built-in or yours, runs through :func:`run`.

Spec
----
call          ``run(ptx_text, [(Launch, args), ...], backend=, arch=, options=)`` executes the launches of
              ONE call in order and returns one statistics entry per launch. A call with several launches
              (Marlin's host M loop) shares its arrays between them: a lock workspace written by launch 0
              is what launch 1 reads, and NumPy views of one array (``C[64:130]``) are views on both
              backends.
clusters      ``Launch(..., cluster=)`` (default 1: none) counts the grid in blocks on both backends; refsim.ptx
              gets ``cluster=`` (:meth:`refsim.ptx.Module.launch`), cuda.core a grid divided by it.
backends      ``"ptx"`` (default): :class:`refsim.ptx.Module` executes the PTX on a CPU with refsim's exact
              fp and tensor-core models under the tensor-core model of ``arch``; pointer arguments are
              NumPy arrays written back in place (device-buffer semantics). Returns the
              :class:`refsim.ptx.LaunchStats` of each launch.
              ``"gpu"``: the same PTX on the current CUDA device through ``cuda.core``
              (:mod:`refsim.cuda.gpu`: one device buffer per base array, the dynamic-shared-memory
              attribute raised, CUDA errors named). ``arch`` does not apply (the hardware is the model);
              returns ``None`` per launch.
arguments     ``args`` in ``.param`` order: C-contiguous NumPy arrays (pointers), NumPy scalars
              (``np.int32(...)``: the scalar type is the parameter type, on both backends), or ``bytes``
              of a ``.b8 p[N]`` parameter's size; on gpu also :class:`refsim.cuda.gpu.TensorMapArg` for a
              ``CUtensorMap`` parameter (the ptx backend takes the map's image as ``bytes``).
validation    once per call: ``backend``, ``options`` and the ``(Launch, args)`` pairs here; the launch
              shape by the one rule of :func:`refsim.ptx.check_launch_shape` on both backends (called by
              :meth:`refsim.ptx.Module.launch` against the arch's facts, by :func:`refsim.cuda.gpu.run`
              against the device's) and the arguments by the backend, before anything is allocated.
module cache  :func:`module` parses a PTX text once per (text, kernel); for a kernel it parses only the
              module header and that ``.entry`` when every entry is self-contained (nvcc's output for
              ``extern "C"`` kernels), so a launch of one of marlin.cu's ten entries parses a tenth of it.

    host module (refsim.cuda.marlin) ──► [(Launch(kernel, grid, block, shared, cluster), args), ...]
                                            │ backend="ptx"                   │ backend="gpu"
                                 module(text, kernel).launch(...)     refsim.cuda.gpu.run(text, launches)
                                 (exact, any CPU)                     (cuda.core, one buffer per base)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from refsim._validate import require_choice, require_fields
from refsim.errors import FormatRuleError

__all__ = ["BACKENDS", "OPTIONS", "Launch", "run", "module", "entries", "entry_text", "check_options"]

BACKENDS: tuple[str, ...] = ("ptx", "gpu")
#: keywords of :meth:`refsim.ptx.Module.launch` a call may pass as ``options`` (ptx backend only)
OPTIONS: tuple[str, ...] = ("schedule", "seed", "max_warp_instructions", "race", "poison", "executor")


@dataclass(frozen=True)
class Launch:
    """One launch: ``.entry`` name, grid and block (int or tuple of up to 3), dynamic shared bytes, and
    the thread-block cluster (int or tuple of up to 3; 1: none). ``grid`` counts BLOCKS on both backends
    and every grid dimension must be a multiple of the cluster's (sm_90+; at most 8 blocks a cluster,
    the portable size); :attr:`cluster_dims` is the cluster as 3 ints."""

    kernel: str
    grid: int | tuple[int, ...]
    block: int | tuple[int, ...]
    shared_bytes: int = 0
    cluster: int | tuple[int, ...] = 1

    def __post_init__(self):
        require_fields(self)  # a str and a Python int, whatever NumPy scalars came in
        for name in ("grid", "block", "cluster"):
            object.__setattr__(self, name, _as_given(name, getattr(self, name)))
        from refsim.ptx.errors import PtxLaunchError
        from refsim.ptx.hopper.cluster import MAX_CLUSTER

        c = self.cluster_dims
        if min(c) < 1 or c[0] * c[1] * c[2] > MAX_CLUSTER:
            raise PtxLaunchError(f"cluster: must be positive with at most {MAX_CLUSTER} blocks (the portable "
                                 f"cluster size); got {self.cluster}")
        grid = _dims(self.grid)
        if any(g % k for g, k in zip(grid, c)):
            raise PtxLaunchError(f"cluster: every grid dimension must be a multiple of the cluster's (the grid "
                                 f"counts blocks); got grid {self.grid}, cluster {self.cluster}")

    @property
    def cluster_dims(self) -> tuple[int, int, int]:
        """The cluster as (x, y, z), 1 for dimensions not given."""
        return _dims(self.cluster)


def _dims(v) -> tuple[int, int, int]:
    v = (v,) if isinstance(v, int) else v
    return tuple(v) + (1,) * (3 - len(v))


def _as_given(name: str, v):
    """A grid or block (an int or a tuple of 1 to 3 ints) with NumPy integers made Python ints, in the
    form it was given; the limits (:func:`refsim.ptx.check_launch_shape`) apply when the launch runs,
    on both backends."""
    def is_int(x):
        return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))

    if is_int(v):
        return int(v)
    if isinstance(v, tuple) and 1 <= len(v) <= 3 and all(is_int(x) for x in v):
        return tuple(int(x) for x in v)
    from refsim.ptx.errors import PtxLaunchError     # the launch-shape rule's own error

    raise PtxLaunchError(f"{name}: must be an int or a tuple of 1 to 3 ints; got {v!r:.80}")


def _text(ptx_text) -> str:
    """``ptx_text`` as a ``str`` (a ``np.str_`` converted); FormatRuleError for anything else."""
    if not isinstance(ptx_text, str):
        raise FormatRuleError(f"ptx_text: must be the PTX as a str; got {type(ptx_text).__name__}")
    return str(ptx_text)


# ----------------------------------------------------------------------------------------------
# PTX text -> parsed module (one cache for every kernel refsim.cuda launches)

_ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)\s*\(", re.M)
#: column-0 directives that may follow an entry's parameter list (performance tuning)
_TUNING = (".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".maxclusterrank", ".reqnctapercluster",
           ".explicitcluster", ".noreturn", ".pragma")


def entries(ptx_text: str) -> tuple[str, ...]:
    """The ``.entry`` names of a PTX text, in file order (mangled, as in the PTX)."""
    return tuple(_ENTRY.findall(_text(ptx_text)))


def entry_text(ptx_text: str, kernel: str) -> str:
    """The module header (version, target, module-scope declarations) and the one ``.entry kernel``;
    the whole text when an entry is not self-contained (a module-scope directive other than an entry
    or its tuning directives follows the first entry: a ``.func`` or ``.global`` between kernels)."""
    ptx_text = _text(ptx_text)
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx_text)]
    if len(starts) < 2:
        return ptx_text
    first = starts[0][0]
    for line in ptx_text[first:].splitlines():
        if line.startswith(".") and not _ENTRY.match(line + "(") and not line.startswith(_TUNING):
            return ptx_text
    for i, (pos, name) in enumerate(starts):
        if name == kernel:
            end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx_text)
            return ptx_text[:first] + ptx_text[pos:end]
    return ptx_text        # unknown name: the whole module, whose launch names the kernels it has


@functools.lru_cache(maxsize=None)
def module(ptx_text: str, kernel: str | None = None):
    """The parsed :class:`refsim.ptx.Module` of ``ptx_text`` (``kernel``: only that entry when it is
    self-contained, see :func:`entry_text`); parsed once per (text, kernel), cached for the process."""
    from refsim import ptx

    return ptx.Module(ptx_text if kernel is None else entry_text(ptx_text, kernel))


# ----------------------------------------------------------------------------------------------
# validation of a call (the launch shapes: refsim.ptx.check_launch_shape, on both backends)


def check_options(options) -> dict:
    """The per-call ``options`` of every refsim.cuda runner: None or a dict of
    :meth:`refsim.ptx.Module.launch` keywords (:data:`OPTIONS`); returns a dict."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise FormatRuleError(f"options: must be a dict of refsim.ptx launch options (e.g. "
                              f"{{'schedule': 'random'}}) or None; got {type(options).__name__}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise FormatRuleError(f"options: keys must be among {list(OPTIONS)}; got {unknown}")
    return dict(options)


def _check_launches(launches) -> list:
    """``launches`` as a list of ``(Launch, args)`` pairs; anything else -> FormatRuleError naming the item."""
    if isinstance(launches, (str, bytes)) or not hasattr(launches, "__iter__"):
        raise FormatRuleError(f"launches: must be a sequence of (refsim.cuda.launch.Launch, args) pairs; "
                              f"got {type(launches).__name__}")
    out = list(launches)
    for i, item in enumerate(out):
        pair = isinstance(item, (tuple, list)) and len(item) == 2
        if not pair or not isinstance(item[0], Launch):
            what = f"a pair starting with {type(item[0]).__name__}" if pair else type(item).__name__
            raise FormatRuleError(f"launches[{i}]: must be a (refsim.cuda.launch.Launch, args) pair; got {what}")
    return out


# ----------------------------------------------------------------------------------------------
# the call


def run(ptx_text: str, launches, *, backend: str = "ptx", arch: str = "sm_80", options: dict | None = None) -> list:
    """Execute ``launches`` — a sequence of ``(Launch, args)`` — of the kernels in ``ptx_text`` in order,
    on ``backend`` (see the module spec). ``options`` (ptx backend only) go to
    :meth:`refsim.ptx.Module.launch`, e.g. ``{"schedule": "random", "seed": 3}``.
    Returns one entry per launch: :class:`refsim.ptx.LaunchStats` (ptx) or ``None`` (gpu)."""
    backend = require_choice("backend", backend, BACKENDS)
    options = check_options(options)
    ptx_text = _text(ptx_text)
    launches = _check_launches(launches)
    if backend == "gpu":
        if options:
            raise FormatRuleError(f"options: only the 'ptx' backend takes launch options; got {sorted(options)}")
        from refsim.cuda import gpu

        return gpu.run(ptx_text, launches)
    from refsim.cuda.gpu import TensorMapArg

    for i, (ln, args) in enumerate(launches):
        if isinstance(args, (tuple, list)) and any(isinstance(a, TensorMapArg) for a in args):
            raise FormatRuleError(f"launches[{i}]: a TensorMapArg is a gpu-backend argument; the ptx backend takes "
                                  f"the map's 128-byte image (refsim.formats.tensor_map.encode_tiled at the "
                                  f"address refsim.ptx gives the array)")
    return [module(ptx_text, ln.kernel).launch(ln.kernel, ln.grid, ln.block, args, arch=arch,
                                               shared_bytes=ln.shared_bytes,
                                               cluster=None if ln.cluster_dims == (1, 1, 1) else ln.cluster,
                                               **options)
            for ln, args in launches]
