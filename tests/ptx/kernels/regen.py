"""Regenerate the committed PTX of the test kernels: ``python tests/ptx/kernels/regen.py``.

Each ``NAME.cu`` here is compiled with ``nvcc -arch=sm_80 -ptx`` (the options in OPTIONS) to
``NAME.ptx`` beside it. The tests run the committed PTX (no nvcc needed); the test marked ``nvcc``
in tests/ptx/test_kernels.py recompiles and diffs when nvcc is installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCH = "sm_80"
OPTIONS = ("-O3",)


def compile_one(cu: Path, nvcc: str = "nvcc") -> str:
    """The PTX text nvcc produces for ``cu`` (the Build ID comment line kept as nvcc writes it)."""
    out = subprocess.run([nvcc, f"-arch={ARCH}", "-ptx", *OPTIONS, str(cu), "-o", "-"],
                         capture_output=True, text=True, check=True)
    return out.stdout


def main() -> int:
    for cu in sorted(HERE.glob("*.cu")):
        cu.with_suffix(".ptx").write_text(compile_one(cu))
        print(f"wrote {cu.with_suffix('.ptx').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
