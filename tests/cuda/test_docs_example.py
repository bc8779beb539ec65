"""docs/cuda.md's "Test your own .cu" example runs as written (where nvcc exists)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from refsim.cuda import build
from refsim.ptx import toolchain

DOC = Path(__file__).resolve().parents[2] / "docs" / "cuda.md"


@pytest.mark.nvcc
def test_the_user_kernel_example_runs(tmp_path, monkeypatch):
    if toolchain.find_tool("nvcc") is None:
        pytest.skip("no nvcc: the example compiles a .cu file (pip install 'refsim[cuda]')")
    text = DOC.read_text()
    block = re.search(r"<!-- example: user_kernel -->\n```python\n(.*?)```", text, re.S)
    assert block, "docs/cuda.md lost its user_kernel example"
    shutil.copy(build.source_path("gptq_awq"), tmp_path / "my_gptq_gemv.cu")
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), str(DOC), "exec"), {})
