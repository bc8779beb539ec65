"""``refsim report`` end to end: report.md written with the sections asked for, exit status 1 when a
check fails, and bad input inside a section one line on stderr with exit 2."""

from refsim.cli import main


def test_report_writes_markdown_with_the_foundation_section(tmp_path):
    rc = main(["report", "--out", str(tmp_path), "--only", "uniform", "--quiet"])
    text = (tmp_path / "report.md").read_text()
    assert rc == 0
    assert "## Uniform, GPTQ and AWQ" in text
    assert "FAIL" not in text


def test_report_exit_status_is_1_when_a_check_fails(tmp_path, monkeypatch):
    import refsim.report as report

    real = report.section_modules

    class Broken:
        TITLE = "broken"
        ORDER = 0

        @staticmethod
        def checks():
            def fail():
                raise AssertionError("deliberate")
            return [report.Check("always fails", fail)]

    monkeypatch.setattr(report, "section_modules", lambda only=None: [Broken] + real("uniform"))
    rc = main(["report", "--out", str(tmp_path), "--quiet"])
    assert rc == 1
    assert "**FAIL** | " in (tmp_path / "report.md").read_text()


def test_bad_input_in_a_subcommand_prints_one_line_and_exits_2(capsys, monkeypatch):
    from refsim.errors import ShapeError
    import refsim.report as report

    def raise_shape(*a, **k):
        raise ShapeError("x: must be 2-D; got shape (3,)")

    monkeypatch.setattr(report, "run_report", raise_shape)
    assert main(["report", "--quiet"]) == 2
    assert "must be 2-D" in capsys.readouterr().err
