"""refsim/cuda/mma.cu, the tensor-core probes: its entries are the listed forms, each run through refsim.ptx
equals refsim.arith.tensor_core on every input category, the registers hold the matrices the ISA says,
and the forms to probe are read from refsim.arith.tensor_core."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from refsim.arith import tensor_core
from refsim.cuda import build, launch
from refsim.cuda import mma as rmma
from refsim.errors import FormatRuleError, ShapeError
from refsim.testing import assert_bitexact

K16 = rmma.MmaKind("m16n8k16", "f32", "f16", "f16", "f32")


def test_the_listed_kinds_are_the_entries_of_the_committed_ptx():
    sm80 = set(launch.entries(build.ptx("mma", "sm_80")))
    sm89 = set(launch.entries(build.ptx("mma", "sm_89")))
    assert {k.entry for k in rmma.KINDS if k.ptx_arch == "sm_80"} == sm80
    assert {k.entry for k in rmma.KINDS} == sm89                        # fp8 needs the sm_89 target
    assert all(k.instruction in build.ptx("mma", k.ptx_arch) for k in rmma.KINDS)


def test_every_modelled_form_has_a_probe_entry():
    assert set(rmma.modelled()) <= set(rmma.KINDS)


def _cases():
    for kind, archs in rmma.modelled().items():
        for arch in ("sm_80", "sm_90"):
            if arch in archs:
                yield pytest.param(kind, arch, id=f"{kind.entry}-{arch}")


@pytest.mark.parametrize("kind,arch", list(_cases()))
def test_the_probe_through_refsim_ptx_equals_the_tensor_core_model_on_every_category(kind, arch):
    rng = np.random.default_rng(zlib.crc32(kind.entry.encode()))
    regs = [np.concatenate(x) for x in zip(*(rmma.pack(kind, *rmma.probe_inputs(kind, cat, 1, rng))
                                              for cat in rmma.categories(kind)))]
    assert_bitexact(rmma.mma_probe(kind, *regs, arch=arch), rmma.mma_reference(kind, arch, *regs), kind.entry)


def test_small_integer_f16_tiles_give_the_exact_product_in_the_isa_layout():
    # integers |x| <= 8: every product and sum is exact in any model, so D = C + A @ B independently
    rng = np.random.default_rng(1)
    A = rng.integers(-8, 9, (2, 16, 16)).astype(np.float16)
    B = rng.integers(-8, 9, (2, 16, 8)).astype(np.float16)
    C = rng.integers(-8, 9, (2, 16, 8)).astype(np.float32)
    regs = rmma.pack(K16, A.view(np.uint16), B.view(np.uint16), C.view(np.uint32))
    d = rmma.mma_probe(K16, *regs, arch="sm_80")
    D = rmma.unpack(K16, d).view(np.float32)
    assert np.array_equal(D, C + A.astype(np.float32) @ B.astype(np.float32))
    # lane 5 (g = 1, t = 1) holds D[1, 2], D[1, 3], D[9, 2], D[9, 3] (PTX ISA C/D fragment of m16n8k16)
    assert list(d[0, 5].view(np.float32)) == [D[0, 1, 2], D[0, 1, 3], D[0, 9, 2], D[0, 9, 3]]


@pytest.mark.parametrize("sat", [False, True])
def test_integer_probes_wrap_or_saturate_like_int32_arithmetic(sat):
    kind = rmma.MmaKind("m16n8k32", "s32", "s8", "s8", "s32", sat)
    rng = np.random.default_rng(2)
    A, B, C = rmma.probe_inputs(kind, "bigC", 3, rng)
    exact = C.astype(np.int64) + A.astype(np.int64) @ B.astype(np.int64)
    want = np.clip(exact, -2**31, 2**31 - 1) if sat else (exact + 2**31) % 2**32 - 2**31
    assert (np.abs(exact) > 2**31 - 1).any()                           # the category does overflow
    D = rmma.unpack(kind, rmma.mma_probe(kind, *rmma.pack(kind, A, B, C)))
    assert np.array_equal(D, want.astype(np.int32))


def test_pack_and_unpack_are_inverse_for_every_operand():
    for kind in rmma.modelled():
        A, B, C = rmma.probe_inputs(kind, "random", 2, np.random.default_rng(3))
        a, b, c = rmma.pack(kind, A, B, C)
        assert (a.shape[-1], b.shape[-1], c.shape[-1]) == kind.registers[:3]
        for m, regs, op in ((A, a, "a"), (B, b, "b"), (C, c, "c")):
            assert np.array_equal(rmma.unpack(kind, regs, op), m), (kind, op)


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


def test_modelled_reads_a_listing_from_tensor_core(monkeypatch):
    monkeypatch.setattr(tensor_core, "MODELLED", (
        ("m16n8k8", "bf16", "f32", ("sm_80", "sm_90")),
        {"shape": "m16n8k32", "atype": "e4m3", "btype": "e5m2", "acc": "f32", "archs": ("sm_90",)},
    ), raising=False)
    assert rmma.modelled() == {
        rmma.MmaKind("m16n8k8", "f32", "bf16", "bf16", "f32"): ("sm_80", "sm_90"),
        rmma.MmaKind("m16n8k32", "f32", "e4m3", "e5m2", "f32"): ("sm_90",)}


def test_what_is_modelled_today_is_f16_and_integer_mma():
    kinds = rmma.modelled()
    assert {(k.atype, k.btype) for k in kinds} == {("f16", "f16")} | {
        (a, b) for a in ("s8", "u8") for b in ("s8", "u8")} | {(a, b) for a in ("s4", "u4") for b in ("s4", "u4")}
    assert kinds[K16] == ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90")
    assert kinds[rmma.MmaKind("m16n8k8", "f16", "f16", "f16", "f16")] == ("sm_80", "sm_86", "sm_87", "sm_89")


def test_refusals_are_named():
    k8 = rmma.MmaKind("m16n8k8", "f32", "f16", "f16", "f32")
    regs = rmma.pack(k8, *rmma.probe_inputs(k8, "random", 1, np.random.default_rng(0)))
    with pytest.raises(rmma.NoModel, match="sm_90"):
        rmma.mma_reference(k8, "sm_90", *regs)
    with pytest.raises(ShapeError, match="uint32"):
        rmma.mma_probe(k8, regs[0].astype(np.int32), *regs[1:])
    with pytest.raises(FormatRuleError, match="category"):
        rmma.probe_inputs(k8, "extremes", 1, np.random.default_rng(0))
    with pytest.raises(FormatRuleError, match="no entry"):
        rmma.mma_probe(rmma.MmaKind("m8n8k4", "f32", "f16", "f16", "f32"), *regs)
