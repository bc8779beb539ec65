"""Kernel latency models, one module per kernel family, behind one :func:`predict`.

Every module defines ``NAME``, ``BITS`` (bit-widths it runs),
``predict(gpu, m, n, k, bits=None, group_size=None, *, clock, params) -> Breakdown`` and its
unchecked entry ``_predict(gpu, m, n, k, bits, group_size, clock, params)`` (m, n, k already ints
>= 1; the kernel's own rules still checked), which :func:`predict` calls after its one validation,
and its batched entry ``_predict_many(g, ms, n, k, bits, group_size, clock, params)`` (``g`` a
resolved GPUSpec, ``ms`` a list of ints in [1, 2^31 - 1]; a list of Breakdowns equal to the per-M
``_predict`` results, or a RefsimError when any entry is refused), which :func:`predict_many` calls.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from functools import lru_cache

import numpy as np

from refsim._validate import require_choice, require_int
from refsim.errors import FormatRuleError, RefsimError, ShapeError
from refsim.gpu_model.conditions import CACHE_STATES, fits_in_l2, warm_l2, with_ecc
from refsim.gpu_model.roofline import Breakdown
from refsim.gpu_model.specs import GPUS as _GPUS, get_gpu

__all__ = ["KERNELS", "kernel_names", "kernel_module", "predict", "predict_many", "clear_caches", "INT32_MAX"]

_MODULES = {
    "cublas-fp16": "cublas_fp16", "marlin": "marlin", "sparse-marlin": "sparse_marlin", "anyprec": "anyprec",
    "atom-w4a4": "atom_w4a4", "int8-w8a8": "int8_w8a8", "mixed-2-4-16": "mixed_2_4_16",
    "awq-w4a16": "awq_w4a16",
}
KERNELS = tuple(_MODULES)
_CACHE: dict = {}


def kernel_names() -> list[str]:
    """Kernel names accepted by :func:`predict`."""
    return list(KERNELS)


def kernel_module(name: str):
    """The model module for ``name``; unknown names raise FormatRuleError listing valid ones."""
    if not isinstance(name, str):
        require_choice("kernel", name, KERNELS)     # raises, naming the valid kernels
    mod = _CACHE.get(name)
    if mod is None:
        require_choice("kernel", name, KERNELS)
        mod = _CACHE[name] = importlib.import_module(f"refsim.gpu_model.kernels.{_MODULES[name]}")
    return mod


#: sizes the kernels' host APIs take as C ``int`` (marlin_cuda, cublasGemmEx, the Any-Precision,
#: AWQ and Atom launchers): M, N and K above it are refused, never wrapped
INT32_MAX = (1 << 31) - 1
_RESULT_CACHE_SIZE = 1 << 16


def _check_size(name: str, value) -> int:
    if type(value) is int and 0 < value <= INT32_MAX:
        return value
    value = require_int(name, value, minimum=1)
    if value > INT32_MAX:
        raise ShapeError(f"{name}: the kernels' host APIs take int32 sizes, so {name} must be <= {INT32_MAX}; "
                         f"got {value}")
    return value


def _check_index_limits(mod, m: int, n: int, k: int) -> None:
    """A kernel's own int32 index expressions (``INT32_INDEXES`` of its module: (label, function of
    m, n, k, source)) must fit, or the launch would wrap: ShapeError naming the expression."""
    for label, fn, why in getattr(mod, "INT32_INDEXES", ()):
        value = fn(m, n, k)
        if value > INT32_MAX:
            raise ShapeError(f"{label}: kernel {mod.NAME} indexes it with int32 ({why}), so it must be <= "
                             f"{INT32_MAX}; got {value}")


# per kernel name: (module, its unchecked ``_predict``, its int32 index check or None)
_HOT: dict = {}


def _hot(kernel):
    entry = _HOT.get(kernel) if type(kernel) is str else None
    if entry is None:
        mod = kernel_module(kernel)
        limits = None
        if getattr(mod, "INT32_INDEXES", None):
            fits = getattr(mod, "int32_fits", None)     # optional sufficient condition, checked first

            def check(m, n, k, mod=mod, fits=fits):
                if fits is None or not fits(m, n, k):
                    _check_index_limits(mod, m, n, k)
            limits = check
        entry = _HOT[kernel] = (mod, mod._predict, limits)
    return entry


def _fresh(gpu, kernel, m, n, k, bits, group_size, clock, params, ecc, cache) -> Breakdown:
    """One prediction, computed (the body of :func:`predict` without its result cache)."""
    entry = _HOT.get(kernel) if type(kernel) is str else None
    mod, model, limits = entry if entry is not None else _hot(kernel)
    if not (type(m) is int and type(n) is int and type(k) is int and m > 0 and n > 0 and k > 0
            and not (m | n | k) >> 31):                 # all three in [1, INT32_MAX]
        m, n, k = _check_size("m", m), _check_size("n", n), _check_size("k", k)
    if limits is not None:
        limits(m, n, k)
    if type(cache) is not str or (cache != "cold" and cache != "warm"):
        require_choice("cache", cache, CACHE_STATES)      # arrays and other types: refused by name
    g = _GPUS.get(gpu) if type(gpu) is str else None     # an exact table name; else get_gpu's rules
    if g is None:
        g = get_gpu(gpu)
    if ecc is not None:
        g = with_ecc(g, ecc)
    # the module's unchecked entry: m, n, k are ints in [1, INT32_MAX] here; it keeps the kernel's own rules
    bd = model(g, m, n, k, bits, group_size, clock, params)
    if cache == "warm":
        if not fits_in_l2(g, bd.bytes_dram):
            return _warm_result(g, bd, None)
        return _warm_result(g, bd, model(warm_l2(g, g.clock_hz(clock)), m, n, k, bits, group_size, clock, params))
    return bd


def _warm_result(g, cold: Breakdown, warm: Breakdown | None) -> Breakdown:
    """The ``cache="warm"`` result from the cold prediction and, when the working set fits L2, the
    prediction on the warm-L2 spec (None otherwise), each with its note."""
    mib = cold.bytes_dram / 2**20
    if warm is None:
        return replace(cold, notes=_join(cold.notes, f"warm L2 changes nothing: the {mib:.1f} MiB working set "
                                                      f"does not fit the {g.l2_bytes / 2**20:.0f} MiB L2"))
    return replace(warm, gpu=g.name, notes=_join(warm.notes, f"warm L2: the {mib:.1f} MiB working set is "
                                                             f"L2-resident and streamed at L2 bandwidth"))


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


_cached = lru_cache(maxsize=_RESULT_CACHE_SIZE)(_fresh)
_PLAIN = (int, str, type(None))


def _copy(bd: Breakdown) -> Breakdown:
    """A new Breakdown equal to ``bd`` with its own ``terms`` dict (a cached result is never shared)."""
    out = object.__new__(Breakdown)
    out.__dict__.update(bd.__dict__)
    out.__dict__["terms"] = dict(bd.terms)
    return out


def predict(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None,
            group_size: int | None = None, *, clock="sustained", params=None, ecc: str | None = None,
            cache: str = "cold") -> Breakdown:
    """Latency breakdown of ``kernel`` computing C(M,N) = A(M,K) @ W(K,N) on ``gpu``.

    m = batch/tokens, n = output features, k = input features (reduction): ints in [1, 2^31 - 1]
    (the kernels' host APIs take C ``int``), plus each kernel's own int32 index limits
    (``INT32_INDEXES``). ``bits`` / ``group_size`` default to the kernel's usual configuration;
    unsupported values raise the kernel's rule. Measurement conditions
    (:mod:`refsim.gpu_model.conditions`): ``clock`` base/boost/sustained or Hz, ``ecc`` 'on'/'off'
    (None: the card's default), ``cache`` 'cold' (default, flushed L2 as Nsight Compute measures)
    or 'warm'. O(1) in M, N, K.

    Predictions are pure functions of their arguments: results for plain arguments (ints, strings,
    None; GPU given by name; default ``params``) are kept in an LRU cache of 65,536 entries and
    returned as copies, so a sweep or report that asks again pays ~1 µs. :func:`clear_caches`
    empties it.
    """
    if (params is None and type(m) is int and type(n) is int and type(k) is int and type(bits) in _PLAIN
            and type(group_size) in _PLAIN and type(gpu) is str and type(kernel) is str
            and type(clock) in (str, int, float) and type(ecc) in _PLAIN and type(cache) is str):
        return _copy(_cached(gpu, kernel, m, n, k, bits, group_size, clock, None, ecc, cache))
    return _fresh(gpu, kernel, m, n, k, bits, group_size, clock, params, ecc, cache)


_SEQUENCES = (list, tuple, range)
MAX_BATCH_VALUES = 1 << 20


def _batch_sizes(ms) -> list:
    """``ms`` as a list (integer arrays as Python ints; other elements as given, checked per entry)."""
    if type(ms) is list:
        out = ms
    elif isinstance(ms, _SEQUENCES):
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
                 errors: str = "raise") -> list:
    """:func:`predict` for every batch size in ``ms`` at one (gpu, kernel, N, K, options):
    ``[predict(gpu, kernel, m, n, k, bits, group_size, clock=..., ...) for m in ms]``, computed with
    the per-(GPU, kernel, N, K) work done once.

    ms: list, tuple, range or 1-D integer array of batch sizes (length L >= 1, any order, duplicates
    allowed); every entry follows :func:`predict`'s rule for ``m`` (int in [1, 2^31 - 1]). Other
    arguments as :func:`predict`; GPU, kernel, N, K, ``cache`` and ``ecc`` are checked once, first.
    Returns a list of L :class:`Breakdown` (element i equals ``predict(..., ms[i], ...)`` exactly:
    every float bit for bit, the same notes and terms in the same order; each with its own ``terms``
    dict). Results are not taken from or put into :func:`predict`'s result cache.

    A refused entry (bad type or value of ``ms[i]``, or a kernel rule that depends on M, e.g. Marlin's
    N % thread_n): ``errors="raise"`` (default) raises the RefsimError subclass :func:`predict` raises
    for the first refused entry, its message prefixed ``ms[i] = <value>: ``; ``errors="return"`` puts
    that error object (as :func:`predict` raises it, unprefixed) in the list at position i instead.
    """
    if type(errors) is not str or (errors != "raise" and errors != "return"):
        require_choice("errors", errors, ("raise", "return"))
    ms = _batch_sizes(ms)
    entry = _HOT.get(kernel) if type(kernel) is str else None
    mod, model, limits = entry if entry is not None else _hot(kernel)
    if not (type(n) is int and type(k) is int and n > 0 and k > 0 and not (n | k) >> 31):
        n, k = _check_size("n", n), _check_size("k", k)
    if type(cache) is not str or (cache != "cold" and cache != "warm"):
        require_choice("cache", cache, CACHE_STATES)
    g = _GPUS.get(gpu) if type(gpu) is str else None
    if g is None:
        g = get_gpu(gpu)
    if ecc is not None:
        g = with_ecc(g, ecc)
    # every entry an int in [1, INT32_MAX] (bools are not ints here, as in predict): C-level passes
    if _INT_ONLY >= set(map(type, ms)) and min(ms) > 0 and max(ms) <= INT32_MAX:
        many = _MANY.get(mod)
        if many is None:
            many = _MANY[mod] = getattr(mod, "_predict_many", None) or _loop(model)
        args = (gpu, kernel, n, k, bits, group_size, clock, params, ecc, cache, errors)
        return _split(g, mod, many, limits, ms, 0, args)
    return _one_by_one(gpu, kernel, ms, n, k, bits, group_size, clock, params, ecc, cache, errors)


def _split(g, mod, many, limits, ms, offset, args) -> list:
    """The batched entry over ``ms`` (ints in [1, INT32_MAX]); when it refuses (some entry breaks a
    rule), the halves are tried again, so the accepted entries of a partly refused batch still run
    batched, down to runs of at most 4 entries, which go entry by entry (:func:`_one_by_one`, the
    first refused entry in order raising or returned). ``offset``: index of ``ms[0]`` in the caller's
    list, for the error message."""
    gpu, kernel, n, k, bits, group_size, clock, params, ecc, cache, errors = args
    try:
        if limits is not None:
            fits = getattr(mod, "int32_fits", None)
            if fits is None or not fits(max(ms), n, k):      # the indices grow with M
                for m in ms:
                    limits(m, n, k)
        out = many(g, ms, n, k, bits, group_size, clock, params)
        if cache == "warm":
            out = _warm_many(g, ms, out, many, n, k, bits, group_size, clock, params)
        return out
    except RefsimError:
        pass                # a refused entry: the halves below, then entry by entry
    if len(ms) <= 4:
        return _one_by_one(gpu, kernel, ms, n, k, bits, group_size, clock, params, ecc, cache, errors, offset)
    half = len(ms) // 2
    return (_split(g, mod, many, limits, ms[:half], offset, args)
            + _split(g, mod, many, limits, ms[half:], offset + half, args))


_INT_ONLY = {int}
_MANY: dict = {}         # kernel module -> its batched entry (``_predict_many``, or a loop over ``_predict``)


def _loop(model):
    """A batched entry for a module without ``_predict_many``: its unchecked ``_predict`` per M."""
    def many(g, ms, n, k, bits, group_size, clock, params):
        return [model(g, m, n, k, bits, group_size, clock, params) for m in ms]
    return many


def _warm_many(g, ms, cold, many, n, k, bits, group_size, clock, params) -> list:
    """The ``cache="warm"`` step of :func:`_fresh` over a batch: entries whose working set fits L2
    are recomputed on the warm-L2 spec (one batched call), the others get the note."""
    fit = [i for i, bd in enumerate(cold) if fits_in_l2(g, bd.bytes_dram)]
    warm = []
    if fit:
        warm = many(warm_l2(g, g.clock_hz(clock)), [ms[i] for i in fit], n, k, bits, group_size, clock, params)
    out = []
    j = 0
    for i, bd in enumerate(cold):
        if j < len(fit) and fit[j] == i:
            out.append(_warm_result(g, bd, warm[j]))
            j += 1
        else:
            out.append(_warm_result(g, bd, None))
    return out


def _one_by_one(gpu, kernel, ms, n, k, bits, group_size, clock, params, ecc, cache, errors, offset=0) -> list:
    """:func:`predict_many` entry by entry (the path for batches with a refused entry); ``offset``: the
    index of ``ms[0]`` in the caller's list."""
    out = []
    for i, m in enumerate(ms, offset):
        try:
            out.append(_fresh(gpu, kernel, m, n, k, bits, group_size, clock, params, ecc, cache))
        except RefsimError as err:
            if errors == "return":
                out.append(err)
                continue
            raise type(err)(f"ms[{i}] = {m!r}: {err}") from err
    return out


def clear_caches() -> None:
    """Empty the prediction result cache and the per-shape caches of the kernel models (stripe
    partitions, GEMM tile choices); for tests that replace a model's building blocks."""
    from refsim.gpu_model.kernels import _common, anyprec, atom_w4a4, marlin, mixed_2_4_16
    _cached.cache_clear()
    marlin.partition.cache_clear()
    _common._best_gemm_config.cache_clear()
    # the hot path's memos of per-(spec, clock, shape) constants and formatted notes
    for memo in (_common._CLOCKS, _common._RATES, _common._CTX, marlin._KINDS, marlin._CC_OK, marlin._NOTES, anyprec._SHAPES,
                 anyprec._DEQUANT, anyprec._NOTES, atom_w4a4._PER_K, atom_w4a4._CTAS_PER_SM, atom_w4a4._NOTES,
                 mixed_2_4_16._PER_GPU):
        memo.clear()
