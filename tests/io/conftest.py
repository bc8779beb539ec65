"""Puts this folder on sys.path so the tests share the builders in conftest_io.py, and gives them a
one-layer GPTQ checkpoint to break."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest_io import L0, gptq_layer  # noqa: E402  (after the path is set)
from refsim.io.gptq import write_gptq  # noqa: E402


@pytest.fixture
def gptq_dir(tmp_path):
    """A folder holding a one-layer (L0, 256 x 256, 4-bit, group 128) GPTQ checkpoint."""
    write_gptq(tmp_path, [gptq_layer(L0, np.random.default_rng(9))])
    return tmp_path
