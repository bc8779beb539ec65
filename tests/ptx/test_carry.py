"""Carry chains through refsim.ptx: the PTX ISA's own examples (Extended-Precision Integer Arithmetic
Instructions: 128-bit addition and subtraction with add.cc/addc, the 64 x 64 -> 128-bit multiply with
mad.cc/madc) run as kernels and compared with Python integers; CC.CF is per-thread state."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# x = y + z (128-bit, 4 x u32 limbs, low limb first) for threads with tid < n, as in the ISA example;
# w = y - z for every thread; q = the 64x64 product of the low halves of y and z (the ISA's multiply)
KERNEL = HEAD + """.visible .entry wide(.param .u64 py, .param .u64 pz, .param .u64 px, .param .u64 pw,
                                        .param .u64 pq, .param .u32 n)
{
.reg .pred %p<2>; .reg .b32 %r<32>; .reg .b64 %rd<16>;
ld.param.u64 %rd1, [py]; ld.param.u64 %rd2, [pz]; ld.param.u64 %rd3, [px]; ld.param.u64 %rd8, [pw];
ld.param.u64 %rd10, [pq]; ld.param.u32 %r30, [n];
mov.u32 %r1, %tid.x; mul.wide.u32 %rd4, %r1, 16;
setp.lt.u32 %p1, %r1, %r30;
add.s64 %rd5, %rd1, %rd4; add.s64 %rd6, %rd2, %rd4; add.s64 %rd7, %rd3, %rd4; add.s64 %rd9, %rd8, %rd4;
add.s64 %rd11, %rd10, %rd4;
ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd5];
ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd6];
ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd7];
@%p1 add.cc.u32 %r10, %r2, %r6;
@%p1 addc.cc.u32 %r11, %r3, %r7;
@%p1 addc.cc.u32 %r12, %r4, %r8;
@%p1 addc.u32 %r13, %r5, %r9;
st.global.v4.u32 [%rd7], {%r10, %r11, %r12, %r13};
sub.cc.u32 %r14, %r2, %r6;
subc.cc.u32 %r15, %r3, %r7;
subc.cc.u32 %r16, %r4, %r8;
subc.u32 %r17, %r5, %r9;
st.global.v4.u32 [%rd9], {%r14, %r15, %r16, %r17};
mul.lo.u32 %r20, %r2, %r6;
mul.hi.u32 %r21, %r2, %r6;
mad.lo.cc.u32 %r21, %r3, %r6, %r21;
madc.hi.u32 %r22, %r3, %r6, 0;
mad.lo.cc.u32 %r21, %r2, %r7, %r21;
madc.hi.cc.u32 %r22, %r2, %r7, %r22;
addc.u32 %r23, 0, 0;
mad.lo.cc.u32 %r22, %r3, %r7, %r22;
madc.hi.u32 %r23, %r3, %r7, %r23;
st.global.v4.u32 [%rd11], {%r20, %r21, %r22, %r23};
ret;
}
"""


def _big(limbs) -> int:
    return sum(int(v) << (32 * i) for i, v in enumerate(limbs))


def test_the_isa_extended_precision_examples_equal_python_integers():
    rng = np.random.default_rng(3)
    T = 96
    y = rng.integers(0, 2**32, (T, 4), dtype=np.uint64).astype(np.uint32)
    z = rng.integers(0, 2**32, (T, 4), dtype=np.uint64).astype(np.uint32)
    y[:8] = 0xFFFFFFFF                                   # long carry and borrow chains
    z[:4] = [1, 0, 0, 0]
    z[4:8] = 0xFFFFFFFF
    y[8:12], z[8:12] = 0, [1, 0, 0, 0]
    x0 = rng.integers(0, 2**32, (T, 4), dtype=np.uint64).astype(np.uint32)
    x, w, q = x0.copy(), np.zeros_like(y), np.zeros_like(y)
    n = 80
    ptx.Module(KERNEL).launch("wide", 1, T, [y, z, x, w, q, n], poison=True)
    for t in range(T):
        want_x = (_big(y[t]) + _big(z[t])) % 2**128 if t < n else _big(x0[t])
        assert _big(x[t]) == want_x, t
        assert _big(w[t]) == (_big(y[t]) - _big(z[t])) % 2**128, t
        assert _big(q[t]) == _big(y[t][:2]) * _big(z[t][:2]), t


def test_reading_the_carry_flag_before_any_cc_instruction_is_reported_with_poison():
    text = HEAD + (".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<3>;\n"
                   "ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd2, %rd1;\naddc.u32 %r1, 1, 2;\n"
                   "st.global.u32 [%rd2], %r1;\n}\n")
    m = ptx.Module(text)
    out = np.zeros(1, np.uint32)
    m.launch("k", 1, 1, [out])
    assert out[0] == 3               # refsim's policy: registers, CC.CF too, start clear (the ISA leaves it open)
    with pytest.raises(ptx.PtxUninitializedError, match="register CC.CF read before written"):
        m.launch("k", 1, 1, [out], poison=True)
