"""refsim.ptx.hopper.warp: elect.sync through both executors."""

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx

pytestmark = needs_compiled

_TEXT = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pout, .param .u32 lo) {
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 ld.param.u64 %rd1, [pout];
 ld.param.u32 %r5, [lo];
 mov.u32 %r1, %tid.x;
 mul.wide.u32 %rd2, %r1, 8;
 add.s64 %rd3, %rd1, %rd2;
 setp.lt.u32 %p2, %r1, %r5;
 @%p2 bra DONE;
 griddepcontrol.wait;
 elect.sync %r2|%p1, 0xffffffff;
 selp.u32 %r3, 1, 0, %p1;
 st.global.v2.u32 [%rd3], {%r2, %r3};
 griddepcontrol.launch_dependents;
DONE:
 ret;
}
"""


@pytest.mark.parametrize("lo", [0, 3, 37])
def test_elect_sync_lowest_active_lane(lo):
    out = np.full((64, 2), 99, np.uint32)
    _, arrays, _ = run_both(ptx.Module(_TEXT), "k", 1, 64, [out, lo], arch="sm_90a")
    got = arrays[0]
    want = np.full((64, 2), 99, np.uint32)
    for w in (0, 1):
        lanes = [t for t in range(32 * w, 32 * w + 32) if t >= lo]
        for t in lanes:
            want[t] = (lanes[0] % 32, int(t == lanes[0]))
    assert np.array_equal(got, want)
