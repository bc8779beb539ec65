"""refsim.ptx.semantics.handler: the Op / Handler interface, the ISA section string and the one
refusal error every builder raises, worked by hand."""

from __future__ import annotations

import dataclasses

import pytest

from refsim.ptx.arch import ARCHS as ARCH_TABLE
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.handler import ARCHS, Handler, Op, isa, unsupported


def test_an_op_prints_as_its_ptx_instruction_name_and_is_frozen():
    assert str(Op("cvt", ("rn",), ("f16", "f32"))) == "cvt.rn.f16.f32"
    assert str(Op("ret")) == "ret"
    assert Op("add", (), ("s32",)) == Op("add", (), ("s32",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        Op("add").opcode = "sub"


def test_isa_names_the_section_title_and_its_anchor():
    assert isa("logic-and-shift", "lop3") == \
        "PTX ISA, Logic and Shift Instructions: lop3 (#logic-and-shift-instructions-lop3)"
    # a dash in the instruction name is a dot in the text, kept in the anchor
    assert isa("parallel-synchronization-and-communication", "cp-async") == (
        "PTX ISA, Parallel Synchronization and Communication Instructions: cp.async "
        "(#parallel-synchronization-and-communication-instructions-cp-async)")
    with pytest.raises(KeyError):
        isa("no-such-category", "add")


def test_unsupported_is_the_error_whose_message_starts_with_the_instruction():
    e = unsupported(Op("div", ("approx",), ("f32",)), "approximate")
    assert isinstance(e, PtxUnsupportedError) and str(e) == "div.approx.f32: approximate"


def test_a_handler_is_a_frozen_record_and_the_archs_are_the_arch_table():
    h = Handler(fn=lambda a: (a,), dst_types=("u32",), src_types=("u32",), kind="alu", isa="x")
    assert h.fn(7) == (7,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.kind = "warp"
    assert ARCHS == tuple(ARCH_TABLE) and ARCHS[0] == "sm_70" and "sm_90" in ARCHS
