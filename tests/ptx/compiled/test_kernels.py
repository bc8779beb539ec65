"""Every test kernel (tests/ptx/kernels) and refsim/cuda's five kernels through both executors:
the compiled path writes the interpreter's bytes and reports its statistics, under lockstep and
seeded random schedules, with and without the race / poison checks, and when blocks outnumber the
resident slots."""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refsim import ptx
from conftest_compiled import needs_compiled, run_both

pytestmark = needs_compiled

KERNELS = Path(__file__).parents[1] / "kernels"
FEW = settings(max_examples=4, deadline=None)


@functools.lru_cache(maxsize=None)
def module(name: str) -> ptx.Module:
    return ptx.Module((KERNELS / f"{name}.ptx").read_text())


def ints(n, lo=-(2**31), hi=2**31 - 1, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, n, endpoint=True).astype(np.int32)


@FEW
@given(n=st.integers(1, 700), seed=st.integers(0, 2**16))
def test_control_flow_kernels(n, seed):
    x = ints(n, -(2**20), 2**20, seed)
    run_both(module("control"), "branchy", (n + 127) // 128, 128, [x, np.zeros(n, np.int32), n])
    run_both(module("control"), "early_exit", (n + 255) // 256, 256, [x, np.zeros(n, np.int32), n])
    xs = ints(min(n, 70), 1, 3000, seed).astype(np.uint32)
    run_both(module("control"), "collatz", 2, 64, [xs, np.zeros(xs.size, np.int32), xs.size])


@FEW
@given(n=st.integers(1, 700), warps=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_shared_memory_barriers_and_shuffles(n, warps, seed):
    x = ints(n, seed=seed)
    nb = (n + 255) // 256
    run_both(module("reduce"), "block_sum", nb, 256, [x, np.zeros(nb, np.int32), n])
    run_both(module("reduce"), "block_sum", nb, 256, [x, np.zeros(nb, np.int32), n], race=True, poison=True)
    xw = ints(32 * warps, -(2**24), 2**24, seed)
    run_both(module("reduce"), "shuffles", 1, 32 * warps, [xw, np.zeros(4 * 32 * warps, np.int32)])


@FEW
@given(n=st.integers(1, 600), seed=st.integers(0, 2**16), schedule=st.sampled_from(["lockstep", "random"]))
def test_atomics_under_both_schedules(n, seed, schedule):
    x = ints(n, -50, 50, seed)
    m = module("atomics")
    grid = (n + 127) // 128
    run_both(m, "histogram", (n + 255) // 256, 256, [x, np.zeros(16, np.uint32), n], schedule=schedule, seed=seed)
    run_both(m, "maxpos", grid, 128, [x, np.array([-(2**31), 0], np.int32), n], schedule=schedule, seed=seed)
    run_both(m, "claim_max", grid, 128, [x, np.array([x.max(), 0], np.int32), np.array([-1], np.int32), n],
             schedule=schedule, seed=seed)


@FEW
@given(nb=st.integers(1, 6), seed=st.integers(0, 2**16), schedule=st.sampled_from(["lockstep", "random"]))
def test_blocks_spinning_on_a_lock_handed_in_reverse_order(nb, seed, schedule):
    x = ints(nb * 64, -1000, 1000, seed)
    run_both(module("flags"), "chain", nb, 64, [x, np.zeros(1, np.int32), np.zeros(1, np.int32), nb],
             schedule=schedule, seed=seed)


@FEW
@given(tiles=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_cp_async_pipeline_with_the_checks(tiles, seed):
    x = ints(tiles * 128, -(2**20), 2**20, seed)
    for opts in ({}, {"race": True}, {"poison": True}):
        run_both(module("cp_async"), "pipeline", 1, 32, [x, np.zeros_like(x), tiles], **opts)


f16_any = st.integers(0, 0xFFFF)      # every fp16 pattern: NaN, Inf and -0 take the integer model's rules


@FEW
@given(a=st.lists(f16_any, min_size=256, max_size=256), b=st.lists(f16_any, min_size=128, max_size=128),
       arch=st.sampled_from(["sm_80", "sm_86", "sm_89", "sm_90"]))
def test_ldmatrix_mma_tile_with_special_values(a, b, arch):
    A = np.array(a, np.uint16).view(np.float16).reshape(16, 16)
    Bt = np.array(b, np.uint16).view(np.float16).reshape(8, 16)
    run_both(module("mma"), "tile_gemm", 1, 32, [A, Bt, np.zeros((16, 8), np.float32)], arch=arch)


# the edge values of each float format: +-0, the smallest and largest subnormals, the smallest normal, the
# largest finite, 1; and the non-finite ones: +-Inf, a quiet and a signalling NaN of each sign
F16_FINITE = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00]
F16_NONFINITE = [0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0xFC01]
F32_FINITE = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
              0xFF7FFFFF, 0x3F800000]
F32_NONFINITE = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00000]


def _edge_tiles(kind, finite: bool, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """4 tiles of A, B, C bits (refsim.cuda.mma's layout) of one f16-input kind: tile 0 all -0 (the
    negative-zero rule), tile 1 +-0 products with -0 and +0 C, tiles 2-3 random picks of the edge values;
    with ``finite=False`` tiles 2-3 get one non-finite value each in A, B and C (and tile 3 Inf x 0)."""
    K = int(kind.shape.split("k")[1])
    cw, c_fin, c_non = (np.uint32, F32_FINITE, F32_NONFINITE) if kind.c == "f32" else (np.uint16, F16_FINITE, F16_NONFINITE)
    A = rng.choice(np.array(F16_FINITE, np.uint16), (4, 16, K))
    B = rng.choice(np.array(F16_FINITE, np.uint16), (4, K, 8))
    C = rng.choice(np.array(c_fin, cw), (4, 16, 8))
    A[0], B[0], C[0] = 0x8000, 0x8000, cw(0x80000000 if kind.c == "f32" else 0x8000)
    zeros = np.array([0, 0x8000], np.uint16)
    A[1], B[1] = rng.choice(zeros, (16, K)), rng.choice(zeros, (K, 8))
    C[1] = np.where(rng.random((16, 8)) < 0.5, C[0], 0).astype(cw)
    if not finite:
        for t in (2, 3):
            A[t, rng.integers(16), rng.integers(K)] = rng.choice(F16_NONFINITE)
            B[t, rng.integers(K), rng.integers(8)] = rng.choice(F16_NONFINITE)
            C[t, rng.integers(16), rng.integers(8)] = rng.choice(c_non)
        A[3, 5, :] = 0x7C00                                # Inf x (+-0 or finite) along row 5
        B[3, :, 2] = 0x0000
    return A, B, C


@pytest.mark.parametrize("entry", ["probe_m16n8k16_f32_f16_f16_f32", "probe_m16n8k16_f16_f16_f16_f16",
                                   "probe_m16n8k8_f32_f16_f16_f32", "probe_m16n8k8_f16_f16_f16_f16"])
def test_f16_mma_on_the_edge_values_equals_the_interpreter(entry, monkeypatch):
    # the compiled executor's mma: finite steps of m16n8k16 .f32 through the compiled twin of
    # mma_steps.mma_k16_f32, every other step (Inf, NaN, f16 accumulation, k8) through the interpreter's
    # handler (a callback); both bit for bit the interpreter's, and each step goes where it should
    from refsim.cuda import build, mma as cm
    from refsim.ptx.compiled.runner import CompiledLaunch

    kind = next(k for k, s in cm.forms() if cm.entry(k, s) == entry)
    m = ptx.Module(build.ptx("mma", "sm_80"))
    handed = []
    real = CompiledLaunch._callback
    monkeypatch.setattr(CompiledLaunch, "_callback",
                        lambda self, p, th: handed.append(self.k.instructions[p].opcode) or real(self, p, th))
    twin = entry == "probe_m16n8k16_f32_f16_f16_f32"
    for finite in (True, False):
        A, B, C = _edge_tiles(kind, finite, np.random.default_rng(7))
        a, b, c = cm.pack(kind, A, B, C)
        d = np.zeros((4, 32, cm.registers(kind)[3]), np.uint32)
        handed.clear()
        for arch in ("sm_80", "sm_90"):
            run_both(m, entry, 1, 128, [a, b, c, d, np.int32(4)], arch=arch)
        assert handed.count("mma") == (0 if twin and finite else 2), (finite, handed)


# one integer mma form per (shape, element bits), mixed signedness, with and without .satfinite
_INT_MMA = [("m16n8k16", "s8", "u8", True), ("m16n8k32", "u8", "s8", False), ("m16n8k32", "s4", "u4", True),
            ("m16n8k64", "u4", "s4", False), ("m16n8k64", "s4", "s4", True)]


@pytest.mark.parametrize("shape,a,b,satfinite", _INT_MMA)
def test_integer_mma_on_the_edge_values_equals_the_interpreter(shape, a, b, satfinite, monkeypatch):
    # the compiled executor's integer mma: every step through refsim_mma_int (the compiled twin of
    # integer_mma.mma_int), none handed to Python; bit for bit the interpreter's and refsim.arith's
    from refsim.arith.integer_mma import INT_RANGES
    from refsim.cuda import build, mma as cm
    from refsim.ptx.compiled.runner import CompiledLaunch

    kind = next(k for k, s in cm.forms() if (k.shape, k.a, k.b) == (shape, a, b) and s == satfinite)
    K = int(shape.split("k")[1])
    rng = np.random.default_rng(3)
    edge = {t: np.array(sorted({*INT_RANGES[t], 0, 1, -1} & set(range(INT_RANGES[t][0], INT_RANGES[t][1] + 1))))
            for t in (a, b)}
    A, B = rng.choice(edge[a], (4, 16, K)), rng.choice(edge[b], (4, K, 8))
    A[0], B[0] = edge[a][np.argmax(abs(edge[a]))], edge[b][np.argmax(abs(edge[b]))]     # largest products
    C = rng.choice(np.array([-(2**31), -(2**31) + 1, -1, 0, 1, 2**31 - 2, 2**31 - 1]), (4, 16, 8)).astype(np.int32)
    C[0, :8], C[0, 8:] = 2**31 - 1, -(2**31)                                           # tile 0 wraps / saturates
    regs = cm.pack(kind, A.astype(cm._storage(a)), B.astype(cm._storage(b)), C)
    handed = []
    real = CompiledLaunch._callback
    monkeypatch.setattr(CompiledLaunch, "_callback",
                        lambda self, p, th: handed.append(self.k.instructions[p].opcode) or real(self, p, th))
    m = ptx.Module(build.ptx("mma", cm.ptx_arch(kind)))
    d = np.zeros((4, 32, 4), np.uint32)
    _, arrays, _ = run_both(m, cm.entry(kind, satfinite), 1, 128, [*regs, d, np.int32(4)], arch="sm_80")
    assert handed.count("mma") == 0, handed
    assert arrays[3].tobytes() == cm.mma_reference(kind, "sm_80", *regs, satfinite=satfinite).tobytes()


@FEW
@given(a=st.integers(-(2**20), 2**20), b=st.sampled_from([0.25, -1.5, 3.0, 2.0**-10]), sel=st.integers(0, 2**31 - 1))
def test_local_memory_struct_parameter_vote_and_wide_atomics(a, b, sel):
    args = [np.zeros(70, np.int32), np.zeros(1, np.float32), np.zeros(1, np.uint64), np.zeros(1, np.float16),
            struct.pack("<if", a, b), sel]
    run_both(module("misc"), "misc", 1, 32, args)
    run_both(module("misc"), "misc", 1, 32, args, poison=True)


def test_blocks_beyond_the_resident_limit_refill_slots(monkeypatch):
    from refsim.ptx import engine

    monkeypatch.setattr(engine, "RESIDENT_THREADS", 512)          # two 256-thread block slots
    n = 7 * 256 - 3
    stats, _, _ = run_both(module("reduce"), "block_sum", 7, 256, [ints(n, seed=5), np.zeros(7, np.int32), n])
    assert stats.blocks == 7 and stats.barriers == 7 * 9


# ---------------------------------------------------------------------------------------------
# refsim/cuda: each host function's launches through both executors (small pinned cases)

@pytest.fixture
def both_executors(monkeypatch):
    """Module.launch runs every launch through both executors and returns the compiled one's."""
    def launch(self, kernel, grid, block, args, **options):
        options.pop("executor", None)
        stats, arrays, err = run_both(self, kernel, grid, block, args, **options)
        if err is not None:
            raise err
        for a, b in zip(args, arrays):
            if isinstance(a, np.ndarray):
                a[...] = b
        return stats
    monkeypatch.setattr(ptx.Module, "launch", launch)


def test_cuda_gemv_kernels(both_executors):
    import refsim.cuda as rc
    from refsim.formats import awq, bitplane, gptq

    rng = np.random.default_rng(1)
    k, n, g = 64, 32, 2
    ckpt = gptq.pack(rng.integers(0, 16, (k, n)), (rng.random((g, n)) * 0.02 + 0.001).astype(np.float32),
                     rng.integers(1, 16, (g, n)), 4, g_idx=rng.permutation(np.arange(k) // 32).astype(np.int32),
                     group_size=32, checkpoint_format="gptq_v2")
    rc.gptq_gemv(rng.standard_normal((3, k)).astype(np.float16), ckpt)
    ck = awq.pack(rng.integers(0, 16, (48, 24)), (rng.random((3, 24)) * 0.02).astype(np.float32),
                  rng.integers(0, 16, (3, 24)), group_size=16)
    rc.awq_gemv(rng.standard_normal((2, 48)).astype(np.float16), ck)
    q = bitplane.pack(rng.integers(0, 2**7, (4, 4128)).astype(np.uint8), 7)
    rc.anyprec_gemv(rng.standard_normal((1, 4128)).astype(np.float16), q,
                    rng.standard_normal((4, 128)).astype(np.float16), 7, "ascending")


def test_cuda_mixed_and_atom_kernels(both_executors):
    import refsim.cuda as rc
    from refsim.formats import atom
    from refsim.formats import mixed_2_4_16 as m2416
    from refsim.quant import mixed_2_4_16 as q2416

    rng = np.random.default_rng(4)
    W = (rng.standard_normal((128, 16)) * 0.05).astype(np.float32)
    X = rng.standard_normal((256, 128))
    rc.mixed_gemv(m2416.pack(q2416.quantize(W, (X.T @ X) / 128, alpha=0.25, outlier_ratio=0.005)),
                  rng.standard_normal(128).astype(np.float16))
    m, n, kb, keeper = 20, 6, 384, 32
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8), (rng.random((m, 3)) * 0.1).astype(np.float16),
                             rng.integers(-128, 128, (m, keeper)).astype(np.int8), (rng.random(m) * 0.01).astype(np.float16))
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), (rng.random((3, n)) * 0.1).astype(np.float16),
                         rng.integers(-128, 128, (keeper, n)).astype(np.int8), (rng.random(n) * 0.01).astype(np.float16))
    rc.atom_group_gemm(a, w)


@pytest.mark.slow
@pytest.mark.parametrize("m, k, n, group, sms, arch", [(1, 256, 256, 128, 2, "sm_80"), (20, 256, 256, 128, 3, "sm_89"),
                                                         (2, 384, 256, None, 6, "sm_86"), (2, 512, 256, 128, 7, "sm_90")])
def test_cuda_marlin(both_executors, m, k, n, group, sms, arch):
    from refsim.cuda import marlin as cm
    from refsim.formats import marlin

    rng = np.random.default_rng(m + sms)
    g = 1 if group is None else k // group
    B, s = marlin.pack(rng.integers(0, 16, (k, n)).astype(np.uint8), (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16),
                       group)
    cm.gemm(rng.standard_normal((m, k)).astype(np.float16), B, s, None, arch=arch, sms=sms)


FLOAT_ATOMICS = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 px, .param .u64 pout)
{
.reg .b32 %r<8>;
.reg .b64 %rd<8>;
.reg .b16 %h<4>;
ld.param.u64 %rd1, [px];
ld.param.u64 %rd2, [pout];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd1, %rd3;
ld.global.u32 %r2, [%rd4];
and.b32 %r3, %r1, 3;
mul.wide.u32 %rd5, %r3, 4;
add.s64 %rd6, %rd2, %rd5;
atom.global.add.f32 %r4, [%rd6], %r2;
cvt.rn.f16.f32 %h1, %r2;
red.global.add.noftz.f16 [%rd2+32], %h1;
st.global.u32 [%rd4], %r4;
}
"""


@FEW
@given(seed=st.integers(0, 2**16), order=st.permutations(range(5)))
def test_float_atomics_contention_and_every_landing_order(seed, order):
    m = ptx.Module(FLOAT_ATOMICS)
    x = (np.random.default_rng(seed).standard_normal(96) * 2.0 ** 20).astype(np.float32)
    out = np.zeros(10, np.float32)
    stats, _, _ = run_both(m, "k", 1, 96, [x, out])
    assert stats.float_atomic_contention == 96          # one f16 address for every thread of the step
    run_both(m, "k", 1, 96, [x, out], atomic_order=tuple(order))
