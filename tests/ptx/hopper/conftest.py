"""Puts tests/ptx/compiled on sys.path so these tests share its run_both helper (conftest_compiled.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "compiled"))
