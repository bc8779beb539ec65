"""Wrapped integer expressions: one definition from which both executors run a plain integer form.

An :class:`Expr` is built from the sources ``src(i)``, constants (``ZERO``, :func:`const`, or a plain int
operand) with ``+ - * & | ^ ~`` and shifts by a constant (``x << 16``, ``x >> 16``), all modulo 2^w
on the w-bit unsigned bit patterns (two's complement makes signed and unsigned ``add``/``sub``/``neg``
the same bits, and the low half of a product), with comparisons (:func:`compare`, signed or unsigned)
and selection (:func:`select`); :func:`call` applies a function defined elsewhere together with its
declared C twin (e.g. a row of refsim.ptx.semantics.floating.C_TWINS). :func:`numpy_fn` turns it
into the handler's function (sources read with ``ubits``, evaluated in uint64, the result wrapped to w
bits); :func:`c` into the compiled executor's C expression
(each source widened to uint64_t, the result cast to the w-bit type). Worked example, ``add.u32``::

    e = src(0) + src(1)
    numpy_fn(e, 32)(np.array([0xFFFFFFFF], np.uint32), np.array([2], np.uint32))  ->  (array([1], uint32),)
    c(e, 32, ["a", "b"])  ->  "((uint32_t)((uint64_t)a + (uint64_t)b))"

A result may be narrower than the expression (``out``: the high 16 bits of a 32-bit source are
``numpy_fn(src(0) >> 16, 32, out=16)``): the value is wrapped to ``out`` bits instead of w.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.semantics.cexpr import cast
from refsim.ptx.semantics.words import sval, ubits, wrap

__all__ = ["Expr", "src", "ZERO", "const", "compare", "select", "call", "numpy_fn", "numpy_pred", "c", "c_pred"]

_NP = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}


class Expr:
    """A node: ``("src", i)``, ``("const", v)``, ``("~", x)``, ``(o, x, y)`` with o in ``+ - * & | ^``,
    ``(s, x, k)`` with s in ``<< >>`` and k a constant int (0 <= k < 64), ``("cmp", o, x, y, signed)`` (:func:`compare`), ``("?", c, x, y)``
    (:func:`select`) or ``("call", fn, ctext, *args)`` (:func:`call`). A plain int operand of
    ``+ - * & | ^`` is the constant."""

    __slots__ = ("node",)

    def __init__(self, *node):
        self.node = node

    def _bin(self, o: str, other: "Expr | int") -> "Expr":
        return Expr(o, self, other if isinstance(other, Expr) else Expr("const", int(other)))

    def __add__(self, other): return self._bin("+", other)  # noqa: E704
    def __sub__(self, other): return self._bin("-", other)  # noqa: E704
    def __mul__(self, other): return self._bin("*", other)  # noqa: E704
    def __and__(self, other): return self._bin("&", other)  # noqa: E704
    def __or__(self, other): return self._bin("|", other)  # noqa: E704
    def __xor__(self, other): return self._bin("^", other)  # noqa: E704
    def __invert__(self): return Expr("~", self)  # noqa: E704

    def __lshift__(self, k: int): return self._shift("<<", k)  # noqa: E704
    def __rshift__(self, k: int): return self._shift(">>", k)  # noqa: E704

    def _shift(self, o: str, k: int) -> "Expr":
        assert isinstance(k, int) and 0 <= k < 64, k      # a shift by a constant amount below 64
        return Expr(o, self, k)

    def sources(self) -> int:
        """How many sources the expression reads (1 + the highest source index)."""
        kind = self.node[0]
        if kind == "src":
            return self.node[1] + 1
        if kind == "const":
            return 0
        return max(x.sources() for x in self.node[1:] if isinstance(x, Expr))


def compare(o: str, x: Expr, y: Expr, signed: bool = False) -> Expr:
    """The comparison ``x o y`` (o in ``== != < <= > >=``) of the w-bit values, read as two's complement
    when ``signed``: 1 or 0 (a predicate)."""
    return Expr("cmp", o, x, y, signed)


def select(c: Expr, x: Expr, y: Expr) -> Expr:
    """``c ? x : y`` (c nonzero: x)."""
    return Expr("?", c, x, y)


def call(fn, ctext: str | None, *args: Expr) -> Expr:
    """``fn(*args)``: a function defined elsewhere, given as its NumPy (w-bit unsigned patterns in, an
    unsigned array out) and its C twin ``ctext``, a format string over the argument expressions
    (``"rt_fadd({0}, {1})"``), or None where no C exists (:func:`c` then returns None)."""
    return Expr("call", fn, ctext, *args)


def const(v: int) -> Expr:
    """The constant v (0 <= v < 2^64)."""
    assert isinstance(v, int) and 0 <= v < 1 << 64, v
    return Expr("const", v)


def src(i: int) -> Expr:
    """Source operand i of the instruction."""
    return Expr("src", i)


ZERO = Expr("const", 0)


_CMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
        ">=": np.greater_equal}


def _eval(e: Expr, vals: list, w: int) -> np.ndarray:
    kind = e.node[0]
    if kind == "src":
        return vals[e.node[1]]
    if kind == "const":
        return np.uint64(e.node[1])
    if kind == "~":
        return np.invert(_eval(e.node[1], vals, w))
    if kind == "cmp":
        o, x, y, signed = e.node[1:]
        x, y = _eval(x, vals, w) & np.uint64(2**w - 1), _eval(y, vals, w) & np.uint64(2**w - 1)
        return _CMP[o](sval(x, w), sval(y, w)) if signed else _CMP[o](x, y)
    if kind == "?":
        c, x, y = (_eval(n, vals, w) for n in e.node[1:])
        return np.where(np.asarray(c) != 0, x, y)
    if kind in ("<<", ">>"):
        x = np.asarray(_eval(e.node[1], vals, w)).astype(np.uint64)
        return (np.left_shift if kind == "<<" else np.right_shift)(x, np.uint64(e.node[2]))
    if kind == "call":
        args = [np.asarray(_eval(a, vals, w)).astype(np.uint64) & np.uint64(2**w - 1) for a in e.node[3:]]
        return np.asarray(e.node[1](*args)).astype(np.uint64)
    return _NP[kind](_eval(e.node[1], vals, w), _eval(e.node[2], vals, w))


def numpy_fn(e: Expr, w: int, out: int | None = None):
    """The handler function of ``e`` at width w: ``fn(*sources) -> (result,)``, the result wrapped to
    ``out`` bits (default w) as that width's unsigned dtype."""
    narrow = None if out is None or out == w else np.dtype(f"uint{out}")    # unsigned casts keep the low bits

    def fn(*srcs):
        with np.errstate(over="ignore"):
            v = wrap(_eval(e, [ubits(x, w) for x in srcs], w), w)
        return (v if narrow is None else v.astype(narrow),)
    return fn


def numpy_pred(e: Expr, w: int):
    """The predicate function of ``e`` (a comparison) at width w: ``fn(*sources) -> bool array``."""
    def fn(*srcs):
        with np.errstate(over="ignore"):
            return np.asarray(_eval(e, [ubits(x, w) for x in srcs], w), bool)
    return fn


def _text(e: Expr, s: list[str], w: int, top: bool) -> str:
    kind = e.node[0]
    if kind == "src":
        return f"(uint64_t){s[e.node[1]]}"
    if kind == "const":
        return f"{e.node[1]:#x}ull" if e.node[1] > 0x7FFFFFFF else str(e.node[1])
    if kind == "~":
        return "~" + _text(e.node[1], s, w, False)
    if kind == "cmp":
        o, x, y, signed = e.node[1:]
        x, y = _text(x, s, w, signed), _text(y, s, w, signed)     # (== binds before & in C: parenthesise)
        t = f"rt_sext({x}, {w}) {o} rt_sext({y}, {w})" if signed else f"{x} {o} {y}"
    elif kind in ("<<", ">>"):
        t = f"{_text(e.node[1], s, w, False)} {kind} {e.node[2]}"
    elif kind == "call":
        if e.node[2] is None:
            raise _NoC
        t = "(uint64_t)" + e.node[2].format(*(_text(a, s, w, True) for a in e.node[3:]))
    elif kind == "?":
        t = " ? ".join([_text(e.node[1], s, w, False), " : ".join(_text(n, s, w, False) for n in e.node[2:])])
    else:
        t = f"{_text(e.node[1], s, w, False)} {kind} {_text(e.node[2], s, w, False)}"
    return t if top else f"({t})"


class _NoC(Exception):
    """A :func:`call` without a C twin."""


def c(e: Expr, w: int, s: list[str], out: int | None = None) -> str | None:
    """The C expression of ``e`` at width w over the C source expressions ``s``, wrapped to ``out`` bits
    (default w); None when a :func:`call` in it has no C twin."""
    try:
        return cast(w if out is None else out, _text(e, s, w, True))
    except _NoC:
        return None


def c_pred(e: Expr, w: int, s: list[str]) -> str:
    """The C predicate (0 or 1, as uint8_t) of ``e`` at width w over the C source expressions ``s``."""
    return f"((uint8_t){_text(e, s, w, False)})"
