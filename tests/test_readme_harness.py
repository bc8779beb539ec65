"""The README's check_kernel example runs as printed and catches the reduction-order bug."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from refsim.emulator.harness import KernelMismatch

pytestmark = pytest.mark.slow


def test_readme_worked_example_catches_a_kernel_planned_for_72_sms():
    readme = Path(__file__).resolve().parents[1] / "README.md"
    section = readme.read_text().split("## Testing your kernel against refsim")[1]
    block = next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "check_kernel(my_marlin" in b)
    with pytest.raises(KernelMismatch) as info:
        exec(compile(block, "README.md", "exec"), {})
    msg = str(info.value)
    assert "on pinned case" in msg and "verdict: partition" in msg
    assert re.search(r"sms in \[[^\]]*\b72\b", msg)
