"""PTX text -> kernels made of instructions with resolved operands (the parser of ``refsim.ptx``).

What the parser produces, per ``.entry``::

    Kernel(name, params=(Param(name, type, size, align, offset), ...),
           registers=(Register(name, type, width_bits), ...),      # one slot per *declaration*
           shared=(Variable(name, size, align, offset), ...), extern_shared_offset, local_bytes,
           instructions=(Instruction(opcode, mods, types, dsts+srcs operands, guard, line, ...), ...))

Registers are scoped by ``{ }``: inline-asm blocks declare registers with the same names and
different types (Marlin's ``cp_async4_pred`` declares ``.reg .pred p`` and ``cp_async4_stream``
``.reg .b64 p``), so every declaration gets its own slot and every use is resolved to the slot of
the innermost enclosing declaration::

    .reg .b64 p;          slot 7  <- "p" in this scope
    {  .reg .pred p;      slot 8  <- "p" inside the braces
       @p cp.async ...    guard = slot 8 (a predicate, always a bool)
    }
    mov.b64 %rd1, p;      source = slot 7

Labels are scoped the same way (nvcc inlines the same asm block, with its labels, many times).
Operands are tuples, resolved once here so the engine's hot loop never looks at text:

    ("reg", slot, negated)       ("imm", int_or_bits, kind)   kind: "int" | "f32" | "f64"
    ("special", "%tid.x")        ("sym", name)                 ("label", instruction_index)
    ("addr", base, offset)       base: ("reg", slot, False) | ("sym", name) | None
    ("vec", (operand, ...))      ("pair", (operand, operand))  ("sink",)

Implicit operands: the carry instructions (``add.cc``, ``addc``, ``sub.cc``, ``subc``, ``mad.cc``,
``madc``) read or write the per-thread carry flag CC.CF, a predicate register the parser declares
(named ``CC.CF``) and inserts as an operand: ``addc.cc.u32 d, a, b`` -> (d, CC.CF, a, b, CC.CF).
The predefined constant ``WARP_SZ`` is the immediate 32.

Malformed or unsupported text raises :class:`refsim.ptx.PtxParseError` naming line, column and the
offending statement.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from dataclasses import dataclass, field

from refsim.ptx import limits
from refsim.archs import ARCH_SPECIFIC, parse_sm
from refsim.ptx.arch import ARCHS
from refsim.ptx.errors import PtxParseError, PtxUnsupportedError
from refsim.ptx.lex import (
    ADDRESS, DEC_FLOAT, DECL, F32_IMM, F64_IMM, IDENT, INSTRUCTION, NAME_ITEM, decl_quals, error,
    initializer_bytes, parse_int, split_top, statements, strip_comments,
)

__all__ = ["TYPE_BITS", "Param", "Register", "Variable", "Instruction", "Kernel", "ParsedModule", "parse"]

#: PTX fundamental types and their widths in bits (``pred`` is a 1-bit boolean).
TYPE_BITS = {
    "pred": 1, "b8": 8, "s8": 8, "u8": 8, "b16": 16, "s16": 16, "u16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "s32": 32, "u32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32, "u16x2": 32, "s16x2": 32,
    "b64": 64, "s64": 64, "u64": 64, "f64": 64, "b128": 128,
    "s4": 4, "u4": 4, "b1": 1, "e4m3": 8, "e5m2": 8, "e4m3x2": 16, "e5m2x2": 16,
    "e3m2": 6, "e2m3": 6, "e2m1": 4, "ue8m0": 8, "ue4m3": 8,
}

SPECIAL_REGISTERS = frozenset(
    [f"%{n}.{c}" for n in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"]
    + [f"%{n}" for n in ("tid", "ntid", "ctaid", "nctaid")]
    + ["%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%clock", "%clock64",
       "%globaltimer", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
       "%dynamic_smem_size", "%total_smem_size", "%warpsz"]
    + [f"%{n}.{c}" for n in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid") for c in "xyz"]
    + ["%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster"]
)

# Directives that carry no semantics for execution (performance hints, debug info).
_IGNORED_IN_BODY = (".pragma", ".loc", ".noreturn")
# Performance directives between an .entry header and its body, kept in Kernel.directives (their integers):
# the register budget refsim.ptx.hopper.registers checks setmaxnreg against reads them.
_KEPT_DIRECTIVES = (".maxnreg", ".maxntid", ".reqntid", ".minnctapersm", ".reqnctapercluster", ".explicitcluster",
                    ".maxclusterrank")


def _directives(text: str, line: int, col: int) -> dict:
    """``{".maxntid": (256, 1, 1), ".explicitcluster": (), ...}`` of the performance directives in ``text``
    (an .entry header's tail or one body statement); an unknown directive there -> PtxUnsupportedError."""
    out = {}
    for m in re.finditer(r"(\.\w+)([^.]*)", text):
        name, rest = m.group(1), m.group(2).strip().rstrip(";").strip()
        if name not in _KEPT_DIRECTIVES:
            raise error(line, col, text.strip(), f"unsupported directive {name}", PtxUnsupportedError)
        try:
            out[name] = tuple(int(x) for x in rest.split(",")) if rest else ()
        except ValueError:
            raise error(line, col, text.strip(), f"{name} takes integers; got {rest!r}") from None
    return out


@dataclass(frozen=True)
class Param:
    name: str
    type: str      # PTX type of the parameter (``b8`` for byte arrays)
    size: int      # bytes
    align: int
    offset: int    # byte offset in the kernel's parameter space


@dataclass(frozen=True)
class Register:
    name: str
    type: str      # declared PTX type
    bits: int      # 1 for predicates


@dataclass(frozen=True)
class Variable:
    name: str
    size: int      # bytes (0 for ``.extern .shared`` arrays: dynamic shared memory)
    align: int
    offset: int    # byte offset in its state space


@dataclass
class Instruction:
    opcode: str                    # base opcode: "ld", "mma", "bra", ...
    mods: tuple[str, ...]          # modifiers without dots or types, PTX order
    types: tuple[str, ...]         # type suffixes, PTX order
    operands: tuple                # resolved operand tuples (see module docstring)
    guard: tuple | None            # ("reg", slot, negated) of an ``@p``/``@!p`` guard
    line: int
    column: int
    text: str                      # the statement as written (for messages)

    @property
    def name(self) -> str:
        return ".".join((self.opcode,) + self.mods + self.types)


@dataclass
class Kernel:
    name: str
    params: tuple[Param, ...]
    registers: list[Register] = field(default_factory=list)
    shared: dict[str, Variable] = field(default_factory=dict)
    shared_bytes: int = 0          # static shared memory of the kernel
    extern_shared: tuple[str, ...] = ()   # names of ``.extern .shared`` arrays (dynamic shared)
    local_bytes: int = 0
    local: dict[str, Variable] = field(default_factory=dict)
    instructions: list[Instruction] = field(default_factory=list)
    refused: str | None = None     # why the kernel cannot run (an unsupported statement), else None
    line: int = 0                  # PTX line of the .entry header
    directives: dict = field(default_factory=dict)   # ".maxntid" -> (256, 1, 1), ... (_KEPT_DIRECTIVES)


@dataclass
class ParsedModule:
    version: str
    target: str
    address_size: int
    kernels: dict[str, Kernel]
    globals: dict[str, tuple[Variable, bytes | None, str]]   # name -> (variable, initial bytes or None
                                                            # for zeros, space)
    extern_shared: dict[str, int]                      # module-scope .extern .shared name -> align




class _Scope:
    def __init__(self, parent):
        self.parent = parent
        self.regs: dict[str, int] = {}
        self.labels: dict[str, int] = {}
        self.pending: list[tuple[Instruction, int, str]] = []   # (instruction, operand index, label)


#: Instructions that read (``c`` forms) or write (``.cc``) the carry flag CC.CF, an implicit operand.
_CARRY_IN = frozenset(["addc", "subc", "madc"])
_CARRY_OUT_OPCODES = frozenset(["add", "sub", "mad", "addc", "subc", "madc"])
#: The name of the carry-flag register (not a legal PTX identifier, so no declaration can clash).
CARRY_FLAG = "CC.CF"
#: Predefined constants an operand may name (PTX ISA, "Predefined Identifiers").
CONSTANTS = {"WARP_SZ": 32}


@functools.lru_cache(maxsize=1 << 16)
def _constant(t: str):
    """The operand of a special register or a literal (``("special", name)``, ``("imm", value,
    "int" | "f32" | "f64" | "float")``), or None; one parse per distinct token (a pure function)."""
    if t in SPECIAL_REGISTERS:
        return ("special", t)
    if t in CONSTANTS:
        return ("imm", CONSTANTS[t], "int")
    if F32_IMM.fullmatch(t):
        return ("imm", int(t[2:], 16), "f32")
    if F64_IMM.fullmatch(t):
        return ("imm", int(t[2:], 16), "f64")
    v = parse_int(t)
    if v is not None:
        return ("imm", v, "int")
    if DEC_FLOAT.fullmatch(t):
        return ("imm", float(t), "float")
    return None


@functools.lru_cache(maxsize=4096)
def _opcode_parts(full: str):
    """``"ld.global.v4.u32"`` -> ("ld", ("global", "v4"), ("u32",)); None for an empty modifier."""
    parts = full.split(".")
    if "" in parts[1:]:
        return None
    mods = tuple(p for p in parts[1:] if p not in TYPE_BITS)
    return parts[0], mods, tuple(p for p in parts[1:] if p in TYPE_BITS)


class _KernelParser:
    def __init__(self, kernel: Kernel, module: "ParsedModule"):
        self.k = kernel
        self.module = module
        self.scope: _Scope | None = None
        self.carry_slot: int | None = None

    def carry_flag(self) -> tuple:
        """The operand of the kernel's CC.CF register, declared on first use (one per thread)."""
        if self.carry_slot is None:
            self.carry_slot = len(self.k.registers)
            self.k.registers.append(Register(CARRY_FLAG, "pred", 1))
        return ("reg", self.carry_slot, False)

    # -- declarations ------------------------------------------------------------------
    def declare(self, text: str, line: int, col: int) -> None:
        m = DECL.match(text)
        if not m:
            raise error(line, col, text, "malformed declaration")
        space = m.group("space")
        align, vec, typ = decl_quals(m.group("quals"))
        if typ is None:
            raise error(line, col, text, "declaration without a type")
        for item in split_top(m.group("names")):
            im = NAME_ITEM.match(item)
            if not im:
                raise error(line, col, text, f"malformed declared name {item!r}")
            name = im.group("name")
            if space == ".reg":
                if vec != 1 or im.group("dims"):
                    raise error(line, col, text, "vector or array registers are not supported", PtxUnsupportedError)
                count = int(im.group("count")) if im.group("count") else 1
                limits.check("registers per kernel", len(self.k.registers) + count, limits.MAX_REGISTERS,
                             f"kernel {self.k.name}, PTX line {line}")
                names = [f"{name}{i}" for i in range(count)] if im.group("count") else [name]
                for n in names:
                    self.scope.regs[n] = len(self.k.registers)
                    self.k.registers.append(Register(n, typ, TYPE_BITS[typ]))
                continue
            if im.group("init"):
                raise error(line, col, text, "initialised variables inside a function are not supported",
                           PtxUnsupportedError)
            width = TYPE_BITS[typ] // 8 * vec
            dims = [d.strip() for d in re.findall(r"\[([^\]]*)\]", im.group("dims") or "")]
            count = 1
            for d in dims:
                count *= int(d) if d else 0
            size = width * count
            a = align or width
            where = f"kernel {self.k.name}, PTX line {line}"
            if space == ".shared":
                off = (self.k.shared_bytes + a - 1) // a * a
                limits.check("static .shared bytes per kernel", off + size, ARCHS["sm_90"].max_static_shared_bytes,
                             where)
                self.k.shared[name] = Variable(name, size, a, off)
                self.k.shared_bytes = off + size
            elif space == ".local":
                off = (self.k.local_bytes + a - 1) // a * a
                limits.check(".local bytes per thread", off + size, limits.MAX_LOCAL_BYTES, where)
                self.k.local[name] = Variable(name, size, a, off)
                self.k.local_bytes = off + size
            else:
                raise error(line, col, text, f"{space} declarations inside a kernel are not supported",
                           PtxUnsupportedError)

    def lookup(self, name: str) -> int | None:
        s = self.scope
        while s is not None:
            if name in s.regs:
                return s.regs[name]
            s = s.parent
        return None

    # -- operands -----------------------------------------------------------------------
    def int64(self, v: int, tok: str, line: int, col: int, text: str) -> int:
        """``v`` if the integer constant fits 64 bits (PTX ISA 4.5.1: every integer constant is .s64
        or .u64, so -2^63 .. 2^64 - 1), else PtxParseError naming kernel, line and constant (ptxas:
        "Constant overflow"). A constant that fits is converted to the instruction's type at its use
        (its low bits, refsim.ptx.operands.immediate), as the ISA and ptxas do."""
        if -(1 << 63) <= v < (1 << 64):
            return v
        raise PtxParseError(f"kernel {self.k.name}, " + str(error(
            line, col, text, f"integer constant {tok.strip()} does not fit 64 bits (PTX integer constants are "
                             f".s64 or .u64: -2^63 .. 2^64 - 1; ptxas: constant overflow)")))

    def operand(self, tok: str, line: int, col: int, text: str, is_branch_target: bool = False):
        t = tok.strip()
        if not t:
            raise error(line, col, text, "empty operand")
        slot = self.lookup(t)                  # the common case first: a register
        if slot is not None:
            return ("reg", slot, False)
        if t == "_":
            return ("sink",)
        if t.startswith("(") and t.endswith(")"):   # call argument lists: calls are refused at load
            return ("raw", t)
        if t.startswith("{") and t.endswith("}"):
            return ("vec", tuple(self.operand(x, line, col, text) for x in split_top(t[1:-1])))
        if t.startswith("[") and t.endswith("]"):
            return self.address(t[1:-1], line, col, text)
        if "|" in t:
            a, b = t.split("|", 1)
            return ("pair", (self.operand(a, line, col, text), self.operand(b, line, col, text)))
        neg = t.startswith("!")
        if neg:
            t = t[1:].strip()
            slot = self.lookup(t)
            if slot is not None:
                return ("reg", slot, True)
            raise error(line, col, text, f"'!' applies to predicate registers only; got {tok!r}")
        c = _constant(t)
        if c is not None:
            if c[0] == "imm" and c[2] == "int":
                self.int64(c[1], t, line, col, text)
            return c
        if IDENT.fullmatch(t):
            if is_branch_target:
                return ("label", t)
            return ("sym", t)
        if t.startswith("%"):
            raise error(line, col, text, f"register {t} is not declared in an enclosing scope")
        raise error(line, col, text, f"cannot parse operand {tok!r}")

    def address(self, inner: str, line: int, col: int, text: str):
        s = inner.replace(" ", "").replace("\t", "")
        if "," in s:
            base, rest = s.split(",", 1)
            if rest.startswith("{") and rest.endswith("}"):     # a tensor map and its coordinates
                try:
                    return ("taddr", self.address(base, line, col, text), self.operand(rest, line, col, text))
                except PtxParseError:
                    pass
            return ("raw", inner)     # texture/surface coordinates: only tex/suld/sust, refused at lookup
        m = ADDRESS.fullmatch(s)
        if not m or (m.group(1) is None and m.group(3) is None):
            raise error(line, col, text, f"cannot parse address [{inner}]")
        base_tok, sign, off = m.groups()
        offset = 0
        if off is not None:
            offset = self.int64(parse_int(off), off, line, col, text)
            if sign == "-":
                offset = -offset
        if base_tok is None:
            return ("addr", None, offset)
        slot = self.lookup(base_tok)            # the common case first: a register
        if slot is not None:
            return ("addr", ("reg", slot, False), offset)
        v = parse_int(base_tok)
        if v is not None:
            return ("addr", None, self.int64(v, base_tok, line, col, text) + offset)
        if IDENT.fullmatch(base_tok):
            return ("addr", ("sym", base_tok), offset)
        raise error(line, col, text, f"address base {base_tok!r} is neither a declared register nor a symbol")

    # -- instructions -------------------------------------------------------------------
    def instruction(self, text: str, line: int, col: int) -> None:
        m = INSTRUCTION.match(text)
        if not m:
            raise error(line, col, text, "cannot parse instruction")
        neg, gname, full, rest = m.groups()
        guard = None
        if gname is not None:
            slot = self.lookup(gname)
            if slot is None or self.k.registers[slot].type != "pred":
                raise error(line, col, text, f"guard {gname} is not a declared predicate register")
            guard = ("reg", slot, bool(neg))
        name = _opcode_parts(full)
        if name is None:
            raise error(line, col, text, "empty modifier in opcode")
        opcode, mods, types = name
        toks = split_top(rest) if rest.strip() else []
        is_branch = opcode in ("bra", "brx", "call")
        if is_branch:
            ops = [self.operand(tok, line, col, text, is_branch_target=i == len(toks) - 1) for i, tok in enumerate(toks)]
        else:
            ops = [self.operand(tok, line, col, text) for tok in toks]
        reads_cf = opcode in _CARRY_IN
        writes_cf = opcode in _CARRY_OUT_OPCODES and "cc" in mods
        if (reads_cf or writes_cf) and ops:      # d{, CC.CF out}, a, b{, c}{, CC.CF in}
            cf = self.carry_flag()
            ops = ops[:1] + ([cf] if writes_cf else []) + ops[1:] + ([cf] if reads_cf else [])
        ins = Instruction(opcode, mods, types, tuple(ops), guard, line, col, " ".join(text.split()))
        if len(self.k.instructions) >= limits.MAX_INSTRUCTIONS:
            limits.check("instructions per kernel", len(self.k.instructions) + 1, limits.MAX_INSTRUCTIONS,
                         f"kernel {self.k.name}, PTX line {line}")
        self.k.instructions.append(ins)
        if is_branch:
            for j, op in enumerate(ops):
                if op[0] == "label":
                    self.scope.pending.append((ins, j, op[1]))

    def label(self, name: str, line: int, col: int, text: str) -> None:
        if name in self.scope.labels:
            raise error(line, col, text, f"label {name} defined twice in one scope")
        self.scope.labels[name] = len(self.k.instructions)

    def open(self) -> None:
        self.scope = _Scope(self.scope)

    def close(self, line: int, col: int) -> None:
        s = self.scope
        for ins, j, name in s.pending:
            t = s
            while t is not None and name not in t.labels:
                t = t.parent
            if t is None:
                if s.parent is not None:
                    s.parent.pending.append((ins, j, name))
                    continue
                raise error(ins.line, ins.column, ins.text, f"branch target {name} is not a label of this kernel")
            ops = list(ins.operands)
            ops[j] = ("label", t.labels[name])
            ins.operands = tuple(ops)
        self.scope = s.parent


_HEADER = re.compile(r"^(?P<quals>(?:\.\w+\s+)*)\.(?P<kind>entry|func)\s+(?:\((?P<ret>[^)]*)\)\s*)?(?P<name>[\w$]+)\s*(?:\((?P<params>[^)]*)\))?(?P<tail>.*)$", re.S)


def _params(text: str, line: int, col: int, header: str) -> tuple[Param, ...]:
    out, offset = [], 0
    for item in split_top(text or ""):
        m = re.match(r"^\.param\s+(?P<quals>(?:\.(?:align\s+\d+|ptr|global|shared|const|local|\w+)\s*)+)(?P<name>[\w$]+)\s*(?:\[(?P<n>\d+)\])?$", item.strip())
        if not m:
            raise error(line, col, header, f"cannot parse kernel parameter {item!r}")
        align, _vec, typ = decl_quals(m.group("quals"))
        if typ not in TYPE_BITS or typ == "pred":
            raise error(line, col, header, f"unsupported parameter type in {item!r}")
        width = TYPE_BITS[typ] // 8
        size = width * (int(m.group("n")) if m.group("n") else 1)
        a = align or width
        offset = (offset + a - 1) // a * a
        out.append(Param(m.group("name"), typ, size, a, offset))
        offset += size
        limits.check("parameter bytes per kernel", offset, limits.MAX_PARAM_BYTES, f"PTX line {line}")
    return tuple(out)


def _body_statement(kp: _KernelParser, kind: str, st: str, line: int, col: int, depth: int) -> int:
    """One statement inside a kernel body; returns the new brace depth. Unsupported statements raise
    PtxUnsupportedError (the caller refuses that kernel only)."""
    if kind == "open":
        kp.open()
        return depth + 1
    if kind == "close":
        if depth == 1:   # falling off the end of a kernel returns (nvcc always writes ``ret``)
            kp.k.instructions.append(Instruction("ret", (), (), (), None, line, col, "} (end of kernel)"))
        kp.close(line, col)
        return depth - 1
    if kind == "header":
        raise error(line, col, st, "function header inside a function body")
    if kind == "label":
        kp.label(st, line, col, st)
    elif st[0] != ".":                    # the common case first: an instruction
        kp.instruction(st, line, col)
    elif st.split(None, 1)[0] in _IGNORED_IN_BODY:
        pass
    elif st.split(None, 1)[0] in _KEPT_DIRECTIVES:
        kp.k.directives.update(_directives(st, line, col))
    elif st.startswith((".reg", ".shared", ".local", ".param", ".const", ".global")):
        kp.declare(st, line, col)
    elif st.startswith("."):
        raise error(line, col, st, "unsupported directive", PtxUnsupportedError)
    else:
        kp.instruction(st, line, col)
    return depth


#: The newest PTX ISA major version refsim reads (CUDA 13.0 writes 9.0).
MAX_PTX_MAJOR = 9


def _version(words: list, line: int, col: int, st: str) -> str:
    m = re.fullmatch(r"(\d+)\.(\d+)", words[1]) if len(words) == 2 else None
    if not m:
        raise error(line, col, st, "malformed .version (expected MAJOR.MINOR)")
    if not 1 <= int(m.group(1)) <= MAX_PTX_MAJOR:
        raise error(line, col, st, f"PTX ISA version {words[1]}: refsim reads versions 1.0 to "
                                  f"{MAX_PTX_MAJOR}.x", PtxUnsupportedError)
    return words[1]


def _target(words: list, line: int, col: int, st: str) -> str:
    target = " ".join(words[1:])
    sm = parse_sm(target.split(",")[0].strip())
    if sm is None:
        raise error(line, col, st, "malformed .target (expected sm_XY)")
    name = target.split(",")[0].strip()
    newest = max(f.sm for f in ARCHS.values())
    if sm > newest:
        raise error(line, col, st, f".target {name}: refsim models architectures up to "
                                  f"sm_{newest} ({', '.join(ARCHS)})", PtxUnsupportedError)
    if name[-1] in "af" and name not in ARCH_SPECIFIC:     # PTX ISA: its features run on that architecture only
        raise error(line, col, st, f".target {name}: an architecture-specific target refsim does not model "
                                  f"(it knows {', '.join(ARCH_SPECIFIC)})", PtxUnsupportedError)
    return target


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused inside the block (and restored as it was): parsing
    and checking a kernel allocate a few dozen objects per instruction, none of them garbage, and
    every collection pass walks all of them again, which makes a load superlinear in its length
    (bench/bench_ptx_parse.py: ~35% of a 10^5-instruction parse)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse(text: str) -> ParsedModule:
    """Parse PTX text into kernels; raises :class:`PtxParseError` / :class:`PtxUnsupportedError`."""
    if not isinstance(text, str):
        raise PtxParseError(f"PTX text: must be a str; got {type(text).__name__}")
    with collector_paused():
        return _parse(text)


def _parse(text: str) -> ParsedModule:
    clean = strip_comments(text)
    version = target = None
    address_size = 64
    kernels: dict[str, Kernel] = {}
    globals_: dict[str, tuple[Variable, bytes, str]] = {}
    extern_shared: dict[str, int] = {}
    global_off = {"global": 0, "const": 0}
    kp: _KernelParser | None = None
    depth = 0
    skip_depth = None
    for kind, st, line, col in statements(clean):
        if kind == "line":
            words = st.split()
            if words[0] == ".version":
                version = _version(words, line, col, st)
            elif words[0] == ".target":
                target = _target(words, line, col, st)
            elif words[0] == ".address_size":
                if words[1:] not in (["32"], ["64"]):
                    raise error(line, col, st, ".address_size must be 32 or 64")
                address_size = int(words[1])
            continue
        if skip_depth is not None:
            if kind in ("open", "header"):
                depth += 1
            elif kind == "close":
                depth -= 1
                if depth == skip_depth:
                    skip_depth = None
            continue
        if depth == 0:
            if kind == "header":
                if st.startswith(".section"):
                    skip_depth, depth = 0, 1
                    continue
                hm = _HEADER.match(st)
                if not hm:
                    raise error(line, col, st, "cannot parse function header")
                params = _params(hm.group("params"), line, col, st)
                k = Kernel(hm.group("name"), params)
                try:
                    k.directives = _directives(hm.group("tail") or "", line, col)
                except PtxUnsupportedError as e:
                    k.refused = f"kernel {k.name}, {e}"
                if hm.group("kind") == "entry":
                    if k.name in kernels:
                        raise error(line, col, st, f".entry {k.name} is defined twice (first at PTX line "
                                                  f"{kernels[k.name].line})")
                    k.line = line
                    kernels[k.name] = k
                    kp = _KernelParser(k, None)
                else:
                    kp = None   # device functions are parsed only when called: refused below
                    skip_depth = 0
                depth = 1
                if kp is not None:
                    kp.open()
                continue
            if kind == "stmt":
                if st.startswith((".extern .func", ".func", ".weak .func", ".visible .func", ".extern .entry")):
                    continue   # prototypes
                m = re.match(r"^(?:\.(?:extern|visible|weak)\s+)*(?P<decl>\.(?:shared|global|const)\b.*)$", st, re.S)
                if m:
                    decl = m.group("decl")
                    dm = DECL.match(decl)
                    if not dm:
                        raise error(line, col, st, "malformed declaration")
                    align, vec, typ = decl_quals(dm.group("quals"))
                    im = NAME_ITEM.match(dm.group("names"))
                    if not im or typ is None:
                        raise error(line, col, st, "malformed declaration")
                    name = im.group("name")
                    width = TYPE_BITS[typ] // 8 * vec
                    dims = re.findall(r"\[([^\]]*)\]", im.group("dims") or "")
                    space = dm.group("space")[1:]
                    if space == "shared":
                        if ".extern" in st.split(decl)[0] or any(d.strip() == "" for d in dims):
                            extern_shared[name] = align or width
                            continue
                        raise error(line, col, st, "module-scope static .shared variables are not supported",
                                   PtxUnsupportedError)
                    count = 1
                    for d in dims:
                        count *= int(d) if d.strip() else 0
                    a = align or width
                    off = (global_off[space] + a - 1) // a * a
                    limits.check(f"module .{space} bytes", off + width * count,
                                 limits.MAX_CONST_BYTES if space == "const" else limits.MAX_GLOBAL_VARIABLE_BYTES,
                                 f"PTX line {line}")
                    try:                  # zero-initialised variables are allocated by each launch
                        init = initializer_bytes(im.group("init"), TYPE_BITS[typ] // 8, count) if im.group("init") else None
                    except (ValueError, KeyError) as err:
                        raise error(line, col, st, f"unsupported initializer ({err})") from None
                    globals_[name] = (Variable(name, width * count, a, off), init, space)
                    global_off[space] = off + width * count
                    continue
                raise error(line, col, st, "unexpected statement at module scope")
            if kind == "open":
                raise error(line, col, st, "'{' at module scope without a function header")
            if kind == "close":
                raise error(line, col, st, "unbalanced '}'")
            raise error(line, col, st, "label at module scope")
        # inside a kernel body
        if kp.k.refused is not None:       # the rest of a refused kernel is only brace-counted
            depth += {"open": 1, "header": 1, "close": -1}.get(kind, 0)
            if depth == 0:
                kp = None
            continue
        try:
            depth = _body_statement(kp, kind, st, line, col, depth)
        except PtxUnsupportedError as e:
            kp.k.refused = f"kernel {kp.k.name}, {e}"
            depth += {"open": 1, "close": -1}.get(kind, 0)
        if depth == 0:
            kp = None
    if depth != 0:
        raise PtxParseError("PTX text: unbalanced braces at end of text (a function body is not closed)")
    if target is None:
        raise PtxParseError("PTX text: no .target directive (is this PTX?)")
    for k in kernels.values():
        k.extern_shared = tuple(extern_shared)
    return ParsedModule(version or "", target, address_size, kernels, globals_, extern_shared)
