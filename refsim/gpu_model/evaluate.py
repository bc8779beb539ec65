"""The fast path: predictions equal to :func:`refsim.gpu_model.problem.reference`, bit for bit, faster.

Two things make it fast, and they are the only places speed lives in the model:

* :func:`predict` keeps results for plain arguments (ints, strings, None; GPU given by name;
  default ``params``) in an LRU cache of 65,536 entries and returns copies (own ``terms`` dict), so a
  report or sweep that asks again pays about a microsecond;
* :func:`predict_many` validates everything but M once per (GPU, kernel, N, K, options) and runs the
  kernel's plain model per M; the models' building blocks that do not depend on M (Marlin's stripe
  partition, a GEMM's tile choice, Any-Precision's launch geometry, ...) are pure functions of
  hashable arguments, cached with ``functools.lru_cache`` where they are defined.

:func:`clear_caches` empties every one of those caches (tests that time or replace a building block).
tests/gpu_model/test_evaluate.py checks both entry points against :func:`~refsim.gpu_model.problem.reference`
over every GPU and kernel, bit for bit.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from refsim._validate import require_choice
from refsim.errors import FormatRuleError, RefsimError
from refsim.gpu_model.problem import _bits, _group, check_m, problem, reference, solve
from refsim.gpu_model.roofline import Breakdown

__all__ = ["predict", "predict_many", "clear_caches", "MAX_BATCH_VALUES"]

_RESULT_CACHE_SIZE = 1 << 16
_PLAIN = (int, str, type(None))
MAX_BATCH_VALUES = 1 << 20


@lru_cache(maxsize=_RESULT_CACHE_SIZE)
def _cached(gpu, kernel, m, n, k, bits, group_size, clock, ecc, cache, timing) -> Breakdown:
    return reference(gpu, kernel, m, n, k, bits, group_size, clock=clock, ecc=ecc, cache=cache, timing=timing)


def _copy(bd: Breakdown) -> Breakdown:
    """A new Breakdown equal to ``bd`` with its own ``terms`` dict (a cached result is never shared)."""
    out = object.__new__(Breakdown)
    out.__dict__.update(bd.__dict__)
    out.__dict__["terms"] = dict(bd.terms)
    return out


def predict(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None, group_size: int | None = None, *,
            clock="sustained", params=None, ecc: str | None = None, cache: str = "cold",
            timing: str = "kernel") -> Breakdown:
    """Latency breakdown of ``kernel`` computing C(M,N) = A(M,K) @ W(K,N) on ``gpu``.

    m = batch/tokens, n = output features, k = input features (reduction): ints in [1, 2^31 - 1]
    (the kernels' host APIs take C ``int``; NumPy integers accepted), plus each kernel's own int32
    index limits. ``bits`` / ``group_size`` default to the kernel's usual configuration; unsupported
    values raise the kernel's rule. Measurement conditions (:mod:`refsim.gpu_model.conditions`):
    ``clock`` base/boost/sustained or Hz, ``ecc`` 'on'/'off' (None: the card's default), ``cache``
    'cold' (default) / 'dirty' / 'warm', ``timing`` 'kernel' (default) / 'events'. O(1) in M, N, K. Returns :class:`~refsim.gpu_model.roofline.Breakdown`
    (seconds, Python floats), equal to :func:`refsim.gpu_model.problem.reference`.
    """
    if (params is None and type(m) is int and type(n) is int and type(k) is int and type(bits) in _PLAIN
            and type(group_size) in _PLAIN and type(gpu) is str and type(kernel) is str
            and type(clock) in (str, int, float) and type(ecc) in _PLAIN and type(cache) is str
            and type(timing) is str):
        return _copy(_cached(gpu, kernel, m, n, k, bits, group_size, clock, ecc, cache, timing))
    return reference(gpu, kernel, m, n, k, bits, group_size, clock=clock, params=params, ecc=ecc, cache=cache,
                     timing=timing)


def _batch_sizes(ms) -> list:
    """``ms`` as a list (integer arrays as Python ints; other elements as given, checked per entry)."""
    if type(ms) is list:
        out = ms
    elif isinstance(ms, (list, tuple, range)):
        out = list(ms)
    elif isinstance(ms, np.ndarray) and ms.ndim == 1:
        out = ms.tolist() if np.issubdtype(ms.dtype, np.integer) else list(ms)
    else:
        raise FormatRuleError(f"ms: must be a list, tuple, range or 1-D array of batch sizes; got "
                              f"{type(ms).__name__}{' of ndim ' + str(ms.ndim) if isinstance(ms, np.ndarray) else ''}")
    if not out:
        raise FormatRuleError("ms: must hold at least one batch size; got an empty sequence")
    if len(out) > MAX_BATCH_VALUES:
        raise FormatRuleError(f"ms: at most {MAX_BATCH_VALUES} batch sizes per call; got {len(out)}")
    return out


def predict_many(gpu, kernel: str, ms, n: int, k: int, bits: int | None = None, group_size: int | None = None, *,
                 clock="sustained", params=None, ecc: str | None = None, cache: str = "cold",
                 timing: str = "kernel", errors: str = "raise") -> list:
    """:func:`predict` for every batch size in ``ms`` at one (gpu, kernel, N, K, options):
    ``[predict(gpu, kernel, m, n, k, bits, group_size, clock=..., ...) for m in ms]``, with every
    argument but M validated once.

    ms: list, tuple, range or 1-D integer array of batch sizes (length L >= 1, any order, duplicates
    allowed); every entry follows :func:`predict`'s rule for ``m``. GPU, kernel, N, K, ``clock``,
    ``params``, ``ecc``, ``cache`` and ``timing`` are checked once, first (a refusal raises). Returns a list of L
    :class:`Breakdown` (element i equals ``predict(..., ms[i], ...)`` bit for bit, with its own
    ``terms`` dict); results are not taken from or put into :func:`predict`'s result cache.

    A refused entry (bad type or value of ``ms[i]``, a kernel rule on ``bits`` / ``group_size`` or on
    the shape, some of which depend on M, e.g. Marlin's N % thread_n): ``errors="raise"`` (default)
    raises the RefsimError subclass :func:`predict` raises for the first refused entry, its message
    prefixed ``ms[i] = <value>: ``; ``errors="return"`` puts that error object (as :func:`predict`
    raises it, unprefixed) at position i instead.
    """
    if type(errors) is not str or errors not in ("raise", "return"):
        require_choice("errors", errors, ("raise", "return"))
    ms = _batch_sizes(ms)
    pb = problem(gpu, kernel, n, k, clock=clock, params=params, ecc=ecc, cache=cache, timing=timing)
    try:      # the kernel's rules on bits and group size are rules of every entry
        pb = pb._replace(bits=_bits(pb.kernel, bits), group_size=_group(pb.kernel, group_size))
    except RefsimError as err:
        return [_refused(ms, 0, err, errors)] * len(ms)
    out = []
    for i, m in enumerate(ms):
        try:
            out.append(solve(pb, check_m(pb, m)))
        except RefsimError as err:
            out.append(_refused(ms, i, err, errors))
    return out


def _refused(ms, i: int, err: RefsimError, errors: str) -> RefsimError:
    """``err`` for entry ``i``: raised with the entry named (``errors="raise"``), or returned."""
    if errors == "raise":
        raise type(err)(f"ms[{i}] = {ms[i]!r}: {err}") from err
    return err


def clear_caches() -> None:
    """Empty the prediction result cache and the models' caches of per-shape building blocks
    (stripe partitions, GEMM tile choices, launch geometries); for tests that replace one."""
    from refsim.gpu_model import conditions, occupancy
    from refsim.gpu_model.kernels import _common, anyprec, atom_w4a4, marlin
    for fn in (_cached, marlin.partition, marlin.tile_shape, marlin._kind_constants, marlin._notes, _common.gemm_config,
               anyprec.fused_shape, anyprec._fused_notes, anyprec.dequant, atom_w4a4.ctas_per_sm,
               atom_w4a4.per_cta, conditions.warm_l2, conditions.dirty_l2, conditions._toggled,
               occupancy.resident):
        fn.cache_clear()
