"""The arithmetic of ``atom`` and ``red``: ``new = atom_apply(op, type, old, b, c)``.

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
source          PTX ISA 9.x, "Parallel Synchronization and Communication Instructions: atom, red".
"""

from __future__ import annotations

import numpy as np

from refsim.arith import rounding
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.floating import elementwise, flush_subnormal

__all__ = ["atom_apply", "ATOM_OPS"]

ATOM_OPS = ("and", "or", "xor", "exch", "cas", "add", "min", "max", "inc", "dec")
_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _width(t: str) -> int:
    return {"b32": 32, "b64": 64, "u32": 32, "s32": 32, "u64": 64, "s64": 64, "f32": 32, "f64": 64,
            "f16": 16, "bf16": 16, "f16x2": 32, "bf16x2": 32}[t]


def atom_apply(op: str, type: str, old, b, c=None, *, noftz: bool = False, space: str = "global") -> np.ndarray:
    """New memory value of one atomic ``op`` on ``type`` (see the module spec).

    op: one of :data:`ATOM_OPS`; type: 'b32', 'b64', 'u32', 's32', 'u64', 's64', 'f32', 'f64', 'f16',
    'f16x2', 'bf16', 'bf16x2'; old, b, c: unsigned bit arrays; noftz: the ``.noftz`` qualifier
    (required for the 16-bit float adds); space: 'global' or 'shared' (f32 add flush rule).
    """
    where = f"atom.{op}{'.noftz' if noftz else ''}.{type}"
    try:
        w = _width(type)
    except KeyError:
        raise PtxUnsupportedError(f"{where}: type .{type} is not an atom/red type refsim executes") from None
    if op not in ATOM_OPS:
        raise PtxUnsupportedError(f"{where}: operation .{op} is not an atom/red operation")
    u = _UINT[w]
    mask = (1 << w) - 1
    o = np.asarray(old).astype(np.uint64) & np.uint64(mask)
    v = np.asarray(b).astype(np.uint64) & np.uint64(mask)
    floaty = type[0] in "fb" and type not in ("b32", "b64")
    if op in ("and", "or", "xor", "exch", "cas"):
        if type not in ("b32", "b64") and op != "exch" and op != "cas":
            raise PtxUnsupportedError(f"{where}: bit operations take .b32/.b64")
        if op == "cas":
            if c is None:
                raise PtxUnsupportedError(f"{where}: cas needs the operand c")
            r = np.where(o == v, np.asarray(c).astype(np.uint64) & np.uint64(mask), o)
        else:
            r = {"and": o & v, "or": o | v, "xor": o ^ v,
                 "exch": np.broadcast_to(v, np.broadcast_shapes(o.shape, v.shape))}[op]
        return r.astype(u)
    if floaty:
        if op != "add":
            raise PtxUnsupportedError(f"{where}: only .add is executed for floating-point atomics")
        if type in ("f16", "f16x2", "bf16", "bf16x2") and not noftz:
            raise PtxUnsupportedError(f"{where}: 16-bit floating-point atom/red.add requires .noftz")
        st = {"f16x2": "f16", "bf16x2": "bf16"}.get(type, type)
        ftz = type == "f32" and space == "global"
        prep = (lambda x: flush_subnormal(x, st)) if ftz else (lambda x: x)

        def add(x, y):
            r = rounding.fp_add(prep(x), prep(y), st, "rn")
            return flush_subnormal(r, st) if ftz else r

        return elementwise(type, add)(o.astype(u), v.astype(u))[0].astype(u)
    kind = type[0]
    if type not in ("u32", "s32", "u64", "s64"):
        raise PtxUnsupportedError(f"{where}: integer operations take .u32/.s32/.u64/.s64")
    if kind == "s":
        so = (o ^ np.uint64(1 << (w - 1))).astype(np.int64) - np.int64(1 << (w - 1)) if w < 64 else o.view(np.int64)
        sv = (v ^ np.uint64(1 << (w - 1))).astype(np.int64) - np.int64(1 << (w - 1)) if w < 64 else v.view(np.int64)
    else:
        so, sv = o, v
    if op == "add":
        r = o + v
    elif op in ("min", "max"):
        pick = (so < sv) if op == "min" else (so > sv)
        r = np.where(pick, o, v)
    elif type != "u32":
        raise PtxUnsupportedError(f"{where}: .inc/.dec take .u32")
    elif op == "inc":
        r = np.where(o >= v, np.uint64(0), o + np.uint64(1))
    else:
        r = np.where((o == 0) | (o > v), v, o - np.uint64(1))
    return (r & np.uint64(mask)).astype(u) if w < 64 else r.astype(u)
