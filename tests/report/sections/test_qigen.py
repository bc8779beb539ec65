"""The QIGen report section's checks pass and its plan table covers the benchmarked shapes."""

from refsim.report.sections import qigen


def test_every_check_passes():
    for check in qigen.checks():
        assert check.run()


def test_markdown_table_has_the_llama_shapes():
    md = qigen.markdown(None)
    for shape in ("4096 x 4096", "4096 x 11008", "11008 x 4096"):
        assert f"| {shape} | 4 | 128 |" in md and f"| {shape} | 3 | 128 |" in md
