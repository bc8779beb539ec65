"""The architecture table and the one launch-shape check of refsim.ptx (refsim/ptx/arch.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx import Module, PtxLaunchError
from refsim.ptx.arch import ARCHS, arch_facts, check_launch_shape

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def test_opt_in_shared_memory_maxima_are_the_cuda_guide_numbers():
    # CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": maximum shared
    # memory per thread block, in KiB
    kib = {"sm_70": 96, "sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_89": 99, "sm_90": 227,
           "sm_120": 99}
    assert {a: f.max_shared_bytes_per_block for a, f in ARCHS.items()} == {a: k * 1024 for a, k in kib.items()}
    assert all(f.shared_bytes_without_opt_in == 49152 == f.max_static_shared_bytes for f in ARCHS.values())


def test_the_performance_model_gpus_agree_with_the_table():
    from refsim.gpu_model.specs import GPUS

    for g in GPUS.values():
        arch = "sm_" + g.compute_capability.replace(".", "")
        assert ARCHS[arch].max_shared_bytes_per_block == g.smem_per_block_bytes, g.name


def test_launch_shape_is_normalised_and_says_when_the_opt_in_is_needed():
    s = check_launch_shape("sm_90", 108, (32, 4), dynamic_shared_bytes=49152 - 1024, static_shared_bytes=1024)
    assert (s.grid, s.block, s.threads_per_block, s.blocks) == ((108, 1, 1), (32, 4, 1), 128, 108)
    assert not s.needs_opt_in
    assert check_launch_shape("sm_90", 1, 1, dynamic_shared_bytes=49153).needs_opt_in
    assert check_launch_shape("sm_90", np.int64(3), (np.int32(2),)).grid == (3, 1, 1)


@pytest.mark.parametrize("kw, match", [
    (dict(grid=0, block=1), r"grid: every dimension must be >= 1; got \(0, 1, 1\)"),
    (dict(grid=(1, 2, 3, 4), block=1), "grid: must be an int or a tuple of 1 to 3 ints"),
    (dict(grid=True, block=1), "grid: must be an int"),
    (dict(grid=1, block=(1025,)), r"block: at most 1024 threads and z <= 64; got \(1025, 1, 1\)"),
    (dict(grid=1, block=(1, 1, 65)), "z <= 64"),
    (dict(grid=(1, 65536), block=1), "grid: y and z must be <= 65535"),
    (dict(grid=2**31, block=1), "x < 2[*][*]31"),
    (dict(grid=1, block=1, dynamic_shared_bytes=-1), "shared_bytes: must be a non-negative int; got -1"),
    (dict(grid=1, block=1, dynamic_shared_bytes=1.0), "shared_bytes: must be a non-negative int"),
    (dict(grid=1, block=1, static_shared_bytes=49153), "static shared memory: at most 49152 bytes"),
    (dict(grid=1, block=1, dynamic_shared_bytes=232448 + 1), "must be <= 232448 bytes per block on sm_90"),
])
def test_launch_shape_rules_are_named_errors(kw, match):
    with pytest.raises(ptx.PtxLaunchError, match=match):
        check_launch_shape("sm_90", **kw)


def test_unknown_architectures_are_refused():
    with pytest.raises(ptx.PtxLaunchError, match=r"arch: must be one of \['sm_70'"):
        check_launch_shape("sm_999", 1, 1)


def test_a_kernel_with_more_than_48_kib_of_static_shared_memory_is_refused_at_load():
    with pytest.raises(ptx.PtxLimitError, match="kernel k, PTX line 6: static .shared bytes per kernel: "
                                                "at most 49,152; got 49,156"):
        ptx.Module(HEAD + ".visible .entry k()\n{\n.shared .align 4 .b8 s[49156];\nret;\n}\n")
    ptx.Module(HEAD + ".visible .entry k()\n{\n.shared .align 4 .b8 s[49152];\nret;\n}\n").launch("k", 1, 32, [])


def test_arch_specific_targets_have_their_architectures_facts():
    # PTX ISA: sm_90a is sm_90 plus the features of exactly that architecture; its limits are sm_90's
    assert arch_facts("sm_90a") is ARCHS["sm_90"]
    assert check_launch_shape("sm_90a", 1, 1024, dynamic_shared_bytes=227 * 1024).facts.name == "sm_90"
    for bad in ("sm_80a", "sm_90b", "sm_90af", "SM_90A"):
        with pytest.raises(PtxLaunchError, match="arch: must be one of"):
            arch_facts(bad)


def test_handlers_are_built_for_an_arch_specific_target_itself_and_for_any_other_name_its_row():
    from refsim.ptx.arch import handler_arch

    assert [handler_arch(a) for a in ("sm_120a", "sm_90a", "sm_120", "sm_89", "sm_52", None)] == [
        "sm_120a", "sm_90a", "sm_120", "sm_89", "sm_80", "sm_80"]
    assert arch_facts("sm_120a") is ARCHS["sm_120"]


def test_a_kernel_compiled_for_sm_90a_launches_with_arch_sm_90a_on_both_executors():
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<5>;\n"
            "ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\n"
            "shl.b32 %r2, %r1, 1;\nmul.wide.u32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\n"
            "st.global.u32 [%rd4], %r2;\nret;\n}\n")
    m = Module(text)
    for executor in ("interpreter", "compiled"):
        y = np.zeros(32, np.int32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # no C compiler: the interpreter runs
            m.launch("k", 1, 32, [y], arch="sm_90a", executor=None if executor == "compiled" else executor)
        assert y.tolist() == [2 * i for i in range(32)]
