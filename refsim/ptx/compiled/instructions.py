"""C bodies of one static instruction: the engine-owned opcodes, the ALU handlers, the warp-wide ones.

Spec
----
a body          C statements run for the step's active threads ``act[0..na)`` (the guard applied),
                in the interpreter's order: operand reads (their poison checks are emitted by
                :mod:`refsim.ptx.compiled.translate` from :attr:`Body.checks`), then the work, then
                the destinations. ``Body.kind`` says how the PC moves: ``"advance"`` (every thread of
                the step to p + 1) or ``"branch"`` (the body moves the active threads; the others
                go to p + 1), as ``Launch._guarded``.
what compiles   every opcode refsim/cuda's kernels and tests/ptx/kernels use, and more: the opcodes
                refsim.ptx.control defines as data (:data:`DERIVED`: its FORMS mov, cvta, isspacep,
                createpolicy, each Result's expression emitted as C; its EFFECTS fence, membar,
                prefetch, ..., nanosleep, trap/brkpt, each Effect's C below), jumps (bra, from its
                ``Entry.jump`` declaration), ld/ldu, st, atom/red (every form of
                refsim.ptx.semantics.atomic with a C twin: its ``c_apply`` becomes the kernel's
                ``atom_apply_<k>``), cp.async's copy, ldmatrix, shfl.sync, vote.sync, the ALU handlers
                (:mod:`refsim.ptx.compiled.alu`), and mma through its declared compiled twins
                (:data:`TWINS`: the finite steps of ``m16n8k16.f32.f16.f16.f32`` through emulators.c's
                ``refsim_mma_k16_f32``, the integer forms through ``refsim_mma_int``).
                shfl.sync, vote.sync and ldmatrix hold no rule of their own (:data:`WARP_DERIVED`):
                their C is derived from refsim.ptx.semantics.warp (SHFL, VOTE, ldmatrix_row_lanes) and
                refsim.arith.fragments.ldmatrix_layout.
refused         (``Refuse``: the kernel runs on the interpreter) 128-bit accesses, bf16/f64 float
                atomics; ALU forms :mod:`alu` does not compile, and warp-wide handlers without a C
                body (redux, every other mma step: non-finite operands, f16 accumulation, k8,
                bf16/tf32/fp8), run their handler through Python for that step
                (``Body.callback``); so do the engine-level Python definitions of refsim.ptx.hopper
                (mbarrier, cp.async.bulk*, tensormap, elect, fence.proxy.async) and the engine's
                :data:`PYTHON_DEFINED` (bar/barrier, ret/exit, cp.async's commit/wait groups), built once per launch over a
                refsim.ptx.compiled.view.LaunchView (CompiledLaunch._engine_step).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

from refsim.ptx import control, memory_ops
from refsim.ptx.compiled.alu import alu
from refsim.ptx.compiled.operands import CT, Refuse, bits_of
from refsim.ptx.control import Effect
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.memory_ops import state_space
from refsim.ptx.operands import flatten
from refsim.ptx.semantics import expr
from refsim.ptx.semantics import warp as sw

__all__ = ["Body", "PYTHON_DEFINED", "CP_GROUP_FORMS", "python_defined", "emit_body", "split_operands", "DERIVED",
           "WARP_DERIVED", "TWINS"]

_SP_C = {"generic": "SP_GENERIC", "global": "SP_GLOBAL", "shared": "SP_SHARED", "local": "SP_LOCAL",
         "param": "SP_PARAM", "const": "SP_CONST"}


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
        return WARP_DERIVED[op](em, ins, handler)
    derived = DERIVED.get(op)
    if derived is not None:
        return derived(em, ins)
    if handler is not None:
        if handler.kind == "warp":
            twin = TWINS.get(op)
            return (twin[0] if twin else WARP_DERIVED.get(op, _handler_step))(em, ins, handler)
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
# the opcodes refsim.ptx.control defines as data

def _form(em, ins) -> Body:
    """An opcode of refsim.ptx.control.FORMS: each source read into ``s<j>``, then each Result's expression
    (refsim.ptx.semantics.expr.c / c_pred over them) stored, for every active thread."""
    try:
        form = control.FORMS[ins.opcode](ins, ins.name)
    except PtxUnsupportedError as e:
        raise Refuse(str(e)) from None
    code = [f"const {CT[bits_of(t)]} s{j} = {em.src(o, t)};" for j, (o, t) in enumerate(form.sources)]
    names = [f"s{j}" for j in range(len(form.sources))]
    for r in form.results:
        if r.copies is not None:
            value = names[r.copies]
        elif r.ptx_type == "pred":
            value = expr.c_pred(r.expr, r.width, names)
        else:
            value = expr.c(r.expr, r.width, names, r.out)
        code.append(em.dst(r.operand, r.ptx_type, value, r.out))
    return Body(code=_loop(code), written=em.written([r.operand for r in form.results]))


#: the C of each refsim.ptx.control.Effect
_EFFECT_C = {
    Effect.NONE: [],
    Effect.YIELD: _loop(["S->yielding[t >> 5] = 1;"]),
    Effect.TRAP: ["if (na) { S->err_ins = D->idx; S->err_thread = act[0]; return E_TRAP; }"],
}


def _effect(em, ins) -> Body:
    """An opcode of refsim.ptx.control.EFFECTS: the C of its Effect."""
    return Body(code=list(_EFFECT_C[control.EFFECTS[ins.opcode]]))


#: The engine-owned opcodes whose C is derived from refsim.ptx.control's one definition (no C of their own)
DERIVED = {**{op: _form for op in control.FORMS}, **{op: _effect for op in control.EFFECTS}}


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

def _mem_decl(em, space: str, esize: int, vec: int, spin: bool, apply: str = "0", ordered: bool = False) -> str:
    """The instruction's rt_mem (a row of the kernel's MEMS table); returns the C pointer to it."""
    slot = em.ctx.new_spin() if spin else -1
    em.ctx.mems.append(f"{{{em.idx}, {_SP_C[space]}, {esize}, {vec}, {slot}, {int(ordered)}, {apply}}}")
    return f"(&MEMS[{em.k(len(em.ctx.mems) - 1)}])"


def _access(ins) -> memory_ops.Access:
    """memory_ops.form (the one decode of a memory instruction), a refusal as Refuse."""
    try:
        return memory_ops.form(ins)
    except PtxUnsupportedError as e:
        raise Refuse(str(e)) from None


def _ld(em, ins) -> Body:
    f = _access(ins)
    space, t, esize, vec, dsts = f.space, f.type, f.esize, f.vec, f.data
    eb = esize * 8
    addr_op = f.addr
    b = Body(written=em.written(dsts))
    base = addr_op[1] if addr_op[0] == "addr" else None
    if space == "param" and (base is None or base[0] == "sym"):     # constant: read once
        off = addr_op[2] + (0 if base is None else em.param_offset(base[1]))
        lines = [f"{CT[eb]} p{j}; memcpy(&p{j}, S->param + {em.k(off + j * esize)}, {esize});" for j in range(vec)]
        b.code = lines + _loop([em.dst(o, t, f"p{j}", eb) for j, o in enumerate(dsts)])
        return b
    m = _mem_decl(em, space, esize, vec, f.spin)
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
    f = _access(ins)
    space, t, esize, vec, srcs = f.space, f.type, f.esize, f.vec, f.data
    if space == "param":
        raise Refuse("st.param")
    eb = esize * 8
    nb = esize * vec
    m = _mem_decl(em, space, esize, vec, False)
    b = Body(code=["uint64_t *ad = S->u64a; uint8_t *val = (uint8_t *)S->u32a;"])
    per = [f"ad[i] = {em.address(f.addr, space)};"]
    for j, o in enumerate(srcs):
        per.append(f"{{ {CT[eb]} v = ({CT[eb]}){em.src(o, t)}; memcpy(val + (int64_t)i * {nb} + {j * esize}, &v, {esize}); }}")
    b.code += _loop(per)
    b.code.append(f"if ((r = S->api->st(S, {m}, act, na, ad, val))) return r;")
    return b


def _atom(em, ins) -> Body:
    from refsim.ptx.semantics import atomic

    f = _access(ins)
    expr = atomic.c_apply(f.op, f.type, f.noftz)        # the arithmetic: generated from its one definition
    if expr is None:
        raise Refuse(f"atomic on .{f.type} is not compiled")
    fn = em.ctx.function("uint64_t", "uint64_t o, uint64_t b, uint64_t c, int32_t shared",
                         f"(void)b; (void)c; (void)shared; return {expr};")
    m = _mem_decl(em, f.space, f.esize, 1, f.spin, f"&{fn}", f.ordered)
    w = f.esize * 8
    per = [f"ad[i] = {em.address(f.addr, f.space)};", f"bv[i] = (uint64_t){em.src(f.data[0], f.type)};"]
    if len(f.data) > 1:
        per.append(f"cv[i] = (uint64_t){em.src(f.data[1], f.type)};")
    b = Body(code=["uint64_t *ad = S->u64a, *bv = S->u64b, *cv = S->u64c, *old = S->u64d;"] + _loop(per))
    b.code.append(f"if ((r = S->api->atom(S, {m}, act, na, ad, bv, {'cv' if len(f.data) > 1 else 'NULL'}, old))) return r;")
    if f.result is not None:
        b.code += _loop([em.dst(f.result, f.type, f"(({CT[w]})old[i])", w)])
        b.written = em.written([f.result])
    return b


def _cp(em, ins) -> Body:
    mods = ins.mods
    if not mods or mods[0] != "async" or "bulk" in mods or "mbarrier" in mods:
        raise Refuse(f"{ins.name} is not compiled")
    f = _access(ins)
    size = f.esize
    m = _mem_decl(em, "shared", 1, 1, False)
    per = [f"dst[i] = {em.address(f.addr, 'shared')};", f"src[i] = {em.address(f.data[0], 'global')};"]
    ss = "NULL"
    if len(f.data) > 1:
        o = f.data[1]
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
    """shfl.sync: the source lane and in-range flag are the C of refsim.ptx.semantics.warp.SHFL's expressions."""
    mode = next(m for m in ins.mods if m in ("up", "down", "bfly", "idx"))
    body_ops = ins.operands[:-1] if "sync" in ins.mods else ins.operands
    flat = flatten(body_ops)
    ndst = len(flat) - 3
    dsts, (a, bo, co) = flat[:ndst], flat[ndst:]
    inner: list[str] = []
    _member(em, ins, inner)
    inner += ["uint32_t av[32];", "for (int l = 0; l < 32; l++) { const int32_t t = b0 + l; av[l] = "
              f"{em.src(a, 'b32')}; }}"]
    j, p = sw.SHFL[mode]                                   # the one rule: expressions of (b, c, lane)
    names = ["bv", "cv", "l"]
    lane_code = [f"const uint32_t bv = {em.src(bo, 'b32')}, cv = {em.src(co, 'b32')};",
                 f"const uint8_t p = {expr.c_pred(p, 32, names)}; (void)p;",
                 f"const uint32_t j = {expr.c(j, 32, names)};",
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
    """vote.sync: each lane's result is the C of refsim.ptx.semantics.warp.VOTE's expression of the ballot."""
    mode = next(m for m in ins.mods if m in ("all", "any", "uni", "ballot"))
    body_ops = ins.operands[:-1] if "sync" in ins.mods else ins.operands
    d, a = flatten(body_ops)
    inner: list[str] = []
    _member(em, ins, inner)
    inner += ["uint32_t ballot = 0;",
              "for (int l = 0; l < 32; l++) {", "    const int32_t t = b0 + l;",
              f"    ballot |= ((uint32_t){em.src(a, 'pred')} & (am >> l) & 1u) << l;", "}"]
    e = sw.VOTE[mode]                                       # the one rule: an expression of (ballot, am)
    val = (expr.c(e, 32, ["ballot", "am"]), "b32", 32) if mode == "ballot" else \
        (expr.c_pred(e, 32, ["ballot", "am"]), "pred", 1)
    inner += ["for (int l = 0; l < 32; l++) {", "    if (!((am >> l) & 1u)) continue;", "    const int32_t t = b0 + l;",
              "    " + em.dst(d, val[1], val[0], val[2])]
    inner += _init_lanes(em, em.written([d]))
    inner.append("}")
    return Body(code=_warp_loop(inner), checks="warps", inits="none")


def _ldmatrix(em, ins, h) -> Body:
    """ldmatrix: the rows' addresses (lanes in the order of warp.ldmatrix_row_lanes) and the register layout
    (refsim.arith.fragments.ldmatrix_layout) go to rt_ldmatrix as tables emitted from those definitions."""
    from refsim.arith import fragments

    num = next(int(m[1:]) for m in ins.mods if m in ("x1", "x2", "x4"))
    lay = fragments.ldmatrix_layout(num, "trans" in ins.mods)                     # (32, num, 2, 3)
    rl = em.ctx.coords(sw.ldmatrix_row_lanes(num))
    flat = em.ctx.coords(lay[..., 0] * 64 + lay[..., 1] * 8 + lay[..., 2])
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
            f"        const int32_t t = act[w * 32 + {rl}[l]];"]
    if checks:
        code += [*loop, "        if (S->poison) {", *["            " + c for c in checks], "        }", "    }"]
    code += [*loop, f"        ad[w * {rows} + l] = {addr};", "    }"]
    code.append(f"if ((r = S->api->ldmatrix(S, {m}, {num}, {rl}, {flat}, act, na, ad, out))) return r;")
    code += _loop([em.dst(o, "b32", f"out[(int64_t)i * {num} + {j}]", 32) for j, o in enumerate(dsts)])
    return Body(code=code, checks="none", written=em.written(dsts))


#: the f16 mma form with a C fast path (its finite steps: TWINS' first entry)
_MMA_TWIN_FORM = (("sync", "aligned", "m16n8k16", "row", "col"), ("f32", "f16", "f16", "f32"))
_MMA_INTS = ("s8", "u8", "s4", "u4")


def _mma_kind(ins):
    """(runtime kind, shape, element type of A, element bits, A signed, B signed, satfinite) of an mma
    form that a declared twin computes (the handler has checked the form), or None."""
    if (ins.mods, ins.types) == _MMA_TWIN_FORM:
        return "RT_MMA_F16_F32", "m16n8k16", "f16", 16, 0, 0, 0
    dtype, atype, btype, ctype = ins.types if len(ins.types) == 4 else (None,) * 4
    if atype in _MMA_INTS and btype in _MMA_INTS and not any(m.startswith("kind::") for m in ins.mods):
        shape = next(m for m in ins.mods if m.startswith("m16n8k"))
        return ("RT_MMA_INT", shape, atype, 4 if atype in ("s4", "u4") else 8, int(atype[0] == "s"),
                int(btype[0] == "s"), int("satfinite" in ins.mods))
    return None


@functools.lru_cache(maxsize=None)
def _mma_layout(shape: str, atype: str):
    """((M, N, K), registers per lane of A, B, C, D, (A, B, C/D) flat index row * cols + col of each lane's
    elements) from :func:`refsim.ptx.semantics.warp.mma_fragments` (built once per form: a kernel has many)."""
    la, lb, lc = sw.mma_fragments(shape, atype)
    regs = (la.elements_per_lane // la.per_reg, lb.elements_per_lane // lb.per_reg, lc.elements_per_lane,
            lc.elements_per_lane)
    at = tuple(lay.coords[..., 0] * lay.shape[1] + lay.coords[..., 1] for lay in (la, lb, lc))
    return (la.shape[0], lb.shape[1], la.shape[1]), regs, at


def _mma(em, ins, h) -> Body:
    """mma through its declared compiled twins (see :data:`TWINS`): ``m16n8k16.row.col.f32.f16.f16.f32``'s
    finite steps through emulators.c's ``refsim_mma_k16_f32``, any other step of it (an Inf or NaN among
    A, B, C) through the handler; the integer forms (s8/u8/s4/u4 -> s32, wrap or ``.satfinite``) through
    ``refsim_mma_int``, every step; every other mma form (f16 accumulation, k8, bf16/tf32/fp8, sm_120a's
    kinds) runs its handler for the whole step. The C holds fragment layouts (data from
    :func:`refsim.ptx.semantics.warp.mma_fragments`) and no arithmetic."""
    form = _mma_kind(ins)
    if form is None:
        return _handler_step(em, ins, h)
    kind, shape, atype, bits, a_signed, b_signed, satfinite = form
    groups = [flatten([o]) for o in ins.operands]
    (M, N, K), regs, at = _mma_layout(shape, atype)
    na, nb, nc, nd = (len(g) for g in (groups[1], groups[2], groups[3], groups[0]))
    if (na, nb, nc, nd) != regs:
        raise Refuse("mma fragment shape")
    coords = [em.ctx.coords(x) for x in at]
    name = em.ctx.static("rt_mma", f"{{0, {M}, {N}, {K}, {na}, {nb}, {nc}, {nd}, {coords[0]}, {coords[1]}, "
                                   f"{coords[2]}, {kind}, {bits}, {a_signed}, {b_signed}, {satfinite}}}")
    code = ["if ((r = S->api->partial_warp(S, E_PARTIAL_MMA, D->idx, act, na))) return r;",
            f"uint32_t *A = S->u32a, *B = A + (int64_t)na * {na}, *C = B + (int64_t)na * {nb}, *O = C + (int64_t)na * {nc};"]
    per = []
    for arr, g, cnt in (("A", groups[1], na), ("B", groups[2], nb), ("C", groups[3], nc)):
        for j, o in enumerate(g):
            per.append(f"{arr}[(int64_t)i * {cnt} + {j}] = {em.src(o, 'b32')};")
    code += _loop(per)
    code.append(f"if ((r = S->api->mma(S, &{name}, act, na, A, B, C, O))) return r;   /* RT_CALLBACK: Python runs it */")
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


#: the engine-owned opcodes with C bodies of their own (the memory mechanics)
_ENGINE = {
    "ld": _ld, "ldu": _ld, "st": _st,
    "atom": _atom, "red": _atom, "cp": _cp,
}

#: the warp-wide instructions whose C is derived from their one definition in refsim.ptx.semantics.warp
#: (shfl: SHFL's expressions, vote: VOTE's, ldmatrix: ldmatrix_row_lanes and fragments.ldmatrix_layout as tables)
WARP_DERIVED = {"shfl": _shfl, "vote": _vote, "ldmatrix": _ldmatrix}


class Twin(NamedTuple):
    """One declared compiled twin: the forms it computes, the refsim.arith function it is the twin of,
    its C name in refsim/native/emulators.c, and (the test file, the tests in it that pin the two equal
    bit for bit)."""

    forms: str
    oracle: str
    c_twin: str
    tests: tuple


#: warp-wide opcodes whose C computes nothing itself: it calls a declared compiled twin of a refsim.arith
#: function, tested bit-equal to it, for the steps that twin covers, and hands every other step to the
#: handler. opcode -> (emitter, its twins)
TWINS = {"mma": (_mma, (
    Twin("m16n8k16.row.col.f32.f16.f16.f32, steps with finite A, B, C", "refsim.arith.mma_steps.mma_k16_f32",
         "refsim_mma_k16_f32", ("tests/native/test_emulators.py", ("test_compiled_k16_step_equals_numpy_path",
                                                                   "test_compiled_k16_step_equals_numpy_on_any_finite_bits"))),
    Twin("m16n8k16/k32 s8|u8 and m16n8k32/k64 s4|u4 -> s32, wrap or .satfinite, every step",
         "refsim.arith.integer_mma.mma_int", "refsim_mma_int",
         ("tests/native/test_emulators.py", ("test_compiled_integer_mma_equals_mma_int_on_the_int32_edges",
                                             "test_compiled_integer_mma_equals_mma_int_on_any_bits"))),
))}
