"""Validation helpers shared by every public function (internal).

Each helper raises the matching :mod:`refsim.errors` class with a message that names the rule
and the value received, and returns the validated value so calls can be chained::

    q = require_dtype("q", q, np.uint8)
    require_ndim("q", q, 2)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError

#: Largest element count a reference implementation agrees to allocate or loop over (2**31 - 1,
#: also the int32 index limit of every CUDA kernel modelled here). Bigger requests are refused
#: with a named error before any allocation, instead of exhausting memory or running for hours.
MAX_ELEMENTS = (1 << 31) - 1


def require_array(name: str, x: Any, *, max_elements: int | None = None) -> np.ndarray:
    """``x`` must already be a NumPy array (no silent conversion of lists of floats).

    The element count is checked first, from the shape alone, so a zero-stride view claiming
    terabytes (``np.broadcast_to(np.float32(1), (2**22, 2**14))``) is refused before anything
    reads or copies it (limit :data:`MAX_ELEMENTS`, or ``max_elements``). An ndarray subclass
    is taken as a plain ndarray view of the same memory, so results are plain arrays. A
    non-native byte order (e.g. a big-endian ``>f4`` array read from a file) is normalised to a
    native copy of the same values, so every later rule and result sees ``float32`` etc. The
    caller's array is never modified."""
    if not isinstance(x, np.ndarray):
        raise DtypeError(f"{name}: must be a numpy.ndarray; got {type(x).__name__}")
    require_element_count(name, x, MAX_ELEMENTS if max_elements is None else max_elements)
    return native_byte_order(plain_ndarray(x))


def require_element_count(name: str, x: np.ndarray, limit: int) -> np.ndarray:
    """Refuse an array (or view) claiming more than ``limit`` elements, from its shape alone."""
    if x.size > limit:
        raise ShapeError(f"{name}: element count must be <= {limit} for a reference implementation; "
                         f"got {x.size} (shape {x.shape})")
    return x


def plain_ndarray(x: np.ndarray) -> np.ndarray:
    """An ndarray subclass as a plain ndarray view of the same memory (no copy)."""
    return x if type(x) is np.ndarray else x.view(np.ndarray)


def native_byte_order(x: np.ndarray) -> np.ndarray:
    """``x`` itself in native byte order, else a native-order copy of the same values."""
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def require_dtype(name: str, x: Any, *dtypes: Any) -> np.ndarray:
    """``x`` must be an ndarray whose dtype is one of ``dtypes``."""
    x = require_array(name, x)
    allowed = [np.dtype(d) for d in dtypes]
    if x.dtype not in allowed:
        names = " or ".join(str(d) for d in allowed)
        raise DtypeError(f"{name}: dtype must be {names}; got {x.dtype}")
    return x


def require_integer_array(name: str, x: Any) -> np.ndarray:
    """``x`` must be an ndarray of an integer dtype (signed or unsigned)."""
    x = require_array(name, x)
    if not np.issubdtype(x.dtype, np.integer):
        raise DtypeError(f"{name}: dtype must be an integer type; got {x.dtype}")
    return x


def require_float_array(name: str, x: Any) -> np.ndarray:
    """``x`` must be an ndarray of a floating dtype (float16/32/64)."""
    x = require_array(name, x)
    if x.dtype not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise DtypeError(f"{name}: dtype must be float16, float32 or float64; got {x.dtype}")
    return x


def require_ndim(name: str, x: np.ndarray, ndim: int) -> np.ndarray:
    """``x`` must have exactly ``ndim`` dimensions."""
    if x.ndim != ndim:
        raise ShapeError(f"{name}: must be {ndim}-D; got shape {x.shape}")
    return x


def require_shape(name: str, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` must have exactly ``shape``."""
    if tuple(x.shape) != tuple(shape):
        raise ShapeError(f"{name}: shape must be {tuple(shape)}; got {tuple(x.shape)}")
    return x


def require_divisible(what: str, value: int, divisor: int, rule: str | None = None) -> int:
    """``value`` must be a positive multiple of ``divisor``."""
    if value <= 0 or value % divisor != 0:
        why = rule or f"must be a positive multiple of {divisor}"
        raise ShapeError(f"{what}: {why}; got {value}")
    return value


def require_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` must be a Python or NumPy integer (not bool), optionally ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise FormatRuleError(f"{name}: must be an integer; got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise FormatRuleError(f"{name}: must be >= {minimum}; got {value}")
    return value


def require_real(name: str, value: Any, *, finite: bool = True) -> float:
    """``value`` must be a real number (Python or NumPy int or float, not bool); returns a Python
    float, so no NumPy scalar type reaches a result. NaN and +-inf are refused unless
    ``finite=False``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise FormatRuleError(f"{name}: must be a real number; got {value!r}")
    x = float(value)
    if finite and not np.isfinite(x):
        raise NonFiniteError(f"{name}: must be finite; got {value!r}")
    return x


def require_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` must be one of ``choices`` (the message lists them); returns the matching entry of
    ``choices`` itself, so a ``np.str_`` equal to a name comes back as the ``str``."""
    choices = tuple(choices)
    try:  # an array or an unhashable object is never a choice (no NumPy truth-value error)
        ok = not isinstance(value, (bool, np.bool_, np.ndarray)) and value in choices
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FormatRuleError(f"{name}: must be one of {list(choices)}; got {value!r}")
    return choices[choices.index(value)]


def require_bits(value: Any, allowed: Iterable[int]) -> int:
    """A bit-width must be one of ``allowed``."""
    allowed = tuple(allowed)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) not in allowed:
        raise FormatRuleError(f"bits: bit-width must be one of {list(allowed)}; got {value!r}")
    return int(value)


def require_finite(name: str, x: np.ndarray) -> np.ndarray:
    """Every element of a float array must be finite."""
    if np.issubdtype(x.dtype, np.floating):
        bad = ~np.isfinite(x)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise NonFiniteError(
                f"{name}: must be finite (no NaN/Inf); got {int(bad.sum())} non-finite "
                f"value(s), first {x[first]!r} at index {first}"
            )
    return x


def require_codes(name: str, q: np.ndarray, bits: int) -> np.ndarray:
    """Integer codes must lie in ``[0, 2**bits)``."""
    q = require_integer_array(name, q)
    if q.size:
        lo = 0 if np.issubdtype(q.dtype, np.unsignedinteger) else int(q.min())  # one pass when unsigned
        hi = int(q.max())
        if lo < 0 or hi >= (1 << bits):
            bad = lo if lo < 0 else hi
            raise FormatRuleError(
                f"{name}: {bits}-bit codes must lie in [0, {(1 << bits) - 1}]; got {bad}"
            )
    return q


def require_group_size(group_size: Any, k: int, *, allowed: Iterable[int] | None = None) -> int | None:
    """``group_size`` is ``None`` (one group spanning K) or a positive divisor of ``k``."""
    if group_size is None:
        return None
    group_size = require_int("group_size", group_size, minimum=1)
    if allowed is not None:
        allowed = tuple(allowed)
        if group_size not in allowed:
            raise FormatRuleError(
                f"group_size: must be None or one of {list(allowed)}; got {group_size}"
            )
    if k % group_size != 0:
        raise ShapeError(f"group_size: must divide K={k}; got {group_size}")
    return group_size


def require_group_128(group_size: Any, kernel: str) -> int | None:
    """``group_size`` of a Marlin-family kernel: ``None`` (per-channel) or 128 (any int type)."""
    if group_size is None:
        return None
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or int(group_size) != 128:
        raise FormatRuleError(f"group_size: {kernel} supports only 128 or None (per-channel); got {group_size!r}")
    return 128


# ---- normalisation and resource bounds ---------------------------------------------------------


def require_ints(**values: Any) -> tuple[int, ...]:
    """Each keyword must be a Python or NumPy integer (not bool) ``>= 1``; returns Python ints
    in keyword order, so arithmetic on them never wraps at a NumPy width."""
    return tuple(require_int(name, v, minimum=1) for name, v in values.items())


def require_bounded(name: str, value: int, limit: int = MAX_ELEMENTS, *, what: str = "size") -> int:
    """Refuse ``value > limit`` (a resource bound, checked before any work)."""
    if value > limit:
        raise FormatRuleError(f"{name}: {what} must be <= {limit} for a reference implementation; got {value}")
    return value


def native_contiguous(x: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``x`` in the one canonical layout: a plain ndarray, C-contiguous with C strides (no zero or
    stray strides, even on length-1 axes), aligned, native byte order, of ``dtype`` if given; ``x``
    itself when it already is one, else a fresh copy (so call it after the size checks).

    Every operand handed to BLAS/LAPACK (``@``, ``np.dot``, ``np.linalg``, ``scipy.linalg``,
    ``einsum(optimize=...)``) and to reductions whose order follows memory (einsum, ``view``) goes
    through here: BLAS picks its kernel by layout and CPU (NumPy's matmul leaves BLAS for its own
    loop on zero or unaligned strides), so a Fortran-order, strided, zero-stride, big-endian or
    unaligned argument would otherwise round differently from a C-order one on some machines.
    tests/test_blas_operands.py finds every such call site in refsim/ and requires it."""
    dt = np.dtype(x.dtype if dtype is None else dtype)
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    x = plain_ndarray(x)
    canonical_strides = x.size == 0 or x.strides == c_strides(x.shape, dt.itemsize)
    if x.dtype == dt and x.flags.c_contiguous and x.flags.aligned and canonical_strides:
        return x
    return np.array(x, dtype=dt, order="C")


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a fresh C-order array of ``shape`` holding at least one element."""
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def require_words(name: str, x: Any, shape: tuple[int | None, ...] | None = None) -> np.ndarray:
    """``x`` must be a 2-D array of 32-bit words (int32 or uint32, as checkpoints store packed
    fields) of ``shape`` (None entries match any size)."""
    x = require_dtype(name, x, np.int32, np.uint32)
    require_ndim(name, x, 2)
    if shape is not None and any(want is not None and got != want for got, want in zip(x.shape, shape)):
        expected = "(" + ", ".join("any" if w is None else str(w) for w in shape) + ")"
        raise ShapeError(f"{name}: shape must be {expected}; got {x.shape}")
    return x


def require_fields(obj: Any, *, nonfinite: Iterable[str] = ()) -> None:
    """Check and normalise a dataclass's fields from their annotations (call it first thing in
    ``__post_init__``): ``int`` fields hold Python ints (NumPy integers converted; bools, floats
    and the rest refused), ``float`` fields finite Python floats (NaN and +-inf also allowed in the
    fields named in ``nonfinite``: a value the class documents as "not measured"), ``bool`` fields
    bools, ``str`` fields strs (``np.str_`` converted), ``np.ndarray`` fields plain ndarrays in
    native byte order (:func:`require_array`), ``X | None`` either, ``tuple[...]`` tuples (a list
    converted; elements checked when the annotation names ``int``), ``list`` lists (a tuple
    converted). Other annotations are the class's own business."""
    import dataclasses

    what = type(obj).__name__
    for f in dataclasses.fields(obj):
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        parts = [p.strip() for p in ann.split("|")]
        optional = "None" in parts
        rest = [p for p in parts if p != "None"]
        value = getattr(obj, f.name)
        if len(rest) != 1 or (optional and value is None):
            continue
        base, name = rest[0], f"{what}.{f.name}"
        if base == "int":
            value = require_int(name, value)
        elif base == "float":
            value = require_real(name, value, finite=f.name not in nonfinite)
        elif base == "bool":
            value = require_bool(name, value)
        elif base in ("np.ndarray", "numpy.ndarray", "ndarray"):
            value = require_array(name, value)
        elif base == "str":
            if not isinstance(value, str):
                raise FormatRuleError(f"{name}: must be a str; got {type(value).__name__}")
            value = str(value)
        elif base.startswith("list"):
            if isinstance(value, tuple):
                value = list(value)
            if not isinstance(value, list):
                raise FormatRuleError(f"{name}: must be a list; got {type(value).__name__}")
        elif base.startswith("tuple"):
            if isinstance(value, list):
                value = tuple(value)
            if not isinstance(value, tuple):
                raise FormatRuleError(f"{name}: must be a tuple; got {type(value).__name__}")
            if base.startswith("tuple[int"):
                value = tuple(require_int(f"{name}[{i}]", v) for i, v in enumerate(value))
        else:
            continue
        object.__setattr__(obj, f.name, value)


def plain_scalar(value: Any) -> Any:
    """A NumPy scalar (``np.str_``, ``np.bool_``, ``np.int64``, ``np.float32``, ...) or a 0-d
    array of one as the Python ``str``/``bool``/``int``/``float`` of the same value; anything else
    returned as it is. Public functions call it on the names and numbers they take, before their
    rules, so a NumPy-typed legal argument gives the result of the Python one, type for type (a
    ``np.float32`` becomes the float it holds exactly)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biufU":
        value = value[()]
    if isinstance(value, (np.str_, np.bool_, np.integer, np.floating)):
        return value.item()
    return value


def set_fields(obj: Any, **values: Any) -> None:
    """Store normalised values on a frozen dataclass from its ``__post_init__``."""
    for key, value in values.items():
        object.__setattr__(obj, key, value)


# ---- arguments that are not arrays (paths, flags, dtypes, objects) -----------------------------
#: NAME_MAX and PATH_MAX of Linux and macOS file systems: a longer name is refused up front (the
#: operating system would raise "File name too long" from whichever call touched it first)
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095


def require_path(name: str, value: Any) -> Path:
    """``value`` must be a ``str`` or ``os.PathLike`` naming a file or folder; returns a ``Path``.
    (Existence is the caller's rule: it raises CheckpointError naming the path.)"""
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, (str, os.PathLike)):
        raise FormatRuleError(f"{name}: must be a path (str or os.PathLike); got {type(value).__name__}")
    path = Path(value)
    if "\x00" in str(path):
        raise FormatRuleError(f"{name}: path must not contain a NUL character; got {str(path)!r}")
    long = [p for p in path.parts if len(os.fsencode(p)) > MAX_NAME_BYTES]
    if long or len(os.fsencode(str(path))) > MAX_PATH_BYTES:
        raise FormatRuleError(f"{name}: a file name is at most {MAX_NAME_BYTES} bytes and a path at most "
                              f"{MAX_PATH_BYTES} (the file systems' limits); got {str(path)[:80]!r}... "
                              f"({len(os.fsencode(str(path)))} bytes)")
    return path


def read_utf8_text(path: Path) -> str:
    """The text of the file at ``path``: UTF-8 (a leading byte-order mark dropped), with no control
    character but tab, newline and carriage return. A binary byte is refused with a FormatRuleError
    naming the file, the line (1-based) and the byte. (OSError from reading is the caller's.)"""
    raw = Path(path).read_bytes()
    body = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        line = body.count(b"\n", 0, err.start) + 1
        raise FormatRuleError(f"{path}:{line}: must be UTF-8 text; got byte {body[err.start]:#04x} "
                              f"(offset {err.start + len(raw) - len(body)} of the file)") from None
    bad = next((i for i, ch in enumerate(text) if ch < " " and ch not in "\t\n\r" or ch == "\x7f"), None)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        raise FormatRuleError(f"{path}:{line}: must be text (no control characters); got byte "
                              f"{ord(text[bad]):#04x}")
    return text


def require_bool(name: str, value: Any) -> bool:
    """``value`` must be ``True``/``False`` (Python or NumPy bool; never 0/1 or a string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise FormatRuleError(f"{name}: must be True or False; got {value!r}")
    return bool(value)


def require_optional_bool(name: str, value: Any) -> bool | None:
    """``None`` (the function decides) or ``True``/``False``, e.g. ``native=`` switches."""
    return None if value is None else require_bool(name, value)


def require_dtype_arg(name: str, value: Any, allowed: Iterable[Any]) -> np.dtype:
    """A dtype *argument* (``np.float16``, ``"float32"``, a ``np.dtype``) that must be one of
    ``allowed``; returns the ``np.dtype``. Arrays, numbers and other objects are refused."""
    allowed = tuple(np.dtype(d) for d in allowed)
    names = " or ".join(str(d) for d in allowed)
    if isinstance(value, (bool, np.ndarray, list, tuple, dict)) or value is None:
        raise DtypeError(f"{name}: must be a dtype ({names}); got {type(value).__name__}")
    try:
        dt = np.dtype(value)
    except (TypeError, ValueError):
        raise DtypeError(f"{name}: must be a dtype ({names}); got {value!r}") from None
    if dt not in allowed:
        raise DtypeError(f"{name}: must be a dtype ({names}); got {dt}")
    return dt


def require_instance(name: str, value: Any, kinds: Any, what: str | None = None) -> Any:
    """``value`` must be an instance of ``kinds`` (a class or tuple of classes)."""
    if not isinstance(value, kinds):
        ks = kinds if isinstance(kinds, tuple) else (kinds,)
        want = what or " or ".join(k.__name__ for k in ks)
        raise FormatRuleError(f"{name}: must be a {want}; got {type(value).__name__}")
    return value


def require_names(name: str, value: Any) -> list[str]:
    """``value`` must be a list or tuple of str (layer or tensor names); returns a list of plain str."""
    require_instance(name, value, (list, tuple))
    for i, v in enumerate(value):
        require_instance(f"{name}[{i}]", v, str)
    return [str(v) for v in value]


def require_callable(name: str, value: Any, *, allow_none: bool = False) -> Any:
    """``value`` must be callable (or ``None`` when ``allow_none``): progress hooks, openers."""
    if value is None and allow_none:
        return None
    if not callable(value) or isinstance(value, type) and issubclass(value, BaseException):
        raise FormatRuleError(f"{name}: must be callable{' or None' if allow_none else ''}; "
                              f"got {type(value).__name__}")
    return value


def require_shape_arg(name: str, shape: Any, limit: int = MAX_ELEMENTS) -> tuple[int, ...]:
    """A shape *argument* (an int or a sequence of ints, each ``>= 0``) as a tuple of Python
    ints, its element count bounded by ``limit`` (checked before anything is allocated)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise FormatRuleError(f"{name}: must be an int or a tuple of ints; got {type(shape).__name__}")
    dims = tuple(require_int(f"{name}[{i}]", d, minimum=0) for i, d in enumerate(shape))
    size = 1
    for d in dims:
        size *= d
    require_bounded(name, size, limit, what="element count")
    return dims
