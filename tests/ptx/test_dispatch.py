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
#: refsim/native/ptx_*.c) beside the interpreter's definition: memory, control flow, barriers and the
#: warp-wide shfl/vote/mma/ldmatrix. Both are held equal by tests/ptx/compiled; this list may only shrink.
TWO_DEFINITIONS = frozenset({
    "applypriority", "atom", "brkpt", "cp", "createpolicy", "cvta", "discard",
    "fence", "isspacep", "ld", "ldmatrix", "ldu", "membar", "mma", "mov", "nanosleep", "prefetch", "prefetchu",
    "red", "shfl", "st", "trap", "vote",
})

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
    or the engine; the compiled executor's own C bodies are exactly TWO_DEFINITIONS."""
    from refsim.ptx import hopper
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
    compiled_own = set(instructions._ENGINE) | set(instructions._WARP) | {"ldmatrix"}
    assert compiled_own == TWO_DEFINITIONS
    assert set(instructions.PYTHON_DEFINED) == set(PYTHON_RUN) and not compiled_own & set(PYTHON_RUN)
    native = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "refsim" / "native").glob("ptx_*.[ch]"))
    for op, functions in PYTHON_RUN.items():
        assert not [f for f in functions if f + "(" in native], op
        assert f"(*{op})" not in native and f"(*{op}_" not in native, op        # no rt_api entry for it
    # jumps are declared as data (Entry.jump), read by the interpreter's dispatch.jump and the emitter's _jump
    jumps = {op for op, e in dispatch.OPCODES.items() if e.jump is not None}
    assert jumps == {"bra"} and not jumps & compiled_own
    assert all(dispatch.OPCODES[op].build is dispatch.jump for op in jumps)
    assert not [op for op in jumps if f'"{op}"' in Path(instructions.__file__).read_text(encoding="utf-8")]
    assert instructions.CP_GROUP_FORMS == ("commit_group", "wait_group", "wait_all")
    assert not [f for f in CP_GROUP_RUN if f + "(" in native] and "(*cp_wait)" not in native
    assert "group" not in Path(instructions.__file__).read_text(encoding="utf-8").split("def _cp(")[1].split("\ndef ")[0]
    assert not compiled_own & (set(hopper.OPCODES) | set(table.C_TABLE))
    # the ALU emitter holds no opcode of its own: every name it could compile comes from C_TABLE
    source = Path(alu.__file__).read_text(encoding="utf-8")
    assert not [op for op in table.TABLE if f'"{op}"' in source]
