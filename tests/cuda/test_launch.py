"""refsim/cuda/launch.py, the one launch path: what a call must be (checked once, for both backends), the
launch-shape rule it leaves to refsim.ptx, and the per-entry module cache; an unknown backend and a GPU
backend without cuda.core refused; a random warp/block schedule with the race checker on changes no bit
of any kernel."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from fake_cuda import FakeCuda
from kernel_inputs import atom_problem as _atom_problem
from kernel_inputs import gptq_checkpoint as _gptq

import refsim.cuda as rc
from refsim.cuda import build, gpu, launch
from refsim.emulator import anyprec_kernel, atom_kernel, gptq_awq_kernel, mixed_2_4_16_kernel
from refsim.errors import FormatRuleError, RefsimError, ToolchainError
from refsim.formats import bitplane, gptq
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.ptx import PtxLaunchError
from refsim.testing import assert_bitexact

_ARGS = (np.zeros(4, np.float16),) * 5 + (np.int32(1),) * 3
_GOOD = launch.Launch("refsim_marlin_m1_n8_k8_grouped", 1, 256, 0)


@pytest.mark.parametrize("launches,match", [
    ("Launch", "launches: must be a sequence"),
    (5, "launches: must be a sequence"),
    ([(_GOOD,)], r"launches\[0\]: must be a \(refsim.cuda.launch.Launch, args\) pair; got tuple"),
    ([(_GOOD, _ARGS), ("refsim_marlin_m1_n8_k8_grouped", _ARGS)],
     r"launches\[1\]: .* got a pair starting with str"),
    ([_GOOD], r"launches\[0\]: .* got Launch"),
])
@pytest.mark.parametrize("backend", ["ptx", "gpu"])
def test_a_call_that_is_not_launch_pairs_is_refused_on_both_backends(monkeypatch, launches, match, backend):
    fake = FakeCuda()
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    with pytest.raises(FormatRuleError, match=match):
        launch.run(build.ptx("marlin"), launches, backend=backend)
    assert fake.calls == []                           # refused before the device is touched


def test_the_ptx_backend_checks_the_shape_against_the_arch_it_runs():
    big = launch.Launch("refsim_marlin_m1_n8_k8_grouped", 1, 256, 101377)        # above sm_86's 99 KiB
    with pytest.raises(PtxLaunchError, match="must be <= 101376 bytes per block on sm_86; got 101377"):
        launch.run(build.ptx("marlin"), [(big, _ARGS)], arch="sm_86")
    with pytest.raises(PtxLaunchError, match=r"block: at most 1024 threads"):
        launch.run(build.ptx("marlin"), [(launch.Launch(_GOOD.kernel, 1, 2048), _ARGS)])


def test_one_entry_is_parsed_alone_and_cached():
    text = build.ptx("marlin")
    kernel = launch.entries(text)[0]
    assert len(launch.entries(launch.entry_text(text, kernel))) == 1
    assert launch.module(text, kernel) is launch.module(text, kernel)
    assert launch.module(text, kernel).kernels == (kernel,)


# ------------------------------------------------------------- backends and schedules, through every kernel
def test_unknown_backend_is_refused():
    x = np.zeros((1, 32), np.float16)
    with pytest.raises(RefsimError, match="backend"):
        rc.gptq_gemv(x, _gptq(np.random.default_rng(0), 32, 32, 32), backend="cpu")


def test_gpu_backend_without_cuda_core_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.core", None)   # import cuda.core -> ImportError
    x = np.zeros((1, 32), np.float16)
    with pytest.raises(ToolchainError, match=r"refsim\[gpu\]"):
        rc.gptq_gemv(x, _gptq(np.random.default_rng(0), 32, 32, 32), backend="gpu")



RANDOM = {"schedule": "random", "race": True}


@pytest.mark.parametrize("kernel", ["anyprec", "mixed", "gptq", "atom"])
def test_a_random_schedule_with_the_race_checker_changes_no_bit(kernel):
    rng = np.random.default_rng(11)
    opts = {**RANDOM, "seed": 5}
    if kernel == "anyprec":
        qweight = bitplane.pack(rng.integers(0, 16, (4, 96)).astype(np.uint8), 4)   # 4 warps share the table
        lut = rng.standard_normal((4, 16)).astype(np.float16)
        x = rng.standard_normal((1, 96)).astype(np.float16)
        got, want = rc.anyprec_gemv(x, qweight, lut, 4, options=opts), anyprec_kernel.anyprec_gemv(x, qweight, lut, 4)
    elif kernel == "mixed":
        k, n = 32, 16                                   # 4 warps, lanes 0..1 hold units
        X = rng.standard_normal((2 * k, k))
        p = m2416.pack(q2416.quantize((rng.standard_normal((k, n)) * 0.05).astype(np.float32), (X.T @ X) / k))
        x = rng.standard_normal(k).astype(np.float16)
        got, want = rc.mixed_gemv(p, x, options=opts), mixed_2_4_16_kernel.mixed_gemv(p, x)
    elif kernel == "gptq":
        ckpt = gptq.pack(rng.integers(0, 16, (32, 160)), np.full((1, 160), 0.01), rng.integers(1, 16, (1, 160)), 4)
        x = rng.standard_normal((1, 32)).astype(np.float16)
        got, want = rc.gptq_gemv(x, ckpt, options=opts), gptq_awq_kernel.gptq_gemv(x, ckpt)
    else:
        a, w = _atom_problem(rng, 18, 10, 3, 32, False, 0.2)      # body 384: the official kernel's smallest
        got, want = rc.atom_group_gemm(a, w, options=opts), atom_kernel.atom_group_gemm(a, w)
    assert_bitexact(got, want, name=kernel)

