"""The README's check_kernel examples run as printed: the reduction-order bug is caught, and
accuracy mode accepts another legitimate order with the summary the README shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from refsim.testing.harness import KernelMismatch

pytestmark = pytest.mark.slow


def test_readme_worked_example_catches_a_kernel_planned_for_72_sms():
    readme = Path(__file__).resolve().parents[1] / "README.md"
    section = readme.read_text().split("## Testing your kernel against refsim")[1]
    block = next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "check_kernel(my_marlin" in b)
    with pytest.raises(KernelMismatch) as info:
        exec(compile(block, "README.md", "exec"), {})
    msg = str(info.value)
    assert "on pinned case" in msg and "rebuild: refsim.testing.rebuild_case(" in msg
    # replay the printed case with an unexhaustible diagnosis budget (the default is wall time)
    printed = eval(next(x for x in msg.splitlines() if "rebuild:" in x).split("rebuild_case(", 1)[1][:-1])
    from refsim.emulator import marlin_kernel as mk
    from refsim.testing import check_kernel

    with pytest.raises(KernelMismatch) as replay:
        check_kernel(lambda A, B, s: mk.marlin_gemm(A, B, s, sms=72), "marlin", sms=108, cases=[printed],
                     diagnose_budget=600, progress=False)
    verdict = next(x for x in str(replay.value).splitlines() if "verdict:" in x)
    assert "verdict: partition" in verdict and re.search(r"sms in \[[^\]]*\b72\b", verdict)


def test_readme_accuracy_example_prints_what_the_readme_shows(capsys):
    readme = Path(__file__).resolve().parents[1] / "README.md"
    section = readme.read_text().split("## Testing your kernel against refsim")[1]
    block = next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if 'mode="accuracy"' in b)
    printed = re.search(r"prints\n\n```\n(.*?)\n```", section, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out.strip()
    timing = re.compile(r"\(seed 0, [0-9.]+ s\)")                  # the one number that is not the result
    assert timing.sub("(seed 0, _ s)", out) == timing.sub("(seed 0, _ s)", printed)
