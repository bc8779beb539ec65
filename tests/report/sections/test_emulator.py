"""The emulator report section's checks pass and its model table lists every architecture."""

from refsim.arith import tensor_core as tc
from refsim.report.sections import emulator


def test_every_check_passes():
    for check in emulator.checks():
        assert check.run()


def test_markdown_lists_all_architectures_and_flags_sm87():
    md = emulator.markdown(None)
    for arch in tc.ARCHS:
        assert f"| {arch} |" in md
    assert "| sm_87 | 8 | 24 | -132/-21 | **no** |" in md
