"""Hostile and equivalent replacements for one argument of a legal call, chosen by its kind.

A *variant* replaces one parameter (or one field of a dataclass argument) of a legal call
(:mod:`fuzz_seeds`) with another value. Three kinds:

    same      the same value in another type or layout (a Python int or float as a NumPy scalar
              of every width and sign that holds it; Fortran / negative-stride / strided /
              unaligned / read-only / zero-stride array): the call must give the identical
              result, bit for bit and type for type. (A NumPy scalar in the legal call carries
              its width as meaning, e.g. fp16 arithmetic: its other widths are only hostile.)
    same|ref  the same value in a form refsim may refuse (big-endian, ndarray subclass, list for
              an array, integral float for an int, 0-d array for a scalar): identical result or
              a RefsimError
    hostile   anything else (NaN/inf/-0, bools, strings, objects, None, other dtypes and ranks,
              empty arrays, huge zero-stride views): a result or a RefsimError

``huge`` variants are zero-stride views claiming 2**36 elements (nothing may materialise them or
loop over them; the fuzz kills a call that tries). ``nonfinite`` variants differ from the legal
call only by a NaN/Inf: a refusal must be a NonFiniteError. A dataclass argument is varied field
by field (:data:`FIELD_LABELS`), through ``setattr`` and ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

SAME, SAME_OR_REFUSED, HOSTILE = "same", "same|ref", "hostile"

INT_TYPES = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
FLOAT_TYPES = (np.float16, np.float32, np.float64)
#: a (2**22, 2**14) float32 zero-stride view claims 256 GiB; every element count here is 2**36
HUGE_ELEMENTS_LOG2 = 36


@dataclass(frozen=True)
class Variant:
    """One replacement: ``make()`` builds the new value (fresh for every call)."""

    slot: str                      # parameter name, or "param.field" for a dataclass field
    label: str                     # what the value is ("np.uint8", "big-endian", "nan", ...)
    kind: str                      # SAME, SAME_OR_REFUSED or HOSTILE
    make: Callable[[], Any]
    baseline: Callable[[], Any] | None = None  # value giving the expected result (SAME kinds)
    huge: bool = False
    nonfinite: bool = False
    via: str = "arg"               # "arg", "setattr" (field set after construction) or "replace"


class Subclass(np.ndarray):
    """An ndarray subclass with no behaviour of its own (a user's tagged array)."""


class Opaque:
    """An object that is nothing refsim knows (where numbers, arrays or strings belong)."""

    def __repr__(self) -> str:
        return "Opaque()"


def _v(slot, label, kind, make, **kw) -> Variant:
    return Variant(slot, label, kind, make, **kw)


def _const(x):
    return lambda: x


# ---- scalars -------------------------------------------------------------------------------------
def _common_hostile(slot: str) -> list[Variant]:
    return [_v(slot, "None", HOSTILE, _const(None)), _v(slot, "object", HOSTILE, Opaque),
            _v(slot, "str 'x'", HOSTILE, _const("x")), _v(slot, "nan", HOSTILE, _const(float("nan"))),
            _v(slot, "list []", HOSTILE, list)]


def int_variants(slot: str, v) -> list[Variant]:
    """Python or NumPy integer ``v``."""
    n = int(v)
    # a Python int has no width: every NumPy integer holding it is the same value. A NumPy integer
    # in the legal call carries its width as meaning, so the other widths are only hostile.
    kind = SAME if type(v) is int else HOSTILE
    out = []
    for t in INT_TYPES:
        info = np.iinfo(t)
        if info.min <= n <= info.max and type(v) is not t:
            out.append(_v(slot, t.__name__, kind, (lambda t=t: t(n))))
    if type(v) is not int:
        out.append(_v(slot, "python int", HOSTILE, _const(n)))
    out += [
        _v(slot, "integral float", SAME_OR_REFUSED, _const(float(n))),
        _v(slot, "np.float64", SAME_OR_REFUSED, lambda: np.float64(n)),
        _v(slot, "0-d array", SAME_OR_REFUSED, lambda: np.asarray(n)),
        _v(slot, "True", HOSTILE, _const(True)), _v(slot, "np.bool_", HOSTILE, lambda: np.bool_(True)),
        _v(slot, "0", HOSTILE, _const(0)), _v(slot, "-1", HOSTILE, _const(-1)),
        _v(slot, "v+1", HOSTILE, _const(n + 1)), _v(slot, "2v", HOSTILE, _const(2 * n)),
        _v(slot, "v//2", HOSTILE, _const(n // 2)),
        _v(slot, "2**31", HOSTILE, _const(2**31)), _v(slot, "2**63", HOSTILE, _const(2**63)),
        _v(slot, "2**64+v", HOSTILE, _const(2**64 + n)), _v(slot, "-2**63", HOSTILE, _const(-2**63)),
        _v(slot, "10**30", HOSTILE, _const(10**30)), _v(slot, "np.uint64 max", HOSTILE, lambda: np.uint64(2**64 - 1)),
        _v(slot, "np.int8(-1)", HOSTILE, lambda: np.int8(-1)),
        _v(slot, "1.5", HOSTILE, _const(1.5)), _v(slot, "inf", HOSTILE, _const(math.inf)),
        _v(slot, "str of v", HOSTILE, _const(str(n))), _v(slot, "[v]", HOSTILE, _const([n])),
        _v(slot, "array [v]", HOSTILE, lambda: np.array([n])),
    ]
    return out + _common_hostile(slot)


def float_variants(slot: str, v) -> list[Variant]:
    """Python or NumPy float ``v``."""
    x = float(v)
    out = []
    for t in FLOAT_TYPES:
        if type(v) is t:
            continue
        y = float(t(x))
        if type(v) is not float:  # a NumPy float in the legal call: its width is meaning
            out.append(_v(slot, t.__name__, HOSTILE, (lambda t=t: t(x))))
        elif math.isfinite(y):
            out.append(_v(slot, t.__name__, SAME, (lambda t=t: t(x)), baseline=None if y == x else _const(y)))
    if type(v) is not float:
        out.append(_v(slot, "python float", HOSTILE, _const(x)))
    if math.isfinite(x) and x == int(x):
        out.append(_v(slot, "integral int", SAME_OR_REFUSED, _const(int(x))))
    out += [
        _v(slot, "0-d array", SAME_OR_REFUSED, lambda: np.asarray(x)),
        _v(slot, "nan", HOSTILE, _const(math.nan)), _v(slot, "inf", HOSTILE, _const(math.inf)),
        _v(slot, "-inf", HOSTILE, _const(-math.inf)), _v(slot, "-0.0", HOSTILE, _const(-0.0)),
        _v(slot, "0.0", HOSTILE, _const(0.0)), _v(slot, "-v", HOSTILE, _const(-x)),
        _v(slot, "1e308", HOSTILE, _const(1e308)), _v(slot, "5e-324", HOSTILE, _const(5e-324)),
        _v(slot, "np.float32 nan", HOSTILE, lambda: np.float32("nan")),
        _v(slot, "np.float16 inf", HOSTILE, lambda: np.float16("inf")),
        _v(slot, "True", HOSTILE, _const(True)), _v(slot, "2**64", HOSTILE, _const(2**64)),
        _v(slot, "str of v", HOSTILE, _const(repr(x))), _v(slot, "[v]", HOSTILE, _const([x])),
        _v(slot, "array [v]", HOSTILE, lambda: np.array([x])),
        _v(slot, "None", HOSTILE, _const(None)), _v(slot, "object", HOSTILE, Opaque),
        _v(slot, "str 'x'", HOSTILE, _const("x")),
    ]
    return out


def bool_variants(slot: str, v) -> list[Variant]:
    b = bool(v)
    out = [_v(slot, "np.bool_", SAME, lambda: np.bool_(b))] if type(v) is bool else \
        [_v(slot, "python bool", SAME, _const(b))]
    return out + [_v(slot, "not v", HOSTILE, _const(not b)), _v(slot, "int 1", HOSTILE, _const(1)),
                  _v(slot, "int 2", HOSTILE, _const(2)), _v(slot, "str 'True'", HOSTILE, _const("True")),
                  _v(slot, "array [v]", HOSTILE, lambda: np.array([b]))] + _common_hostile(slot)


def str_variants(slot: str, v: str) -> list[Variant]:
    return [_v(slot, "np.str_", SAME, lambda: np.str_(v)),
            _v(slot, "''", HOSTILE, _const("")), _v(slot, "upper", HOSTILE, _const(v.upper() + "?")),
            _v(slot, "padded", HOSTILE, _const(f" {v} ")), _v(slot, "bytes", HOSTILE, _const(v.encode())),
            _v(slot, "NUL", HOSTILE, _const(v + "\x00")), _v(slot, "long", HOSTILE, _const("x" * 5000)),
            _v(slot, "0", HOSTILE, _const(0)), _v(slot, "[v]", HOSTILE, _const([v])),
            _v(slot, "None", HOSTILE, _const(None)), _v(slot, "object", HOSTILE, Opaque),
            _v(slot, "nan", HOSTILE, _const(math.nan)), _v(slot, "True", HOSTILE, _const(True))]


def none_variants(slot: str) -> list[Variant]:
    """A parameter whose legal value here is ``None`` (an optional input or choice)."""
    return [_v(slot, "0", HOSTILE, _const(0)), _v(slot, "-1", HOSTILE, _const(-1)),
            _v(slot, "1", HOSTILE, _const(1)), _v(slot, "2**64", HOSTILE, _const(2**64)),
            _v(slot, "np.int64(64)", HOSTILE, lambda: np.int64(64)), _v(slot, "nan", HOSTILE, _const(math.nan)),
            _v(slot, "inf", HOSTILE, _const(math.inf)), _v(slot, "True", HOSTILE, _const(True)),
            _v(slot, "str 'x'", HOSTILE, _const("x")), _v(slot, "object", HOSTILE, Opaque),
            _v(slot, "list []", HOSTILE, list), _v(slot, "empty array", HOSTILE, lambda: np.zeros(0)),
            _v(slot, "0-d array", HOSTILE, lambda: np.asarray(1.0)),
            _v(slot, "f32 (3, 4)", HOSTILE, lambda: np.ones((3, 4), np.float32))]


# ---- arrays --------------------------------------------------------------------------------------
def _strided(x: np.ndarray) -> np.ndarray:
    """``x``'s values in every other element of a bigger buffer (non-contiguous, positive strides)."""
    if x.ndim == 0:
        return x.copy()
    buf = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    buf[..., ::2] = x
    return buf[..., ::2]


def _unaligned(x: np.ndarray) -> np.ndarray:
    """``x``'s values at an address one byte off the dtype's alignment (a slice of a byte buffer)."""
    raw = np.zeros(x.nbytes + 1, np.uint8)
    out = np.frombuffer(raw.data, dtype=x.dtype, count=x.size, offset=1).reshape(x.shape)
    out[...] = x
    return out


def _readonly(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    y.flags.writeable = False
    return y


def _negative_strides(x: np.ndarray) -> np.ndarray:
    return np.flip(np.flip(x).copy())


def _zero_stride(x: np.ndarray) -> np.ndarray:
    """A view that repeats ``x``'s first row along axis 0 (stride 0): same shape, fewer values."""
    return np.broadcast_to(x[:1], x.shape)


def _with(x: np.ndarray, value) -> np.ndarray:
    y = x.copy()
    y.flat[0] = value
    return y


def huge_view(dtype, ndim: int, fill=1) -> np.ndarray:
    """A zero-stride view of one element claiming 2**36 elements in ``ndim`` dimensions."""
    ndim = max(ndim, 1)
    share, extra = divmod(HUGE_ELEMENTS_LOG2, ndim)
    shape = tuple(2 ** (share + (1 if i < extra else 0)) for i in range(ndim))
    return np.broadcast_to(np.asarray(fill, dtype=dtype), shape)


_DTYPES = ("float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
           "uint32", "int64", "uint64", "bool", "complex64")


def array_variants(slot: str, x: np.ndarray, *, mutated: bool = False) -> list[Variant]:
    """Variants of an array argument ``x`` (``mutated``: the API modifies it, so no read-only or
    zero-stride layouts)."""
    out: list[Variant] = []
    if x.size:
        layouts = {"fortran": np.asfortranarray, "negative strides": _negative_strides,
                   "strided": _strided, "unaligned": _unaligned}
        if not mutated:
            layouts["read-only"] = _readonly
        for name, f in layouts.items():
            out.append(_v(slot, name, SAME, (lambda f=f: f(x))))
        if not mutated and x.ndim >= 1 and x.shape[0] > 1:
            out.append(_v(slot, "zero-stride rows", SAME, lambda: _zero_stride(x),
                          baseline=lambda: np.ascontiguousarray(_zero_stride(x))))
        if x.dtype.itemsize > 1:
            out.append(_v(slot, "big-endian", SAME_OR_REFUSED, lambda: x.astype(x.dtype.newbyteorder(">"))))
        out.append(_v(slot, "subclass", SAME_OR_REFUSED, lambda: x.copy().view(Subclass)))
        out.append(_v(slot, "list", SAME_OR_REFUSED, lambda: x.tolist()))
    first = x.flat[0] if x.size else x.dtype.type(0)
    out += [
        _v(slot, "0-d array", HOSTILE, lambda: np.asarray(first)),
        _v(slot, "scalar", HOSTILE, _const(first)),
        _v(slot, "raveled", HOSTILE, lambda: x.ravel().copy()),
        _v(slot, "extra axis", HOSTILE, lambda: x[None].copy()),
        _v(slot, "empty rows", HOSTILE, lambda: np.zeros((0,) + x.shape[1:], x.dtype)),
        _v(slot, "empty last axis", HOSTILE, lambda: np.zeros(x.shape[:-1] + (0,), x.dtype)),
        _v(slot, "huge 2-D view", HOSTILE, lambda: huge_view(x.dtype, 2, first), huge=True),
        _v(slot, "huge view", HOSTILE, lambda: huge_view(x.dtype, x.ndim, first), huge=True),
        _v(slot, "None", HOSTILE, _const(None)),
        _v(slot, "object", HOSTILE, Opaque),
        _v(slot, "str 'x'", HOSTILE, _const("x")),
        _v(slot, "object array", HOSTILE, lambda: x.astype(object)),
        _v(slot, "str array", HOSTILE, lambda: x.astype(str)),
    ]
    if x.ndim >= 1 and x.shape[-1] > 1:
        out.append(_v(slot, "one column short", HOSTILE, lambda: x[..., :-1].copy()))
    if x.ndim >= 2:
        out.append(_v(slot, "transposed", HOSTILE, lambda: np.ascontiguousarray(np.swapaxes(x, -1, -2))))
    for dt in _DTYPES:
        if np.dtype(dt) != x.dtype:
            out.append(_v(slot, dt, HOSTILE, (lambda dt=dt: x.astype(dt))))
    if x.size and np.issubdtype(x.dtype, np.floating):
        for label, val in (("nan", np.nan), ("inf", np.inf), ("-inf", -np.inf)):
            out.append(_v(slot, f"{label} at [0]", HOSTILE, (lambda val=val: _with(x, val)), nonfinite=True))
        out += [_v(slot, "-0.0 everywhere", HOSTILE, lambda: np.full_like(x, -0.0)),
                _v(slot, "max finite", HOSTILE, lambda: np.full_like(x, np.finfo(x.dtype).max)),
                _v(slot, "smallest subnormal", HOSTILE, lambda: np.full_like(x, np.finfo(x.dtype).smallest_subnormal)),
                _v(slot, "negated", HOSTILE, lambda: -x)]
    if x.size and np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        out += [_v(slot, "dtype max", HOSTILE, lambda: np.full_like(x, info.max)),
                _v(slot, "dtype min", HOSTILE, lambda: np.full_like(x, info.min)),
                _v(slot, "v+1", HOSTILE, lambda: x + x.dtype.type(1))]
    return out


# ---- containers ----------------------------------------------------------------------------------
def sequence_variants(slot: str, v) -> list[Variant]:
    other = tuple(v) if isinstance(v, list) else list(v)
    out = [_v(slot, "tuple<->list", SAME_OR_REFUSED, _const(other)),
           _v(slot, "empty", HOSTILE, lambda: type(v)()), _v(slot, "None", HOSTILE, _const(None)),
           _v(slot, "str 'x'", HOSTILE, _const("x")), _v(slot, "object", HOSTILE, Opaque),
           _v(slot, "nested", HOSTILE, _const([list(v)])), _v(slot, "set", HOSTILE, lambda: {0})]
    if v and all(isinstance(e, (int, float, np.number)) and not isinstance(e, bool) for e in v):
        out.append(_v(slot, "as array", SAME_OR_REFUSED, lambda: np.array(v)))
    if v:
        for sub in scalar_like_variants(f"{slot}[0]", v[0]):
            if sub.kind == HOSTILE:
                out.append(dataclasses.replace(sub, make=(lambda m=sub.make: type(v)([m(), *v[1:]]))))
    return out


def dict_variants(slot: str, v: dict) -> list[Variant]:
    return [_v(slot, "empty", HOSTILE, dict), _v(slot, "None", HOSTILE, _const(None)),
            _v(slot, "list", HOSTILE, _const(list(v))), _v(slot, "object", HOSTILE, Opaque),
            _v(slot, "str 'x'", HOSTILE, _const("x")), _v(slot, "extra key", HOSTILE, lambda: {**v, "x?": Opaque()}),
            _v(slot, "nan", HOSTILE, _const(math.nan))]


def other_variants(slot: str, v) -> list[Variant]:
    return [_v(slot, "None", HOSTILE, _const(None)), _v(slot, "0", HOSTILE, _const(0)),
            _v(slot, "str 'x'", HOSTILE, _const("x")), _v(slot, "nan", HOSTILE, _const(math.nan)),
            _v(slot, "object", HOSTILE, Opaque), _v(slot, "array", HOSTILE, lambda: np.zeros(3)),
            _v(slot, "list []", HOSTILE, list), _v(slot, "True", HOSTILE, _const(True))]


def scalar_like_variants(slot: str, v, *, mutated: bool = False) -> list[Variant]:
    """The variants of ``v`` by its kind (dataclass instances are :func:`field_variants`')."""
    if isinstance(v, (bool, np.bool_)):
        return bool_variants(slot, v)
    if isinstance(v, (int, np.integer)):
        return int_variants(slot, v)
    if isinstance(v, (float, np.floating)):
        return float_variants(slot, v)
    if isinstance(v, str):
        return str_variants(slot, v)
    if v is None:
        return none_variants(slot)
    if isinstance(v, np.ndarray):
        return array_variants(slot, v, mutated=mutated)
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return sequence_variants(slot, v)
    if isinstance(v, dict):
        return dict_variants(slot, v)
    return other_variants(slot, v)


#: the subset of a field's variants tried on dataclass fields (every field of every container
#: argument: the full sets would multiply the fuzz's cost by the field count)
FIELD_LABELS = {
    "np.int64", "np.uint8", "integral float", "0", "-1", "2**64+v", "nan", "None", "str 'x'", "object", "True",
    "np.float32", "inf", "0.0", "-v", "array [v]", "fortran", "big-endian", "subclass", "list",
    "nan at [0]", "inf at [0]", "empty rows", "raveled", "huge view", "v+1", "dtype max", "float32",
    "int32", "float16", "uint8", "''", "upper", "np.str_", "empty", "not v", "int 1", "tuple<->list",
}


def field_variants(slot: str, obj) -> list[Variant]:
    """Each field of dataclass ``obj`` replaced, once through ``setattr`` on a copy (a container
    whose fields are replaced after construction: frozen classes refuse it) and once through
    ``dataclasses.replace`` (which runs the class's own checks)."""
    import copy

    out = []
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        current = getattr(obj, f.name)
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            continue
        for sub in scalar_like_variants(f"{slot}.{f.name}", current):
            if sub.label not in FIELD_LABELS:
                continue

            def via_setattr(make=sub.make, name=f.name):
                new = copy.deepcopy(obj)
                setattr(new, name, make())  # FrozenInstanceError for a frozen class: the fuzz skips it
                return new

            def via_replace(make=sub.make, name=f.name):
                return dataclasses.replace(obj, **{name: make()})

            def base(make=sub.baseline, name=f.name):
                return dataclasses.replace(obj, **{name: make()})

            baseline = base if sub.baseline is not None else None
            out.append(dataclasses.replace(sub, make=via_setattr, baseline=baseline, via="setattr"))
            out.append(dataclasses.replace(sub, make=via_replace, baseline=baseline, via="replace"))
    return out


def variants_for(slot: str, v, *, mutated: bool = False) -> list[Variant]:
    """Every variant of parameter ``slot`` whose legal value is ``v``."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return field_variants(slot, v) + other_variants(slot, v)
    return scalar_like_variants(slot, v, mutated=mutated)


__all__ = ["Variant", "variants_for", "huge_view", "Subclass", "Opaque", "SAME", "SAME_OR_REFUSED", "HOSTILE",
           "INT_TYPES", "FLOAT_TYPES"]
