"""bench/measure_hopper.py and its microbenchmark bench/hopper/marlin_issue.ptx.gz, without a GPU: the
committed PTX runs through refsim.ptx (a broken kernel is found before a GPU run is spent on it), the
modes compute what they claim, and the run plans and predicts every row before timing anything."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.cuda import launch

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("measure_hopper", ROOT / "bench" / "measure_hopper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_entry_the_run_launches_is_in_the_committed_ptx():
    mh = _bench()
    PTX = mh.issue_ptx()
    want = {f"marlin_issue_m{mb}_{mode}" for mb in mh.ISSUE_M_BLOCKS for mode in mh.ISSUE_MODES}
    assert want <= set(launch.entries(PTX))


def _sink(kernel: str, words: np.ndarray) -> np.ndarray:
    PTX = _bench().issue_ptx()
    cycles, ns, sink = np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(128, np.float32)
    # one entry's text only (the whole 18-entry module costs seconds to load): 1 CTA, 1 warp per SMSP
    launch.module(launch.entry_text(PTX, kernel)).launch(kernel, 1, 128, (words, cycles, ns, sink, np.int32(1)),
                                                         arch="sm_90")
    assert cycles[0] > 0
    return sink


def test_the_barrier_and_unit_group_scales_change_no_result():
    words = _bench().issue_words()
    base = _sink("marlin_issue_m1_3", words)            # dequant + mma
    assert np.isfinite(base).all() and np.abs(base).max() > 0
    # + __syncthreads per tile: the same arithmetic; + group scales of 1.0: HMUL2 by 1 is exact
    assert _sink("marlin_issue_m1_7", words).tobytes() == base.tobytes()
    assert _sink("marlin_issue_m1_11", words).tobytes() == base.tobytes()


def test_the_run_plans_every_row_and_predicts_it_first():
    mh = _bench()
    rows = mh.plan_rows({"cublas", "marlin", "anyprec"}, quick=False)
    # 5 Llama-2-7B shapes x 2 caches x (10 cuBLAS M + 5 Marlin M + 6 bit-widths x 3 Any-Precision M)
    assert len(rows) == 5 * 2 * (10 + 5 + 6 * 3)
    pred = mh.predictions(rows[:3] + rows[-3:], "h100-sxm")
    assert all(p["predicted_us"] > 0 and p["trust"] for p in pred)


def test_the_output_uses_the_tables_kernel_names():
    from refsim.gpu_model import measured
    names = _bench()._table_kernels()
    assert names["marlin"] == "marlin-official" and names["anyprec"] == "anyprec-official"
    assert set(names.values()) <= set(measured._KERNELS)


def test_the_warm_wait_kernel_runs():
    mh = _bench()
    launch.module(mh.SPIN_PTX).launch("spin", 1, 1, (np.uint64(100),), arch="sm_90")


def test_the_hopper_part_plans_both_kernels_and_predicts_them_unvalidated():
    mh = _bench()
    rows = mh.plan_rows({"hopper"}, quick=False)
    # W4A16: 5 shapes x 8 M x 2 caches; DeepGEMM: N = K = 4096 x 8 M x 2 caches
    assert len(rows) == 5 * 8 * 2 + 8 * 2
    assert {r["kernel"] for r in rows} == {"hopper-w4a16", "deepgemm-fp8"}
    assert _bench()._table_kernels()["hopper-w4a16"] == "hopper-w4a16"
    pred = mh.predictions([rows[0], rows[-1]], "h100-sxm")
    assert all(p["predicted_us"] > 0 and p["trust"].startswith("unvalidated") for p in pred)


def _fake_gpu(monkeypatch):
    spec = importlib.util.spec_from_file_location("fake_cuda", ROOT / "tests" / "cuda" / "fake_cuda.py")
    fake_cuda = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake_cuda)
    from refsim.cuda import gpu
    fake = fake_cuda.FakeCuda()
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    return fake


def test_the_hopper_rows_become_resident_gpu_launches_with_their_tensor_maps(monkeypatch):
    """What run_hopper_rows hands refsim's gpu backend, on the fake driver: both kernels prepare, launch
    again without syncing (the timed call), with 2 and 4 tensor maps encoded at their device buffers; a
    DeepGEMM problem without a committed instantiation is refused by name before anything runs."""
    from refsim.cuda import gpu
    from refsim.errors import FormatRuleError

    fake = _fake_gpu(monkeypatch)
    mh = _bench()
    rng = np.random.default_rng(1)
    for kernel, (m, n, k, sms), maps in (("hopper-w4a16", (5, 64, 256, 132), 2),
                                         ("deepgemm-fp8", (64, 256, 512, 4), 4)):
        before = len(fake.tensor_maps())
        ptx, launches = mh.hopper_launches(kernel, m, n, k, sms, rng)
        resident = gpu.prepare(ptx, launches)
        resident.launch(sync=False)
        resident.close()
        assert len(fake.tensor_maps()) - before == maps, kernel
    assert [ln[0] for ln in fake.launches()] == ["hopper_w4a16_gemm", launches[0][0].kernel]
    with pytest.raises(FormatRuleError, match="no committed instantiation for N=4096, K=4096, num_sms=132"):
        mh.hopper_launches("deepgemm-fp8", 1, 4096, 4096, 132, rng)


def test_every_wgmma_rate_entry_the_run_launches_is_in_the_committed_ptx():
    mh = _bench()
    want = {f"wgmma_rate_{kind}_n{n}" for kind, (_, ns) in mh.WGMMA_KINDS.items() for n in ns}
    assert want == set(launch.entries(mh.wgmma_ptx()))


@pytest.mark.parametrize("kind, n, iters, warpgroups", [("f16", 8, 1, 1), ("f16", 256, 1, 1), ("e4m3", 64, 2, 2)])
def test_the_wgmma_rate_loop_computes_what_it_issues(kind, n, iters, warpgroups):
    """Through refsim.ptx: each warpgroup's accumulators sum to iters x 4 x sum(A @ B^T) (small integers, exact
    in f32), so the committed loop really issues its 4 wgmmas per iteration on the staged operands."""
    mh = _bench()
    init, a, b = mh.wgmma_operands(kind, n)
    cycles, ns, sink = np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(128 * warpgroups, np.float32)
    name = f"wgmma_rate_{kind}_n{n}"
    launch.module(launch.entry_text(mh.wgmma_ptx(), name)).launch(
        name, 1, 128 * warpgroups, (init, cycles, ns, sink, np.int32(iters)), arch="sm_90a")
    want = iters * mh.WGMMA_GROUP * (a.astype(np.float64) @ b.astype(np.float64).T).sum()
    assert want > 0 and cycles[0] > 0
    for w in range(warpgroups):
        assert sink[128 * w:128 * (w + 1)].astype(np.float64).sum() == want
