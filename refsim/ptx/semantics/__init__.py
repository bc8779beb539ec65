"""Per-instruction semantics of PTX: one pure handler per opcode family, found through one table.

Changes to /work/wt/PTX_INTERFACE.md (``lookup(op, arch=)`` and the :class:`Handler` fields are as
pinned there; these only make its open points precise):
  * 8-bit ``cvt`` destinations return uint32 sign/zero-extended from 8 bits (engine truncates).
  * optional second destinations (``setp p|q``, ``shfl d|p``, ``lop3 d|p``) are always returned and
    listed in ``dst_types``; the engine writes those the instruction names. ``!p`` sources are negated
    by the engine. Immediates (``lop3``'s immLut, shift amounts, ``prmt`` selectors) arrive as arrays.
  * warp handlers: shfl ``fn(a, b, c, active)`` -> (d, p); vote/redux ``fn(a, active)``; ldmatrix
    ``fn(rows)`` with ``src_types == ()`` (the address is the engine's); mma ``fn(a, b, c)`` with
    ``src_types`` = na + nb + nc registers in operand order.
  * ``atom_apply(op, type, old, b, c=None, *, noftz=False, space="global")``: the two keywords carry
    ``.noftz`` and the state space (``atom.add.f32`` flushes subnormals on global memory only).
  * ``mov_pack`` / ``mov_unpack`` for ``mov`` with vector-brace operands.

Spec
----
contract        ``lookup(Op, arch=)`` -> :class:`Handler`, called once per static instruction at load
                time; anything refsim does not execute exactly raises
                :class:`refsim.ptx.PtxUnsupportedError` whose message starts with the instruction text
                (``"div.approx.f32: ..."``). Handlers are pure: ``fn(*srcs) -> tuple of destinations``,
                elementwise over threads (``kind="alu"``) or over warps (``kind="warp"``).
values          a register value for T threads is a 1-D array of the *unsigned bit-pattern* dtype of
                the operand's width (16 -> uint16, 32 -> uint32, 64 -> uint64); predicates are bool.
                Signedness and float-ness live in the instruction type, never in the dtype.
                8-bit types (``cvt.s8``, ``cvt.u8``): results come as uint32 sign-/zero-extended to
                32 bits (the engine truncates to its register's width); 8-bit sources read the low
                8 bits of whatever unsigned array is given.
optional dsts   instructions with an optional second destination (``setp p|q``, ``shfl d|p``,
                ``lop3 d|p``) always return every destination; ``dst_types`` lists them all and the
                engine writes only those present in the instruction.
negated preds   a source written ``!p`` is negated by the engine before the call.
extra API       beyond PTX_INTERFACE.md: :func:`mov_pack` / :func:`mov_unpack` for
                ``mov.b32 r, {h0, h1}`` and ``mov.b64 {lo, hi}, r`` (the operand shape is not in
                :class:`Op`), and :func:`atom_apply` for the atom/red arithmetic.
modules         integer.py (integer ALU, bit ops, setp/selp), convert.py (cvt), floating.py
                (float arithmetic), warp.py (shfl, vote, ldmatrix, mma), atomic.py (atom_apply).
source          PTX ISA 9.x (docs.nvidia.com/cuda/parallel-thread-execution), section named in each
                handler's ``isa`` field. Policy for implementation-defined results: docs/ptx_semantics.md.

Dispatch in a picture::

    "fma.rn.f16x2 %r1, %r2, %r3, %r4"  --engine parses-->  Op("fma", ("rn",), ("f16x2",))
        --lookup-->  Handler(fn=<fma f16x2 rn>, dst_types=("f16x2",), src_types=("f16x2",)*3,
                             kind="alu", isa="PTX ISA, Half Precision Floating Point Instructions: fma ...")
        --engine-->  d = fn(a, b, c)[0]   (uint32 arrays, one element per thread)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from refsim.ptx.errors import PtxUnsupportedError

__all__ = ["Op", "Handler", "lookup", "isa", "supported_opcodes", "mov_pack", "mov_unpack", "atom_apply",
           "ARCHS"]

ARCHS = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90")


@dataclass(frozen=True)
class Op:
    """One static PTX instruction, stripped of operands.

    opcode: ``"add"``; mods: modifiers in PTX order without dots and without types
    (``add.rn.ftz.f32`` -> ``("rn", "ftz")``); types: the type suffixes in PTX order
    (``cvt.rn.f16.f32`` -> ``("f16", "f32")``).
    """

    opcode: str
    mods: tuple[str, ...] = ()
    types: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ".".join((self.opcode,) + tuple(self.mods) + tuple(self.types))


@dataclass(frozen=True)
class Handler:
    """What the engine calls for one static instruction (see the module spec)."""

    fn: Callable[..., tuple]
    dst_types: tuple[str, ...]
    src_types: tuple[str, ...]
    kind: str
    isa: str


Builder = Callable[[Op, str], Handler]
_TABLE: dict[str, Builder] = {}


def register(*opcodes: str) -> Callable[[Builder], Builder]:
    """Decorator: ``builder(op, arch) -> Handler`` handles every opcode listed."""

    def deco(builder: Builder) -> Builder:
        for name in opcodes:
            if name in _TABLE:
                raise RuntimeError(f"opcode {name!r} registered twice")
            _TABLE[name] = builder
        return builder

    return deco


_TITLES = {
    "integer-arithmetic": "Integer Arithmetic Instructions",
    "logic-and-shift": "Logic and Shift Instructions",
    "comparison-and-selection": "Comparison and Selection Instructions",
    "half-precision-comparison": "Half Precision Comparison Instructions",
    "data-movement-and-conversion": "Data Movement and Conversion Instructions",
    "floating-point": "Floating Point Instructions",
    "half-precision-floating-point": "Half Precision Floating Point Instructions",
    "parallel-synchronization-and-communication": "Parallel Synchronization and Communication Instructions",
    "warp-level-matrix": "Warp Level Matrix Multiply-Accumulate Instructions",
}


def isa(category: str, name: str) -> str:
    """The PTX ISA section of an instruction, by title and documentation anchor (stable across ISA
    versions, unlike section numbers): ``isa("logic-and-shift", "lop3")`` ->
    ``"PTX ISA, Logic and Shift Instructions: lop3 (#logic-and-shift-instructions-lop3)"``."""
    return f"PTX ISA, {_TITLES[category]}: {name.replace('-', '.')} (#{category}-instructions-{name})"


def unsupported(op: Op, why: str) -> PtxUnsupportedError:
    """The error every builder raises for an instruction refsim does not execute exactly."""
    return PtxUnsupportedError(f"{op}: {why}")


def lookup(op: Op, *, arch: str = "sm_80") -> Handler:
    """The :class:`Handler` executing ``op`` on ``arch`` (one of :data:`ARCHS`).

    Raises :class:`refsim.ptx.PtxUnsupportedError` naming the instruction for an unknown opcode,
    an unsupported modifier/type combination, or an implementation-defined result (``.approx``).
    """
    if not isinstance(op, Op):
        raise PtxUnsupportedError(f"lookup: op must be a refsim.ptx.semantics.Op; got {type(op).__name__}")
    if arch not in ARCHS:
        raise PtxUnsupportedError(f"{op}: arch must be one of {', '.join(ARCHS)}; got {arch!r}")
    builder = _TABLE.get(op.opcode)
    if builder is None:
        raise unsupported(op, f"opcode '{op.opcode}' is not an instruction refsim's semantics execute "
                              f"(supported: {', '.join(sorted(_TABLE))})")
    return builder(op, arch)


def supported_opcodes() -> tuple[str, ...]:
    """Every opcode the table knows (modifier/type support is decided per instruction by lookup)."""
    return tuple(sorted(_TABLE))


# ----------------------------------------------------------------------------------------------
# mov pack/unpack: the operand shape ({a, b}) decides, so these are plain functions

_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def mov_pack(parts, width: int) -> np.ndarray:
    """``mov.b{width} d, {p0, p1, ...}``: p0 in the lowest bits (PTX ISA, Data Movement and Conversion Instructions: mov).

    parts: sequence of n unsigned arrays of width // n bits each (same shape); width 16, 32 or 64.
    Returns the packed unsigned array of ``width`` bits.
    """
    n = len(parts)
    if width not in (16, 32, 64) or n not in (2, 4) or width // n < 8:
        raise PtxUnsupportedError(f"mov.b{width}: packing {n} parts is not a PTX mov form")
    bits = width // n
    out = np.zeros(np.broadcast_shapes(*(np.shape(p) for p in parts)), np.uint64)
    for i, p in enumerate(parts):
        out |= (np.asarray(p).astype(np.uint64) & np.uint64((1 << bits) - 1)) << np.uint64(i * bits)
    return out.astype(_UINT[width])


def mov_unpack(value: np.ndarray, width: int, n: int) -> tuple[np.ndarray, ...]:
    """``mov.b{width} {p0, ..., p(n-1)}, a``: inverse of :func:`mov_pack`; p0 = the lowest bits."""
    if width not in (16, 32, 64) or n not in (2, 4) or width // n < 8:
        raise PtxUnsupportedError(f"mov.b{width}: unpacking into {n} parts is not a PTX mov form")
    bits = width // n
    v = np.asarray(value).astype(np.uint64)
    return tuple(((v >> np.uint64(i * bits)) & np.uint64((1 << bits) - 1)).astype(_UINT[bits])
                 for i in range(n))


from refsim.ptx.semantics import integer as _integer  # noqa: E402,F401  (registers handlers)
from refsim.ptx.semantics import floating as _floating  # noqa: E402,F401
from refsim.ptx.semantics import convert as _convert  # noqa: E402,F401
from refsim.ptx.semantics import warp as _warp  # noqa: E402,F401
from refsim.ptx.semantics.atomic import atom_apply  # noqa: E402
