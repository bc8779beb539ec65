"""Choosing the executor: ``executor=`` is validated; the compiled path is the default when a C
compiler is available, says once why a kernel or machine needs the interpreter and then uses it
(same bits), refuses loudly when asked for explicitly, and runs ALU forms without a C body through
their handler. One C template serves every instruction of a shape."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx import compiled
from refsim.ptx.compiled import state
from conftest_compiled import needs_compiled, run_both

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
PROLOGUE = """.visible .entry k(.param .u64 p0)
{
.reg .b32 %r<5>;
.reg .b64 %rd<4>;
.reg .f64 %fd<4>;
ld.param.u64 %rd1, [p0];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x;
"""
F64_ATOMIC = HEAD + PROLOGUE + """cvt.rn.f64.u32 %fd1, %r1;
atom.global.add.f64 %fd2, [%rd2], %fd1;
}
"""
ADD = HEAD + PROLOGUE + """cvt.rn.f32.u32 %r2, %r1;
mov.b32 %r4, 0f3E800000;
add.rz.f32 %r3, %r2, %r4;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd2, %rd2, %rd3;
st.global.u32 [%rd2], %r3;
}
"""


def test_executor_must_be_one_of_the_three():
    with pytest.raises(ptx.PtxLaunchError, match="executor: must be one of"):
        ptx.Module(ADD).launch("k", 1, 32, [np.zeros(32, np.float32)], executor="fast")


@needs_compiled
def test_a_kernel_the_translator_refuses_runs_on_the_interpreter_after_one_warning():
    m = ptx.Module(F64_ATOMIC)
    with pytest.warns(RuntimeWarning, match=r"runs on the interpreter \(not compiled: PTX line 13 `atom.global.add.f64"):
        out = np.zeros(1, np.float64)
        m.launch("k", 1, 32, [out])
    assert out[0] == sum(range(32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.launch("k", 1, 32, [out])                      # said once
    with pytest.raises(ptx.PtxUnsupportedError, match="executor='compiled' cannot run it: PTX line 13"):
        m.launch("k", 1, 32, [out], executor="compiled")


@needs_compiled
def test_alu_forms_without_a_c_body_run_their_handler_in_the_step():
    m = ptx.Module(ADD)
    tr = compiled.translation(m, "k")
    assert tr.reason is None and tr.callbacks == {5, 9}          # add.rz.f32: no C body; 9: exit, Python's
    stats, (out,), _ = run_both(m, "k", 1, 32, [np.zeros(32, np.float32)])
    assert out.tolist() == [np.float32(t) + np.float32(0.25) for t in range(32)]


def test_refsim_native_0_means_the_interpreter(monkeypatch):
    monkeypatch.setenv("REFSIM_NATIVE", "0")
    assert compiled.unavailable() == "REFSIM_NATIVE=0"
    m = ptx.Module(ADD)
    out = np.zeros(32, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # a choice, not a problem: no warning
        m.launch("k", 1, 32, [out])
    assert out[3] == np.float32(3.25)
    with pytest.raises(ptx.PtxUnsupportedError, match="REFSIM_NATIVE=0"):
        m.launch("k", 1, 32, [out], executor="compiled")


def test_without_a_compiler_one_warning_then_the_interpreter(monkeypatch, tmp_path):
    monkeypatch.delenv("REFSIM_NATIVE", raising=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path))            # nothing built there
    state.runtime.cache_clear()
    try:
        m = ptx.Module(ADD)
        out = np.zeros(32, np.float32)
        with pytest.warns(RuntimeWarning, match="compiled PTX runtime unavailable"):
            m.launch("k", 1, 32, [out])
        assert out[5] == np.float32(5.25)
        with pytest.raises(ptx.PtxUnsupportedError, match="a C compiler is needed"):
            m.launch("k", 1, 32, [out], executor="compiled")
    finally:
        monkeypatch.undo()
        state.runtime.cache_clear()


def test_instructions_of_one_shape_share_one_c_function():
    from refsim.cuda import launch
    from refsim.cuda import marlin as cm

    name = "refsim_marlin_m1_n8_k8_grouped"
    m = launch.module(cm._ptx_text(), name)
    tr = compiled.translation(m, name)
    n = len(m._kernel(name).instructions)
    templates = tr.source.count("static int t_")
    assert tr.reason is None and n > 1000 and templates * 10 < n


def test_a_handler_step_reads_symbol_operands_as_the_interpreter_does():
    text = HEAD + """.global .align 4 .b8 g[16];
.visible .entry k(.param .u64 p0)
{
.reg .b32 %r<4>;
.reg .b64 %rd<6>;
.shared .align 4 .b8 s[64];
ld.param.u64 %rd1, [p0];
mov.u32 %r1, %tid.x;
dp4a.u32.u32 %r2, %r1, s, %r1;
mov.u64 %rd3, g;
mad.lo.cc.u64 %rd4, %rd3, 1, 0;
cvt.u32.u64 %r3, %rd4;
add.s32 %r2, %r2, %r3;
mul.wide.u32 %rd5, %r1, 4;
add.s64 %rd1, %rd1, %rd5;
st.global.u32 [%rd1], %r2;
}
"""
    m = ptx.Module(text)
    assert len(compiled.translation(m, "k").callbacks) == 3          # dp4a, the carry-chain mad, the exit
    run_both(m, "k", 1, 32, [np.zeros(32, np.uint32)])
