"""refsim/cuda/launch.py, the one launch path: what a call must be (checked once, for both backends), the
launch-shape rule it leaves to refsim.ptx, and the per-entry module cache."""

from __future__ import annotations

import numpy as np
import pytest
from fake_cuda import FakeCuda

from refsim.cuda import build, gpu, launch
from refsim.errors import FormatRuleError
from refsim.ptx import PtxLaunchError

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
