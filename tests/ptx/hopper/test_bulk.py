"""refsim.ptx.hopper.bulk: the sm_90a test kernels (tests/ptx/kernels/hopper_async.cu) through both
executors, bit for bit, against expectations computed here with NumPy slicing."""

from pathlib import Path

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx
from refsim.formats import smem_layouts, tensor_map
from refsim.ptx.memory import GLOBAL_BASE

pytestmark = needs_compiled

_PTX = Path(__file__).parents[1] / "kernels" / "hopper_async.ptx"


@pytest.fixture(scope="module")
def mod():
    return ptx.Module(_PTX.read_text())


def _map(rows, cols, box=(8, 8), swizzle="none"):
    # the tensor is the kernels' first pointer argument: refsim maps it at GLOBAL_BASE
    return tensor_map.encode_tiled("int32", GLOBAL_BASE, (cols, rows), (cols * 4,), box, (1, 1), swizzle=swizzle)


@pytest.mark.parametrize("schedule", ["lockstep", "random"])
def test_tma_ring_three_stages(mod, schedule):
    ntiles = 5
    t = np.arange(8 * 8 * ntiles, dtype=np.int32).reshape(8 * ntiles, 8) * 3 - 7
    out = np.zeros(64, np.int32)
    _, arrays, _ = run_both(mod, "tma_ring", 1, 96, [_map(8 * ntiles, 8), t, ntiles, out], arch="sm_90a",
                            schedule=schedule, seed=7)
    want = sum(t[8 * k:8 * k + 8].reshape(-1) * (k + 1) for k in range(ntiles))
    assert np.array_equal(arrays[3], want)


@pytest.mark.parametrize("x, y", [(6, -2), (-3, 4), (0, 0)])
def test_tma_tile_out_of_bounds_fill(mod, x, y):
    t = np.arange(120, dtype=np.int32).reshape(10, 12) + 1
    out = np.zeros(64, np.int32)
    _, arrays, _ = run_both(mod, "tma_tile", 1, 32, [_map(10, 12), t, x % 2**32, y % 2**32, out], arch="sm_90a")
    padded = np.zeros((30, 32), np.int32)
    padded[10:20, 10:22] = t
    assert np.array_equal(arrays[4].reshape(8, 8), padded[10 + y:18 + y, 10 + x:18 + x])


def test_tma_store_writes_in_bounds_box(mod):
    g = np.full((10, 12), -1, np.int32)
    _, arrays, _ = run_both(mod, "tma_store", 1, 32, [_map(10, 12), g, 6, 5, 1], arch="sm_90a")
    tid = np.arange(32)
    tile = np.concatenate([tid * 3 + 1, tid * 5 + 2]).reshape(8, 8)
    want = g.copy()
    want[5:10, 6:12] = tile[:5, :6]
    assert np.array_equal(arrays[1], want)


def test_bulk_copy_and_reduce_add(mod):
    src = (np.arange(64, dtype=np.int64) * 2654435761 % 2**32).astype(np.uint32).view(np.int32)
    dst = np.zeros(64, np.int32)
    acc = np.full(64, 2**32 - 5, np.uint32)
    _, arrays, _ = run_both(mod, "bulk_copy_reduce", 1, 32, [src, dst, acc, 192], arch="sm_90a")
    assert np.array_equal(arrays[1][:48], src[:48]) and not arrays[1][48:].any()
    want = acc.copy()
    want[:48] = acc[:48] + src[:48].view(np.uint32)          # wraps modulo 2**32
    assert np.array_equal(arrays[2], want)


def test_bulk_size_rule(mod):
    src, dst, acc = np.zeros(64, np.int32), np.zeros(64, np.int32), np.zeros(64, np.uint32)
    _, _, err = run_both(mod, "bulk_copy_reduce", 1, 32, [src, dst, acc, 40], arch="sm_90a", expect_error=True)
    assert isinstance(err, ptx.PtxMisalignedError) and "multiple of 16; got 40" in str(err)


def test_unfenced_store_runs_and_fenced_store_equal(mod):
    # without race checking, the fence changes nothing refsim computes
    a = run_both(mod, "tma_store", 1, 32, [_map(10, 12), np.zeros((10, 12), np.int32), 0, 0, 0], arch="sm_90a")[1]
    b = run_both(mod, "tma_store", 1, 32, [_map(10, 12), np.zeros((10, 12), np.int32), 0, 0, 1], arch="sm_90a")[1]
    assert np.array_equal(a[1], b[1]) and a[1].any()


_HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pin, .param .u64 pout) {
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 .shared .align 128 .b8 buf[256];
 .shared .align 8 .b8 bar[16];
 ld.param.u64 %rd1, [pin];
 ld.param.u64 %rd2, [pout];
"""


@pytest.mark.parametrize("line, cls, words", [
    ("cp.async.bulk.global.shared::cta.bulk_group.multicast::cluster [%rd2], [buf], 16, %rs1;",
     ptx.PtxUnsupportedError, ".multicast::cluster is defined on global -> shared::cluster loads"),
    # the float forms outside the ISA's table for cp.reduce.async.bulk
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.f32 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .min.f32 is not defined here"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.max.f64 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .max.f64 is not defined here"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.inc.f32 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .inc.f32 is not defined here"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f16 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .add.f16 requires .noftz"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.bf16 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .add.bf16 requires .noftz"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f32 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .add.f32 takes no .noftz"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.noftz.f16 [%rd2], [buf], 16;", ptx.PtxUnsupportedError,
     "cp.reduce.async.bulk .min.f16 takes no .noftz"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [buf+8], [%rd1], 16, [bar];",
     ptx.PtxMisalignedError, "16-byte aligned"),
])
def test_refused_forms(line, cls, words):
    text = _HEAD + " .reg .b16 %rs<2>;\n mbarrier.init.shared::cta.b64 [bar], 1;\n " + line + "\n ret;\n}\n"
    m = ptx.Module(text)
    _, _, err = run_both(m, "k", 1, 1, [np.zeros(64, np.int32), np.zeros(64, np.int32)], arch="sm_90a",
                         expect_error=True)
    assert isinstance(err, cls) and words in str(err) and "PTX line" in str(err)


def test_unfenced_generic_write_before_tma_store_is_a_race(mod):
    args = [_map(10, 12), np.zeros((10, 12), np.int32), 0, 0]
    _, _, err = run_both(mod, "tma_store", 1, 32, args + [0], arch="sm_90a", race=True, expect_error=True)
    assert isinstance(err, ptx.PtxRaceError)
    assert ("async-proxy read of .shared 0x0 (issued by block (0, 0, 0) thread (0, 0, 0)) of a byte block (0, 0, 0) "
            "thread (0, 0, 0) wrote through the generic proxy with no fence.proxy.async") in str(err)
    run_both(mod, "tma_store", 1, 32, args + [1], arch="sm_90a", race=True)       # fenced: no race


def test_pipelines_have_no_false_races(mod):
    t = np.arange(8 * 8 * 4, dtype=np.int32).reshape(32, 8)
    run_both(mod, "tma_ring", 1, 96, [_map(32, 8), t, 4, np.zeros(64, np.int32)], arch="sm_90a", race=True)
    src = np.arange(64, dtype=np.int32)
    run_both(mod, "bulk_copy_reduce", 1, 32, [src, np.zeros(64, np.int32), np.zeros(64, np.uint32), 64],
             arch="sm_90a", race=True)


@pytest.mark.parametrize("race", [False, True])
def test_generic_read_before_the_phase_is_observed(race):
    # thread 0 copies into buf and every thread reads buf without waiting on the barrier
    text = _HEAD + """ .reg .b32 %q<4>;
 mov.u32 %q1, %tid.x;
 setp.eq.u32 %p1, %q1, 0;
 @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
 bar.sync 0;
 @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 16;
 @%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [%rd1], 16, [bar];
 bar.sync 0;
 ld.shared.u32 %q2, [buf+4];
 st.global.u32 [%rd2], %q2;
 ret;
}
"""
    src = np.arange(64, dtype=np.int32) + 5
    _, arrays, err = run_both(ptx.Module(text), "k", 1, 2, [src, np.zeros(64, np.int32)], arch="sm_90a", race=race,
                              expect_error=race)
    if race:
        assert isinstance(err, ptx.PtxRaceError)
        assert ("generic-proxy access to .shared 0x4 by block (0, 0, 0) thread (0, 0, 0): an async-proxy copy "
                "(cp.async.bulk) wrote it and this thread has not observed the mbarrier phase") in str(err)
    else:
        assert arrays[1][0] == 6          # the copy landed at issue (one admissible order)


def test_generic_access_to_a_live_mbarrier_is_refused():
    text = _HEAD + """ .reg .b32 %q<4>;
 mbarrier.init.shared::cta.b64 [bar], 1;
 ld.shared.u32 %q2, [bar+4];
 ret;
}
"""
    _, _, err = run_both(ptx.Module(text), "k", 1, 1, [np.zeros(4, np.int32)] * 2, arch="sm_90a", expect_error=True)
    assert isinstance(err, ptx.PtxBarrierError)
    assert "generic access to the bytes of a live mbarrier at .shared 0x104 by block (0, 0, 0) thread (0, 0, 0)" in str(err)


@pytest.mark.parametrize("mode", ["32B", "64B", "128B"])
def test_tma_tile_swizzle(mod, mode):
    # the tile sits at .shared 0 (tma_tile's only 128-aligned array comes first); thread t reads words
    # t and t + 32 of the physical layout
    t = np.arange(64, dtype=np.int32).reshape(8, 8) * 11 + 3
    out = np.zeros(64, np.int32)
    _, arrays, _ = run_both(mod, "tma_tile", 1, 32, [_map(8, 8, swizzle=mode), t, 0, 0, out], arch="sm_90a")
    want = np.zeros(64, np.int32)
    for i in range(64):                             # logical word i (row-major box) -> its physical word
        want[smem_layouts.swizzle_reference(4 * i, mode) // 4] = t.reshape(-1)[i]
    assert np.array_equal(arrays[4], want) and not np.array_equal(want, t.reshape(-1))


def _tensor_kernel(rank: int, map_in_global: bool) -> str:
    """k(map, tensor, out, coords...): thread 0 loads a box (<= 256 bytes) with a rank-``rank`` TMA into
    buf (the map a parameter or, map_in_global, a pointer to it); 32 threads copy buf's 64 words to out."""
    coords = ", ".join(f"%c{i}" for i in range(rank))
    decl_map = ".param .u64 pmap" if map_in_global else ".param .align 64 .b8 pmap[128]"
    get_map = " ld.param.u64 %rd3, [pmap];\n" if map_in_global else " mov.b64 %rd4, pmap;\n cvta.param.u64 %rd3, %rd4;\n"
    loads = "".join(f" ld.param.u32 %c{i}, [pc{i}];\n" for i in range(rank))
    params = "".join(f", .param .u32 pc{i}" for i in range(rank))
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k({decl_map}, .param .u64 pt, .param .u64 pout{params}) {{
 .reg .b32 %r<8>; .reg .b32 %c<6>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 .shared .align 128 .b8 buf[256];
 .shared .align 8 .b8 bar[8];
{get_map}{loads} ld.param.u64 %rd2, [pout];
 mov.u32 %r1, %tid.x;
 setp.eq.u32 %p1, %r1, 0;
 @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
 bar.sync 0;
 @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 256;
 @%p1 cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [buf], [%rd3, {{{coords}}}], [bar], %rd7;
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
 @!%p2 bra WAIT;
 shl.b32 %r2, %r1, 3;
 mov.u32 %r3, buf;
 add.u32 %r3, %r3, %r2;
 ld.shared.v2.u32 {{%r4, %r5}}, [%r3];
 mul.wide.u32 %rd5, %r1, 8;
 add.s64 %rd6, %rd2, %rd5;
 st.global.v2.u32 [%rd6], {{%r4, %r5}};
 ret;
}}
"""


@pytest.mark.parametrize("rank, dims, box, coords", [
    (1, (100,), (64,), (50,)),
    (3, (8, 5, 4), (4, 4, 4), (6, -1, 2)),
    (5, (4, 4, 2, 3, 2), (4, 2, 2, 2, 2), (1, 3, 1, -1, 0)),
])
@pytest.mark.parametrize("map_in_global", [False, True])
def test_tma_ranks_and_map_in_global_memory(rank, dims, box, coords, map_in_global):
    t = (np.arange(int(np.prod(dims)), dtype=np.int32) * 7 + 1).reshape(dims[::-1])
    strides = tuple(int(np.prod(dims[:i + 1])) * 4 for i in range(rank - 1))
    base = GLOBAL_BASE + (8192 if map_in_global else 0)        # the map's 128 bytes come first, 4 KiB apart
    img = tensor_map.encode_tiled("int32", base, dims, strides, box, (1,) * rank)
    mapped = np.frombuffer(img, np.uint8).copy() if map_in_global else img
    out = np.full(64, -5, np.int32)
    args = ([mapped, t, out] if map_in_global else [img, t, out]) + [c % 2**32 for c in coords]
    _, arrays, _ = run_both(ptx.Module(_tensor_kernel(rank, map_in_global)), "k", 1, 32, args, arch="sm_90a")
    # the box by plain indexing, innermost coordinate last
    want = np.zeros(box[::-1], np.int32)
    for idx in np.ndindex(*box[::-1]):
        c = [coords[rank - 1 - i] + idx[i] for i in range(rank)]
        if all(0 <= c[i] < dims[rank - 1 - i] for i in range(rank)):
            want[idx] = t[tuple(c)]
    assert np.array_equal(arrays[2], want.reshape(-1))


def test_observation_is_per_thread():
    # thread 0 copies and waits; thread 1 only meets it at bar.sync and reads: thread 1 never observed
    # the phase (a GPU gives it no guarantee of seeing the copy's bytes)
    text = _HEAD + """ .reg .b32 %q<4>;
 mov.u32 %q1, %tid.x;
 setp.eq.u32 %p1, %q1, 0;
 @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
 bar.sync 0;
 @!%p1 bra READ;
 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 16;
 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [%rd1], 16, [bar];
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
 @!%p2 bra WAIT;
READ:
 bar.sync 0;
 ld.shared.u32 %q2, [buf];
 st.global.u32 [%rd2], %q2;
 ret;
}
"""
    src = np.arange(64, dtype=np.int32) + 5
    _, _, err = run_both(ptx.Module(text), "k", 1, 2, [src, np.zeros(64, np.int32)], arch="sm_90a", race=True,
                         expect_error=True)
    assert isinstance(err, ptx.PtxRaceError) and "by block (0, 0, 0) thread (1, 0, 0): an async-proxy copy" in str(err)
    fixed = text.replace(" ld.shared.u32 %q2, [buf];", " mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;\n"
                         " ld.shared.u32 %q2, [buf];")
    _, arrays, _ = run_both(ptx.Module(fixed), "k", 1, 2, [src, np.zeros(64, np.int32)], arch="sm_90a", race=True)
    assert arrays[1][0] == 5


_MANY = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 pmap[128], .param .u64 pt, .param .u64 pout, .param .u32 pbad) {
 .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 .shared .align 128 .b8 buf[1024];
 .shared .align 8 .b8 bar[8];
 mov.b64 %rd4, pmap;
 cvta.param.u64 %rd3, %rd4;
 ld.param.u64 %rd2, [pout];
 ld.param.u32 %r9, [pbad];
 mov.u32 %r1, %tid.x;
 mov.u32 %r10, %ctaid.x;
 setp.eq.u32 %p1, %r1, 0;
 setp.lt.u32 %p3, %r1, 4;
 @%p1 mbarrier.init.shared::cta.b64 [bar], 4;
 bar.sync 0;
 // threads 0..3 each load an 8x8 box at (x, y) = (ctaid - 1, 8 tid + 4 ctaid - 2) into buf + 256 tid
 // (+ pbad for thread 2), all in one step
 mul.lo.u32 %r11, %r1, 256;
 mov.u32 %r12, buf;
 add.u32 %r12, %r12, %r11;
 setp.eq.u32 %p2, %r1, 2;
 @%p2 add.u32 %r12, %r12, %r9;
 sub.u32 %r13, %r10, 1;
 shl.b32 %r14, %r1, 3;
 shl.b32 %r15, %r10, 2;
 add.u32 %r14, %r14, %r15;
 sub.u32 %r14, %r14, 2;
 @%p3 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 256;
 @%p3 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r12], [%rd3, {%r13, %r14}], [bar];
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
 @!%p2 bra WAIT;
 // out[ctaid][256]: thread t copies words 4t..4t+3 of buf
 shl.b32 %r2, %r1, 4;
 mov.u32 %r3, buf;
 add.u32 %r3, %r3, %r2;
 ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [%r3];
 mul.wide.u32 %rd5, %r10, 1024;
 mul.wide.u32 %rd6, %r1, 16;
 add.s64 %rd5, %rd5, %rd6;
 add.s64 %rd6, %rd2, %rd5;
 st.global.v4.u32 [%rd6], {%r4, %r5, %r6, %r7};
 ret;
}
"""


@pytest.mark.parametrize("bad", [0, 16])
def test_many_tensor_loads_in_one_step(bad):
    # 2 blocks x 4 threads issue their TMA loads in one step (one batch); with bad = 16 thread 2's
    # destination is misaligned: the error names thread 2 of block 0, the first thread that fails
    t = (np.arange(40 * 8, dtype=np.int32) * 5 - 11).reshape(40, 8)
    out = np.full(512, -1, np.int32)
    _, arrays, err = run_both(ptx.Module(_MANY), "k", 2, 64, [_map(40, 8), t, out, bad], arch="sm_90a",
                              expect_error=bool(bad))
    if bad:
        assert isinstance(err, ptx.PtxMisalignedError)
        assert "not 128-byte aligned (by block (0, 0, 0) thread (2, 0, 0))" in str(err)
        return
    padded = np.zeros((60, 20), np.int32)
    padded[10:50, 10:18] = t
    for b in range(2):
        for j in range(4):
            x, y = b - 1, 8 * j + 4 * b - 2
            box = padded[10 + y:18 + y, 10 + x:18 + x]
            assert np.array_equal(arrays[2][256 * b + 64 * j:256 * b + 64 * (j + 1)], box.reshape(-1)), (b, j)


# ------------------------------------------------------------------ .multicast::cluster (hopper_multicast.cu)
@pytest.fixture(scope="module")
def multicast_mod():
    return ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_multicast.ptx").read_text())


def _multicast(mod, mask, tensor_copy, skip_wait=0, **options):
    t = (np.arange(64, dtype=np.int32) * 3 + 1).reshape(8, 8)
    args = [_map(8, 8), t, mask, tensor_copy, skip_wait, np.zeros(128, np.int32)]
    return t, run_both(mod, "multicast", 2, 32, args, arch="sm_90a", cluster=2, **options)


@pytest.mark.parametrize("mask", [3, 2, 1])
@pytest.mark.parametrize("tensor_copy", [1, 0])
def test_multicast_lands_in_every_cta_of_the_mask(multicast_mod, mask, tensor_copy):
    # CTA 0 issues the copy; each CTA whose bit is set waits on its own barrier (complete_tx of 256 bytes)
    t, (_, arrays, _) = _multicast(multicast_mod, mask, tensor_copy, race=True, poison=True)
    out = arrays[5].reshape(2, 64)
    for rank in range(2):
        want = t.reshape(-1) if mask >> rank & 1 else np.full(64, -1, np.int32)
        assert np.array_equal(out[rank], want), (rank, out[rank])


def test_multicast_mask_bit_outside_the_cluster_is_named(multicast_mod):
    _, (_, _, err) = _multicast(multicast_mod, 5, 1, expect_error=True)
    assert type(err) is ptx.PtxMemoryError, repr(err)
    assert ("kernel multicast, PTX line" in str(err) and ".multicast::cluster ctaMask 0x0005 names CTA rank 2 of the "
            "cluster, which has 2 CTA(s) (ranks 0..1) (by block (0, 0, 0) thread (0, 0, 0))" in str(err)), str(err)


def test_multicast_bytes_are_async_writes_of_each_destination(multicast_mod):
    # CTA 1 reads its tile without waiting on its own barrier: the bytes the copy wrote there are a race
    _, (_, _, err) = _multicast(multicast_mod, 3, 1, skip_wait=1, race=True, expect_error=True)
    assert type(err) is ptx.PtxRaceError and "block (1, 0, 0)" in str(err), str(err)
    assert "has not observed the mbarrier phase that completes the copy" in str(err), str(err)


# ------------------------------------------------ float cp.reduce.async.bulk (hopper_bulk_reduce.cu)
# (acc, src, want) as raw bits, worked by hand: RN ties to even, -0 + +0 = +0, NaN and Inf - Inf give
# the canonical NaN, add.f32 flushes subnormal inputs and results (sign kept), .noftz keeps them.
_F32_ADD = [
    (0x3F800000, 0x33800000, 0x3F800000),    # 1 + 2^-24: a tie, to even (1)
    (0x3F800000, 0x34400000, 0x3F800002),    # 1 + 1.5 ulp: a tie, to even (1 + 2 ulp)
    (0x00000000, 0x80000000, 0x00000000),    # +0 + -0 = +0
    (0x80000000, 0x80000000, 0x80000000),    # -0 + -0 = -0
    (0x7FC00001, 0x3F800000, 0x7FFFFFFF),    # NaN + 1: canonical NaN
    (0x7F800000, 0xFF800000, 0x7FFFFFFF),    # Inf - Inf: canonical NaN
    (0x7F800000, 0x3F800000, 0x7F800000),    # Inf + 1
    (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),    # overflow to Inf
    (0x00400000, 0x00400000, 0x00000000),    # subnormal inputs flushed (unflushed: 2^-126)
    (0x80000001, 0x00000000, 0x00000000),    # -subnormal -> -0; -0 + +0 = +0
    (0x80000001, 0x80000000, 0x80000000),    # -subnormal -> -0; -0 + -0 = -0
    (0x00C00000, 0x80800000, 0x00000000),    # 1.5*2^-126 - 2^-126 = 2^-127: result flushed to +0
    (0x80C00000, 0x00800000, 0x80000000),    # ... and to -0
    (0x3F800000, 0xBF800000, 0x00000000),    # 1 - 1 = +0
    (0x40400000, 0x3F000000, 0x40600000),    # 3 + 0.5 = 3.5
    (0x4B7FFFFF, 0x3F000000, 0x4B800000),    # (2^24 - 1) + 0.5: a tie, to even (2^24)
]
_F64_ADD = [
    (0x3FF0000000000000, 0x3CA0000000000000, 0x3FF0000000000000),   # 1 + 2^-53: tie, to even
    (0x3FF0000000000000, 0x3CB8000000000000, 0x3FF0000000000002),   # 1 + 1.5 ulp: tie, to even
    (0x0000000000000001, 0x0000000000000001, 0x0000000000000002),   # subnormals kept
    (0x8000000000000000, 0x0000000000000000, 0x0000000000000000),   # -0 + +0 = +0
]
_F16_ADD = [
    (0x3C00, 0x1000, 0x3C00),    # 1 + 2^-11: tie, to even
    (0x3C00, 0x1600, 0x3C02),    # 1 + 1.5 ulp: tie, to even
    (0x0001, 0x0001, 0x0002),    # subnormals kept (.noftz)
    (0x0200, 0x0200, 0x0400),    # 2^-15 + 2^-15 = 2^-14, the smallest normal
    (0x8000, 0x0000, 0x0000),    # -0 + +0 = +0
    (0x8000, 0x8000, 0x8000),    # -0 + -0 = -0
    (0x7E01, 0x3C00, 0x7FFF),    # NaN + 1: canonical NaN
    (0x7C00, 0xFC00, 0x7FFF),    # Inf - Inf
    (0x7BFF, 0x4C00, 0x7C00),    # 65504 + 16 = 65520: a tie, to even (Inf)
    (0x7BFF, 0x4BFF, 0x7BFF),    # 65504 + 15.99: below the tie
    (0x8001, 0x0000, 0x8001),    # -subnormal + +0 keeps the subnormal
    (0xC000, 0x3C00, 0xBC00),    # -2 + 1 = -1
    (0x3C00, 0x3C00, 0x4000), (0x4200, 0x3800, 0x4300), (0x0000, 0x0000, 0x0000), (0x7BFF, 0xFBFF, 0x0000),
]
_BF16_ADD = [
    (0x3F80, 0x3B80, 0x3F80),    # 1 + 2^-8: tie, to even
    (0x3F80, 0x3C40, 0x3F82),    # 1 + 1.5 ulp: tie, to even
    (0x0001, 0x0001, 0x0002),    # subnormals kept (.noftz)
    (0x0040, 0x0040, 0x0080),    # 2^-127 + 2^-127 = 2^-126, the smallest normal
    (0x8000, 0x0000, 0x0000),    # -0 + +0 = +0
    (0x8000, 0x8000, 0x8000),    # -0 + -0 = -0
    (0x7FC1, 0x3F80, 0x7FFF),    # NaN + 1: canonical NaN
    (0x7F80, 0xFF80, 0x7FFF),    # Inf - Inf
    (0x7F7F, 0x7F7F, 0x7F80),    # overflow to Inf
    (0x4380, 0x3F80, 0x4380),    # 256 + 1: a tie (257), to even (256)
    (0x4380, 0x3FC0, 0x4381),    # 256 + 1.5 = 257.5: above the tie, up (258; ulp 2)
    (0x8001, 0x0000, 0x8001),    # -subnormal + +0 keeps the subnormal
    (0x3F80, 0x3F80, 0x4000), (0xC000, 0x3F80, 0xBF80), (0x0000, 0x0000, 0x0000), (0x7F7F, 0xFF7F, 0x0000),
]
# min/max rows: (acc, src, min, max): one NaN gives the other operand, two NaNs the canonical NaN,
# -0 < +0, subnormals kept
_F16_MINMAX = [
    (0x3C00, 0x4000, 0x3C00, 0x4000), (0x0000, 0x8000, 0x8000, 0x0000), (0x8000, 0x0000, 0x8000, 0x0000),
    (0x7E00, 0x4200, 0x4200, 0x4200), (0x4200, 0x7E00, 0x4200, 0x4200), (0x7E00, 0x7E01, 0x7FFF, 0x7FFF),
    (0xFC00, 0x3C00, 0xFC00, 0x3C00), (0x0001, 0x0002, 0x0001, 0x0002), (0x8001, 0x0000, 0x8001, 0x0000),
    (0xC000, 0xBC00, 0xC000, 0xBC00), (0x7C00, 0x7BFF, 0x7BFF, 0x7C00), (0x3C00, 0x3C00, 0x3C00, 0x3C00),
    (0x0400, 0x03FF, 0x03FF, 0x0400), (0xFBFF, 0x7BFF, 0xFBFF, 0x7BFF), (0x0000, 0x0000, 0x0000, 0x0000),
    (0x8001, 0x8002, 0x8002, 0x8001),
]
_BF16_MINMAX = [
    (0x3F80, 0x4000, 0x3F80, 0x4000), (0x0000, 0x8000, 0x8000, 0x0000), (0x8000, 0x0000, 0x8000, 0x0000),
    (0x7FC0, 0x4040, 0x4040, 0x4040), (0x4040, 0x7FC0, 0x4040, 0x4040), (0x7FC0, 0x7FC1, 0x7FFF, 0x7FFF),
    (0xFF80, 0x3F80, 0xFF80, 0x3F80), (0x0001, 0x0002, 0x0001, 0x0002), (0x8001, 0x0000, 0x8001, 0x0000),
    (0xC000, 0xBF80, 0xC000, 0xBF80), (0x7F80, 0x7F7F, 0x7F7F, 0x7F80), (0x3F80, 0x3F80, 0x3F80, 0x3F80),
    (0x0080, 0x007F, 0x007F, 0x0080), (0xFF7F, 0x7F7F, 0xFF7F, 0x7F7F), (0x0000, 0x0000, 0x0000, 0x0000),
    (0x8001, 0x8002, 0x8002, 0x8001),
]
_KINDS = {"add.f32": (0, np.uint32, _F32_ADD), "add.f64": (1, np.uint64, _F64_ADD),
          "add.noftz.f16": (2, np.uint16, _F16_ADD), "add.noftz.bf16": (3, np.uint16, _BF16_ADD),
          "min.f16": (4, np.uint16, [r[:3] for r in _F16_MINMAX]),
          "max.f16": (5, np.uint16, [r[:2] + r[3:] for r in _F16_MINMAX]),
          "min.bf16": (6, np.uint16, [r[:3] for r in _BF16_MINMAX]),
          "max.bf16": (7, np.uint16, [r[:2] + r[3:] for r in _BF16_MINMAX])}


@pytest.fixture(scope="module")
def float_mod():
    return ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_bulk_reduce.ptx").read_text())


@pytest.mark.parametrize("form", list(_KINDS))
def test_float_reduce_worked_values(float_mod, form):
    kind, dt, rows = _KINDS[form]
    acc, src, want = (np.array(c, dt) for c in zip(*rows))
    n = acc.nbytes
    assert n % 16 == 0
    acc = np.concatenate([acc, np.full(16 // acc.itemsize, 0x5A5A5A5A5A5A5A5A & np.iinfo(dt).max, dt)])
    _, arrays, _ = run_both(float_mod, "bulk_reduce_float", 1, 1, [src, acc, n, kind], arch="sm_90a")
    got = arrays[1]
    assert [hex(x) for x in got[:len(want)]] == [hex(x) for x in want]
    assert np.array_equal(got[len(want):], acc[len(want):])          # the bytes past size are untouched
