"""refsim.cuda.user_kernel: a user's PTX or .cu file becomes a callable with an emulator-shaped signature,
launched by the user's plan; a missing file and an ambiguous kernel name are refused."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_inputs import gptq_checkpoint as _gptq

import refsim.cuda as rc
from refsim.cuda import build
from refsim.emulator import gptq_awq_kernel
from refsim.errors import FormatRuleError, RefsimError
from refsim.ptx import toolchain
from refsim.testing import assert_bitexact


def _gptq_plan(x, ckpt):
    m, k = x.shape
    n = ckpt.qweight.shape[1]
    y = np.zeros((m, n), np.float16)
    args = (x, ckpt.qweight, ckpt.qzeros, ckpt.scales, ckpt.g_idx, y, np.int32(m), np.int32(n), np.int32(k),
            np.int32(1))
    return rc.LaunchPlan(grid=-(-n // 128), block=128, args=args, out=y)


def test_user_kernel_runs_a_users_ptx_file_with_an_emulator_shaped_signature():
    f = rc.user_kernel(build.PTX_DIR / "gptq_awq.sm_80.ptx", kernel="gptq_gemv", launch=_gptq_plan)
    rng = np.random.default_rng(6)
    ckpt = _gptq(rng, 32, 32, 32)
    x = rng.standard_normal((2, 32)).astype(np.float16)
    assert_bitexact(f(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


@pytest.mark.nvcc
def test_user_kernel_compiles_a_users_cu_file():
    if toolchain.find_tool("nvcc") is None:
        pytest.skip("no nvcc: a .cu file needs the cuda extra ($NVCC, the wheel, PATH)")
    f = rc.user_kernel(build.source_path("gptq_awq"), kernel="gptq", launch=_gptq_plan)   # unique substring
    rng = np.random.default_rng(7)
    ckpt = _gptq(rng, 32, 32, 32)
    x = rng.standard_normal((1, 32)).astype(np.float16)
    assert_bitexact(f(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


def test_user_kernel_refuses_a_missing_file_and_an_unknown_kernel(tmp_path):
    with pytest.raises(RefsimError, match="no such"):
        rc.user_kernel(tmp_path / "nope.cu", kernel="k", launch=_gptq_plan)
    f = rc.user_kernel(build.PTX_DIR / "gptq_awq.sm_80.ptx", kernel="gemv", launch=_gptq_plan)  # 2 matches
    ckpt = _gptq(np.random.default_rng(0), 32, 32, 32)
    with pytest.raises(FormatRuleError, match="awq_gemv, gptq_gemv|gptq_gemv, awq_gemv"):
        f(np.zeros((1, 32), np.float16), ckpt)



def test_a_cu_file_nvcc_rejects_is_named_in_every_diagnostic_line(failing_nvcc, tmp_path):
    from refsim.errors import CompileError

    src = tmp_path / "my_gemv.cu"
    src.write_text('extern "C" __global__ void k() {}\n')
    f = rc.user_kernel(src, kernel="k", launch=lambda: rc.LaunchPlan(grid=1, block=32, args=(), out=None))
    with pytest.raises(CompileError) as exc:
        f()
    lines = str(exc.value).splitlines()
    assert lines[0] == f"nvcc failed on {src} (-arch=sm_80):"
    assert lines[1] == f'{src}(3): error: identifier "undefined_name" is undefined' and len(lines) == 4
    assert "refsim-ptx-" not in str(exc.value)
