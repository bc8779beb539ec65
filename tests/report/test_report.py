"""The report runner: BLAS pools run one thread inside the report and are restored after it; the
sections that share work (2/4/16 problems, calibration predictions) give the same results as
fresh computations."""

import types

import numpy as np
import threadpoolctl

from refsim import report
from refsim.report import Check


def _blas_threads():
    return sorted({p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"})


def test_blas_is_single_threaded_inside_the_report_only(tmp_path, monkeypatch):
    np.ones((4, 4)) @ np.ones((4, 4))                 # BLAS loaded
    seen = []
    fake = types.SimpleNamespace(TITLE="fake", ORDER=0, __name__="fake",
                                 checks=lambda: [Check("threads", lambda: seen.append(_blas_threads()) or "ok")])
    monkeypatch.setattr(report, "section_modules", lambda only=None: [fake])
    with threadpoolctl.threadpool_limits(limits=2):
        before = _blas_threads()
        (sec,) = report.run_report(tmp_path)
        after = _blas_threads()
    assert sec.results[0].status == "PASS"
    assert seen == [[1]]
    assert after == before


def test_shared_2_4_16_problem_equals_a_fresh_one():
    from refsim.quant import mixed_2_4_16 as Q
    from refsim.report.sections import mixed_2_4_16 as sec

    W, m = sec._problem(alpha=0.1)
    assert sec._problem(alpha=0.1)[1] is m              # shared, not recomputed
    rng = np.random.default_rng(0)
    W2 = (rng.standard_normal((160, 32)) * 0.05).astype(np.float32)
    X = rng.standard_normal((320, 160))
    fresh = Q.quantize(W2, X.T @ X / 160, alpha=0.1, outlier_ratio=0.005)
    assert np.array_equal(W.view(np.uint32), W2.view(np.uint32))
    for f in ("q", "code", "zero", "four", "col", "row_ptr", "val"):
        a, b = np.asarray(getattr(m, f)), np.asarray(getattr(fresh, f))
        assert a.shape == b.shape and a.tobytes() == b.tobytes(), f
    assert not m.q.flags.writeable                       # a check that writes raises instead of corrupting


def test_memoised_calibration_prediction_equals_the_kernel_model():
    from refsim.gpu_model import calibrate
    from refsim.gpu_model.kernels import predict
    from refsim.gpu_model.roofline import FITTED
    from refsim.gpu_model.specs import get_gpu

    g = get_gpu("rtx4070-laptop")
    for r in calibrate.load_rows()[::29]:
        bits = None if r.kernel == "cublas-fp16" else r.bits
        want = predict(g, r.kernel, r.m, r.n, r.k, bits=bits, clock="base", params=FITTED).latency_us
        for _ in range(2):                               # first call computes, second is the memo
            got = calibrate.predict_row(r, g, FITTED)
            assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)


def test_a_bit_mismatch_becomes_the_checks_failure_detail(tmp_path, monkeypatch):
    from refsim.testing import assert_bitexact

    def wrong_bits():
        assert_bitexact(np.array([1.0, 2.0, 3.0], np.float16), np.array([1.0, 2.0, 3.001], np.float16), name="y")

    fake = types.SimpleNamespace(TITLE="fake", ORDER=0, __name__="fake", checks=lambda: [Check("bits", wrong_bits)])
    monkeypatch.setattr(report, "section_modules", lambda only=None: [fake])
    (sec,) = report.run_report(tmp_path)
    (res,) = sec.results
    assert res.status == "FAIL"
    assert res.detail.startswith("y: 1 of 3 elements differ in their bits (dtype float16, shape (3,)); "
                                 "max ULP distance among mismatches: 1; at (2,): actual 0x4200")


def test_no_report_section_compares_bits_by_hand():
    # every bit comparison in a section goes through assert_bitexact (one report format, raw bits)
    import re
    from pathlib import Path

    import refsim.report.sections as sections

    hand = re.compile(r"np\.array_equal\(|\.tobytes\(\)|\.tolist\(\) *!=|\.view\(np\.uint\d+\) *!=")
    for path in Path(sections.__file__).parent.glob("*.py"):
        if path.name == "performance.py":      # predictions, no bits
            continue
        hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if hand.search(line)]
        assert not hits, f"{path.name}: lines {hits}"
