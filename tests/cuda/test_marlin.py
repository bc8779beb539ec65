"""refsim/cuda/marlin.cu: its PTX carries the design's instructions, its launch plan is the emulator's,
and run through refsim.ptx it writes what refsim.emulator.marlin_kernel.marlin_gemm writes, bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refsim.cuda as rc
from refsim.cuda import build
from refsim.cuda import marlin as cm
from refsim.emulator import marlin_kernel as mk
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin, stripes
from refsim.testing import assert_bitexact, check_kernel


_GAP = cm.engine_gap()
needs_engine = pytest.mark.skipif(_GAP is not None, reason=f"refsim.ptx cannot run marlin.cu yet: {_GAP}")


def _problem(rng, m, k, n, group_size):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)                     # (K, N) codes
    g = 1 if group_size is None else k // group_size
    sc = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16)          # (G, N)
    B, s = marlin.pack(q, sc, group_size)
    A = rng.standard_normal((m, k)).astype(np.float16)                    # (M, K)
    return A, B, s


def _entry_bodies() -> dict[str, str]:
    text = build.ptx(cm.SOURCE, cm.KERNEL_ARCH)
    parts = re.split(r"^\.visible \.entry (\w+)\(", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


# ---------------------------------------------------------------------------------------------
# the PTX carries the instructions the design depends on (freshness: tests/cuda/test_build.py)
# ---------------------------------------------------------------------------------------------
def test_every_tile_shape_and_group_mode_has_an_entry():
    expected = {cm.entry_name(mb, stripes.TileConfig(16 * tkb, 16 * tnb, gb))
                for mb, tnb, tkb in stripes.KERNELS for gb in (None, 8)}
    assert set(cm.entries()) == expected


@pytest.mark.parametrize("name", sorted(_entry_bodies()))
def test_entry_uses_the_marlin_instruction_mix(name):
    body = _entry_bodies()[name]
    mb, tnb, tkb = (int(x) for x in re.match(r"refsim_marlin_m(\d)_n(\d+)_k(\d+)_", name).groups())
    k_steps = tkb // (8 // (tnb // 4))                   # k16 blocks per warp per tile
    ops = re.findall(r"^\s*(?:@%p\d+\s+)?([a-z][\w.:]*)", body, flags=re.M)
    count = {op: ops.count(op) for op in set(ops)}
    # fully unrolled tile: per k16 block 4 sub-tiles x 2 n8 halves x MB m-blocks of m16n8k16
    assert count["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"] == 8 * mb * k_steps
    assert count["ldmatrix.sync.aligned.m8n8.x4.shared.b16"] == mb * k_steps
    # dequant: two lop3 (a & b) | c per word and half, one sub.rn / fma.rn per word and half
    assert count["lop3.b32"] == 16 * k_steps and set(re.findall(r"lop3\.b32[^;]*, (\d+);", body)) == {"234"}
    assert count["sub.rn.f16x2"] == count["fma.rn.f16x2"] == 8 * k_steps
    grouped = name.endswith("_grouped")
    # grouped: 4 scale products per sub-tile in the loop; per-channel: one per stored half2
    assert count["mul.rn.f16x2"] == (16 * k_steps if grouped else 16 * mb)
    assert count["cp.async.cg.shared.global"] > 0 and count["cp.async.commit_group"] > 0
    assert "cp.async.wait_group" in count
    assert count["ld.global.acquire.gpu.b32"] == 1 and count["red.relaxed.gpu.global.add.s32"] == 1
    assert count["fence.acq_rel.gpu"] == 1
    # no float op left to the compiler's choice of rounding or contraction, no local memory
    float_ops = [op for op in ops if re.match(r"(add|sub|mul|fma|mad)\.(f32|f16)", op)]
    assert float_ops == [] and count.get("add.rn.f32", 0) > 0
    assert not any(".local" in op for op in ops)


def test_shared_memory_matches_the_napkin_math_and_fits_sm80():
    # k128 x n128, one m-block, grouped: A 16 rows x 128 fp16 = 4096 B, B 128 x 128 x 4 bit = 8192 B,
    # scale row 128 x 2 B = 256 B per stage, 4 stages
    cfg = stripes.marlin_tile_config(1, 256, 256, 128)
    assert cm.shared_bytes(1, cfg) == 4 * (4096 + 8192 + 256)
    # k64 x n256, four m-blocks, per-channel: A 64 x 64 x 2 = 8192 B, B 64 x 256 / 2 = 8192 B
    cfg = stripes.marlin_tile_config(64, 256, 256, None)
    assert cm.shared_bytes(4, cfg) == 4 * (8192 + 8192)
    assert max(cm.shared_bytes(mb, stripes.TileConfig(16 * tkb, 16 * tnb, gb))
               for mb, tnb, tkb in stripes.KERNELS for gb in (None, 8)) <= 163 * 1024


@pytest.mark.parametrize("m", [1, 16, 17, 70, 130, 1100])
def test_launch_plan_covers_every_row_once_with_the_emulators_launches(m):
    plan = cm.launch_plan(m, 512, 256, 7, None)
    rows = np.concatenate([np.arange(ln.row_start, ln.row_start + ln.rows) for ln in plan])
    assert np.array_equal(rows, np.arange(m))
    launches = stripes.stripes(m, 512, 256, 7, None).launches
    assert [(ln.row_start, ln.rows) for ln in plan] == [(x.row_start, x.prob_m) for x in launches]
    assert all(ln.grid == 7 and ln.block == 256 and ln.kernel in cm.entries() for ln in plan)


def test_marlin_gemm_is_registered_with_its_oracle():
    assert rc.marlin_gemm is cm.marlin_gemm
    assert ("marlin_gemm", "marlin", "refsim.emulator.marlin_kernel.marlin_gemm") in {
        (k.name, k.source, k.oracle) for k in rc.kernels()}


def test_bad_input_raises_a_specific_error():
    A, B, s = _problem(np.random.default_rng(0), 2, 256, 256, 128)
    with pytest.raises(FormatRuleError, match="sm_80 or newer"):
        cm.marlin_gemm(A, B, s, arch="sm_70")
    with pytest.raises(FormatRuleError, match="backend"):
        cm.marlin_gemm(A, B, s, backend="cpu")
    with pytest.raises(ShapeError, match="A: must have K"):
        cm.marlin_gemm(A[:, :128], B, s)
    with pytest.raises(ShapeError, match="s:"):
        cm.marlin_gemm(A, B, s[:, :128])
    with pytest.raises(FormatRuleError, match="all zero"):
        cm.gemm(A, B, s, np.ones(256 // 128 * 16, np.int32))
    with pytest.raises(ShapeError, match="locks"):
        cm.gemm(A, B, s, np.zeros(3, np.int32))


# ---------------------------------------------------------------------------------------------
# run through refsim.ptx: bit for bit the emulator
# ---------------------------------------------------------------------------------------------
# (M, K, N, group_size, sms, arch): slices per column in the comment (k128 x n128 tile for M <= 16,
# k64 x n256 above; stripes start on group boundaries when grouped)
CASES = [
    (1, 256, 256, 128, 2, "sm_80"),       # 1 slice per column
    (3, 512, 256, 128, 3, "sm_80"),       # 2 slices (iters 3 over 4 k-tiles)
    (2, 384, 256, None, 6, "sm_86"),      # 3 slices (iters 1), per-channel
    (16, 512, 256, 128, 8, "sm_80"),      # 4 slices (iters 1), full m-block
    (20, 256, 256, 128, 3, "sm_89"),      # k64 x n256, 2 m-blocks, 12 padded rows, 2 slices
    (70, 128, 256, None, 2, "sm_80"),     # two launches (64 rows + 6 rows), 2 slices
    (2, 512, 256, 128, 7, "sm_90"),       # Hopper tensor-core model
]


@needs_engine
@pytest.mark.parametrize("m,k,n,gs,sms,arch", CASES)
def test_kernel_equals_the_emulator_bit_for_bit(m, k, n, gs, sms, arch):
    rng = np.random.default_rng(1000 * m + sms)
    A, B, s = _problem(rng, m, k, n, gs)
    expected = mk.marlin_gemm(A, B, s, arch=arch, sms=sms)
    assert_bitexact(cm.marlin_gemm(A, B, s, arch=arch, sms=sms), expected,
                    f"marlin.cu M={m} K={k} N={n} g={gs} sms={sms} {arch}")


@needs_engine
def test_kernel_leaves_the_workspace_and_the_inputs_as_they_were():
    A, B, s = _problem(np.random.default_rng(5), 3, 512, 256, 128)
    copies = [x.copy() for x in (A, B, s)]
    locks = cm.workspace(256)
    cm.gemm(A, B, s, locks, sms=8)                      # 4 slices per column: every lock moves
    assert not locks.any()
    for x, c in zip((A, B, s), copies):
        assert_bitexact(x, c, "input")


@needs_engine
@pytest.mark.slow
@pytest.mark.parametrize("m,k,n,gs,sms", [
    (130, 384, 256, None, 5),     # parallel launch (2 problems of 64 rows) + a 2-row launch, 2 slices
    (64, 1024, 512, 128, 11),     # 4 m-blocks, odd SM count, slices across column boundaries
    (1, 256, 256, 128, 108),      # the default A100 grid: 104 of 108 blocks have no tile
])
def test_kernel_equals_the_emulator_on_larger_shapes(m, k, n, gs, sms):
    rng = np.random.default_rng(m + sms)
    A, B, s = _problem(rng, m, k, n, gs)
    assert_bitexact(cm.marlin_gemm(A, B, s, sms=sms), mk.marlin_gemm(A, B, s, sms=sms),
                    f"marlin.cu M={m} K={k} N={n} g={gs} sms={sms}")


@needs_engine
def test_kernel_has_no_shared_memory_race_or_uninitialised_read_under_a_random_schedule():
    # warps and blocks interleaved at random, with the race and poison checks on: a missing
    # __syncthreads or cp.async wait in marlin.cu raises (checked: dropping the barrier after the
    # main loop's wait_group gives PtxRaceError at the ldmatrix) instead of passing by luck
    A, B, s = _problem(np.random.default_rng(0), 1, 512, 256, 128)
    C = cm.marlin_gemm(A, B, s, sms=4, options=dict(schedule="random", seed=0, race=True, poison=True))
    assert_bitexact(C, mk.marlin_gemm(A, B, s, sms=4), "marlin.cu under a random schedule")


# ------------------------------------------------------------ properties: drawn shapes, partitions and values
#: fp16 values that stress conversions and signs: +-0, the smallest and largest subnormals, the
#: smallest normal, values whose products and sums land on fp16 / fp32 rounding ties
_SPECIAL_A = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 1023 * 2.0**-24, 2.0**-14, 1.0, -1.0, 0.5, 1.5,
                       2049.0 / 2048, 3.0, -7.0], np.float64)


def _weights(rng, k, n, gs):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)                    # (K, N) codes
    g = 1 if gs is None else k // gs
    sc = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16)         # (G, N)
    return q, sc


def _mirrored(rng, A, q, k, gs):
    """Pair k16 blocks at random (inside a group when grouped, so both see the same scales): the
    second gets the first's weight rows and minus its activations, so large partial sums cancel and
    the output keeps the rounding errors of the order in which they were added."""
    span = 8 if gs is not None or rng.random() < 0.5 else k // 16       # k16 blocks per pairing domain
    m = A.shape[0]
    for d0 in range(0, k // 16, span):
        blocks = rng.permutation(np.arange(d0, d0 + span))
        for x, y in zip(blocks[0::2], blocks[1::2]):
            q[16 * y:16 * y + 16] = q[16 * x:16 * x + 16]
            big = rng.choice([-1.0, 1.0], (m, 16)) * 2.0 ** rng.uniform(4, 9, (m, 16))
            A[:, 16 * x:16 * x + 16] = big
            A[:, 16 * y:16 * y + 16] = -big


def _drawn_problem(rng, m, k, n, gs, values):
    q, sc = _weights(rng, k, n, gs)
    if values == "normal":
        A = rng.standard_normal((m, k))
    elif values == "mirrored":
        A = rng.standard_normal((m, k))
        _mirrored(rng, A, q, k, gs)
    elif values == "special":
        A = rng.choice(_SPECIAL_A, (m, k)) * (rng.random((m, k)) < 0.3)
    else:  # "integers": integer sums above 2048 make the fp16 conversions hit ties
        A = rng.integers(-16, 17, (m, k)).astype(np.float64)
    B, s = marlin.pack(q, sc, gs)
    return A.astype(np.float16), B, s


# M: the k128 x n128 tile (1..16), the k64 x n256 tile with 2..4 m-blocks, and two launches (65..70)
_M = st.one_of(st.integers(1, 20), st.integers(33, 40), st.integers(65, 70))


@needs_engine
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=_M, k=st.sampled_from([128, 256, 384, 512]), gs=st.sampled_from([128, None]), sms=st.integers(1, 12),
       arch=st.sampled_from(["sm_80", "sm_86", "sm_89", "sm_90"]),
       values=st.sampled_from(["normal", "mirrored", "special", "integers"]), seed=st.integers(0, 2**16))
def test_kernel_equals_the_emulator_for_any_shape_partition_and_values(m, k, gs, sms, arch, values, seed):
    A, B, s = _drawn_problem(np.random.default_rng(seed), m, k, 256, gs, values)
    assert_bitexact(cm.marlin_gemm(A, B, s, arch=arch, sms=sms), mk.marlin_gemm(A, B, s, arch=arch, sms=sms),
                    f"marlin.cu M={m} K={k} g={gs} sms={sms} {arch} {values}")


@needs_engine
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 20), k=st.sampled_from([128, 256, 384]), gs=st.sampled_from([128, None]),
       sms=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_kernel_returns_the_exact_product_when_no_partial_sum_rounds(m, k, gs, sms, seed):
    A, B, s = _exact_problem(np.random.default_rng(seed), m, k, 256, gs)
    assert_bitexact(cm.marlin_gemm(A, B, s, sms=sms), marlin.reference_gemm(A, B, s) + np.float16(0),
                    f"exact product M={m} K={k} g={gs} sms={sms}")


def _exact_problem(rng, m, k, n, gs):
    """A in {-1, 0, 1} (sparse), power-of-two scales: every product and partial sum (fp32, the
    tensor-core grid, the fp16 carries) is a multiple of 2^-2 below 2^9, so nothing rounds and the
    kernel must return the exactly rounded product (refsim.formats.marlin.reference_gemm)."""
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)                     # (K, N)
    sc = (2.0 ** rng.integers(-2, 2, (1 if gs is None else k // gs, n))).astype(np.float16)
    A = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.08)).astype(np.float16)
    B, s = marlin.pack(q, sc, gs)
    if (np.abs(A.astype(np.float64)) @ np.abs(marlin.effective_weights(B, s).astype(np.float64))).max() >= 2**9:
        A = np.zeros_like(A)                                               # keep the premise
    return A, B, s


@pytest.mark.slow
@needs_engine
@pytest.mark.parametrize("sms", [5])
def test_kernel_passes_the_kernel_author_harness(sms):
    # the same check a kernel author runs on their own Marlin kernel (refsim.testing.check_kernel)
    check_kernel(lambda A, B, s: cm.marlin_gemm(A, B, s, sms=sms), "marlin", sms=sms, max_examples=2, shrink=False)


@pytest.mark.parametrize("m, k, group_size, sms", [(1, 128, None, 1), (16, 256, 128, 3), (5, 512, 128, 2)])
def test_n128_runs_where_the_kernel_accepts_it_and_equals_the_emulator(m, k, group_size, sms):
    """N = 128: the official host code picks thread_n = 128 for M <= 16 (Marlin<256,1,8,8,4,g>), so the
    kernel runs it; refsim packs, emulates and runs it end to end."""
    rng = np.random.default_rng(m + k)
    q = rng.integers(0, 16, (k, 128)).astype(np.uint8)
    s = (rng.random((1 if group_size is None else k // group_size, 128)) * 0.01 + 0.001).astype(np.float16)
    B, S = marlin.pack(q, s, group_size)
    A = rng.standard_normal((m, k)).astype(np.float16)
    assert_bitexact(cm.marlin_gemm(A, B, S, sms=sms), mk.marlin_gemm(A, B, S, sms=sms), name="C")


def test_n128_with_more_than_16_rows_is_refused_with_the_kernels_rule():
    B, S = marlin.pack(np.zeros((128, 128), np.uint8), np.ones((1, 128), np.float16), None)
    with pytest.raises(ShapeError, match=r"N: must be a multiple of thread_n=256 \(kernel ERR_PROB_SHAPE\); got 128"):
        cm.marlin_gemm(np.zeros((17, 128), np.float16), B, S, sms=2)
