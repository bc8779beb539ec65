"""The README's "Test your CUDA kernel without a GPU" example runs as printed, and catches a bug."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from refsim.testing.harness import KernelMismatch


def _block() -> str:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### Test your CUDA kernel without a GPU")[1]
    return next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "check_kernel(" in b)


def test_readme_cuda_example_passes_as_printed():
    exec(compile(_block(), "README.md", "exec"), {})


def test_readme_cuda_example_fails_when_the_launch_is_wrong():
    # the same example with one block too few in the grid: the last 4 output rows stay zero
    broken = _block().replace("grid=-(-n // 4)", "grid=max(1, -(-n // 4) - 1)")
    assert broken != _block()
    with pytest.raises(KernelMismatch, match="anyprec kernel differs"):
        exec(compile(broken, "README.md", "exec"), {})
