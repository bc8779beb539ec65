"""A report check that cannot run is SKIPPED and counted apart from passes and failures."""

import types

from refsim import report
from refsim.report import Check, SkipCheck


def _no_data():
    raise SkipCheck("no data here")


def _broken():
    raise AssertionError("wrong bits")


def test_skipped_is_neither_pass_nor_fail(tmp_path, monkeypatch):
    fake = types.SimpleNamespace(
        TITLE="fake", ORDER=0, __name__="fake",
        checks=lambda: [Check("ok", lambda: "fine"), Check("absent", _no_data), Check("bad", _broken)])
    monkeypatch.setattr(report, "section_modules", lambda only=None: [fake])
    (sec,) = report.run_report(tmp_path)
    assert [r.status for r in sec.results] == ["PASS", "SKIPPED", "FAIL"]
    assert sec.failed == 1 and sec.skipped == 1
    text = (tmp_path / "report.md").read_text()
    assert "**1 of 3 self-checks passed**, **1 FAILED**, 1 SKIPPED" in text
    assert "| absent | SKIPPED |" in text and "skipped: no data here" in text


def test_performance_section_asserts_no_speed():
    from refsim.report.sections import performance
    assert not any("speed" in c.name for c in performance.checks())
