"""refsim.ptx.compiled.translate: how one kernel becomes C, read on tiny kernels without building them.

One C function per instruction *shape*: instructions that differ only in registers and immediates share
a template and get their own descriptor row (register slots, immediates, in operand order, with the PTX
line); a guard makes a different shape. A dispatch table maps each instruction to its template; a
kernel the path cannot compile gets no C but the PTX line, its text and the reason; forms left to the
handler, bar.red destinations and module-scope symbols are listed for the runner.
"""

from __future__ import annotations

import re

from conftest_compiled import template, translated

from refsim import ptx
from refsim.ptx.compiled.translate import HEADER, RUNTIME, translate


def _desc(tr) -> list[tuple[int, list[int], int]]:
    """(instruction, descriptor constants, PTX line) of each DESC row."""
    rows = re.findall(r"\{(\d+), \{([^}]*)\}\}  /\* line (\d+) \*/", tr.source)
    return [(int(i), [int(x[:-2]) for x in k.split(", ") if x.endswith("LL")], int(line)) for i, k, line in rows]


def _table(tr) -> list[str]:
    return re.search(r"TABLE\[\d+\]\)\(.*?\) = \{\n    (.*?)\n\};", tr.source, re.S).group(1).split(", ")


def test_instructions_of_one_shape_share_a_template_and_differ_in_their_descriptor_rows():
    # 7 instructions (the kernel's closing brace is an implicit exit): the two unguarded adds share
    # a template, the guarded one has its own; the two bar.red and the two exits are callbacks (their
    # one definition is the interpreter's Python) and share the callback template
    tr = translated("add.s32 %r6, %r5, 9;\nadd.s32 %r7, %r6, 11;\n@%p1 add.s32 %r7, %r6, 11;\n"
                    "bar.red.popc.u32 %r1, 0, %p1;\nbar.red.and.pred %p2, 0, %p1;\nexit;")
    assert tr.reason is None and tr.source.startswith(HEADER)
    assert "/* refsim.ptx.compiled: kernel k, 7 instructions, 3 templates */" in tr.source
    assert _table(tr) == ["t_0", "t_0", "t_1", "t_2", "t_2", "t_2", "t_2"]
    rows = _desc(tr)
    assert [(i, line) for i, _, line in rows] == [(i, 7 + i) for i in range(7)]
    # add.s32 d, a, imm: the row is (slot of a, imm, slot of d); %r6 written by the first is read by the second
    (a0, imm0, d0), (a1, imm1, d1) = rows[0][1], rows[1][1]
    assert (imm0, imm1) == (9, 11) and d0 == a1 and len({a0, d0, d1}) == 3
    # the guarded one leads with its predicate's slot
    assert rows[2][1][1:] == rows[1][1] and rows[2][1][0] not in rows[1][1]
    assert tr.callbacks == frozenset({3, 4, 5, 6})
    assert "typedef struct rt_desc { int32_t idx; int64_t k[4]; } rt_desc;" in tr.source     # the widest row
    assert tr.source.endswith("int refsim_exec(rt_state *S, int32_t p, const int32_t *th, int32_t n) "
                              "{ return TABLE[p](S, &DESC[p], th, n); }\n")


def test_a_guard_selects_the_threads_whose_predicate_is_set_or_clear():
    tr = translated("@%p1 add.s32 %r6, %r5, 9;\n@!%p1 add.s32 %r6, %r5, 9;\nexit;")
    assert _table(tr)[:2] == ["t_0", "t_1"]
    assert "for (int32_t i = 0; i < n; i++) if (G[th[i]] != 0) act_[na++] = th[i];" in template(tr, 0)
    assert "for (int32_t i = 0; i < n; i++) if (G[th[i]] != 1) act_[na++] = th[i];" in template(tr, 1)
    # every thread of the step, guarded out or not, moves past an ALU instruction
    assert template(tr, 0).endswith("for (int32_t i = 0; i < n; i++) S->pc[th[i]] = (int32_t)D->idx + 1;\n"
                                    "    return 0;")
    # a guarded branch: the taken threads jump, the others step past it
    br = template(translated("@%p1 bra $L;\n$L:\nexit;"), 0)
    assert "        S->pc[t] = (int32_t)D->k[1];\n" in br
    assert br.endswith("if (j < na && act[j] == th[i]) { j++; continue; } S->pc[th[i]] = (int32_t)D->idx + 1; }\n"
                       "    return 0;")


def test_a_kernel_it_cannot_compile_gets_the_line_its_text_and_the_reason():
    for body, line, why in [("st.param.u32 [n], %r1;", "`st.param.u32 [n], %r1`", "st.param"),
                            ("bra %r1;", "`bra %r1`", "indirect branch"),
                            ("add.s32 %r1, %r2, 1;\natom.global.add.u16 %r1, [%rd1], %r2;",
                             "`atom.global.add.u16 %r1, [%rd1], %r2`",
                             "atom.add.u16: type .u16 is not an atom/red type refsim executes"),
                            ("atom.global.add.noftz.bf16x2 %r1, [%rd1], %r2;",
                             "`atom.global.add.noftz.bf16x2 %r1, [%rd1], %r2`", "atomic on .bf16x2 is not compiled")]:
        tr = translated(body + "\nexit;")
        assert tr.source is None and tr.reason == f"PTX line {6 + body.count(chr(10)) + 1} {line}: {why}"


def test_forms_left_to_the_handler_are_listed_as_callbacks():
    tr = translated("add.s32 %r6, %r5, 9;\ndiv.s64 %rd5, %rd3, %rd4;\nexit;")
    assert tr.callbacks == frozenset({1, 2, 3})              # div.s64, and the exits (Launch.exit_threads)


def test_module_scope_symbols_are_numbered_in_first_use_order():
    text = (".version 8.0\n.target sm_80\n.address_size 64\n.global .align 4 .b32 g[4];\n.global .align 4 .b32 h[4];\n"
            ".visible .entry k()\n{\n.reg .b64 %rd<3>; .reg .b32 %r<3>;\n"
            "ld.global.u32 %r1, [h+4];\nld.global.u32 %r2, [g];\nld.global.u32 %r2, [h];\nexit;\n}\n")
    m = ptx.Module(text)
    tr = translate(m._kernel("k"), m._lookup("k", "sm_80"), m._parsed.globals)
    assert tr.symbols == ("h", "g")
    # one rt_mem row per memory instruction; h+4 is symbol 0 plus the offset 4 in the descriptor
    assert tr.source.count("SP_GLOBAL, 4, 1") == 3
    assert "ad[i] = ((uint64_t)(S->sym[D->k[2]] + ((uint64_t)D->k[3])));" in template(tr, 0)
    assert _desc(tr)[0][1][2:] == [0, 4]


def test_the_runtime_unit_is_the_header_and_its_c_files():
    assert RUNTIME.startswith(HEADER) and "refsim_mma_k16_f32" in RUNTIME
