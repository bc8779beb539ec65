"""The test kernels of tests/ptx/kernels/*.cu, run from their committed PTX and compared bit for bit
with NumPy oracles written here (hypothesis draws the inputs); the nvcc-marked test recompiles."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refsim import ptx
from refsim.testing import assert_bitexact

KERNELS = Path(__file__).parent / "kernels"
FEW = settings(max_examples=6, deadline=None)


@functools.lru_cache(maxsize=None)
def module(name: str) -> ptx.Module:
    return ptx.Module((KERNELS / f"{name}.ptx").read_text())


def int32s(n_min=1, n_max=300, lo=-(2**31), hi=2**31 - 1):
    return st.lists(st.integers(lo, hi), min_size=n_min, max_size=n_max).map(lambda v: np.array(v, np.int32))


# ---------------------------------------------------------------- control flow
@FEW
@given(x=int32s(lo=-(2**20), hi=2**20))
def test_branchy_divergence_reconverges(x):
    n = len(x)
    y = np.zeros(n, np.int32)
    module("control").launch("branchy", (n + 127) // 128, 128, [x, y, n])
    t = np.arange(n) % 128
    odd = (x & 1).astype(bool)
    expected = np.where(odd, 3 * x + 1 + np.where(t & 1, 7, -5), np.where(t & 2, (x >> 1) ^ 0x55, -(x >> 1)))
    assert_bitexact(y, expected.astype(np.int32))


def collatz_steps(v: int) -> int:
    s = 0
    while v != 1 and s < 1000:
        v = (3 * v + 1) % 2**32 if v & 1 else v >> 1
        s += 1
    return s


@FEW
@given(x=st.lists(st.integers(1, 3000), min_size=1, max_size=70).map(lambda v: np.array(v, np.uint32)))
def test_collatz_loop_trip_counts_differ_per_lane(x):
    n = len(x)
    steps = np.full(n, -1, np.int32)
    module("control").launch("collatz", (n + 63) // 64, 64, [x, steps, n])
    assert_bitexact(steps, np.array([collatz_steps(int(v)) for v in x], np.int32))


@FEW
@given(x=int32s(lo=-(2**20), hi=2**20))
def test_early_exit_before_barrier(x):
    n = len(x)
    y = np.full(n, -7, np.int32)
    module("control").launch("early_exit", (n + 255) // 256, 256, [x, y, n])
    assert_bitexact(y, np.where(x < 0, -7, 2 * x).astype(np.int32))


# ---------------------------------------------------------------- shared memory and shuffles
@FEW
@given(x=int32s(n_max=700))
def test_block_sum_tree_reduction(x):
    n = len(x)
    nb = (n + 255) // 256
    out = np.zeros(nb, np.int32)
    stats = module("reduce").launch("block_sum", nb, 256, [x, out, n])
    padded = np.zeros(nb * 256, np.int64)
    padded[:n] = x
    expected = (padded.reshape(nb, 256).sum(axis=1) % 2**32).astype(np.uint32).view(np.int32)
    assert_bitexact(out, expected)
    assert stats.barriers == nb * 9   # one after the stores, eight in the tree


@FEW
@given(x=st.integers(1, 3).flatmap(lambda w: int32s(32 * w, 32 * w, -(2**24), 2**24)))
def test_warp_shuffles(x):
    n = len(x)
    y = np.zeros(4 * n, np.int32)
    module("reduce").launch("shuffles", 1, n, [x, y])
    xw = x.reshape(-1, 32).astype(np.int64)
    lane = np.arange(32)
    expected = np.stack([
        np.repeat(xw.sum(axis=1), 32),
        np.repeat(xw.max(axis=1), 32),
        xw[:, (lane * 5 + 3) % 32].reshape(-1),
        np.where(lane >= 3, xw[:, np.maximum(lane - 3, 0)], xw).reshape(-1),
    ], axis=1).astype(np.int32)
    assert_bitexact(y.reshape(n, 4), expected)


# ---------------------------------------------------------------- atomics
@FEW
@given(x=int32s(n_max=600))
def test_histogram_shared_and_global_atomics(x):
    n = len(x)
    hist = np.zeros(16, np.uint32)
    module("atomics").launch("histogram", (n + 255) // 256, 256, [x, hist, n])
    assert_bitexact(hist, np.bincount(x & 15, minlength=16).astype(np.uint32))


@FEW
@given(x=int32s(n_max=600, lo=-50, hi=50), seed=st.integers(0, 3))
def test_atomic_max_add_and_cas(x, seed):
    n = len(x)
    best = np.array([-(2**31), 0], np.int32)
    m = module("atomics")
    m.launch("maxpos", (n + 127) // 128, 128, [x, best, n], schedule="random", seed=seed)
    assert_bitexact(best, np.array([x.max(), (x > 0).sum()], np.int32))
    owner = np.array([-1], np.int32)
    m.launch("claim_max", (n + 127) // 128, 128, [x, best, owner, n])
    assert x[owner[0]] == x.max()


# ---------------------------------------------------------------- inter-block flags
@FEW
@given(nb=st.integers(1, 6), seed=st.integers(0, 2**16), schedule=st.sampled_from(["lockstep", "random"]))
def test_blocks_hand_a_lock_in_reverse_order(nb, seed, schedule):
    x = np.random.default_rng(seed).integers(-1000, 1000, nb * 64).astype(np.int32)
    out = np.zeros(1, np.int32)
    lock = np.zeros(1, np.int32)
    module("flags").launch("chain", nb, 64, [x, out, lock, nb], schedule=schedule, seed=seed)
    assert_bitexact(out, np.array([x.sum()], np.int32))
    assert_bitexact(lock, np.array([nb], np.int32))


# ---------------------------------------------------------------- cp.async
@FEW
@given(tiles=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_cp_async_double_buffer(tiles, seed):
    x = np.random.default_rng(seed).integers(-(2**20), 2**20, tiles * 128).astype(np.int32)
    y = np.zeros_like(x)
    module("cp_async").launch("pipeline", 1, 32, [x, y, tiles], race=True)
    assert_bitexact(y, (2 * x + np.repeat(np.arange(tiles), 128)).astype(np.int32))


# ---------------------------------------------------------------- the committed PTX is nvcc's
@pytest.mark.slow
@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed (the committed PTX is used)")
def test_committed_ptx_matches_nvcc(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("regen", KERNELS / "regen.py")
    regen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regen)
    import re
    import subprocess

    committed_version = re.search(r"release [\d.]+, V[\d.]+", (KERNELS / "reduce.ptx").read_text()).group(0)
    installed = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    if committed_version not in installed:
        pytest.skip(f"the committed PTX comes from nvcc {committed_version}; another nvcc emits other PTX")
    strip = lambda s: [l for l in s.splitlines() if "Compiler Build ID" not in l]  # noqa: E731
    fresh = regen.compile_all(tmp_path)
    assert sorted(fresh) == sorted(p.name for p in KERNELS.glob("*.cu"))
    for cu, text in fresh.items():
        committed = (KERNELS / cu).with_suffix(".ptx").read_text()
        assert strip(text) == strip(committed), f"{cu}: run tests/ptx/kernels/regen.py"


# ---------------------------------------------------------------- ldmatrix + mma
f16_bits = st.integers(0, 0xFFFF).filter(lambda u: (u & 0x7C00) != 0x7C00)   # finite float16 patterns


@FEW
@given(a=st.lists(f16_bits, min_size=256, max_size=256), b=st.lists(f16_bits, min_size=128, max_size=128),
       arch=st.sampled_from(["sm_80", "sm_89", "sm_90"]))
def test_ldmatrix_mma_tile_equals_the_tensor_core_model(a, b, arch):
    from refsim.arith import tensor_core

    A = np.array(a, np.uint16).view(np.float16).reshape(16, 16)        # (M, K)
    B = np.array(b, np.uint16).view(np.float16).reshape(16, 8)         # (K, N)
    C = np.zeros((16, 8), np.float32)
    module("mma").launch("tile_gemm", 1, 32, [A, np.ascontiguousarray(B.T), C], arch=arch)
    assert_bitexact(C, tensor_core.mma_m16n8k16(arch, A, B, np.zeros((16, 8), np.float32)))


MMA_TYPES = {  # kernel of mma_types.cu -> (shape, A type, B type, K, container dtype)
    "bf16_k16": ("m16n8k16", "bf16", "bf16", 16, np.uint16), "bf16_k8": ("m16n8k8", "bf16", "bf16", 8, np.uint16),
    "f16_k8": ("m16n8k8", "f16", "f16", 8, np.uint16), "tf32_k8": ("m16n8k8", "tf32", "tf32", 8, np.uint32),
    "e4m3_k32": ("m16n8k32", "e4m3", "e4m3", 32, np.uint8), "e5m2_k32": ("m16n8k32", "e5m2", "e5m2", 32, np.uint8),
    "e4m3_e5m2_k32": ("m16n8k32", "e4m3", "e5m2", 32, np.uint8),
}


@FEW
@given(kernel=st.sampled_from(sorted(MMA_TYPES)), arch=st.sampled_from(["sm_89", "sm_90"]), seed=st.integers(0, 2**32 - 1))
def test_mma_types_kernels_equal_the_tensor_core_models(kernel, arch, seed):
    from refsim.arith import tensor_core, tensor_core_types

    shape, at, bt, K, dt = MMA_TYPES[kernel]
    rng = np.random.default_rng(seed)
    top = np.iinfo(dt).max
    A = rng.integers(0, top, (16, K), dtype=np.uint64, endpoint=True).astype(dt)   # any bit pattern
    B = rng.integers(0, top, (K, 8), dtype=np.uint64, endpoint=True).astype(dt)
    C = (rng.standard_normal((16, 8)) * 2.0 ** rng.integers(-20, 20, (16, 8))).astype(np.float32)
    D = np.zeros((16, 8), np.float32)
    module("mma_types").launch(kernel, 1, 32, [A, np.ascontiguousarray(B.T), C, D], arch=arch)
    if at == "f16":
        want = tensor_core.mma_m16n8k8(arch, A.view(np.float16), B.view(np.float16), C)
    else:
        want = tensor_core_types.mma(arch, shape, at, bt, A, B, C)
    assert_bitexact(D, want, f"{kernel} at {arch}")


# ---------------------------------------------------------------- local memory, struct param, vote, atomics
@FEW
@given(a=st.integers(-(2**20), 2**20), b=st.sampled_from([0.25, -1.5, 3.0, 2.0**-10]), sel=st.integers(0, 2**31 - 1))
def test_local_array_struct_param_vote_and_wide_atomics(a, b, sel):
    import struct

    out = np.zeros(70, np.int32)
    fo, u64, h = np.zeros(1, np.float32), np.zeros(1, np.uint64), np.zeros(1, np.float16)
    module("misc").launch("misc", 1, 32, [out, fo, u64, h, struct.pack("<if", a, b), sel])
    t = np.arange(32)
    expected = np.zeros(70, np.int32)
    expected[:32] = ((t + sel) % 16) * t + a
    expected[32] = np.uint32(0xAAAAAAAA).view(np.int32)
    expected[33:65] = 1
    assert_bitexact(out, expected)
    assert_bitexact(fo, np.array([np.float32(b) * 32], np.float32))       # 32 exact additions
    assert_bitexact(u64, np.array([32 << 33], np.uint64))
    assert_bitexact(h, np.array([16.0], np.float16))


def test_blocks_beyond_the_resident_limit_run_in_refilled_slots(monkeypatch):
    from refsim.ptx import engine

    monkeypatch.setattr(engine, "RESIDENT_THREADS", 512)          # two 256-thread block slots
    n = 7 * 256 - 3
    x = np.random.default_rng(5).integers(-(2**31), 2**31, n).astype(np.int32)
    out = np.zeros(7, np.int32)
    stats = module("reduce").launch("block_sum", 7, 256, [x, out, n])
    padded = np.zeros(7 * 256, np.int64)
    padded[:n] = x
    assert_bitexact(out, (padded.reshape(7, 256).sum(axis=1) % 2**32).astype(np.uint32).view(np.int32))
    assert stats.blocks == 7 and stats.barriers == 7 * 9


_PACKED_AND_IMMEDIATE = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p){
 .reg .b32 %r<5>; .reg .b64 %rd<3>; .reg .f32 %f<3>;
 ld.param.u64 %rd1, [p];
 cvta.to.global.u64 %rd2, %rd1;
 ld.global.u32 %r1, [%rd2];
 ld.global.u32 %r4, [%rd2+4];
 max.s16x2 %r2, %r1, %r4;
 min.u16x2 %r3, %r1, %r4;
 st.global.u32 [%rd2+8], %r2;
 st.global.u32 [%rd2+12], %r3;
 ld.global.f32 %f1, [%rd2+16];
 add.rz.f32 %f2, %f1, 0f3F800000;
 st.global.f32 [%rd2+20], %f2;
 ret;
}
"""


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
def test_packed_16x2_min_max_and_a_float_immediate_under_a_rounding_mode(executor):
    # .s16x2/.u16x2 are types of their own (the parser once read them as modifiers and refused the
    # module), and an immediate operand of add.rz.f32 is broadcast like a register
    a = np.zeros(6, np.uint32)
    a[:2] = [0xFFFF0002, 0x00017FFF]                       # halves (hi, lo): (-1 | 65535, 2), (1, 32767)
    a[4] = np.float32(2.0**-20).view(np.uint32)
    ptx.Module(_PACKED_AND_IMMEDIATE).launch("k", grid=1, block=1, args=[a], executor=executor)
    assert hex(a[2]) == hex(0x00017FFF)     # signed max: hi max(-1, 1) = 1, lo max(2, 32767) = 32767
    assert hex(a[3]) == hex(0x00010002)     # unsigned min: hi min(65535, 1) = 1, lo min(2, 32767) = 2
    # 1 + 2^-20 is exact in f32; toward zero keeps it
    assert a[5] == np.float32(1 + 2.0**-20).view(np.uint32)
