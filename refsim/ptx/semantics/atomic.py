"""The arithmetic of ``atom`` and ``red``: ``new = atom_apply(op, type, old, b, c)``, defined once.

Spec
----
contract        the engine serialises the atomic accesses to one address (in its chosen order) and
                calls :func:`atom_apply` once per access with the value in memory (``old``) and the
                operands; it stores ``new`` and, for ``atom``, returns ``old`` to the thread.
                Arrays: unsigned bit patterns of the type's width (broadcastable); returns the same dtype.
operations      bit ops .and/.or/.xor (.b32/.b64), .exch, .cas (``new = old == b ? c : old``);
                integer .add (u32/s32/u64/s64 wrap), .min/.max (signed or unsigned by type),
                .inc (``old >= b ? 0 : old + 1``), .dec (``old == 0 or old > b ? b : old - 1``), u32;
                float .add rounds to nearest even: f32 and f64; f16, f16x2, bf16, bf16x2 need
                ``.noftz`` and keep subnormals; f32 on *global* memory flushes subnormal inputs and
                results to sign-preserving zero, on shared memory it does not (the ISA's "current
                implementation" sentence; ``space=`` selects it).
one definition  :func:`form` states each (op, type) as one refsim.ptx.semantics.expr expression over
                ``old = src(0)``, ``b = src(1)``, ``c = src(2)``; the float adds of f32, f16 and f16x2 call
                the refsim.arith.fp RN primitive of ``floating.C_TWINS[("add", type)]`` with its declared
                C twin (tests/ptx/compiled/test_conformance.py runs every row on both executors).
                :func:`atom_apply` is the expression's NumPy; :func:`c_apply` its C, which the compiled
                executor emits as the instruction's ``atom_apply_<k>`` (refsim/native/ptx_memory.c keeps
                only the memory mechanics). bf16, bf16x2 and f64 adds have no C twin: the interpreter runs them.
source          PTX ISA 9.x, "Parallel Synchronization and Communication Instructions: atom, red".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from refsim.arith import rounding
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.expr import ZERO, Expr, c, call, compare, const, numpy_fn, select, src
from refsim.ptx.semantics.floating import C_TWINS, bits_rn, elementwise

__all__ = ["atom_apply", "c_apply", "form", "ATOM_OPS"]

ATOM_OPS = ("and", "or", "xor", "exch", "cas", "add", "min", "max", "inc", "dec")
_WIDTH = {"b32": 32, "b64": 64, "u32": 32, "s32": 32, "u64": 64, "s64": 64, "f32": 32, "f64": 64,
          "f16": 16, "bf16": 16, "f16x2": 32, "bf16x2": 32}
_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _flush_f32(x: Expr) -> Expr:
    """f32 bits with a zero exponent field (zero, subnormal) -> their sign alone (``.ftz``)."""
    return select(compare("==", x & const(0x7F800000), ZERO), x & const(0x80000000), x)


def _fadd(t: str, x: Expr, y: Expr) -> Expr:
    """The RN add of ``t``: the C_TWINS primitive with its C twin, or (bf16, bf16x2, f64) the exact
    float64 path of refsim.arith.rounding, which has no C."""
    row = C_TWINS.get(("add", t))
    if row is not None:
        fn = bits_rn(t, row[2])
        return call(lambda a, b: fn(a, b)[0], row[1], x, y)
    st = {"f16x2": "f16", "bf16x2": "bf16"}.get(t, t)
    exact = elementwise(t, lambda a, b: rounding.fp_add(a, b, st, "rn"))
    u = _UINT[_WIDTH[t]]
    return call(lambda a, b: exact(a.astype(u), b.astype(u))[0], None, x, y)


@lru_cache(maxsize=None)
def form(op: str, type: str, noftz: bool = False, space: str = "global") -> tuple[Expr, int]:
    """(expression of the new value, width in bits) of ``atom.op.type`` (see the module spec);
    PtxUnsupportedError naming the form for anything refsim does not execute."""
    where = f"atom.{op}{'.noftz' if noftz else ''}.{type}"
    if type not in _WIDTH:
        raise PtxUnsupportedError(f"{where}: type .{type} is not an atom/red type refsim executes")
    if op not in ATOM_OPS:
        raise PtxUnsupportedError(f"{where}: operation .{op} is not an atom/red operation")
    w = _WIDTH[type]
    old, b, cv = src(0), src(1), src(2)
    if op in ("exch", "cas"):
        return (b if op == "exch" else select(compare("==", old, b), cv, old)), w
    if op in ("and", "or", "xor"):
        if type not in ("b32", "b64"):
            raise PtxUnsupportedError(f"{where}: bit operations take .b32/.b64")
        return {"and": old & b, "or": old | b, "xor": old ^ b}[op], w
    if type in ("b32", "b64"):
        raise PtxUnsupportedError(f"{where}: integer operations take .u32/.s32/.u64/.s64")
    if type[0] in "fb":
        if op != "add":
            raise PtxUnsupportedError(f"{where}: only .add is executed for floating-point atomics")
        if type in ("f16", "f16x2", "bf16", "bf16x2") and not noftz:
            raise PtxUnsupportedError(f"{where}: 16-bit floating-point atom/red.add requires .noftz")
        if type == "f32" and space == "global":
            return _flush_f32(_fadd(type, _flush_f32(old), _flush_f32(b))), w
        return _fadd(type, old, b), w
    if op == "add":
        return old + b, w
    if op in ("min", "max"):
        return select(compare("<" if op == "min" else ">", old, b, type[0] == "s"), old, b), w
    if type != "u32":
        raise PtxUnsupportedError(f"{where}: .inc/.dec take .u32")
    if op == "inc":
        return select(compare(">=", old, b), ZERO, old + const(1)), w
    return select(compare("==", old, ZERO) | compare(">", old, b), b, old - const(1)), w


@lru_cache(maxsize=None)
def _numpy(op: str, type: str, noftz: bool, space: str):
    e, w = form(op, type, noftz, space)
    return numpy_fn(e, w), e.sources()


def atom_apply(op: str, type: str, old, b, c=None, *, noftz: bool = False, space: str = "global") -> np.ndarray:
    """New memory value of one atomic ``op`` on ``type`` (see the module spec).

    op: one of :data:`ATOM_OPS`; type: 'b32', 'b64', 'u32', 's32', 'u64', 's64', 'f32', 'f64', 'f16',
    'f16x2', 'bf16', 'bf16x2'; old, b, c: unsigned bit arrays; noftz: the ``.noftz`` qualifier
    (required for the 16-bit float adds); space: 'global' or 'shared' (f32 add flush rule).
    """
    fn, nsrc = _numpy(op, type, bool(noftz), "shared" if space == "shared" else "global")
    if nsrc > 2 and c is None:
        raise PtxUnsupportedError(f"atom.{op}.{type}: cas needs the operand c")
    r = fn(*(old, b, c)[:max(nsrc, 1)])[0]
    shape = np.broadcast_shapes(np.shape(old), np.shape(b))
    return r if r.shape == shape else np.broadcast_to(r, shape).copy()


def c_apply(op: str, type: str, noftz: bool = False) -> str | None:
    """The C expression of the new value over ``uint64_t o, b, c`` and ``int32_t shared`` (the access
    is to shared memory), derived from :func:`form`; None where the form has no C twin (bf16, bf16x2,
    f64 adds). PtxUnsupportedError as :func:`form`."""
    g, w = form(op, type, noftz, "global")
    s, _ = form(op, type, noftz, "shared")
    cg, cs = c(g, w, ["o", "b", "c"]), c(s, w, ["o", "b", "c"])
    if cg is None or cs is None:
        return None
    return cg if cg == cs else f"(shared ? {cs} : {cg})"
