"""refsim.ptx.semantics.table: the one opcode table assembled from the families, and lookup()'s
refusals naming the instruction."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics import compare, convert, floating, integer, logic, table, warp
from refsim.ptx.semantics.handler import Op


def test_the_table_is_the_union_of_the_families_builders_each_opcode_once():
    families = (integer, logic, compare, floating, convert, warp)
    names = [name for fam in families for name in fam.BUILDERS]
    assert len(names) == len(set(names)) == len(table.TABLE)
    assert table.supported_opcodes() == tuple(sorted(names))
    assert {"add", "lop3", "setp", "fma", "cvt", "shfl", "mma"} <= set(table.TABLE)
    assert table.TABLE["lop3"] is logic.BUILDERS["lop3"]


def test_assembling_two_families_that_build_one_opcode_is_refused():
    class A:
        BUILDERS = {"add": None}

    class B:
        BUILDERS = {"add": None, "sub": None}
    with pytest.raises(RuntimeError, match="opcode 'add' is built by two semantics families"):
        table._assemble(A, B)


def test_lookup_returns_the_handler_that_executes_the_instruction():
    h = table.lookup(Op("add", (), ("s32",)))
    assert (h.kind, h.dst_types, h.src_types) == ("alu", ("s32",), ("s32", "s32"))
    assert h.isa == "PTX ISA, Integer Arithmetic Instructions: add (#integer-arithmetic-instructions-add)"
    (d,) = h.fn(np.array([0x7FFF_FFFF, 5], np.uint32), np.array([1, 0xFFFF_FFFF], np.uint32))
    assert d.tolist() == [0x8000_0000, 4]                             # wraps; 5 + (-1)


@pytest.mark.parametrize("op, arch, match", [
    (Op("frob", (), ("b32",)), "sm_80", r"^frob.b32: opcode 'frob' is not an instruction refsim's semantics execute "
                                        r"\(supported: abs, add, "),
    (Op("add", (), ("s32",)), "sm_60", r"^add.s32: arch must be one of sm_70, .*; got 'sm_60'$"),
    (Op("add", ("sat",), ("u32",)), "sm_80", r"^add.sat.u32: .sat applies to .s32 only$"),
    (Op("div", ("approx",), ("f32",)), "sm_80", r"^div.approx.f32: .*implementation-defined"),
])
def test_lookup_refuses_naming_the_instruction(op, arch, match):
    with pytest.raises(PtxUnsupportedError, match=match):
        table.lookup(op, arch=arch)


def test_lookup_takes_an_op_only():
    with pytest.raises(PtxUnsupportedError, match="lookup: op must be a refsim.ptx.semantics.Op; got str"):
        table.lookup("add.s32")


def test_each_c_form_lives_in_the_family_that_builds_its_handler_once():
    families = (integer, logic, compare, floating, convert, warp)
    homes = {name: [fam for fam in families if name in getattr(fam, "C_FORMS", {})] for name in table.C_TABLE}
    assert all(len(h) == 1 and name in h[0].BUILDERS for name, h in homes.items())
    assert table.C_TABLE["lop3"] is logic.C_FORMS["lop3"] and table.C_TABLE["cvt"] is convert.C_FORMS["cvt"]
    assert {"add", "mul", "lop3", "prmt", "setp", "selp", "cvt", "fma"} <= set(table.C_TABLE)
    assert not {"mma", "shfl", "slct", "addc"} & set(table.C_TABLE)       # these run their handlers


def test_assembling_a_c_form_away_from_its_handler_is_refused():
    class A:
        BUILDERS = {"add": None}

    class B:
        BUILDERS = {"sub": None}
        C_FORMS = {"add": (set(), None)}
    with pytest.raises(RuntimeError, match="opcode 'add': its C form and its handler live in different families"):
        table._assemble(A, B, attr="C_FORMS")

    class C:
        BUILDERS = {"add": None}
        C_FORMS = {"add": (set(), None)}
    table._assemble(C, attr="C_FORMS")
    with pytest.raises(RuntimeError, match="opcode 'add' is compiled by two semantics families"):
        table._assemble(C, C, attr="C_FORMS")
