"""refsim.gpu_model.measure: the microbenchmark driver on a stand-in for ``cuda.core`` (no GPU).

The stand-in runs no kernel: each launch advances a clock by a duration the test chooses (rep i of 20
takes base + i ms; a launch right after the L2 flush takes 100 ms more), so the medians, minima and 90th
percentiles ``measure`` reports, the sizes and occupancies it walks, the flush before every cold launch and
the device fields are all known by hand. Without cuda.core, or when the GPU run fails, it is a
ToolchainError naming the cause.
"""

from __future__ import annotations

import statistics
import sys
from types import ModuleType, SimpleNamespace

import pytest

from refsim.errors import ToolchainError
from refsim.gpu_model import measure as ms

SMS, L2 = 2, 1 << 20


class _Event:
    """A recorded event: ``stop - start`` is the elapsed time in ms, as cuda.core's events give it."""

    def __init__(self, t: float):
        self.t = t

    def __sub__(self, other: "_Event") -> float:
        return self.t - other.t

    def sync(self):
        pass


class _Stream:
    def __init__(self):
        self.now, self.reps, self.flushed = 0.0, {}, False

    def record(self, options=None) -> _Event:
        return _Event(self.now)


def _fake_cuda_core(log: list, fail: str | None = None) -> ModuleType:
    cc = ModuleType("cuda.core")
    stream = _Stream()

    class Device:
        name = "Fake GPU"
        compute_capability = (9, 0)
        properties = SimpleNamespace(multiprocessor_count=SMS, l2_cache_size=L2, clock_rate=1980000)

        def __init__(self):
            if fail:
                raise RuntimeError(fail)

        def set_current(self):
            pass

        def create_stream(self):
            return stream

        def allocate(self, nbytes, stream=None):
            return SimpleNamespace(nbytes=nbytes)

    def launch(s, config, kernel, *args):
        log.append((kernel, config.grid, config.block))
        if kernel == "zero":
            s.flushed = args[0].nbytes == max(2 * L2, 256 << 20)
            return
        key = (kernel, config.grid, config.block, args[1] if kernel == "read" else 0, s.flushed)
        i = s.reps.get(key, 0)
        s.reps[key] = i + 1
        base = 1 if kernel == "empty_kernel" else args[1] * 16 // (1 << 18)     # ms: 1 per 256 KiB read
        s.now += base + i + (100 if s.flushed else 0)
        s.flushed = False

    cc.Device = Device
    cc.Program = lambda src, code_type, options: SimpleNamespace(
        compile=lambda kind: SimpleNamespace(get_kernel=lambda name: name))
    cc.ProgramOptions = lambda arch: SimpleNamespace(arch=arch)
    cc.EventOptions = lambda enable_timing: None
    cc.LaunchConfig = lambda grid, block: SimpleNamespace(grid=grid, block=block)
    cc.launch = launch
    return cc


def _stats(base_ms: float) -> dict:
    """median, min and p90 (sorted[int(0.9 * 19)] = the 18th) of base + i ms, i = 0..19, in us."""
    times = [(base_ms + i) * 1e3 for i in range(20)]
    return {"median_us": statistics.median(times), "min_us": times[0], "p90_us": times[17]}


@pytest.fixture
def fake(monkeypatch):
    log: list = []
    monkeypatch.setitem(sys.modules, "cuda", ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.core", _fake_cuda_core(log))
    return log


def test_measure_reports_each_benchmarks_statistics_worked_by_hand(fake):
    res = ms.measure()
    assert res["sms"] == SMS
    assert res["device"] == {"name": "Fake GPU", "compute_capability": "sm_90", "l2_bytes": L2, "clock_khz": 1980000}
    # empty kernel: 1 + i ms, cold ones 100 ms more (the flush right before)
    assert res["empty"] == {"warm": _stats(1), "cold": _stats(101)}
    # read: 256 KiB .. 1 GiB, cold then warm; base = bytes / 256 KiB
    assert [(r["bytes"], r["cache"]) for r in res["read"]] == [(b, c) for b in ms.SIZES for c in ("cold", "warm")]
    for r in res["read"]:
        base = r["bytes"] // (1 << 18) + (100 if r["cache"] == "cold" else 0)
        assert {k: r[k] for k in ("median_us", "min_us", "p90_us")} == _stats(base), r
    # occupancy: every (blocks per SM, threads) of the table, 256 MiB cold, grid = SMs x blocks
    assert [(r["blocks_per_sm"], r["threads"], r["bytes"]) for r in res["read_occupancy"]] == \
        [(b, t, 256 << 20) for b, t in ms.OCCUPANCY]
    assert res["read_occupancy"][0]["min_us"] == (1024 + 100) * 1e3


def test_every_cold_launch_follows_a_flush_and_the_grids_are_those_documented(fake):
    ms.measure()
    timed = [(i, e) for i, e in enumerate(fake) if e[0] != "zero"]
    # 20 empty cold + 20 warm, 7 sizes x 2 x 20 reads, 18 occupancy points x 20
    assert len(timed) == 40 + 7 * 2 * 20 + 18 * 20
    assert fake[0] == ("zero", SMS * 8, 256)                   # the data buffer zeroed first
    assert {(g, b) for k, g, b in fake if k == "read"} >= {(SMS * 8, 256), (SMS * 32, 512), (SMS * 1, 128)}
    assert {(g, b) for k, g, b in fake if k == "empty_kernel"} == {(1, 32)}
    flushes = sum(1 for k, _, _ in fake if k == "zero") - 1
    assert flushes == 20 + 7 * 20 + 18 * 20                    # one per cold launch


def test_without_cuda_core_it_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.core", None)        # import cuda.core raises ImportError
    with pytest.raises(ToolchainError, match=r"needs cuda.core: pip install 'refsim\[gpu\]'"):
        ms.measure()


def test_a_failing_gpu_run_is_a_toolchain_error_with_the_cause(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda", ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.core", _fake_cuda_core([], fail="CUDA_ERROR_NO_DEVICE"))
    with pytest.raises(ToolchainError, match="refsim calibrate --measure: the GPU run failed: CUDA_ERROR_NO_DEVICE"):
        ms.measure()


def test_the_benchmark_source_holds_the_three_kernels_it_launches():
    for name in ("empty_kernel", "zero", "read"):
        assert f'extern "C" __global__ void {name}(' in ms.SOURCE
    # the next load's address depends on the loaded value: the chain the compiler cannot hoist
    assert "i += stride + (unsigned long long)(v.x != 0.f);" in ms.SOURCE
    assert ms.SIZES[0] == 256 << 10 and ms.SIZES[-1] == 1 << 30 and ms.REPS == 20
