"""Puts this folder on sys.path so the tests share the fake CUDA driver in fake_cuda.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
