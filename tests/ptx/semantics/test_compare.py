"""Comparison and selection instructions (refsim.ptx.semantics.compare): setp's ordered and unordered
rules and BoolOp, selp (PTX ISA 9.x, Comparison and Selection Instructions).
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.ptx.semantics import Op, lookup

DT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def run(opcode, mods, types, *srcs):
    return lookup(Op(opcode, tuple(mods), tuple(types))).fn(*srcs)


def u32(*v):
    return np.array([x & 0xFFFFFFFF for x in v], np.uint32)


@pytest.mark.parametrize("cmp, t, a, b, want", [
    ("lt", "s32", 0xFFFFFFFF, 0, True), ("lo", "s32", 0xFFFFFFFF, 0, False), ("lt", "u32", 0xFFFFFFFF, 0, False),
    ("hs", "u32", 5, 5, True), ("hi", "u32", 5, 5, False), ("ge", "s16", 0x8000, 0x7FFF, False),
    ("eq", "b64", 2**63, 2**63, True), ("ne", "u64", 1, 2, True), ("ls", "u16", 3, 2, False),
])
def test_setp_integer_comparisons(cmp, t, a, b, want):
    dt = DT[int(t[1:])]
    p, q = run("setp", (cmp,), (t,), np.array([a], dt), np.array([b], dt))
    assert bool(p[0]) is want and bool(q[0]) is (not want)


@pytest.mark.parametrize("cmp, a, b, want", [
    ("lt", 1.0, 2.0, True), ("lt", np.nan, 2.0, False), ("ltu", np.nan, 2.0, True), ("eq", -0.0, 0.0, True),
    ("ne", np.nan, np.nan, False), ("neu", np.nan, np.nan, True), ("num", 1.0, np.nan, False),
    ("nan", 1.0, np.nan, True), ("geu", 1.0, 2.0, False), ("gt", np.inf, 1e38, True),
])
def test_setp_float_comparisons_follow_ordered_and_unordered_rules(cmp, a, b, want):
    bits = lambda x: np.array([x], np.float32).view(np.uint32)  # noqa: E731
    p, _ = run("setp", (cmp,), ("f32",), bits(a), bits(b))
    assert bool(p[0]) is want


def test_setp_boolop_combines_with_c_and_selp_selects():
    p, q = run("setp", ("lt", "and"), ("s32",), u32(1, 1), u32(2, 2), np.array([True, False]))
    assert p.tolist() == [True, False] and q.tolist() == [False, False]
    p, q = run("setp", ("lt", "or"), ("s32",), u32(3), u32(2), np.array([True]))
    assert p.tolist() == [True] and q.tolist() == [True]
    (d,) = run("selp", (), ("b32",), u32(1, 1), u32(2, 2), np.array([True, False]))
    assert d.tolist() == [1, 2]
