"""One kernel of a parsed PTX module -> C: one function per static instruction, one dispatch table.

Generated code for ``@%p1 add.s32 %r5, %r3, 7;`` (instruction 12, descriptor {12, {g, 5, 3, 7}})::

    static int t_4(rt_state *S, const rt_desc *D, const int32_t *th, int32_t n) {
        uint32_t *const R1 = ...S->reg[D->k[1]], *const R2 = ...S->reg[D->k[2]];
        <guard: act = threads of th whose predicate D->k[0] is set; poison: guard initialised>
        <poison: R2 initialised for every act thread>
        for (i < na) { t = act[i]; const uint32_t s0 = R2[t]; const uint32_t s1 = (uint32_t)D->k[3];
                       const uint32_t v0 = s0 + s1; R1[t] = v0; }
        <poison: R1 marked initialised>;  every thread of th: pc = D->idx + 1
    }

A function is a *template*: every instruction of the same shape (opcode, types, operand kinds and
widths) shares it and differs only in its descriptor row (``DESC[p]``: register slots, immediates,
branch targets, offsets), which keeps the C small and its compile time short.

The C depends on the PTX only (the architecture's tensor-core parameters are launch data), so one
build serves every ``arch``; the build cache (refsim.native.build) keys it by the source text, the
compiler and its flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from refsim.ptx.compiled.instructions import emit_body
from refsim.ptx.compiled.operands import InstructionEmitter, Refuse

__all__ = ["Translation", "translate", "HEADER", "RUNTIME"]

_NATIVE = Path(__file__).resolve().parents[2] / "native"
#: the declarations shared by the runtime and every generated kernel
HEADER = (_NATIVE / "ptx_runtime.h").read_text(encoding="utf-8")
#: the runtime library (threads and barriers, memory, tensor cores, the scheduler) as one unit; built
#: with emulators.c, whose refsim_mma_k16_f32 and refsim_mma_int are the compiled twins mma calls
#: (refsim.ptx.compiled.instructions.TWINS)
RUNTIME = HEADER + "".join((_NATIVE / name).read_text(encoding="utf-8") for name in (
    "emulators.c", "ptx_threads.c", "ptx_memory.c", "ptx_tensor.c", "ptx_runtime.c"))


@dataclass
class Translation:
    """The compiled form of one kernel, or why there is none.

    source: C text (header included) or None; reason: why the kernel is refused (None if compiled);
    symbols: module-scope variables whose launch addresses go to ``S->sym`` in this order; nspin: flag
    loads with a spin check; callbacks: instructions whose handler or definition runs in Python."""

    kernel: str
    source: str | None
    reason: str | None
    symbols: tuple = ()
    nspin: int = 0
    callbacks: frozenset = frozenset()


@dataclass
class _Context:
    k: object
    global_names: set
    statics: dict = field(default_factory=dict)   # C initializer -> name (shared static data)
    mems: list = field(default_factory=list)      # rt_mem rows, one per memory instruction
    functions: dict = field(default_factory=dict)  # C function text -> name (generated helpers, e.g. atomics)
    symbols: list = field(default_factory=list)
    nspin: int = 0
    wgmma_slots: frozenset = frozenset()          # registers a wgmma reads (race: pending accumulators)
    generic_mapa: bool = False                    # generic accesses may reach another CTA (hopper.dsmem)

    def static(self, ctype: str, init: str) -> str:
        """The name of a static const ``ctype`` with this initializer (one per distinct content)."""
        key = f"{ctype} = {init}"
        if key not in self.statics:
            self.statics[key] = f"ST{len(self.statics)}"
        return self.statics[key]

    def function(self, ret: str, params: str, body: str, prefix: str = "atom_apply") -> str:
        """The name of a static C function ``ret name(params) { body }`` (one per distinct text)."""
        key = (ret, params, body)
        if key not in self.functions:
            self.functions[key] = f"{prefix}_{len(self.functions)}"
        return self.functions[key]

    def coords(self, values) -> str:
        return self.static("int16_t []", "{" + ", ".join(str(int(x)) for x in values.reshape(-1)) + "}")

    def symbol_index(self, name: str) -> int:
        if name not in self.symbols:
            self.symbols.append(name)
        return self.symbols.index(name)

    def new_spin(self) -> int:
        self.nspin += 1
        return self.nspin - 1


def translate(kernel, handlers: dict, global_names) -> Translation:
    """C source of ``kernel`` (a parsed :class:`refsim.ptx.parse.Kernel`); ``handlers``: static
    instruction index -> :class:`refsim.ptx.semantics.Handler` (as ``Module._lookup`` returns them);
    ``global_names``: the module-scope ``.global``/``.const`` variables."""
    from refsim.ptx.hopper import dsmem
    from refsim.ptx.hopper.wgmma import operand_slots

    ctx = _Context(kernel, set(global_names), wgmma_slots=frozenset(operand_slots(kernel)),
                   generic_mapa=dsmem.has_generic_mapa(kernel))
    templates: dict[str, str] = {}     # function body -> name
    rows, names, callbacks = [], [], set()
    for idx, ins in enumerate(kernel.instructions):
        try:
            body, consts, cb = _function(ctx, idx, ins, handlers.get(idx))
        except Refuse as e:
            return Translation(kernel.name, None, f"PTX line {ins.line} `{ins.text}`: {e}")
        names.append(templates.setdefault(body, f"t_{len(templates)}"))
        rows.append((idx, consts, ins))
        if cb:
            callbacks.add(idx)
    n = len(kernel.instructions)
    nk = max(1, max(len(c) for _, c, _ in rows))
    funcs = [f"static int {name}(rt_state *S, const rt_desc *D, const int32_t *th, int32_t n) {{\n{body}\n}}"
             for body, name in templates.items()]
    desc = ",\n    ".join(f"{{{idx}, {{{', '.join(f'{c}LL' for c in consts) or '0'}}}}}  /* line {ins.line} */"
                          for idx, consts, ins in rows)
    statics = [f"static const {ct.replace(' []', '')} {name}{'[]' if ct.endswith('[]') else ''} = {init.split(' = ', 1)[1]};"
               for key, name in ctx.statics.items() for ct, init in [(key.split(' = ', 1)[0], key)]]
    source = "\n".join([
        HEADER,
        f"/* refsim.ptx.compiled: kernel {kernel.name}, {n} instructions, {len(templates)} templates */",
        f"typedef struct rt_desc {{ int32_t idx; int64_t k[{nk}]; }} rt_desc;",
        *statics,
        *(f"static {ret} {name}({params}) {{ {body} }}" for (ret, params, body), name in ctx.functions.items()),
        f"static const rt_mem MEMS[{max(1, len(ctx.mems))}] = {{{', '.join(ctx.mems) or '{0}'}}};",
        *funcs,
        f"static const rt_desc DESC[{n}] = {{\n    {desc}\n}};",
        f"static int (*const TABLE[{n}])(rt_state *, const rt_desc *, const int32_t *, int32_t) = {{\n    "
        + ", ".join(names) + "\n};",
        "int refsim_exec(rt_state *S, int32_t p, const int32_t *th, int32_t n) { return TABLE[p](S, &DESC[p], th, n); }",
        "",
    ])
    return Translation(kernel.name, source, None, tuple(ctx.symbols), ctx.nspin, frozenset(callbacks))


def _function(ctx: _Context, idx: int, ins, handler) -> tuple[str, list, bool]:
    """(template body, descriptor constants, runs its handler in Python) of one instruction."""
    em = InstructionEmitter(ctx, idx, ins)
    guard = None
    if ins.guard is not None:
        guard = (em.slot(ins.guard[1]), int(ins.guard[2]))
    body = emit_body(em, ins, handler)
    if body.callback:
        return "    (void)S; (void)D; (void)th; (void)n;\n    return RT_CALLBACK;", [], True
    lines = ["int r = 0; (void)r;", *em.decls.values()]
    if guard is None:
        lines.append("const int32_t *act = th; const int32_t na = n;")
    else:
        g, neg = guard
        lines += [f"const uint8_t *G = (const uint8_t *)S->reg[{g}];",
                  f"if (S->poison) for (int32_t i = 0; i < n; i++) if (!S->reg_init[{g}][th[i]]) "
                  "{ S->err_ins = D->idx; return E_UNINIT_GUARD; }",
                  "int32_t *act_ = S->act, na = 0;",
                  f"for (int32_t i = 0; i < n; i++) if (G[th[i]] != {neg}) act_[na++] = th[i];",
                  "const int32_t *act = act_;"]
    checks = []
    if body.checks != "none" and em.reads:
        fn = "check_init_warps" if body.checks == "warps" else "check_init"
        checks = ["if (S->poison) {", *[f"    if ((r = S->api->{fn}(S, D->idx, {em.slot(s)}, act, na))) return r;"
                                         for s in dict.fromkeys(em.reads)], "}"]
    pending = [s for s in dict.fromkeys(em.reads) if s in ctx.wgmma_slots]
    if pending:          # race: a register of an incomplete wgmma read (refsim.ptx.hopper.wgmma.pending_check)
        checks.append("if (S->wg_pending) {")
        for s in pending:
            x = em.slot(s)
            checks += [f"    for (int32_t i = 0; i < na; i++) if (S->wg_pending[(int64_t)({x}) * S->T + act[i]]) {{",
                       f"        S->err_ins = D->idx; S->err_aux = {x}; S->err_thread = act[i]; return E_RACE_WGMMA; }}"]
        checks.append("}")
    code = list(body.code)
    if body.checks == "warps" and code and code[0].startswith("if ((r = S->api->partial_warp"):
        code = code[:1] + checks + code[1:]     # the full-warp rule comes before the reads
    else:
        code = checks + code
    lines += code
    if body.inits != "none" and body.written:
        lines += ["if (S->poison) {", *[f"    for (int32_t i = 0; i < na; i++) S->reg_init[{s}][act[i]] = 1;"
                                         for s in dict.fromkeys(body.written)], "}"]
    if body.kind == "advance":
        lines.append("for (int32_t i = 0; i < n; i++) S->pc[th[i]] = (int32_t)D->idx + 1;")
    elif ins.guard is not None:
        lines.append("for (int32_t i = 0, j = 0; i < n; i++) { if (j < na && act[j] == th[i]) { j++; continue; } "
                     "S->pc[th[i]] = (int32_t)D->idx + 1; }")
    lines.append("return 0;")
    return "\n".join("    " + ln for ln in lines), em.consts, False
