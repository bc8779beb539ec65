"""refsim/cuda/wgmma.cu, the wgmma probes: its entries are the ones the host names, every kind (once, at N = 8)
run through refsim.ptx equals refsim.arith.wgmma, the kernel computes A·B + C on matrices whose answer is
worked out here without refsim, both executors agree bit for bit, the gpu backend runs the same launch, and bad
arguments are refused by name. The whole 242-probe sweep runs through ``refsim validate`` by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from refsim.arith import wgmma as arith
from refsim.cuda import build, gpu, launch
from refsim.cuda import wgmma as rwg
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import wgmma_probes


def _first_probe(kind, n=8):
    return next(p for p in wgmma_probes.probes() if p.kind == kind and p.n == n)


def test_the_committed_ptx_holds_exactly_the_entries_the_host_names():
    names = launch.entries(build.ptx("wgmma", "sm_90a"))
    assert names == rwg.entries()
    # 12 float kinds x 2 N x (imm-scale +1, -1) + 4 s8/u8 kinds x 2 N x (.satfinite or not) + b1 x 2 N
    # + f32.f16.f16 from registers x 2 N x 2
    assert len(names) == 48 + 16 + 2 + 4
    assert "probe_m64n256k32_s32_u8_s8_satfinite" in names and "probe_m64n8k16_f32_f16_f16_neg_rs" in names
    assert "probe_m64n8k256_s32_b1_b1" in names and "probe_m64n8k8_f32_tf32_tf32_neg" in names


@pytest.mark.parametrize("kind", arith.modelled(), ids=lambda k: k.types)
def test_every_kind_at_n8_equals_refsim_arith(kind):
    p = _first_probe(kind)
    A, B, C = p.inputs(seed=0, tiles=1)
    got = rwg.wgmma_probe(kind, 8, A, B, C, options={"executor": "interpreter"})
    want = rwg.wgmma_reference(kind, 8, A, B, C)
    assert got.dtype == want.dtype and got.shape == (1, 64, 8)
    assert np.array_equal(got, want), np.argwhere(got != want)[:4]


def test_negation_scale_d_and_satfinite_reach_the_instruction():
    kind = arith.kind_of("f32.bf16.bf16")
    for p in (q for q in wgmma_probes.probes() if q.kind == kind and q.n == 8 and q.category in ("negated", "noC")):
        A, B, C = p.inputs(seed=1, tiles=1)
        flags = dict(scale_d=p.scale_d, negate=p.scale_ab == -1)
        got = rwg.wgmma_probe(kind, 8, A, B, C, options={"executor": "interpreter"}, **flags)
        assert np.array_equal(got, rwg.wgmma_reference(kind, 8, A, B, C, **flags)), p.name
    s8 = arith.kind_of("s32.s8.s8")
    A = np.full((1, 64, 32), 127, np.int8)
    B = np.full((1, 32, 8), 127, np.int8)
    C = np.full((1, 64, 8), 2**31 - 1, np.int32)
    wrap = rwg.wgmma_probe(s8, 8, A, B, C, options={"executor": "interpreter"})
    sat = rwg.wgmma_probe(s8, 8, A, B, C, satfinite=True, options={"executor": "interpreter"})
    assert (wrap == np.int32(-(2**31) + 32 * 127 * 127 - 1)).all() and (sat == np.int32(2**31 - 1)).all()


def _small_ints(rng, shape):
    return rng.integers(-3, 4, shape)


def test_the_kernel_computes_a_b_plus_c_from_the_staged_layout():
    # small integers: every float kind computes them exactly, so D = A B + C worked out in int64 here;
    # each element of A and B at a distinct place exposes a wrong core-matrix layout or fragment mapping
    rng = np.random.default_rng(7)
    a, b, c = _small_ints(rng, (1, 64, 16)), _small_ints(rng, (1, 16, 8)), _small_ints(rng, (1, 64, 8))
    want = a @ b + c
    f16 = lambda x: x.astype(np.float16).view(np.uint16)              # noqa: E731
    for a_registers in (False, True):
        got = rwg.wgmma_probe("f32.f16.f16", 8, f16(a), f16(b), c.astype(np.float32).view(np.uint32),
                              a_registers=a_registers, options={"executor": "interpreter"})
        assert np.array_equal(got.view(np.float32), want.astype(np.float32)), a_registers
    got = rwg.wgmma_probe("f16.f16.f16", 8, f16(a), f16(b), f16(c), negate=True, options={"executor": "interpreter"})
    assert np.array_equal(got.view(np.float16), ((-a) @ (-b) + c).astype(np.float16))     # imm-scale -1 twice
    bits_a, bits_b = rng.integers(0, 2, (1, 64, 256)), rng.integers(0, 2, (1, 256, 8))
    got = rwg.wgmma_probe("s32.b1.b1", 8, bits_a.astype(np.uint8), bits_b.astype(np.uint8), c.astype(np.int32),
                          options={"executor": "interpreter"})
    assert np.array_equal(got, bits_a @ bits_b + c)                   # popc(a AND b) + c


def test_both_executors_run_the_probe_bit_identically():
    kind = arith.kind_of("f32.f16.f16")
    A, B, C = _first_probe(kind).inputs(seed=3, tiles=2)
    text = build.ptx("wgmma", "sm_90a")
    for name in (rwg.entry(kind, 8), rwg.entry(kind, 8, negate=True, a_registers=True)):
        runs = []
        for executor in ("interpreter", "compiled"):
            a, b, c = rwg.operands(kind, 8, A, B, C)
            out = np.zeros_like(c)
            (stats,) = launch.run(text, [(launch.Launch(name, 2, 128), (a, b, c, out, np.int32(1)))], arch="sm_90a",
                                  options={"executor": executor, "race": True, "poison": True})
            runs.append((out, stats))
        assert np.array_equal(runs[0][0], runs[1][0]) and runs[0][1] == runs[1][1], name
        assert runs[0][1].opcodes["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"] == 2 * 4   # a warp each


def test_the_gpu_backend_launches_the_same_entry(monkeypatch):
    spec = importlib.util.spec_from_file_location("fake_cuda", Path(__file__).parent / "fake_cuda.py")
    fake_cuda = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fake_cuda", fake_cuda)
    spec.loader.exec_module(fake_cuda)
    fake = fake_cuda.FakeCuda(arch="sm_90")
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    kind = arith.kind_of("f32.f16.f16")                 # the executor test's entry (its translation is cached)
    A, B, C = _first_probe(kind).inputs(seed=0, tiles=1)
    got = rwg.wgmma_probe(kind, 8, A, B, C, scale_d=False, backend="gpu")
    assert np.array_equal(got, rwg.wgmma_reference(kind, 8, A, B, C, scale_d=False))
    assert ("get_kernel", "probe_m64n8k16_f32_f16_f16") in {c[:2] for c in fake.calls}


def test_bad_arguments_are_refused_by_name():
    kind = arith.kind_of("f32.bf16.bf16")
    A, B, C = _first_probe(kind).inputs()
    with pytest.raises(FormatRuleError, match="satfinite: only s8/u8"):
        rwg.entry(kind, 8, satfinite=True)
    with pytest.raises(FormatRuleError, match="a_registers: wgmma.cu takes A from registers for f32.f16.f16 only"):
        rwg.entry(kind, 8, a_registers=True)
    with pytest.raises(FormatRuleError, match="negate: integer wgmma has no imm-scale"):
        rwg.entry("s32.s8.u8", 8, negate=True)
    with pytest.raises(FormatRuleError, match="n: must be one of"):
        rwg.entry(kind, 16)
    with pytest.raises(DtypeError, match="A: dtype must be uint16"):
        rwg.wgmma_reference(kind, 8, A.view(np.float16), B, C)
    with pytest.raises(ShapeError, match=r"B: must be \(tiles, 16, 8\)"):
        rwg.wgmma_probe(kind, 8, A, B[:, :8], C)
    with pytest.raises(ShapeError, match="same number of tiles"):
        rwg.operands(kind, 8, A, np.concatenate([B, B]), C)
    with pytest.raises(FormatRuleError, match="b1 elements must be 0 or 1"):
        rwg.operands("s32.b1.b1", 8, np.full((1, 64, 256), 2, np.uint8), np.zeros((1, 256, 8), np.uint8),
                     np.zeros((1, 64, 8), np.int32))
    assert np.array_equal(A, _first_probe(kind).inputs()[0])          # inputs unchanged
