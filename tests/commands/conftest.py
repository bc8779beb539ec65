"""The checkpoint the quantize, inspect and convert command tests share (made once per session), and
``refsim check`` run as a user runs it."""

import subprocess
import sys

import pytest

from refsim.cli import main
from refsim.data import minilm


@pytest.fixture(scope="session")
def quantized(tmp_path_factory):
    """A GPTQ (symmetric, act-order) checkpoint of two real MiniLM layers, made by the CLI."""
    out = tmp_path_factory.mktemp("cli") / "gptq"
    rc = main(["quantize", str(minilm.model_path()), "--method", "gptq", "--sym", "--act-order", "--layers",
               r"encoder\.layer\.1\.(intermediate\.dense|attention\.self\.query)$", "--executor", "serial",
               "--out", str(out), "--quiet"])
    assert rc == 0
    return out


@pytest.fixture
def refsim_check(tmp_path):
    """``refsim_check(source, *args, timeout=120) -> (status, stdout, stderr)``: ``python -m refsim check``
    in a fresh process (cwd ``tmp_path``) on a kernel module written from ``source``; an ``@`` in an
    argument stands for ``path/to/that/module.py:``."""
    def run(source, *args, timeout=120):
        path = tmp_path / "user_kernels.py"
        path.write_text(source)
        res = subprocess.run([sys.executable, "-m", "refsim", "check", *[str(a).replace("@", f"{path}:") for a in args]],
                             capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
        return res.returncode, res.stdout, res.stderr
    return run
