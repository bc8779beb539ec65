"""atom/red arithmetic (``atom_apply``) against the PTX ISA text: "Parallel Synchronization and
Communication Instructions: atom" — .inc/.dec ranges, cas, integer wrap, float .add rounding to nearest
even, .noftz keeping subnormals, f32 on global memory flushing subnormal inputs and results."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import fp
from refsim.ptx import PtxUnsupportedError
from refsim.ptx.semantics import atom_apply
from refsim.testing import assert_bitexact


def u32(*v):
    return np.array([x & 0xFFFFFFFF for x in v], np.uint32)


@pytest.mark.parametrize("op, t, old, b, want", [
    ("add", "u32", 0xFFFFFFFF, 2, 1), ("add", "s32", -1, -1, -2),
    ("min", "s32", -5, 3, -5), ("min", "u32", -5, 3, 3), ("max", "s32", -5, 3, 3), ("max", "u32", -5, 3, -5),
    ("inc", "u32", 4, 5, 5), ("inc", "u32", 5, 5, 0), ("inc", "u32", 9, 5, 0),        # old >= b ? 0 : old + 1
    ("dec", "u32", 0, 5, 5), ("dec", "u32", 9, 5, 5), ("dec", "u32", 3, 5, 2),        # old == 0 or old > b ? b : old - 1
    ("and", "b32", 0b1100, 0b1010, 0b1000), ("or", "b32", 0b1100, 0b1010, 0b1110),
    ("xor", "b32", 0b1100, 0b1010, 0b0110), ("exch", "b32", 7, 9, 9),
])
def test_integer_and_bit_atomics(op, t, old, b, want):
    assert int(atom_apply(op, t, u32(old), u32(b))[0]) == want & 0xFFFFFFFF


def test_cas_swaps_only_on_equality_and_64_bit_wraps():
    assert atom_apply("cas", "b32", u32(5, 6), u32(5, 5), u32(9, 9)).tolist() == [9, 6]
    assert atom_apply("add", "u64", np.array([2**64 - 1], np.uint64), np.array([3], np.uint64)).tolist() == [2]
    assert atom_apply("min", "s64", np.array([2**63], np.uint64), np.array([0], np.uint64)).tolist() == [2**63]


def test_float_add_rounds_to_nearest_even_and_f32_global_flushes_subnormals():
    a = np.random.default_rng(3).standard_normal(500).astype(np.float32)
    b = np.random.default_rng(4).standard_normal(500).astype(np.float32)
    got = atom_apply("add", "f32", a.view(np.uint32), b.view(np.uint32), space="shared")
    assert_bitexact(got, fp.f32_add(a, b).view(np.uint32), "atom.add.f32")
    sub = np.array([2.0**-140], np.float32).view(np.uint32)
    assert atom_apply("add", "f32", sub, u32(0), space="global").tolist() == [0]
    assert atom_apply("add", "f32", sub, u32(0), space="shared").tolist() == sub.tolist()


def test_noftz_half_adds_keep_subnormals_and_pack_halves():
    h = np.array([0x0001], np.uint16)                      # smallest f16 subnormal
    assert atom_apply("add", "f16", h, h, noftz=True).tolist() == [0x0002]
    got = atom_apply("add", "f16x2", u32(0x3C000001), u32(0x3C000001), noftz=True)
    assert got.tolist() == [0x40000002]                    # 1 + 1 = 2 (high), 2^-24 + 2^-24 (low)
    assert atom_apply("add", "bf16x2", u32(0x3F803F80), u32(0x3F803F80), noftz=True).tolist() == [0x40004000]
    with pytest.raises(PtxUnsupportedError, match="requires .noftz"):
        atom_apply("add", "f16", h, h)


def test_unsupported_atomics_are_refused_naming_the_instruction():
    with pytest.raises(PtxUnsupportedError, match=r"^atom\.min\.f16"):
        atom_apply("min", "f16", np.uint16(0), np.uint16(0), noftz=False)
    with pytest.raises(PtxUnsupportedError, match=r"^atom\.inc\.s32"):
        atom_apply("inc", "s32", u32(0), u32(0))
    with pytest.raises(PtxUnsupportedError, match=r"^atom\.add\.u16"):
        atom_apply("add", "u16", np.uint16(0), np.uint16(0))


def test_the_c_of_each_form_is_derived_from_its_expression():
    from refsim.ptx.semantics.atomic import c_apply

    assert c_apply("min", "s32") == ("((uint32_t)((rt_sext((uint64_t)o, 32) < rt_sext((uint64_t)b, 32)) ? "
                                     "(uint64_t)o : (uint64_t)b))")
    assert c_apply("cas", "b64") == "((uint64_t)(((uint64_t)o == (uint64_t)b) ? (uint64_t)c : (uint64_t)o))"
    assert c_apply("add", "f16x2", True) == "((uint32_t)((uint64_t)RT_X2(rt_hadd, (uint64_t)o, (uint64_t)b)))"
    f32 = c_apply("add", "f32")          # shared memory keeps subnormals, global flushes (chosen per access)
    assert f32.startswith("(shared ? ((uint32_t)((uint64_t)rt_fadd((uint64_t)o, (uint64_t)b))) : ") and "0x80000000ull" in f32
    assert c_apply("add", "bf16x2", True) is None and c_apply("add", "f64") is None     # no C twin: interpreter only
    with pytest.raises(PtxUnsupportedError, match="requires .noftz"):
        c_apply("add", "f16x2")
