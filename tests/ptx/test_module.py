"""refsim.ptx.module: Module's queries (kernels, params, instruction_mix, contractible, unsupported)
and the launch side it owns (each argument turned into parameter bytes, the executor and
atomic_order arguments checked), worked by hand on tiny modules."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.errors import PtxLaunchError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# two kernels; `k` copies its value parameters into out (u32 words) so the bytes can be read back
MODULE = HEAD + """.visible .entry k(.param .u64 out, .param .s8 a, .param .f16 h, .param .align 4 .b8 blob[8],
    .param .f32 f)
{
.reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .b16 %h<2>; .reg .f32 %f<6>;
ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;
ld.param.s8 %r1, [a]; st.global.u32 [%rd2], %r1;
ld.param.b16 %h1, [h]; cvt.u32.u16 %r2, %h1; st.global.u32 [%rd2+4], %r2;
ld.param.u32 %r3, [blob]; ld.param.u32 %r4, [blob+4]; st.global.u32 [%rd2+8], %r3; st.global.u32 [%rd2+12], %r4;
ld.param.f32 %f1, [f]; mul.f32 %f2, %f1, %f1; add.f32 %f3, %f2, %f1; mul.rn.f32 %f4, %f1, %f1;
add.f32 %f5, %f4, %f1; st.global.f32 [%rd2+16], %f3;
}
.visible .entry empty()
{
ret;
}
"""


@pytest.fixture(scope="module")
def m() -> ptx.Module:
    return ptx.Module(MODULE)


def test_kernels_params_and_instruction_mix(m):
    assert m.kernels == ("k", "empty")
    assert m.params("k") == (("out", "u64", 8), ("a", "s8", 1), ("h", "f16", 2), ("blob", "b8", 8), ("f", "f32", 4))
    assert m.params("empty") == ()
    mix = m.instruction_mix("k")
    assert mix["ld.param.u32"] == 2 and mix["st.global.u32"] == 4 and mix["mul.f32"] == 1 and mix["mul.rn.f32"] == 1
    assert sum(mix.values()) == 18                                      # 17 written and the implicit ret
    assert m.instruction_mix("empty") == {"ret": 2}                   # the written ret and the implicit one
    assert m.unsupported == {}
    with pytest.raises(PtxLaunchError, match=r"kernel: must be one of \['k', 'empty'\]; got 'nope'"):
        m.params("nope")


def test_contractible_pairs_a_plain_mul_with_the_add_that_reads_it(m):
    # line 12: mul.f32 %f2 then add.f32 %f3 reads it: a pair; mul.rn.f32 %f4 (rounding given) then
    # add.f32 %f5: not one
    assert m.contractible("k") == ((12, 12),)
    assert m.contractible("empty") == ()


def test_each_argument_becomes_its_parameters_bytes(m):
    out = np.zeros(5, np.uint32)
    m.launch("k", 1, 1, [out, -2, np.float16(1.5), bytes(range(1, 9)), 3.0], executor="interpreter")
    assert out[:4].tolist() == [0xFFFFFFFE, 0x3E00, 0x04030201, 0x08070605]
    assert out[4:].view(np.float32)[0] == 12.0                          # 3 * 3 + 3


@pytest.mark.parametrize("args, match", [
    ([-129, 0.0, bytes(8), 0.0], r"args\[1\] \(a, .s8\): value must lie in \[-128, 127\]; got -129"),
    ([True, 0.0, bytes(8), 0.0], r"args\[1\] \(a, .s8\): must be an array, an int or a float; got bool"),
    ([0, 0.1, bytes(8), 0.0], r"args\[2\] \(h, .f16\): 0.1 is not exactly representable in .f16"),
    ([0, 0.0, bytes(7), 0.0], r"args\[3\] \(blob, .b8\): a 8-byte parameter takes bytes of that length"),
    ([0, 0.0, bytes(8), 2.0**-150], r"args\[4\] \(f, .f32\): .* is not exactly representable in .f32"),
])
def test_a_value_argument_that_does_not_fit_its_parameter_is_named(m, args, match):
    with pytest.raises(PtxLaunchError, match=match):
        m.launch("k", 1, 1, [np.zeros(5, np.uint32), *args], executor="interpreter")


@pytest.mark.parametrize("array, match", [
    (np.zeros(5, ">u4"), "native byte order; got dtype >u4"),
    (np.zeros(5, object), "native byte order; got dtype object"),
])
def test_a_pointer_argument_must_hold_native_numbers(m, array, match):
    with pytest.raises(PtxLaunchError, match=match):
        m.launch("k", 1, 1, [array, 0, 0.0, bytes(8), 0.0], executor="interpreter")


def test_an_array_for_a_value_parameter_and_a_non_sequence_args_are_refused(m):
    with pytest.raises(PtxLaunchError, match=r"args\[1\] \(a, .s8\): an array \(pointer\) needs a 64-bit parameter"):
        m.launch("k", 1, 1, [np.zeros(5, np.uint32), np.zeros(1, np.int8), 0.0, bytes(8), 0.0])
    with pytest.raises(PtxLaunchError, match="args: must be a sequence with one argument per .param; got ndarray"):
        m.launch("empty", 1, 1, np.zeros(0))


@pytest.mark.parametrize("kw, match", [
    (dict(executor="gpu"), r"executor: must be one of \[.*'interpreter'.*\]; got 'gpu'"),
    (dict(atomic_order=(0, 2)), r"atomic_order: must be None or a permutation of 0..n-1; got \(0, 2\)"),
    (dict(atomic_order=()), r"atomic_order: must be None or a permutation of 0..n-1; got \(\)"),
    (dict(atomic_order=(True, False)), r"atomic_order: must be None or a permutation"),
])
def test_executor_and_atomic_order_are_checked(m, kw, match):
    with pytest.raises(PtxLaunchError, match=match):
        m.launch("empty", 1, 1, [], **kw)


def test_a_module_runs_on_its_target_and_later_archs_only():
    m = ptx.Module(HEAD.replace("sm_80", "sm_86") + ".visible .entry k()\n{\nret;\n}\n")
    assert m.target == "sm_86"
    m.launch("k", 1, 1, [], arch="sm_89", executor="interpreter")
    with pytest.raises(PtxLaunchError, match="arch: PTX built for .target sm_86 cannot run on sm_80"):
        m.launch("k", 1, 1, [], executor="interpreter")
