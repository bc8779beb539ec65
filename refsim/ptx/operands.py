"""Operand access for one launch: registers, immediates, special registers and symbol addresses.

Every function here runs once per static instruction, when the program is built, and returns a
closure the hot loop calls per step::

    reader(L, op, ptx_type, ins)  ->  sel -> values     values: the unsigned bit patterns of ``ptx_type``
                                                         (uint8/16/32/64), bool for ``pred``; a 0-d array
                                                         for immediates and uniform special registers
    writer(L, op, ptx_type, ins)  ->  (sel, values) -> None

``sel`` is the selection of threads of one step: a ``slice(None)`` (every thread) or an index array.

Widths (docs/ptx.md, "Operand widths")::

    register .b64, read as .u32      ->  truncated to the low 32 bits
    register .b32, read as .s64      ->  sign-extended (the instruction type's signedness decides)
    result .u8 into a .b32 register  ->  zero-extended; .s8 -> sign-extended

A register used against its kind (a predicate as an integer or the reverse) or a destination narrower
than the result is :class:`refsim.ptx.PtxUnsupportedError` naming the line.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import checks
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.parse import TYPE_BITS, Instruction

__all__ = ["UINT", "SINT", "bits", "dtype", "flatten", "convert", "reader", "writer", "immediate",
           "symbol_address", "split_operands"]

UINT = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SINT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def bits(t: str) -> int:
    return TYPE_BITS[t]


def dtype(nbits: int):
    return UINT[nbits]


def flatten(ops) -> list:
    """Operands with ``{a, b}`` vectors and ``p|q`` pairs expanded, in order."""
    out = []
    for op in ops:
        if op[0] in ("vec", "pair"):
            out.extend(flatten(op[1]))
        else:
            out.append(op)
    return out


def convert(vals: np.ndarray, to_bits: int, signed: bool) -> np.ndarray:
    """Unsigned bit patterns -> another width: truncation, or zero/sign extension."""
    vals = np.asarray(vals)
    from_bits = vals.dtype.itemsize * 8
    if from_bits == to_bits:
        return vals
    if to_bits < from_bits or not signed:
        return vals.astype(UINT[to_bits])
    return vals.view(SINT[from_bits]).astype(SINT[to_bits]).view(UINT[to_bits])


def reader(L, op, ptx_type: str, ins: Instruction):
    """A function ``sel -> values`` for a source operand read as ``ptx_type``."""
    kind = op[0]
    want = bits(ptx_type) if ptx_type != "pred" else 1
    if kind == "reg":
        slot, neg = op[1], op[2]
        reg = L.regs[slot]
        decl = L.k.registers[slot]
        rbits = decl.bits
        if (rbits == 1) != (want == 1):
            raise PtxUnsupportedError(f"{L.where(ins)}: register {decl.name} (.{decl.type}) used as .{ptx_type}")
        check = checks.register_read(L, slot, ins)
        if want == 1:
            if neg:
                return lambda sel: (check(sel), ~reg[sel])[1]
            return lambda sel: (check(sel), reg[sel])[1]
        if rbits == want:
            if check is checks._no_check:
                return lambda sel: reg[sel]
            return lambda sel: (check(sel), reg[sel])[1]
        signed = ptx_type.startswith("s")
        return lambda sel: (check(sel), convert(reg[sel], want, signed))[1]
    if kind == "imm":
        c = immediate(L, op, ptx_type, ins)
        return lambda sel: c
    if kind == "special":
        name = op[1]
        if name in ("%clock", "%clock64", "%globaltimer"):
            dt = np.uint32 if name == "%clock" else np.uint64
            mask = 2**32 - 1 if dt is np.uint32 else 2**64 - 1
            return lambda sel: convert(np.asarray(dt(L.stats.warp_instructions & mask)), want, False)
        if name not in L.special:
            raise PtxUnsupportedError(f"{L.where(ins)}: special register {name} is not modelled")
        arr = L.special[name]
        if np.ndim(arr) == 0:
            c = convert(np.asarray(arr), want, False)
            return lambda sel: c
        return lambda sel: convert(arr[sel], want, False)
    if kind == "sym":
        c = convert(np.asarray(np.uint64(symbol_address(L, op[1], ins)[1])), want, False)
        return lambda sel: c
    if kind == "addr":
        raise PtxUnsupportedError(f"{L.where(ins)}: an address operand is not a value here")
    raise PtxUnsupportedError(f"{L.where(ins)}: operand {op} not supported as a source")


def immediate(L, op, ptx_type: str, ins: Instruction) -> np.ndarray:
    """The bits of an immediate read as ``ptx_type``: integers wrap to the width (two's complement),
    ``0f``/``0d`` hex floats are bit patterns, decimal floats must be exact in ``.f32``/``.f64``."""
    _, v, kind = op
    if ptx_type == "pred":
        return np.asarray(bool(v))
    nbits = bits(ptx_type)
    dt = dtype(nbits)
    if ptx_type.startswith(("f", "bf")) and kind in ("int", "float"):
        if ptx_type not in ("f32", "f64"):
            raise PtxUnsupportedError(f"{L.where(ins)}: decimal immediate for .{ptx_type}")
        fdt = np.float32 if ptx_type == "f32" else np.float64
        x = fdt(v)
        if float(x) != float(v):
            raise PtxUnsupportedError(f"{L.where(ins)}: immediate {v} is not exact in .{ptx_type}")
        return np.asarray(x).view(dt)
    if kind == "f32" and nbits == 64:
        return np.asarray(np.float64(np.uint32(v).view(np.float32))).view(np.uint64)
    if kind == "f64" and nbits == 32:
        raise PtxUnsupportedError(f"{L.where(ins)}: 0d immediate for a 32-bit type")
    if kind == "float":
        raise PtxUnsupportedError(f"{L.where(ins)}: float immediate for .{ptx_type}")
    return np.asarray(int(v) % (1 << nbits), dtype=dt)


def writer(L, op, ptx_type: str, ins: Instruction):
    """A function ``(sel, values) -> None`` for a destination operand written as ``ptx_type``."""
    if op[0] == "sink":
        return lambda sel, v: None
    if op[0] != "reg":
        raise PtxUnsupportedError(f"{L.where(ins)}: destination {op} is not a register")
    slot = op[1]
    reg = L.regs[slot]
    decl = L.k.registers[slot]
    rbits = decl.bits
    want = 1 if ptx_type == "pred" else bits(ptx_type)
    if (rbits == 1) != (want == 1) or (rbits < want):
        raise PtxUnsupportedError(f"{L.where(ins)}: register {decl.name} (.{decl.type}) cannot hold .{ptx_type}")
    init = L.reg_init[slot] if L.poison else None
    signed = ptx_type.startswith("s")

    def write(sel, v):
        reg[sel] = convert(v, rbits, signed) if rbits != want else v
        if init is not None:
            init[sel] = True
    return write


def symbol_address(L, name: str, ins: Instruction) -> tuple[str, int]:
    """(state space, address in that space) of a variable or parameter symbol."""
    k = L.k
    if name in k.shared:
        return "shared", k.shared[name].offset
    if name in k.extern_shared:
        return "shared", L.dyn_offset
    if name in k.local:
        return "local", k.local[name].offset
    for p in k.params:
        if p.name == name:
            return "param", p.offset
    if name in L.sym:
        return "global", L.sym[name]
    raise PtxUnsupportedError(f"{L.where(ins)}: unknown symbol {name}")


def split_operands(L, ins: Instruction, h):
    """(destinations, sources) of a handler's instruction: optional destinations (``p|q``, ``d|p``)
    may be absent."""
    flat = flatten(ins.operands)
    nsrc = len(h.src_types)
    ndst = len(flat) - nsrc
    if not 1 <= ndst <= len(h.dst_types):
        raise PtxUnsupportedError(f"{L.where(ins)}: expected up to {len(h.dst_types)} destination and "
                                  f"{nsrc} source operands; got {len(flat)} operands")
    return flat[:ndst], flat[ndst:]
