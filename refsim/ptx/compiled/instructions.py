"""C bodies of one static instruction: the engine-owned opcodes, the ALU handlers, the warp-wide ones.

Spec
----
a body          C statements run for the step's active threads ``act[0..na)`` (the guard applied),
                in the interpreter's order: operand reads (their poison checks are emitted by
                :mod:`refsim.ptx.compiled.translate` from :attr:`Body.checks`), then the work, then
                the destinations. ``Body.kind`` says how the PC moves: ``"advance"`` (every thread of
                the step to p + 1) or ``"branch"`` (the body moves the active threads; the others
                go to p + 1), as ``Launch._guarded``.
what compiles   every opcode refsim/cuda's kernels and tests/ptx/kernels use, and more: mov (vector
                pack/unpack), cvta, isspacep, createpolicy, no-ops (fence, membar, prefetch, ...),
                nanosleep, trap/brkpt, jumps (bra, from its ``Entry.jump`` declaration), ld/ldu,
                st, atom/red (integer ops, f32 and .noftz f16/f16x2 add), cp.async's copy, ldmatrix, mma (f16 T-FDPA and integer shapes), shfl.sync,
                vote.sync, and the ALU handlers (:mod:`refsim.ptx.compiled.alu`).
refused         (``Refuse``: the kernel runs on the interpreter) 128-bit accesses, bf16/f64 float
                atomics; ALU forms :mod:`alu` does not compile, and warp-wide handlers without a C
                body (redux, mma on bf16/tf32/fp8), run their handler through Python for that step
                (``Body.callback``); so do the engine-level Python definitions of refsim.ptx.hopper
                (mbarrier, cp.async.bulk*, tensormap, elect, fence.proxy.async) and the engine's
                :data:`PYTHON_DEFINED` (bar/barrier, ret/exit, cp.async's commit/wait groups), built once per launch over a
                refsim.ptx.compiled.view.LaunchView (CompiledLaunch._engine_step).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refsim.ptx.compiled.alu import alu
from refsim.ptx.compiled.operands import CT, Refuse, bits_of, literal
from refsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_BYTES
from refsim.ptx.memory_ops import state_space, vector_width
from refsim.ptx.operands import flatten
from refsim.ptx.parse import TYPE_BITS

__all__ = ["Body", "PYTHON_DEFINED", "CP_GROUP_FORMS", "python_defined", "emit_body", "split_operands"]

_SP_C = {"generic": "SP_GENERIC", "global": "SP_GLOBAL", "shared": "SP_SHARED", "local": "SP_LOCAL",
         "param": "SP_PARAM", "const": "SP_CONST"}
_AOPS = ("and", "or", "xor", "exch", "cas", "add", "min", "max", "inc", "dec")
_ATYPE = {"b32": 0, "b64": 1, "u32": 2, "s32": 3, "u64": 4, "s64": 5, "f32": 6, "f16": 8, "f16x2": 9}
_NOOPS = ("membar", "fence", "prefetch", "prefetchu", "applypriority", "discard")


@dataclass
class Body:
    code: list = field(default_factory=list)      # C lines
    kind: str = "advance"                         # "advance" | "branch"
    checks: str = "act"                           # poison checks over "act", "warps", or "none" (in code)
    inits: str = "act"                            # poison init marks over "act", "warps", or "none"
    written: list = field(default_factory=list)   # destination register slots (C expressions)
    callback: bool = False                        # Python runs the handler for this step


def split_operands(ins, h):
    """(destinations, sources) as ``Launch._split_operands``: optional destinations may be absent."""
    flat = flatten(ins.operands)
    ndst = len(flat) - len(h.src_types)
    if not 1 <= ndst <= len(h.dst_types):
        raise Refuse("operand count")
    return flat[:ndst], flat[ndst:]


def _loop(lines: list[str], var: str = "act", count: str = "na") -> list[str]:
    return [f"for (int32_t i = 0; i < {count}; i++) {{", f"    const int32_t t = {var}[i]; (void)t;",
            *["    " + ln for ln in lines if ln], "}"]



def emit_body(em, ins, handler) -> Body:
    """The body of instruction ``ins`` (see the module spec); raises Refuse."""
    op = ins.opcode
    from refsim.ptx import hopper

    if hopper.python_defined(ins) or python_defined(ins) \
            or hopper.dsmem.python_access(ins, state_space(ins), em.ctx.generic_mapa):
        # one Python definition (distributed shared memory's ld/st/atom included): run it over a LaunchView
        em.reads.clear()
        return Body(callback=True)
    if op == "ldmatrix":
        return _ldmatrix(em, ins)
    if handler is not None and op not in ("mov",):
        if handler.kind == "warp":
            return _WARP.get(op, _handler_step)(em, ins, handler)
        return _alu(em, ins, handler)
    from refsim.ptx import dispatch

    entry = dispatch.OPCODES.get(op)
    if entry is not None and entry.jump is not None:
        return _jump(em, ins, entry.jump)
    fn = _ENGINE.get(op)
    if fn is None:
        raise Refuse(f"{ins.name} is not compiled")
    return fn(em, ins)


def _handler_step(em, ins, handler) -> Body:
    em.reads.clear()
    return Body(callback=True)


# ----------------------------------------------------------------------------------------------
# ALU handlers

def _alu(em, ins, h) -> Body:
    from refsim.ptx.semantics import Op

    dsts, srcs = split_operands(ins, h)
    b = Body()
    names = []
    for j, (o, t) in enumerate(zip(srcs, h.src_types)):
        names.append(f"s{j}")
        b.code.append(f"const {CT[bits_of(t)]} s{j} = {em.src(o, t)};")
    res = alu(Op(ins.opcode, ins.mods, ins.types), names, srcs)
    if res is None:
        em.reads.clear()
        return Body(callback=True)
    for j, ((expr, vb), o) in enumerate(zip(res, dsts)):
        b.code.append(f"const {CT[vb] if vb > 1 else 'uint8_t'} v{j} = {expr};")
    for j, ((expr, vb), o, t) in enumerate(zip(res, dsts, h.dst_types)):
        b.code.append(em.dst(o, t, f"v{j}", vb))
    b.code = _loop(b.code)
    b.written = em.written(dsts)
    return b


# ----------------------------------------------------------------------------------------------
# moves

def _mov(em, ins) -> Body:
    if len(ins.operands) != 2 or not ins.types:
        raise Refuse("malformed mov")
    t = ins.types[0]
    d, a = ins.operands
    b = Body()
    if d[0] == "vec" or a[0] == "vec":
        width = TYPE_BITS[t]
        parts = d[1] if d[0] == "vec" else a[1]
        n = len(parts)
        if width not in (16, 32, 64) or n not in (2, 4) or width // n < 8:
            raise Refuse("vector mov form")
        pb = width // n
        if d[0] == "vec":                   # unpack: part i = bits [i*pb, (i+1)*pb)
            b.code.append(f"const {CT[width]} v = {em.src(a, t)};")
            for i, o in enumerate(parts):
                b.code.append(em.dst(o, f"b{pb}", f"(({CT[pb]})(v >> {i * pb}))", pb))
            b.written = em.written(parts)
        else:                               # pack: part 0 in the lowest bits
            terms = [f"((uint64_t){em.src(o, f'b{pb}')} << {i * pb})" for i, o in enumerate(parts)]
            b.code.append(em.dst(d, t, f"(({CT[width]})({' | '.join(terms)}))", width))
            b.written = em.written([d])
    else:
        w = bits_of(t)
        b.code.append(em.dst(d, t, em.src(a, t), w))
        b.written = em.written([d])
    b.code = _loop(b.code)
    return b


def _cvta(em, ins) -> Body:
    t = ins.types[0]
    bits = bits_of(t)
    mods = [m for m in ins.mods if m != "to"]
    space = mods[0].split("::")[0] if mods else "global"
    delta = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
    sign = "-" if "to" in ins.mods else "+"
    v = f"(((uint64_t){em.src(ins.operands[1], t)} {sign} {literal(delta, 64)}) & {literal((1 << bits) - 1, 64)})"
    return Body(code=_loop([em.dst(ins.operands[0], t, f"(({CT[bits]}){v})", bits)]), written=em.written(ins.operands[:1]))


def _isspacep(em, ins) -> Body:
    space = ins.mods[0].split("::")[0]
    a = "a"
    sh = f"({a} >= {SHARED_WINDOW}ull && {a} < {SHARED_WINDOW + WINDOW_BYTES}ull)"
    lo = f"({a} >= {LOCAL_WINDOW}ull && {a} < {LOCAL_WINDOW + WINDOW_BYTES}ull)"
    r = {"shared": sh, "local": lo, "global": f"(!{sh} && !{lo})", "const": f"(!{sh} && !{lo})", "param": "0"}[space]
    code = [f"const uint64_t a = {em.src(ins.operands[1], 'u64')};", em.dst(ins.operands[0], "pred", f"((uint8_t){r})", 1)]
    return Body(code=_loop(code), written=em.written(ins.operands[:1]))


def _createpolicy(em, ins) -> Body:
    return Body(code=_loop([em.dst(ins.operands[0], "b64", "((uint64_t)0)", 64)]), written=em.written(ins.operands[:1]))


def _noop(em, ins) -> Body:
    return Body()


def _nanosleep(em, ins) -> Body:
    return Body(code=_loop(["S->yielding[t >> 5] = 1;"]))


def _trap(em, ins) -> Body:
    return Body(code=["if (na) { S->err_ins = D->idx; S->err_thread = act[0]; return E_TRAP; }"])


# ----------------------------------------------------------------------------------------------
# control flow

def _jump(em, ins, target_of) -> Body:
    """An opcode declared a jump (refsim.ptx.dispatch ``Entry.jump``, e.g. bra): pc = its target."""
    target = target_of(ins)
    if target is None:
        raise Refuse("indirect branch")
    return Body(code=_loop([f"S->pc[t] = (int32_t){em.k(target)};"]), kind="branch")


# ----------------------------------------------------------------------------------------------
# memory

def _mem_decl(em, space: str, esize: int, vec: int, spin: bool, aop: int = 0, atype: int = 0, noftz: int = 0) -> str:
    """The instruction's rt_mem (a row of the kernel's MEMS table); returns the C pointer to it."""
    slot = em.ctx.new_spin() if spin else -1
    em.ctx.mems.append(f"{{{em.idx}, {_SP_C[space]}, {esize}, {vec}, {slot}, {aop}, {atype}, {noftz}}}")
    return f"(&MEMS[{em.k(len(em.ctx.mems) - 1)}])"


def _access(em, ins, data: int, role: str):
    space = state_space(ins)
    vec = vector_width(ins)
    t = ins.types[0]
    esize = max(1, bits_of(t) // 8)
    ops = flatten([ins.operands[data]])
    if len(ops) != vec:
        raise Refuse(f"{vec} {role} expected")
    return space, t, esize, vec, ops


def _ld(em, ins) -> Body:
    space, t, esize, vec, dsts = _access(em, ins, 0, "destinations")
    eb = esize * 8
    addr_op = ins.operands[1]
    b = Body(written=em.written(dsts))
    base = addr_op[1] if addr_op[0] == "addr" else None
    if space == "param" and (base is None or base[0] == "sym"):     # constant: read once
        off = addr_op[2] + (0 if base is None else em.param_offset(base[1]))
        lines = [f"{CT[eb]} p{j}; memcpy(&p{j}, S->param + {em.k(off + j * esize)}, {esize});" for j in range(vec)]
        b.code = lines + _loop([em.dst(o, t, f"p{j}", eb) for j, o in enumerate(dsts)])
        return b
    spin = any(m in ("volatile", "acquire", "relaxed") for m in ins.mods)
    m = _mem_decl(em, space, esize, vec, spin)
    nb = esize * vec
    b.code = ["uint64_t *ad = S->u64a; uint8_t *out = (uint8_t *)S->u32a;"]
    b.code += _loop([f"ad[i] = {em.address(addr_op, space)};"])
    b.code.append(f"if ((r = S->api->ld(S, {m}, act, na, ad, out))) return r;")
    per = []
    for j, o in enumerate(dsts):
        per.append(f"{{ {CT[eb]} v; memcpy(&v, out + (int64_t)i * {nb} + {j * esize}, {esize}); {em.dst(o, t, 'v', eb)} }}")
    b.code += _loop(per)
    return b


def _st(em, ins) -> Body:
    space, t, esize, vec, srcs = _access(em, ins, 1, "sources")
    if space == "param":
        raise Refuse("st.param")
    eb = esize * 8
    nb = esize * vec
    m = _mem_decl(em, space, esize, vec, False)
    b = Body(code=["uint64_t *ad = S->u64a; uint8_t *val = (uint8_t *)S->u32a;"])
    per = [f"ad[i] = {em.address(ins.operands[0], space)};"]
    for j, o in enumerate(srcs):
        per.append(f"{{ {CT[eb]} v = ({CT[eb]}){em.src(o, t)}; memcpy(val + (int64_t)i * {nb} + {j * esize}, &v, {esize}); }}")
    b.code += _loop(per)
    b.code.append(f"if ((r = S->api->st(S, {m}, act, na, ad, val))) return r;")
    return b


def _atom(em, ins) -> Body:
    returns = ins.opcode == "atom"
    space = state_space(ins)
    t = ins.types[0]
    ops = [m for m in ins.mods if m in _AOPS]
    if len(ops) != 1 or vector_width(ins) != 1:
        raise Refuse("atomic operation")
    aop = ops[0]
    if t not in _ATYPE or (t in ("f16", "f16x2") and "noftz" not in ins.mods):
        raise Refuse(f"atomic on .{t} is not compiled")
    esize = bits_of(t) // 8
    flat = flatten(ins.operands)
    dst, rest = (flat[0], flat[1:]) if returns else (None, flat)
    spin = aop in ("cas", "exch") or any(m in ("acquire", "acq_rel", "relaxed") for m in ins.mods) and returns
    m = _mem_decl(em, space, esize, 1, spin, _AOPS.index(aop), _ATYPE[t], int("noftz" in ins.mods))
    w = bits_of(t)
    per = [f"ad[i] = {em.address(rest[0], space)};", f"bv[i] = (uint64_t){em.src(rest[1], t)};"]
    if len(rest) > 2:
        per.append(f"cv[i] = (uint64_t){em.src(rest[2], t)};")
    b = Body(code=["uint64_t *ad = S->u64a, *bv = S->u64b, *cv = S->u64c, *old = S->u64d;"] + _loop(per))
    b.code.append(f"if ((r = S->api->atom(S, {m}, act, na, ad, bv, {'cv' if len(rest) > 2 else 'NULL'}, old))) return r;")
    if dst is not None:
        b.code += _loop([em.dst(dst, t, f"(({CT[w]})old[i])", w)])
        b.written = em.written([dst])
    return b


def _cp(em, ins) -> Body:
    mods = ins.mods
    if not mods or mods[0] != "async" or "bulk" in mods or "mbarrier" in mods:
        raise Refuse(f"{ins.name} is not compiled")
    ops = list(ins.operands)
    if any(m.startswith("L2::cache_hint") for m in mods):
        ops = ops[:-1]
    if ops[2][0] != "imm" or ops[2][1] not in (4, 8, 16):
        raise Refuse("cp-size")
    size = int(ops[2][1])
    m = _mem_decl(em, "shared", 1, 1, False)
    per = [f"dst[i] = {em.address(ops[0], 'shared')};", f"src[i] = {em.address(ops[1], 'global')};"]
    ss = "NULL"
    if len(ops) > 3:
        o = ops[3]
        ss = "ss"
        if o[0] == "reg" and em.reg_bits(o[1]) == 1:
            per.append(f"ss[i] = {em.src(o, 'pred')} ? 0 : {size};")
        else:
            per.append(f"ss[i] = (int64_t){em.src(o, 'u32')};")
    code = ["uint64_t *dst = S->u64a, *src = S->u64b; int64_t *ss = (int64_t *)S->u64c; (void)ss;"] + _loop(per)
    code.append(f"if (na && (r = S->api->cp_async(S, {m}, act, na, dst, src, {ss}, {size}))) return r;")
    return Body(code=code)


# ----------------------------------------------------------------------------------------------
# warp-wide

def _warp_loop(inner: list[str]) -> list[str]:
    """Loop over the warps of act: w, the mask am of its active lanes, b0 = its first thread."""
    return ["for (int32_t i = 0; i < na;) {",
            "    const int32_t w = act[i] >> 5, b0 = w * 32; uint32_t am = 0;",
            "    while (i < na && (act[i] >> 5) == w) { am |= 1u << (act[i] & 31); i++; }",
            *["    " + ln for ln in inner], "}"]


def _member(em, ins, code: list[str]) -> None:
    if "sync" in ins.mods:
        code += ["for (int l = 0; l < 32; l++) {", "    const int32_t t = b0 + l;",
                 f"    if (!(({em.src(ins.operands[-1], 'b32')} >> l) & 1u)) am &= ~(1u << l);", "}"]


def _shfl(em, ins, h) -> Body:
    mode = next(m for m in ins.mods if m in ("up", "down", "bfly", "idx"))
    body_ops = ins.operands[:-1] if "sync" in ins.mods else ins.operands
    flat = flatten(body_ops)
    ndst = len(flat) - 3
    dsts, (a, bo, co) = flat[:ndst], flat[ndst:]
    inner: list[str] = []
    _member(em, ins, inner)
    inner += ["uint32_t av[32];", "for (int l = 0; l < 32; l++) { const int32_t t = b0 + l; av[l] = "
              f"{em.src(a, 'b32')}; }}"]
    jp = {"up": ("lane - bval", "j >= max_lane"), "down": ("lane + bval", "j <= max_lane"),
          "bfly": ("lane ^ bval", "j <= max_lane"), "idx": ("min_lane | (bval & ~mask & 31)", "j <= max_lane")}[mode]
    lane_code = [f"const int32_t bval = (int32_t)({em.src(bo, 'b32')} & 31u), cv = (int32_t){em.src(co, 'b32')};",
                 "const int32_t cval = cv & 31, mask = (cv >> 8) & 31, lane = l;",
                 "const int32_t max_lane = (lane & mask) | (cval & ~mask & 31), min_lane = lane & mask;",
                 "(void)max_lane; (void)min_lane;",
                 f"int32_t j = {jp[0]}; const uint8_t p = (uint8_t)({jp[1]}); if (!p) j = lane;",
                 em.dst(dsts[0], "b32", "av[j]", 32)]
    if len(dsts) > 1:
        lane_code.append(em.dst(dsts[1], "pred", "p", 1))
    inner += ["for (int l = 0; l < 32; l++) {", "    if (!((am >> l) & 1u)) continue;",
              "    const int32_t t = b0 + l;", *["    " + c for c in lane_code if c]]
    inner += _init_lanes(em, em.written(dsts))
    inner.append("}")
    return Body(code=_warp_loop(inner), checks="warps", inits="none", written=[])


def _init_lanes(em, slots) -> list[str]:
    """poison init marks of the lanes the warp instruction wrote (inside the lane loop)."""
    if not slots:
        return []
    return ["    if (S->poison) { " + " ".join(f"S->reg_init[{s}][t] = 1;" for s in slots) + " }"]


def _vote(em, ins, h) -> Body:
    mode = next(m for m in ins.mods if m in ("all", "any", "uni", "ballot"))
    body_ops = ins.operands[:-1] if "sync" in ins.mods else ins.operands
    d, a = flatten(body_ops)
    inner: list[str] = []
    _member(em, ins, inner)
    inner += ["uint32_t ballot = 0, allv = 1, anyv = 0;",
              "for (int l = 0; l < 32; l++) {", "    const int32_t t = b0 + l;",
              f"    const uint32_t v = {em.src(a, 'pred')}, on = (am >> l) & 1u;",
              "    ballot |= (v & on) << l; allv &= v | !on; anyv |= v & on;", "}"]
    val = {"ballot": ("ballot", "b32", 32), "all": ("(uint8_t)allv", "pred", 1), "any": ("(uint8_t)anyv", "pred", 1),
           "uni": ("(uint8_t)(allv | !anyv)", "pred", 1)}[mode]
    inner += ["for (int l = 0; l < 32; l++) {", "    if (!((am >> l) & 1u)) continue;", "    const int32_t t = b0 + l;",
              "    " + em.dst(d, val[1], val[0], val[2])]
    inner += _init_lanes(em, em.written([d]))
    inner.append("}")
    return Body(code=_warp_loop(inner), checks="warps", inits="none")


def _ldmatrix(em, ins) -> Body:
    num = next(int(m[1:]) for m in ins.mods if m in ("x1", "x2", "x4"))
    trans = int("trans" in ins.mods)
    dsts = flatten([ins.operands[0]])
    space = "shared" if state_space(ins) == "shared" else "generic"
    m = _mem_decl(em, space, 2, 8, False)
    rows = 8 * num
    code = ["if ((r = S->api->partial_warp(S, E_PARTIAL_LDMATRIX, D->idx, act, na))) return r;",
            "uint64_t *ad = S->u64a; uint32_t *out = S->u32a;"]
    addr = em.address(ins.operands[1], space)
    checks = [f"if (!S->reg_init[{em.slot(s)}][t]) {{ S->err_ins = D->idx; S->err_aux = {em.slot(s)}; S->err_thread = t; "
              f"return E_UNINIT_REG; }}" for s in dict.fromkeys(em.reads)]
    loop = ["for (int32_t w = 0; w < na / 32; w++)", f"    for (int32_t l = 0; l < {rows}; l++) {{",
            "        const int32_t t = act[w * 32 + l];"]
    if checks:
        code += [*loop, "        if (S->poison) {", *["            " + c for c in checks], "        }", "    }"]
    code += [*loop, f"        ad[w * {rows} + l] = {addr};", "    }"]
    code.append(f"if ((r = S->api->ldmatrix(S, {m}, {num}, {trans}, act, na, ad, out))) return r;")
    code += _loop([em.dst(o, "b32", f"out[(int64_t)i * {num} + {j}]", 32) for j, o in enumerate(dsts)])
    return Body(code=code, checks="none", written=em.written(dsts))


def _mma(em, ins, h) -> Body:
    from refsim.ptx.semantics import warp as sw

    if any(m.startswith("kind::") for m in ins.mods):      # sm_120a's kinds: the handler runs the step
        return _handler_step(em, ins, h)
    groups = [flatten([o]) for o in ins.operands]
    if len(groups) != 4:
        raise Refuse("mma operands")
    dtype, atype, btype, ctype = ins.types
    ints = ("s8", "u8", "s4", "u4")
    if not ((atype, btype) == ("f16", "f16") or (atype in ints and btype in ints)):
        return _handler_step(em, ins, h)      # bf16 / tf32 / fp8 models: the handler runs the step
    shape = next(m for m in ins.mods if m.startswith("m") and m[1:].replace("n", "").replace("k", "").isdigit())
    la, lb, lc = sw.mma_fragments(shape, atype)
    M, K = la.shape
    N = lb.shape[1]
    kind = 0 if atype == "f16" else 1
    na, nb, nc, nd = (len(g) for g in (groups[1], groups[2], groups[3], groups[0]))
    abits = 16 if kind == 0 else (4 if atype in ("s4", "u4") else 8)
    c_pr = 1 if ctype in ("f32", "s32") else 2
    d_pr = 1 if dtype in ("f32", "s32") else 2
    if la.elements_per_lane != na * (32 // abits) or lb.elements_per_lane != nb * (32 // abits) \
            or lc.elements_per_lane != nc * c_pr or lc.elements_per_lane != nd * d_pr:
        raise Refuse("mma fragment shape")
    coords = [em.ctx.coords(lay.coords[..., 0] * lay.shape[1] + lay.coords[..., 1]) for lay in (la, lb, lc)]
    name = em.ctx.static(
        "rt_mma", f"{{0, {kind}, {M}, {N}, {K}, {na}, {nb}, {nc}, {nd}, "
        f"{32 // abits}, {32 // abits}, {c_pr}, {d_pr}, {abits}, {abits}, {int(atype.startswith('s'))}, "
        f"{int(btype.startswith('s'))}, {int('satfinite' in ins.mods)}, {int(ctype == 'f32')}, {int(dtype == 'f32')}, "
        f"0, 0, 0, 0, {coords[0]}, {coords[1]}, {coords[2]}}}")
    code = ["if ((r = S->api->partial_warp(S, E_PARTIAL_MMA, D->idx, act, na))) return r;",
            f"uint32_t *A = S->u32a, *B = A + (int64_t)na * {na}, *C = B + (int64_t)na * {nb}, *O = C + (int64_t)na * {nc};"]
    per = []
    for arr, g, cnt in (("A", groups[1], na), ("B", groups[2], nb), ("C", groups[3], nc)):
        for j, o in enumerate(g):
            per.append(f"{arr}[(int64_t)i * {cnt} + {j}] = {em.src(o, 'b32')};")
    code += _loop(per)
    code.append(f"if ((r = S->api->mma(S, &{name}, act, na, A, B, C, O))) return r;")
    code += _loop([em.dst(o, "b32", f"O[(int64_t)i * {nd} + {j}]", 32) for j, o in enumerate(groups[0])])
    return Body(code=code, checks="warps", written=em.written(groups[0]))


#: engine-owned opcodes whose one definition, the interpreter's Python, the compiled executor runs over a
#: LaunchView for the step (CompiledLaunch._engine_step): the barriers (refsim/ptx/barriers.py: arrivals,
#: release, bar.red) and thread exit (Launch.exit_threads: exit, cp.async landing, barrier release,
#: block refill through the runtime's refsim_rt_land_async / refsim_rt_start_block)
PYTHON_DEFINED = frozenset({"bar", "barrier", "ret", "exit"})
#: cp.async's group bookkeeping (refsim.ptx.memory_ops.cp: commit_group, wait_group, wait_all) runs the
#: same way; the copy itself (cp.async.ca/cg) keeps its C body
CP_GROUP_FORMS = ("commit_group", "wait_group", "wait_all")


def python_defined(ins) -> bool:
    """True when the compiled executor runs the interpreter's definition of ``ins`` (see PYTHON_DEFINED)."""
    return ins.opcode in PYTHON_DEFINED or (ins.opcode == "cp" and any(m in ins.mods for m in CP_GROUP_FORMS))

_ENGINE = {
    "mov": _mov, "cvta": _cvta, "isspacep": _isspacep, "createpolicy": _createpolicy,
    **{name: _noop for name in _NOOPS}, "nanosleep": _nanosleep, "trap": _trap, "brkpt": _trap,
    "ld": _ld, "ldu": _ld, "st": _st,
    "atom": _atom, "red": _atom, "cp": _cp,
}

#: the warp-wide handlers with a C body of their own (redux and the rest run their handler's Python)
_WARP = {"mma": _mma, "shfl": _shfl, "vote": _vote}
