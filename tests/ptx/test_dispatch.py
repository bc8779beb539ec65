"""The one dispatch table (refsim/ptx/dispatch.py) and the layering of refsim.ptx's modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from refsim import ptx
from refsim.ptx import dispatch, semantics
from refsim.ptx.parse import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
PTX_DIR = Path(ptx.__file__).parent


def test_every_semantics_opcode_and_every_engine_opcode_is_in_the_one_table():
    assert set(semantics.supported_opcodes()) <= set(dispatch.OPCODES)
    engine_owned = {op for op, e in dispatch.OPCODES.items() if not e.handler}
    assert {"ld", "st", "atom", "red", "cp", "bar", "bra", "ret", "exit", "mov", "cvta"} <= engine_owned
    assert not engine_owned & set(semantics.supported_opcodes())
    assert dispatch.OPCODES["ldmatrix"].handler          # address side in the engine, layout in semantics
    assert {op for op, e in dispatch.OPCODES.items() if not e.advances} == {"bra", "ret", "exit", "bar", "barrier",
                                                                                "setmaxnreg"}   # a blocked .inc stays


def test_an_opcode_outside_the_table_is_refused_at_load_naming_the_line():
    text = HEAD + ".visible .entry k()\n{\n.reg .b32 %r<3>;\nfrobnicate.b32 %r1, %r2;\nret;\n}\n"
    k = parse(text).kernels["k"]
    with pytest.raises(ptx.PtxUnsupportedError, match=r"kernel k, PTX line 7, column 1 `frobnicate.b32 %r1, %r2`: "
                                                      r"opcode 'frobnicate' is not an instruction refsim executes"):
        dispatch.load(k, "sm_80")


ROOT = PTX_DIR.parent.parent


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """Every refsim.ptx module or package a file imports, anywhere in the file (lazy imports too);
    a package stands for its ``__init__``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("refsim.ptx"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if _is_module(sub) else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("refsim.ptx"))
    return out


def test_the_modules_of_refsim_ptx_import_without_circles():
    graph = {}
    for f in PTX_DIR.rglob("*.py"):
        name = ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = _imports(f) - {name}
    seen, stack = {}, []

    def visit(n):
        seen[n] = "open"
        stack.append(n)
        for m in graph.get(n, ()):
            if seen.get(m) == "open":
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(m):] + [m]))
            if m not in seen:
                visit(m)
        seen[n] = "done"
        stack.pop()

    for n in sorted(graph):
        if n not in seen:
            visit(n)
    assert "refsim.ptx.engine" in graph and "refsim.ptx.semantics.table" in graph


def test_a_module_load_builds_one_instruction_of_each_form_and_refuses_the_first_bad_one(monkeypatch):
    from refsim.ptx import dispatch
    from refsim.ptx.parse import parse

    head = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n.reg .b32 %r<8>;\n.reg .pred %p<4>;\n"
    # forms: add.s32 reg,reg,imm 1 (x 500, registers differ) | add.s32 reg,reg,imm 2 | the closing exit
    body = "".join(f"add.s32 %r{i % 8}, %r{(i + 1) % 8}, 1;\n" for i in range(500)) + "add.s32 %r1, %r2, 2;\n"
    k = parse(head + body + "}\n").kernels["k"]
    assert dispatch.form(k, k.instructions[0]) == dispatch.form(k, k.instructions[499])
    assert dispatch.form(k, k.instructions[0]) != dispatch.form(k, k.instructions[500])
    built = []
    real = dispatch.build
    monkeypatch.setattr(dispatch, "build", lambda L, i, ins: built.append(i) or real(L, i, ins))
    ptx.Module(head + body + "}\n")
    assert built == [0, 500, 501]
    # a register of another type is another form: the refusal names the first instruction that has it
    bad = "add.s32 %r1, %r2, 1;\nadd.s32 %r1, %p2, 1;\nadd.s32 %r1, %p3, 1;\n"
    m = ptx.Module(head + bad + "}\n")
    assert m.unsupported["k"] == "kernel k, PTX line 9 `add.s32 %r1, %p2, 1`: register %p2 (.pred) used as .s32"


#: Opcodes the compiled executor still restates in C of its own (refsim/ptx/compiled/instructions.py and
#: refsim/native/ptx_*.c) beside the interpreter's definition: the memory mechanics of ld/st/cp, control
#: flow and barriers (the warp-wide opcodes are derived (WARP_DERIVED) or call a declared twin (mma, see
#: test_a_compiled_twin_is_declared_and_the_runtime_holds_no_tensor_core_model); refsim.ptx.control's
#: forms and effects are data (instructions.DERIVED)). Both definitions are held equal by
#: tests/ptx/compiled; this list may only shrink.
TWO_DEFINITIONS = frozenset({
    "cp", "ld", "ldu", "st",
})

#: Engine opcodes with a compiled body whose arithmetic is generated from the one semantics definition
#: (the compiled C keeps only the memory mechanics); test_atomic_arithmetic_is_generated holds them to it.
GENERATED = frozenset({"atom", "red"})

#: Warp-wide opcodes whose compiled C is derived from their one definition in refsim.ptx.semantics.warp
#: (shfl: SHFL's expressions, vote: VOTE's, ldmatrix: ldmatrix_row_lanes and fragments.ldmatrix_layout as
#: tables); test_the_derived_c_of_shfl_vote_ldmatrix_follows_their_one_definition holds them to it.
WARP_DERIVED = frozenset({"ldmatrix", "shfl", "vote"})

#: Engine-owned opcodes whose one definition is the interpreter's Python, which the compiled executor runs
#: over a LaunchView (refsim.ptx.compiled.instructions.PYTHON_DEFINED), and the C functions that once
#: restated them in refsim/native: none of these names may come back.
PYTHON_RUN = {"bar": ("rt_bar", "release_barriers", "reduce_predicates"), "barrier": (),
              "ret": ("rt_exit_threads",), "exit": ()}
#: ... and the same for cp.async's group bookkeeping (commit_group, wait_group, wait_all; the copy keeps its C)
CP_GROUP_RUN = ("rt_cp_wait",)


def test_every_opcode_has_one_definition_site():
    """Each opcode is defined in exactly one place: one semantics family (its handler, and beside it the
    C form the compiled executor emits), refsim.ptx.hopper (one Python definition both executors run),
    or the engine; the compiled executor's own C bodies are exactly TWO_DEFINITIONS, and the engine
    opcodes refsim.ptx.control defines as data (FORMS, EFFECTS) get C derived from that data only."""
    from refsim.ptx import control, hopper
    from refsim.ptx.compiled import alu, instructions
    from refsim.ptx.semantics import table

    for op in dispatch.OPCODES:
        sites = [fam.__name__ for fam in table._FAMILIES if op in fam.BUILDERS]
        sites += ["refsim.ptx.hopper"] if op in hopper.OPCODES else []
        engine = op in dispatch.ENGINE_OPCODES and op not in hopper.OPCODES and not dispatch.OPCODES[op].handler
        sites += ["engine"] if engine else []        # (ldmatrix: the engine moves addresses, warp.py lays out)
        assert len(sites) == 1, (op, sites)
        if op in table.C_TABLE:                       # a C form lives in the family that builds the handler
            home = next(fam for fam in table._FAMILIES if op in fam.BUILDERS)
            assert table.C_TABLE[op] is home.C_FORMS[op], op
    compiled_own = set(instructions._ENGINE)
    assert GENERATED <= compiled_own and compiled_own - GENERATED == TWO_DEFINITIONS
    assert set(instructions.WARP_DERIVED) == WARP_DERIVED and not WARP_DERIVED & compiled_own
    assert not compiled_own & (set(hopper.OPCODES) | set(table.C_TABLE) | set(instructions.TWINS))
    # the derived engine forms: every FORMS / EFFECTS opcode through the one generic emitter of its kind,
    # and no C body of compiled/instructions.py names one of them (a hand-written body would)
    derived = set(control.FORMS) | set(control.EFFECTS)
    assert instructions.DERIVED == {**{op: instructions._form for op in control.FORMS},
                                    **{op: instructions._effect for op in control.EFFECTS}}
    assert not derived & (compiled_own | set(hopper.OPCODES) | set(table.C_TABLE) | set(instructions.WARP_DERIVED))
    assert all(dispatch.OPCODES[op].build in (control.expression_step, control.effect) for op in derived - {"fence"})
    source = Path(instructions.__file__).read_text(encoding="utf-8")
    assert not [op for op in derived if f'"{op}"' in source or f"'{op}'" in source]
    # barriers and exits: the interpreter's Python runs in both executors; no C of theirs in the runtime
    assert set(instructions.PYTHON_DEFINED) == set(PYTHON_RUN) and not compiled_own & set(PYTHON_RUN)
    native = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "refsim" / "native").glob("ptx_*.[ch]"))
    for op, functions in PYTHON_RUN.items():
        assert not [f for f in functions if f + "(" in native], op
        assert f"(*{op})" not in native and f"(*{op}_" not in native, op        # no rt_api entry for it
    # jumps are declared as data (Entry.jump), read by the interpreter's dispatch.jump and the emitter's _jump
    jumps = {op for op, e in dispatch.OPCODES.items() if e.jump is not None}
    assert jumps == {"bra"} and not jumps & compiled_own
    assert all(dispatch.OPCODES[op].build is dispatch.jump for op in jumps)
    assert not [op for op in jumps if f'"{op}"' in source]
    assert instructions.CP_GROUP_FORMS == ("commit_group", "wait_group", "wait_all")
    assert not [f for f in CP_GROUP_RUN if f + "(" in native] and "(*cp_wait)" not in native
    assert "group" not in source.split("def _cp(")[1].split("\ndef ")[0]
    # the ALU emitter holds no opcode of its own: every name it could compile comes from C_TABLE
    source = Path(alu.__file__).read_text(encoding="utf-8")
    assert not [op for op in table.TABLE if f'"{op}"' in source]


def _translated(body: str, regs: str = ".reg .b32 %r<8>; .reg .pred %p<3>;") -> str:
    from refsim.ptx.compiled.translate import translate

    m = ptx.Module(HEAD + ".visible .entry k()\n{\n" + regs + "\n.shared .align 16 .b8 s[1024];\n" + body + "\nret;\n}\n")
    return translate(m._kernel("k"), m._lookup("k", "sm_80"), m._parsed.globals).source


def test_the_derived_c_of_shfl_vote_ldmatrix_follows_their_one_definition(monkeypatch):
    """Change the one definition and both executors change: the C the compiled executor emits for shfl,
    vote and ldmatrix carries the patched rule (a hand-written C body would not), as does the NumPy."""
    import numpy as np

    from refsim.arith import fragments
    from refsim.ptx.semantics import expr, warp

    shfl = "shfl.sync.bfly.b32 %r1|%p1, %r2, %r3, %r4, -1;"
    vote = "vote.sync.uni.pred %p1, %p2, -1;"
    ldm = "mov.u32 %r2, s;\nldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r3, %r4}, [%r2];"
    before = [_translated(t) for t in (shfl, vote, ldm)]
    odd = expr.src(2) ^ 24301                                         # lane ^ 0x5EED: a rule no ISA has
    monkeypatch.setitem(warp.SHFL, "bfly", (odd & 31, expr.compare("==", odd, expr.src(0))))
    monkeypatch.setitem(warp.VOTE, "uni", expr.compare("==", expr.src(1), expr.src(0) ^ 24301))
    lay = fragments.ldmatrix_layout(2, True)[::-1]                      # lanes in reverse order
    monkeypatch.setattr(fragments, "ldmatrix_layout", lambda num, trans=False: lay)
    monkeypatch.setattr(warp, "ldmatrix_row_lanes", lambda num: np.arange(8 * num)[::-1].reshape(num, 8) + 16)
    after = [_translated(t) for t in (shfl, vote, ldm)]
    for b, a in zip(before, after):
        assert b != a
    assert "24301" in after[0] and "24301" not in before[0]
    assert "24301" in after[1] and "24301" not in before[1]
    flat = lay[..., 0] * 64 + lay[..., 1] * 8 + lay[..., 2]
    assert "{" + ", ".join(str(int(x)) for x in flat.reshape(-1)) + "}" in after[2]
    assert "{" + ", ".join(str(x) for x in range(31, 15, -1)) + "}" in after[2]
    # the interpreter's NumPy reads the same objects
    j, p = warp.shfl_sources("bfly", np.uint32(24301 ^ 5), np.uint32(0))
    assert j.tolist() == [(lane ^ 24301) & 31 for lane in range(32)] and p.tolist() == [lane == 5 for lane in range(32)]
    # the runtime keeps no layout of its own: rt_ldmatrix reads the tables
    tensor = (PTX_DIR.parent / "native" / "ptx_tensor.c").read_text(encoding="utf-8")
    rt = tensor[tensor.index("static int rt_ldmatrix("):tensor.index("/* ---- mma: the compiled twins")]
    assert "trans" not in rt and "% 4" not in rt and "/ 4" not in rt and "lay[" in rt and "rl[" in rt


def test_a_compiled_twin_is_declared_and_the_runtime_holds_no_tensor_core_model():
    """mma's C fast paths are emulators.c's declared compiled twins of refsim.arith.mma_steps.mma_k16_f32
    (finite f16 k16 f32 steps) and refsim.arith.integer_mma.mma_int (the integer forms), each pinned
    bit-equal to its oracle by the named tests; the PTX runtime's own C holds no tensor-core model: each
    model parameter a twin takes (the architecture's T-FDPA block, fraction bits and zero exponent;
    the integer ``.satfinite`` rule) is read only as an argument of that twin's call, and the runtime
    calls emulators.c only through the declared twins."""
    import importlib
    import re

    from refsim import native
    from refsim.native import emulators
    from refsim.ptx.compiled import instructions

    assert set(instructions.TWINS) == {"mma"}
    emit, twins = instructions.TWINS["mma"]
    assert emit is instructions._mma
    assert [(t.oracle, t.c_twin) for t in twins] == [("refsim.arith.mma_steps.mma_k16_f32", "refsim_mma_k16_f32"),
                                                     ("refsim.arith.integer_mma.mma_int", "refsim_mma_int")]
    for twin in twins:
        mod, fn = twin.oracle.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(mod), fn)), twin.oracle
        assert f"``{twin.c_twin}``" in importlib.import_module(mod).__doc__     # the oracle declares its twin
        assert twin.c_twin in {sig[0] for sig in emulators.SIGNATURES}         # ... which emulators.c exports
        path, names = twin.tests
        source = (Path(__file__).parents[2] / path).read_text(encoding="utf-8")
        assert names and all(f"def {n}(" in source for n in names), (path, names)
    runtime = Path(native.__file__).parent
    code = [re.sub(r"/\*.*?\*/", "", f.read_text(encoding="utf-8"), flags=re.S) for f in sorted(runtime.glob("ptx_*.c"))]
    lines = [line.strip() for text in code for line in text.splitlines()]               # comments removed
    for param, call in ((r"->tc_\w+", "refsim_mma_k16_f32("), (r"->satfinite\b", "refsim_mma_int(")):
        uses = [line for line in lines if re.search(param, line)]
        assert uses and all(call in line for line in uses), (param, uses)
    called = {m for line in lines for m in re.findall(r"\b(refsim_\w+)\(", line)}
    assert called & {sig[0] for sig in emulators.SIGNATURES} == {t.c_twin for t in twins}
    # the runtime's mma moves register elements into matrices and back: no sum is formed there
    tensor = (runtime / "ptx_tensor.c").read_text(encoding="utf-8")
    mma = re.sub(r"/\*.*?\*/", "", tensor[tensor.index("/* ---- mma: the compiled twins"):], flags=re.S)
    assert "rt_mma_run" in mma and not re.search(r"[-+*]=", mma)
    header = (runtime / "ptx_runtime.h").read_text(encoding="utf-8")
    assert set(re.findall(r"\btc_\w+", header)) == {"tc_L", "tc_F", "tc_ez32"}
    rt_mma = re.sub(r"/\*.*?\*/", "", header[header.index("typedef struct rt_mma {"):header.index("} rt_mma;")], flags=re.S)
    assert re.findall(r"\*?(\w+)[,;]", rt_mma) == ["ins", "M", "N", "K", "na", "nb", "nc", "nd", "a_at", "b_at", "c_at",
                                                   "kind", "bits", "a_signed", "b_signed", "satfinite"]


def test_atomic_arithmetic_is_generated_from_its_one_definition():
    """atom/red (GENERATED): the C each (op, type) runs is ``semantics.atomic.c_apply``'s, emitted into the
    kernel as its rt_mem's ``apply``; the runtime, its header and the compiled emitter name no atomic
    operation or type of their own (a hand-written C arithmetic there fails this test)."""
    import inspect
    import re

    from refsim import native
    from refsim.ptx.compiled import instructions
    from refsim.ptx.compiled.translate import translate
    from refsim.ptx.semantics import atomic

    sources = {p.name: p.read_text(encoding="utf-8") for p in Path(native.__file__).parent.glob("ptx_*.[ch]")}
    words = r"\b(aop|atype|noftz|RT_AOP_\w*|RT_AT_\w*|flush_f32|atom_apply)\b"
    assert {name: re.findall(words, text) for name, text in sources.items() if re.search(words, text)} == {}
    assert "m->apply(o, b, c, a->kind == SP_SHARED)" in sources["ptx_memory.c"]
    emitter = inspect.getsource(instructions._atom)
    assert "atomic.c_apply(" in emitter
    assert not [w for w in (*atomic.ATOM_OPS, "b32", "u32", "s32", "f32", "f16", "f16x2") if f'"{w}"' in emitter]
    forms = [("and", "b32"), ("or", "b64"), ("xor", "b32"), ("exch", "b64"), ("cas", "b32"), ("add", "u32"),
             ("add", "s64"), ("min", "s32"), ("max", "u64"), ("inc", "u32"), ("dec", "u32"), ("add", "f32"),
             ("add.noftz", "f16x2")]
    for op, t in forms:
        reg = {"b64": "rd", "u64": "rd", "s64": "rd"}.get(t, "r")
        c = ", %{0}3".format(reg) if op == "cas" else ""
        text = (HEAD + ".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
                f"ld.param.u64 %rd1, [p];\natom.global.{op}.{t} %{reg}2, [%rd1], %{reg}2{c};\nret;\n}}\n")
        src = translate(parse(text).kernels["k"], {}, set()).source
        want = atomic.c_apply(op.split(".")[0], t, "noftz" in op)
        assert f"{{ (void)b; (void)c; (void)shared; return {want}; }}" in src, (op, t)
        assert re.search(r"static const rt_mem MEMS\[1\] = \{\{1, SP_GLOBAL, \d, 1, -?\d+, [01], &atom_apply_0\}\}", src), src
