"""refsim.ptx.compiled.view.LaunchView: the interpreter's Launch names over a compiled launch's state."""

import numpy as np

from conftest_compiled import needs_compiled
from refsim import ptx
from refsim.ptx.compiled.view import LaunchView

pytestmark = needs_compiled

_TEXT = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p) {
 .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<2>;
 elect.sync %r1|%p1, 0xffffffff;
 ret;
}
"""


def _launches():
    """The interpreter's Launch and a compiled launch of one launch of 2 blocks x 40 threads."""
    m = ptx.Module(_TEXT)
    out = np.zeros(4, np.uint32)
    L = m._launch_state("k", (2, 1, 1), (40, 1, 1), [out], arch="sm_90a", shared_bytes=64, schedule="lockstep",
                        seed=0, max_warp_instructions=None, race=True, poison=True)
    C = runner_launch(m, out)
    return L, C


def runner_launch(m, out):
    from refsim.ptx import compiled
    from refsim.ptx.compiled import runner, state

    k, gmem, symbols, param, handlers = m._launch_inputs("k", [out], "sm_90a")
    tr = compiled.translation(m, "k")
    exec_addr, _ = state.kernel_library(tr.source)
    return runner.CompiledLaunch(k, handlers, tr, exec_addr, (2, 1, 1), (40, 1, 1), param, gmem, symbols,
                                 arch="sm_90a", shared_bytes=64, schedule="lockstep", seed=0,
                                 max_warp_instructions=None, race=True, poison=True)


def test_view_offers_the_launch_names_with_the_same_meaning():
    L, C = _launches()
    V = LaunchView(C)
    try:
        for name in ("T", "NW", "tpb", "nslots", "END", "shared_size", "shared_stride", "dyn_offset", "local_stride",
                     "poison", "race"):
            assert getattr(V, name) == getattr(L, name), name
        for name in ("slot_of", "local_index", "slot_block", "pc", "exited", "bar_wait", "yielding", "shared",
                     "race_w", "race_r", "pending", "shared_init", "bar_pred", "bar_id", "bar_pc", "bar_count",
                     "bar_need", "group", "warp_slot"):
            a, b = getattr(V, name), getattr(L, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert V.who(77) == L.who(77) == "block (1, 0, 0) thread (13, 0, 0)"
        assert np.array_equal(V.special["%ctaid.x"][np.arange(V.T)], L.special["%ctaid.x"])
        assert np.array_equal(V.special["%laneid"][np.arange(V.T)], L.special["%laneid"])
        assert "%nope" not in V.special and "%tid.x" in V.special
        # writes through the view land in the runtime's state
        V.yielding[1] = True
        assert C.arrays["yielding"][1] == 1
        V.progress += 3
        assert C.S.progress == 3
        V.stats.global_bytes_read += 16
        assert C.S.global_bytes_read == 16
        assert V.ext == {} and L.ext == {} and V.bar_red_out == {} == L.bar_red_out
        V.bar_count[1, 3] = 7                       # (slot, barrier id) as the interpreter's
        assert C.arrays["bar_count"].reshape(-1)[16 + 3] == 7
        # the runtime's block placement: a slot started again gets the next block (none left: parked)
        V.start_block(1)
        assert V.exited[V.tpb:].all() and (V.pc[V.tpb:] == V.END).all() and V.bar_count[1, 3] == 7
    finally:
        C.lib.refsim_rt_free(C.S)
