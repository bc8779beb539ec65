"""Puts tests/ptx/compiled on sys.path so the tests share the helpers in conftest_compiled.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "compiled"))
