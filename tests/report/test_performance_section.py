"""The performance report section writes its tables with or without matplotlib."""

import sys

from refsim.report.sections import performance


def test_tables_are_written_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib -> ImportError
    md = performance.markdown(tmp_path)
    for gpu in ("a10", "rtx4090", "orin-agx-64gb"):
        assert f"### {gpu}: latency per block" in md and f"### {gpu}: speedup over cublas-fp16" in md
    assert "roofline plot skipped" in md
    assert not list(tmp_path.glob("*.png"))
    assert "| marlin |" in md and "compute-bound from" in md


def test_checks_pass():
    for check in performance.checks():
        assert check.run()
