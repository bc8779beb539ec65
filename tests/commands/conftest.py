"""The checkpoint the quantize, inspect and convert command tests share (made once per session)."""

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
