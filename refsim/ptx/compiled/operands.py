"""C expressions for the operands of one PTX instruction, with the interpreter's width rules.

Spec
----
values          a register read as a PTX type is the C unsigned integer of that type's width
                (``uint8_t`` 0/1 for predicates); narrower reads truncate, wider reads zero-extend,
                or sign-extend for ``.s`` types (refsim.ptx's ``Launch._reader``). A result is stored
                at the register's width: truncated, or extended by the instruction type's signedness
                from the width the semantics handler produces (``Launch._writer``).
immediates      as ``Launch._immediate``: ``0f``/``0d`` bit patterns, exact decimal floats for .f32/.f64,
                integers modulo 2^width.
special regs    from the launch state: ``%tid`` per thread, ``%ctaid`` per block slot, ``%clock*`` the
                warp-instruction counter; read zero-extended or truncated to the wanted width.
addresses       ``[reg+off]`` (64-bit registers wrap mod 2^64, 32-bit mod 2^32), ``[sym+off]``
                (shared/local symbols get the generic window when the instruction is generic),
                ``[imm]``; global symbols come from ``S->sym[i]`` (their virtual address is the launch's).
poison          every register an instruction reads is recorded, in the interpreter's reader order,
                so the generated code checks initialisation (``S->poison``) in the same order.

Anything the interpreter refuses when it builds a kernel (a predicate read as an integer, a register
too narrow for its result) never reaches here: Module() builds every kernel once at load time.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW
from refsim.ptx.parse import TYPE_BITS
from refsim.ptx.semantics.cexpr import CT, ST

__all__ = ["Refuse", "CT", "ST", "bits_of", "InstructionEmitter", "immediate_bits"]


class Refuse(Exception):
    """This instruction (hence its kernel) is not compiled; the message says why."""


def bits_of(ptx_type: str) -> int:
    """Width of a PTX type as the engine stores it (1 for predicates)."""
    bits = 1 if ptx_type == "pred" else TYPE_BITS.get(ptx_type)
    if bits not in CT:
        raise Refuse(f"type .{ptx_type} has no register width the compiled path stores")
    return bits


def immediate_bits(op, ptx_type: str) -> int:
    """Bit pattern of an immediate operand read as ``ptx_type`` (``Launch._immediate``)."""
    _, v, kind = op
    if ptx_type == "pred":
        return int(bool(v))
    bits = bits_of(ptx_type)
    if ptx_type.startswith(("f", "bf")) and kind in ("int", "float"):
        if ptx_type not in ("f32", "f64"):
            raise Refuse(f"decimal immediate for .{ptx_type}")
        x = (np.float32 if ptx_type == "f32" else np.float64)(v)
        if float(x) != float(v):
            raise Refuse(f"immediate {v} is not exact in .{ptx_type}")
        return int(np.asarray(x).view(np.uint32 if ptx_type == "f32" else np.uint64))
    if kind == "f32" and bits == 64:
        return int(np.asarray(np.float64(np.uint32(v).view(np.float32))).view(np.uint64))
    if kind in ("float",) or (kind == "f64" and bits == 32):
        raise Refuse(f"immediate {v} does not fit .{ptx_type}")
    return int(v) % (1 << bits)


def literal(value: int, bits: int) -> str:
    """A C constant of the unsigned type of ``bits``."""
    suffix = "ull" if bits == 64 else "u"
    return f"(({CT[bits]}){value}{suffix})"


def convert(expr: str, from_bits: int, to_bits: int, signed: bool) -> str:
    """``refsim.ptx.operands.convert``: truncate, or zero/sign-extend, an unsigned value."""
    if from_bits == to_bits:
        return expr
    if to_bits == 1:
        raise Refuse("a non-predicate value read as a predicate")
    if to_bits < from_bits or not signed or from_bits == 1:
        return f"(({CT[to_bits]})({expr}))"
    return f"(({CT[to_bits]})({ST[to_bits]})({ST[from_bits]})({expr}))"


_SPECIAL = {
    "%tid.x": ("S->tid[0][{t}]", 32), "%tid.y": ("S->tid[1][{t}]", 32), "%tid.z": ("S->tid[2][{t}]", 32),
    "%ntid.x": ("(uint32_t)S->block[0]", 32), "%ntid.y": ("(uint32_t)S->block[1]", 32),
    "%ntid.z": ("(uint32_t)S->block[2]", 32),
    "%nctaid.x": ("(uint32_t)S->grid[0]", 32), "%nctaid.y": ("(uint32_t)S->grid[1]", 32),
    "%nctaid.z": ("(uint32_t)S->grid[2]", 32),
    "%ctaid.x": ("S->ctaid[({t} / S->tpb) * 3 + 0]", 32), "%ctaid.y": ("S->ctaid[({t} / S->tpb) * 3 + 1]", 32),
    "%ctaid.z": ("S->ctaid[({t} / S->tpb) * 3 + 2]", 32),
    "%laneid": ("(uint32_t)({t} & 31)", 32), "%warpid": ("(uint32_t)(({t} % S->tpb) >> 5)", 32),
    "%nwarpid": ("(uint32_t)(S->tpb / 32)", 32), "%smid": ("(uint32_t)({t} / S->tpb)", 32),
    "%nsmid": ("(uint32_t)S->nslots", 32), "%gridid": ("(uint64_t)0", 64), "%warpsz": ("(uint32_t)32", 32),
    "%lanemask_eq": ("((uint32_t)1 << ({t} & 31))", 32),
    "%lanemask_lt": ("(uint32_t)(((uint64_t)1 << ({t} & 31)) - 1)", 32),
    "%lanemask_le": ("(uint32_t)(((uint64_t)2 << ({t} & 31)) - 1)", 32),
    "%lanemask_gt": ("(uint32_t)~(uint32_t)(((uint64_t)2 << ({t} & 31)) - 1)", 32),
    "%lanemask_ge": ("(uint32_t)~(uint32_t)(((uint64_t)1 << ({t} & 31)) - 1)", 32),
    "%dynamic_smem_size": ("(uint32_t)S->dyn_bytes", 32), "%total_smem_size": ("(uint32_t)S->shared_size", 32),
    "%clock": ("(uint32_t)RT_CLOCK(S)", 32), "%clock64": ("RT_CLOCK(S)", 64), "%globaltimer": ("RT_CLOCK(S)", 64),
}


class InstructionEmitter:
    """Declarations, constants, poison-check order and operand expressions for one static instruction.

    The C an instruction produces is a *template*: register slots, immediates, branch targets and
    offsets are read from the instruction's descriptor (``D->k[j]``, ``D->idx``), so instructions of
    one shape share one C function (a Marlin entry has ~1,400 instructions and far fewer shapes)."""

    def __init__(self, ctx, idx: int, ins):
        self.ctx = ctx            # the kernel translation (registers, symbols, static data)
        self.idx = idx
        self.ins = ins
        self.decls: dict[str, str] = {}
        self.consts: list[int] = []
        self.slot_k: dict[int, str] = {}
        self.reads: list[int] = []     # register slots in reader order (poison checks)

    def k(self, value: int) -> str:
        """A per-instruction constant: the C expression ``D->k[j]`` (int64_t) holding ``value``."""
        v = int(value) % 2**64
        self.consts.append(v - 2**64 if v >= 2**63 else v)
        return f"D->k[{len(self.consts) - 1}]"

    def const(self, value: int, bits: int) -> str:
        """A constant of the unsigned type of ``bits`` (from the descriptor)."""
        return f"(({CT[bits]}){self.k(value)})"

    # -- registers ----------------------------------------------------------------------
    def slot(self, slot: int) -> str:
        """The C expression of a register slot number (for the runtime's poison calls)."""
        if slot not in self.slot_k:
            self.slot_k[slot] = self.k(slot)
        return self.slot_k[slot]

    def reg(self, slot: int) -> str:
        bits = self.ctx.k.registers[slot].bits
        j = self.slot(slot)
        name = f"R{j[5:-1]}"
        self.decls.setdefault(name, f"{CT[bits]} *const {name} = ({CT[bits]} *)S->reg[{j}];")
        return name

    def reg_bits(self, slot: int) -> int:
        return self.ctx.k.registers[slot].bits

    # -- sources --------------------------------------------------------------------------
    def src(self, op, ptx_type: str, t: str = "t") -> str:
        """C expression of ``op`` read as ``ptx_type`` by thread ``t`` (type: CT[bits_of(ptx_type)])."""
        want = bits_of(ptx_type)
        kind = op[0]
        if kind == "reg":
            slot, neg = op[1], op[2]
            rbits = self.reg_bits(slot)
            if (rbits == 1) != (want == 1):
                raise Refuse(f"register used as .{ptx_type}")
            self.reads.append(slot)
            r = f"{self.reg(slot)}[{t}]"
            if want == 1:
                return f"((uint8_t)!{r})" if neg else r
            return convert(r, rbits, want, ptx_type.startswith("s"))
        if kind == "imm":
            return self.const(immediate_bits(op, ptx_type), want)
        if kind == "special":
            if op[1] not in _SPECIAL:
                raise Refuse(f"special register {op[1]}")
            expr, bits = _SPECIAL[op[1]]
            return convert(expr.format(t=t), bits, want, False)
        if kind == "sym":
            space, addr = self.symbol(op[1])
            return convert(addr, 64, want, False)
        raise Refuse(f"operand {op[0]} as a source")

    def symbol(self, name: str) -> tuple[str, str]:
        """(state space, C expression of its address in that space) of a variable or parameter."""
        k = self.ctx.k
        if name in k.shared:
            return "shared", self.const(k.shared[name].offset, 64)
        if name in k.extern_shared:
            return "shared", self.const((k.shared_bytes + 15) // 16 * 16, 64)
        if name in k.local:
            return "local", self.const(k.local[name].offset, 64)
        for p in k.params:
            if p.name == name:
                return "param", self.const(p.offset, 64)
        if name in self.ctx.global_names:
            return "global", f"S->sym[{self.k(self.ctx.symbol_index(name))}]"
        raise Refuse(f"unknown symbol {name}")

    def param_offset(self, name: str) -> int:
        """Offset of a kernel parameter in the parameter space."""
        for p in self.ctx.k.params:
            if p.name == name:
                return p.offset
        raise Refuse(f"symbol {name} is not a parameter")

    # -- destinations ------------------------------------------------------------------------
    def dst(self, op, ptx_type: str, value: str, value_bits: int, t: str = "t") -> str:
        """Statement storing ``value`` (an unsigned C value of ``value_bits``) through ``op``."""
        if op[0] == "sink":
            return ""
        if op[0] != "reg":
            raise Refuse(f"destination {op[0]}")
        slot = op[1]
        rbits = self.reg_bits(slot)
        want = bits_of(ptx_type)
        if (rbits == 1) != (want == 1) or rbits < want:
            raise Refuse(f"register cannot hold .{ptx_type}")
        if rbits == want or rbits <= value_bits:
            v = value if rbits == value_bits else f"(({CT[rbits]})({value}))"
        else:
            v = convert(value, value_bits, rbits, ptx_type.startswith("s"))
        return f"{self.reg(slot)}[{t}] = {v};"

    def written(self, ops) -> list[str]:
        """Slot expressions of the destination registers (for the poison ``init`` marks)."""
        return [self.slot(o[1]) for o in ops if o[0] == "reg"]

    # -- addresses -------------------------------------------------------------------------------
    def address(self, op, space: str, t: str = "t") -> str:
        """C expression (uint64_t) of an address operand ``[...]`` of an instruction in ``space``."""
        if op[0] != "addr":
            raise Refuse("expected an address operand")
        _, base, off = op
        if base is None:
            return self.const(off % 2**64, 64)
        if base[0] == "sym":
            sp, a = self.symbol(base[1])
            if space not in ("generic", sp) and not (space == "const" and sp == "global"):
                raise Refuse(f"symbol {base[1]} is in .{sp}, not .{space}")
            if space == "generic" and sp in ("shared", "local"):
                a = f"({a} + {literal(SHARED_WINDOW if sp == 'shared' else LOCAL_WINDOW, 64)})"
            return f"((uint64_t)({a} + {self.const(off % 2**64, 64)}))"
        rbits = self.reg_bits(base[1])
        r = self.src(base, "u64" if rbits == 64 else "u32", t)
        if rbits == 64:
            return f"((uint64_t)({r} + {self.const(off % 2**64, 64)}))"
        return f"((((uint64_t){r}) + {self.const(off % 2**64, 64)}) & 0xFFFFFFFFull)"
