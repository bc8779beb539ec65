"""State spaces and the address map: generic addresses into shared/global, null pointers, views
written through to their base, buffers that keep contents between launches, read-only arrays."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.memory import read_only_error

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# thread t: s[t] = t + 100 through a generic pointer to shared; out[t] = s[31 - t] read generically
GENERIC = HEAD + """.visible .entry k(.param .u64 out)
{
.reg .b32 %r<6>;
.reg .b64 %rd<10>;
.shared .align 4 .b8 s[128];
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u64 %rd2, s;
cvta.shared.u64 %rd3, %rd2;
mul.wide.u32 %rd4, %r1, 4;
add.s64 %rd5, %rd3, %rd4;
add.s32 %r2, %r1, 100;
st.u32 [%rd5], %r2;
bar.sync 0;
sub.s32 %r3, 31, %r1;
mul.wide.u32 %rd6, %r3, 4;
add.s64 %rd7, %rd3, %rd6;
ld.u32 %r4, [%rd7];
add.s64 %rd8, %rd1, %rd4;
st.u32 [%rd8], %r4;
}
"""


def test_generic_addresses_reach_shared_and_global():
    out = np.zeros(32, np.int32)
    ptx.Module(GENERIC).launch("k", 1, 32, [out])
    assert out.tolist() == [131 - t for t in range(32)]


def test_a_view_is_written_through_to_its_base_and_buffers_persist():
    base = np.full(40, -1, np.int32)
    m = ptx.Module(GENERIC)
    m.launch("k", 1, 32, [base.reshape(-1)[8:]])
    assert (base[:8] == -1).all() and base[8:].tolist() == [131 - t for t in range(32)]
    m.launch("k", 1, 32, [base[:32]])                # a second launch on overlapping memory
    assert base[:32].tolist() == [131 - t for t in range(32)]
    assert base[32:].tolist() == [131 - t for t in range(24, 32)]   # the first launch's values stay


def test_null_pointer_faults():
    with pytest.raises(ptx.PtxMemoryError, match="address 0x0 "):
        ptx.Module(GENERIC.replace("ld.param.u64 %rd1, [out];", "mov.u64 %rd1, 0;")).launch(
            "k", 1, 1, [np.zeros(1, np.int32)])


def test_store_to_a_read_only_array_is_an_error():
    out = np.zeros(32, np.int32)
    out.setflags(write=False)
    with pytest.raises(ptx.PtxMemoryError, match="read-only array 'out'"):
        ptx.Module(GENERIC).launch("k", 1, 32, [out])
    assert not out.any()


def test_the_read_only_error_names_where_and_the_array():
    e = read_only_error("kernel k, PTX line 7 `st.u32 [%rd1], 1`", "out")
    assert isinstance(e, ptx.PtxMemoryError)
    assert str(e) == "kernel k, PTX line 7 `st.u32 [%rd1], 1`: writes to read-only array 'out' (writeable=False)"


def test_dynamic_shared_memory_is_the_extern_array():
    text = HEAD + """.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 out)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, dyn;
st.shared.u32 [%r1+1020], 77;
ld.shared.u32 %r2, [%r1+1020];
st.global.u32 [%rd1], %r2;
}
"""
    out = np.zeros(1, np.int32)
    m = ptx.Module(text)
    m.launch("k", 1, 1, [out], shared_bytes=1024)
    assert out[0] == 77
    with pytest.raises(ptx.PtxMemoryError, match="block has 1020 bytes"):
        m.launch("k", 1, 1, [out], shared_bytes=1020)


def test_createpolicy_and_l2_cache_hint_are_accepted_without_effect_on_values():
    text = HEAD + """.visible .entry k(.param .u64 p0)
{
.reg .b32 %r<4>;
.reg .b64 %rd<6>;
.shared .align 16 .b8 s[16];
ld.param.u64 %rd1, [p0];
cvta.to.global.u64 %rd2, %rd1;
createpolicy.fractional.L2::evict_first.b64 %rd5, 1.0;
mov.u32 %r1, s;
cp.async.cg.shared.global.L2::cache_hint [%r1], [%rd2], 16, %rd5;
cp.async.commit_group;
cp.async.wait_group 0;
ld.shared.v4.u32 {%r0, %r1, %r2, %r3}, [s];
st.global.v4.u32 [%rd2+16], {%r0, %r1, %r2, %r3};
}
"""
    x = np.array([1, 2, 3, 4, 0, 0, 0, 0], np.int32)
    ptx.Module(text).launch("k", 1, 1, [x], race=True, poison=True)
    assert x.tolist() == [1, 2, 3, 4, 1, 2, 3, 4]
