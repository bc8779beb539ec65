"""refsim.ptx.hopper.registers: setmaxnreg's accounting through both executors (kernels of
tests/ptx/kernels/hopper_registers.cu; the refused forms in small hand-written PTX)."""

from pathlib import Path

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx
from refsim.ptx.hopper import registers

pytestmark = needs_compiled

_KERNELS = ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_registers.ptx").read_text())


def _want():
    t = np.arange(384, dtype=np.uint32)
    return np.where(t < 128, 3 * t + 1, 5 * t + t // 128).astype(np.uint32)


@pytest.mark.parametrize("spin,schedule", [(0, "lockstep"), (40, "random")])
def test_balanced_warp_specialization_runs(spin, schedule):
    # 168 x 384 registers: 40 x 128 + 232 x 256 fits exactly; with spin the consumers' .inc waits for the .dec
    out = np.zeros(384, np.uint32)
    _, arrays, _ = run_both(_KERNELS, "ws_balanced", 2, 384, [out, spin], arch="sm_90a", schedule=schedule, seed=3)
    assert np.array_equal(arrays[0], _want())


def test_an_inc_that_can_never_be_satisfied_is_a_named_deadlock():
    out = np.zeros(384, np.uint32)
    _, _, err = run_both(_KERNELS, "ws_over", 1, 384, [out, 0], expect_error=True, arch="sm_90a")
    assert isinstance(err, ptx.PtxDeadlockError)
    msg = str(err)
    # warpgroup 1 took (240 - 168) x 128 = 9,216 of the 16,384 registers warpgroup 0 released; of the 7,168
    # left, warps 8-10 of warpgroup 2 took 72 x 32 = 2,304 each: warp 11 asks 2,304 of 256, forever
    assert "setmaxnreg.inc to 240 (PTX line 127) by warpgroup 2 (warps 11)" in msg
    assert "asks for 2304 registers; the CTA's pool holds 256" in msg
    assert "warps hold 40, 40, 40, 40, 240, 240, 240, 240, 240, 240, 240, 168" in msg
    assert "budget 168 registers x 384 threads from .maxntid 384, .minnctapersm 1" in msg


def test_entry_allocation_from_the_directives():
    k = _KERNELS._parsed.kernels["ws_balanced"]
    assert k.directives == {".maxntid": (384, 1, 1), ".minnctapersm": (1,)}
    assert registers.entry_registers(k, 384) == (168, ".maxntid 384, .minnctapersm 1")
    bare = ptx.Module(_hand("setmaxnreg.dec.sync.aligned.u32 40;"))._parsed.kernels["k"]
    assert registers.entry_registers(bare, 128) == (248, "no register directive: refsim assumes one block of "
                                                          "128 threads per SM")
    assert registers.entry_registers(bare, 512)[0] == 128
    capped = ptx.Module(_hand("setmaxnreg.dec.sync.aligned.u32 40;", ".maxnreg 100"))._parsed.kernels["k"]
    assert registers.entry_registers(capped, 128) == (96, ".maxnreg 100")


def _hand(body: str, directive: str = "") -> str:
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pout)
{directive}
{{
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 ld.param.u64 %rd1, [pout];
 mov.u32 %r1, %tid.x;
 shr.u32 %r2, %r1, 5;
 {body}
 mul.wide.u32 %rd2, %r1, 4;
 add.s64 %rd3, %rd1, %rd2;
 st.global.u32 [%rd3], %r1;
 ret;
}}
"""


@pytest.mark.parametrize("n", [16, 260, 44])
def test_counts_outside_the_isa_range_are_refused_at_load(n):
    m = ptx.Module(_hand(f"setmaxnreg.inc.sync.aligned.u32 {n};"))
    why = m.unsupported["k"]
    assert "PTX line 11" in why and "multiple of 8 in [24, 256]; got " + str(n) in why


@pytest.mark.parametrize("body,block,rule", [
    # an .inc to fewer registers than the warp holds (248 at entry for a bare 128-thread block)
    ("setmaxnreg.inc.sync.aligned.u32 200;", 128, ".inc must not lower the count"),
    ("setmaxnreg.dec.sync.aligned.u32 40;\n setmaxnreg.dec.sync.aligned.u32 56;", 128, ".dec must not raise"),
    # the last warpgroup of a 160-thread block has one warp
    ("setmaxnreg.dec.sync.aligned.u32 40;", 160, "warpgroup 1 is not complete"),
    # warps 0-1 and 2-3 of one warpgroup execute different setmaxnreg instructions
    ("setp.lt.u32 %p1, %r2, 2;\n @%p1 bra A;\n setmaxnreg.dec.sync.aligned.u32 40;\n bra B;\n"
     "A:\n setmaxnreg.dec.sync.aligned.u32 48;\nB:", 128, "the same setmaxnreg must be executed by all warps"),
    # warp 0 runs two setmaxnregs before warps 1-3 ran the first
    ("setp.ne.u32 %p1, %r2, 0;\n @%p1 bra A;\n setmaxnreg.dec.sync.aligned.u32 40;\n"
     " setmaxnreg.dec.sync.aligned.u32 32;\nA:", 128, "synchronize between setmaxnreg instructions"),
])
def test_warpgroup_rules_are_named(body, block, rule):
    out = np.zeros(block, np.uint32)
    _, _, err = run_both(ptx.Module(_hand(body)), "k", 1, block, [out], expect_error=True, arch="sm_90a")
    assert isinstance(err, ptx.PtxRegisterError) and rule in str(err), str(err)
    assert "kernel k, PTX line" in str(err)


def test_a_partial_warp_is_refused():
    body = "setp.lt.u32 %p1, %r1, 16;\n @%p1 bra A;\n setmaxnreg.dec.sync.aligned.u32 40;\nA:"
    out = np.zeros(128, np.uint32)
    _, _, err = run_both(ptx.Module(_hand(body)), "k", 1, 128, [out], expect_error=True, arch="sm_90a")
    assert isinstance(err, ptx.PtxUnsupportedError) and "partial warp" in str(err)
