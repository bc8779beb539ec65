"""refsim.ptx.hopper.tensormap: a kernel edits a tensor map (in global or shared memory) and loads
through it, through both executors."""

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx
from refsim.formats import tensor_map
from refsim.ptx.memory import GLOBAL_BASE

pytestmark = needs_compiled

_HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pmap, .param .u64 pold, .param .u64 pnew, .param .u64 pout, .param .u32 pdim) {
 .reg .b32 %r<8>; .reg .b64 %rd<12>; .reg .pred %p<4>;
 .shared .align 128 .b8 buf[256];
 .shared .align 128 .b8 smap[128];
 .shared .align 8 .b8 bar[8];
 ld.param.u64 %rd1, [pmap];
 ld.param.u64 %rd2, [pnew];
 ld.param.u64 %rd3, [pout];
 ld.param.u32 %r7, [pdim];
 mov.u32 %r1, %tid.x;
 setp.eq.u32 %p1, %r1, 0;
"""
_LOAD = """ @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
 bar.sync 0;
 @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 256;
 mov.u32 %r2, 0;
 @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [buf], [%rd1, {%r2, %r2}], [bar];
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
 @!%p2 bra WAIT;
 shl.b32 %r3, %r1, 3;
 mov.u32 %r4, buf;
 add.u32 %r4, %r4, %r3;
 ld.shared.v2.u32 {%r5, %r6}, [%r4];
 mul.wide.u32 %rd5, %r1, 8;
 add.s64 %rd6, %rd3, %rd5;
 st.global.v2.u32 [%rd6], {%r5, %r6};
 ret;
}
"""
_IN_GLOBAL = """ @%p1 tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;
 @%p1 tensormap.replace.tile.global_dim.global.b1024.b32 [%rd1], 1, %r7;
 fence.proxy.tensormap::generic.release.gpu;
 fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
"""
# 16 threads copy the map into shared memory, thread 0 edits it there, the warp copies it back
_IN_SHARED = """ setp.lt.u32 %p3, %r1, 16;
 mul.wide.u32 %rd7, %r1, 8;
 add.s64 %rd8, %rd1, %rd7;
 @%p3 ld.global.u64 %rd9, [%rd8];
 shl.b32 %r3, %r1, 3;
 mov.u32 %r4, smap;
 add.u32 %r4, %r4, %r3;
 @%p3 st.shared.u64 [%r4], %rd9;
 bar.sync 0;
 @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [smap], %rd2;
 @%p1 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [smap], 1, %r7;
 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd1], [smap], 128;
 fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
"""


@pytest.mark.parametrize("edit", [_IN_GLOBAL, _IN_SHARED])
def test_kernel_points_a_map_at_another_tensor(edit):
    # the map (first array, GLOBAL_BASE) describes `old`; the kernel points it at `new` with 5 rows
    old = np.arange(64, dtype=np.int32).reshape(8, 8)
    new = np.arange(64, dtype=np.int32).reshape(8, 8) * -3 + 1000
    img = tensor_map.encode_tiled("int32", GLOBAL_BASE + 8192, (8, 8), (32,), (8, 8), (1, 1))
    gmap = np.frombuffer(img, np.uint8).copy()
    out = np.zeros(64, np.int32)
    _, arrays, _ = run_both(ptx.Module(_HEAD + edit + _LOAD), "k", 1, 32, [gmap, old, new, out, 5], arch="sm_90a")
    want = new.copy()
    want[5:] = 0                                          # rows 5..7 are now out of bounds
    assert np.array_equal(arrays[3].reshape(8, 8), want)
    m = tensor_map.decode_tiled(bytes(arrays[0]))
    assert m.global_dims == (8, 5) and m.global_address != GLOBAL_BASE + 8192


@pytest.mark.parametrize("line, words", [
    ("@%p1 tensormap.replace.tile.global_dim.global.b1024.b32 [%rd1], 2, %r7;", "ordinal 2 is not a dimension"),
    ("@%p1 tensormap.replace.tile.swizzle_mode.global.b1024.b32 [%rd1], 3;", "box inner dimension must be <= 128"),
    ("@%p1 tensormap.replace.tile.elemtype.global.b1024.b32 [%rd1], 13;", "elemtype code 13 is not one refsim models"),
])
def test_edits_that_leave_no_valid_map(line, words):
    img = tensor_map.encode_tiled("int32", GLOBAL_BASE + 8192, (64, 8), (256,), (64, 1), (1, 1))
    text = _HEAD + " " + line + "\n ret;\n}\n"
    _, _, err = run_both(ptx.Module(text), "k", 1, 1, [np.frombuffer(img, np.uint8).copy(), np.zeros(4, np.int32),
                         np.zeros(4, np.int32), np.zeros(4, np.int32), 5], arch="sm_90a", expect_error=True)
    assert isinstance(err, ptx.PtxMemoryError) and "leaves no valid tensor map" in str(err) and words in str(err), str(err)
