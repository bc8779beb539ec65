"""refsim/cuda/mma.cu, the tensor-core probes: its entries are the forms refsim.arith.tensor_core models, each
run through refsim.ptx equals refsim.arith at every arch it is modelled under on every input category, the
registers hold the matrices the ISA says, and the forms the ISA forbids are refused by name."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refsim.arith import tensor_core_types
from refsim.arith.tensor_core_types import MmaKind
from refsim.cuda import build, launch
from refsim.cuda import mma as rmma
from refsim.errors import FormatRuleError, ShapeError
from refsim.ptx import PtxUnsupportedError
from refsim.ptx.semantics import Op, lookup
from refsim.testing import assert_bitexact

K16 = rmma.kind_of("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
DOC = Path(__file__).resolve().parents[2] / "docs" / "cuda.md"


def test_the_entries_of_the_committed_ptx_are_the_modelled_forms():
    sm80 = set(launch.entries(build.ptx("mma", "sm_80")))
    sm89 = set(launch.entries(build.ptx("mma", "sm_89")))
    assert {rmma.entry(k, s) for k, s in rmma.forms() if rmma.ptx_arch(k) == "sm_80"} == sm80
    assert {rmma.entry(k, s) for k, s in rmma.forms()} == sm89                 # fp8 needs the sm_89 target
    for k, s in rmma.forms():
        assert rmma.instruction(k, s) + " " in build.ptx("mma", rmma.ptx_arch(k)), rmma.instruction(k, s)


def test_the_forms_are_every_modelled_kind_and_the_integer_kinds_again_with_satfinite():
    kinds = tensor_core_types.modelled()
    ints = [k for k in kinds if k.a in ("s8", "u8", "s4", "u4")]
    assert len(ints) == 16 and len(rmma.forms()) == len(kinds) + len(ints)
    assert [k for k, s in rmma.forms() if s] == ints
    assert {(k.a, k.b) for k in kinds} >= {("f16", "f16"), ("bf16", "bf16"), ("tf32", "tf32"), ("e4m3", "e5m2")}
    assert all(k.c == k.d for k in kinds)                   # the ISA's m16n8k8/k16 take C and D of one type


def _registers(kind, tiles, seed):
    rng = np.random.default_rng(seed)
    return [np.concatenate(x) for x in zip(*(rmma.pack(kind, *rmma.probe_inputs(kind, cat, tiles, rng))
                                             for cat in rmma.categories(kind)))]


def _form_archs():
    for kind, sat in rmma.forms():
        for arch in kind.archs:
            yield pytest.param(kind, sat, arch, id=f"{rmma.entry(kind, sat)}-{arch}")


@pytest.mark.parametrize("kind,sat,arch", list(_form_archs()))
def test_the_probe_through_refsim_ptx_equals_the_model_on_every_category(kind, sat, arch):
    regs = _registers(kind, 1, zlib.crc32(rmma.entry(kind, sat).encode()))
    assert_bitexact(rmma.mma_probe(kind, *regs, satfinite=sat, arch=arch),
                    rmma.mma_reference(kind, arch, *regs, satfinite=sat), f"{rmma.instruction(kind, sat)} {arch}")


_EXACT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
          "e5m2": ml_dtypes.float8_e5m2, "f32": np.float32}


@pytest.mark.parametrize("kind", [k for k in tensor_core_types.modelled() if k.a not in ("s8", "u8", "s4", "u4")],
                         ids=lambda k: k.ptx)
def test_small_integer_tiles_give_the_exact_product_for_every_float_form(kind):
    # |x| <= 4 (exact in every input type): every product and every partial sum is exact under any model,
    # so D = C + A @ B, computed here in float64 independently of refsim.arith
    rng = np.random.default_rng(1)
    K = int(kind.shape.split("k")[1])
    A, B = rng.integers(-4, 5, (2, 16, K)), rng.integers(-4, 5, (2, K, 8))
    C = rng.integers(-8, 9, (2, 16, 8))

    def bits(x, t):
        if t == "tf32":
            return x.astype(np.float32).view(np.uint32)
        return x.astype(_EXACT[t]).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[np.dtype(_EXACT[t]).itemsize])
    regs = rmma.pack(kind, bits(A, kind.a), bits(B, kind.b), bits(C, kind.c))
    D = rmma.unpack(kind, rmma.mma_probe(kind, *regs, arch=kind.archs[-1]))
    assert np.array_equal(D.view(_EXACT[kind.d]).astype(np.float64), C + A @ B)


def test_small_integer_f16_tiles_land_in_the_isa_lanes():
    rng = np.random.default_rng(1)
    A = rng.integers(-8, 9, (2, 16, 16)).astype(np.float16)
    B = rng.integers(-8, 9, (2, 16, 8)).astype(np.float16)
    C = rng.integers(-8, 9, (2, 16, 8)).astype(np.float32)
    d = rmma.mma_probe(K16, *rmma.pack(K16, A.view(np.uint16), B.view(np.uint16), C.view(np.uint32)), arch="sm_80")
    D = C + A.astype(np.float32) @ B.astype(np.float32)
    # lane 5 (g = 1, t = 1) holds D[1, 2], D[1, 3], D[9, 2], D[9, 3] (PTX ISA C/D fragment of m16n8k16)
    assert list(d[0, 5].view(np.float32)) == [D[0, 1, 2], D[0, 1, 3], D[0, 9, 2], D[0, 9, 3]]


def test_tf32_registers_are_read_without_their_13_low_bits():
    kind = rmma.kind_of("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
    A, B, C = rmma.probe_inputs(kind, "lowbits", 2, np.random.default_rng(5))
    assert (A & 0x1FFF).any() and (B & 0x1FFF).any()
    cleared = rmma.pack(kind, A & np.uint32(0xFFFFE000), B & np.uint32(0xFFFFE000), C)
    assert_bitexact(rmma.mma_probe(kind, *rmma.pack(kind, A, B, C), arch="sm_90"),
                    rmma.mma_probe(kind, *cleared, arch="sm_90"), "tf32 low bits")


@pytest.mark.parametrize("sat", [False, True])
def test_integer_probes_wrap_or_saturate_like_int32_arithmetic(sat):
    kind = rmma.kind_of("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
    A, B, C = rmma.probe_inputs(kind, "bigC", 3, np.random.default_rng(2))
    exact = C.astype(np.int64) + A.astype(np.int64) @ B.astype(np.int64)
    want = np.clip(exact, -2**31, 2**31 - 1) if sat else (exact + 2**31) % 2**32 - 2**31
    assert (np.abs(exact) > 2**31 - 1).any()                           # the category does overflow
    D = rmma.unpack(kind, rmma.mma_probe(kind, *rmma.pack(kind, A, B, C), satfinite=sat))
    assert np.array_equal(D, want.astype(np.int32))


def test_pack_and_unpack_are_inverse_for_every_operand():
    for kind in tensor_core_types.modelled():
        A, B, C = rmma.probe_inputs(kind, "random", 2, np.random.default_rng(3))
        a, b, c = rmma.pack(kind, A, B, C)
        assert (a.shape[-1], b.shape[-1], c.shape[-1]) == rmma.registers(kind)[:3]
        for m, regs, op in ((A, a, "a"), (B, b, "b"), (C, c, "c")):
            assert np.array_equal(rmma.unpack(kind, regs, op), m), (kind.ptx, op)


def test_categories_hold_what_they_name():
    rng = np.random.default_rng(4)
    A, B, C = rmma.probe_inputs(K16, "subnormal", 2, rng)
    assert ((A & 0x7C00) == 0).all() and (A & 0x3FF).all()             # f16: exponent field 0, non-zero
    A, B, C = rmma.probe_inputs(K16, "nearmax", 2, rng)
    assert (np.abs(A.view(np.float16)) >= 32752).all()
    A, B, C = rmma.probe_inputs(K16, "cancel", 2, rng)
    a = A.view(np.float16)
    assert np.array_equal(a[:, :, 9:], -a[:, :, 1:8]) and np.array_equal(B[:, 8:], B[:, :8])
    A, B, C = rmma.probe_inputs(K16, "cancelC", 2, rng)
    exact = A.view(np.float16).astype(np.float64) @ B.view(np.float16).astype(np.float64)
    assert np.array_equal(C.view(np.float32), (-exact).astype(np.float32))
    A, B, C = rmma.probe_inputs(K16, "zeros", 2, rng)
    assert ((A & 0x7FFF) == 0).mean() > 0.3 and (A == 0x8000).any()
    e4m3 = rmma.kind_of("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
    A, B, C = rmma.probe_inputs(e4m3, "subnormal", 2, rng)
    assert ((A & 0x78) == 0).all() and (A & 0x07).all()                # e4m3: exponent field 0, non-zero


def test_the_docs_table_of_forms_is_the_data():
    text = DOC.read_text()
    block = re.search(r"<!-- forms: refsim\.cuda\.mma\.forms_table\(\) -->\n(.*?)\n\n", text, re.S)
    assert block, "docs/cuda.md lost its table of mma forms"
    assert block.group(1) + "\n" == rmma.forms_table(), "regenerate it: print(refsim.cuda.mma.forms_table())"


@pytest.mark.parametrize("shape", ["m16n8k16", "m16n8k8"])
@pytest.mark.parametrize("d, c", [("f32", "f16"), ("f16", "f32")])
def test_refsim_ptx_refuses_f16_mma_with_c_and_d_of_different_types(shape, d, c):
    # ptxas 13.0: ".dtype must be '.f16' when .ctype is '.f16' for 'mma' instruction with shape '.m16n8k16'"
    with pytest.raises(PtxUnsupportedError, match="C and D of one type"):
        lookup(Op("mma", ("sync", "aligned", shape, "row", "col"), (d, "f16", "f16", c)), arch="sm_80")


def test_refusals_are_named():
    e4m3 = rmma.kind_of("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
    regs = rmma.pack(e4m3, *rmma.probe_inputs(e4m3, "random", 1, np.random.default_rng(0)))
    with pytest.raises(rmma.NoModel, match="sm_89"):
        rmma.mma_reference(e4m3, "sm_80", *regs)
    with pytest.raises(ShapeError, match="uint32"):
        rmma.mma_probe(e4m3, regs[0].astype(np.int32), *regs[1:])
    with pytest.raises(FormatRuleError, match="category"):
        rmma.probe_inputs(e4m3, "extremes", 1, np.random.default_rng(0))
    with pytest.raises(FormatRuleError, match="satfinite"):
        rmma.mma_probe(e4m3, *regs, satfinite=True)
    with pytest.raises(FormatRuleError, match="no entry"):
        rmma.mma_probe(MmaKind("m16n8k16", "f16", "f16", "f16", "f32", ("sm_80",), ()), *regs)
    with pytest.raises(FormatRuleError, match="MmaKind"):
        rmma.entry("m16n8k16")
    with pytest.raises(rmma.NoModel, match="m16n8k4"):
        rmma.kind_of("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32")
