"""Regenerate the committed PTX of the test kernels: ``python tests/ptx/kernels/regen.py``.

Each ``NAME.cu`` here is compiled with ``nvcc -arch=sm_80 -ptx`` (the options in OPTIONS; the
arch of ARCH_OF where a kernel needs a later one) to ``NAME.ptx`` beside it. The tests run the committed PTX (no nvcc needed); the test marked ``nvcc``
in tests/ptx/test_kernels.py recompiles and diffs when nvcc is installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCH = "sm_80"
ARCH_OF = {"mma_types.cu": "sm_89",      # fp8 mma needs .target sm_89
           "hopper_async.cu": "sm_90a",  # mbarrier, TMA, elect.sync: sm_90a
           "hopper_registers.cu": "sm_90a",  # setmaxnreg: sm_90a
           "hopper_stmatrix.cu": "sm_90a",   # stmatrix: sm_90
           "wgmma.cu": "sm_90a",             # wgmma needs the arch-specific sm_90a target
           "hopper_cluster.cu": "sm_90a",    # clusters: sm_90
           "hopper_dsmem.cu": "sm_90a",      # distributed shared memory: sm_90
           "hopper_multicast.cu": "sm_90a",  # TMA multicast, remote mbarrier arrive: sm_90
           "hopper_bulk_reduce.cu": "sm_90a",  # cp.reduce.async.bulk float forms: sm_90
           "block_scaled_mma.cu": "sm_120a"}     # mma .kind:: needs .target sm_120a (nvcc 13.0)
OPTIONS = ("-O3",)


def compile_all(out_dir: Path, nvcc: str = "nvcc") -> dict[str, str]:
    """PTX text per ``.cu`` file name, from one nvcc call per arch writing into ``out_dir``."""
    sources = sorted(HERE.glob("*.cu"))
    for arch in sorted({ARCH_OF.get(cu.name, ARCH) for cu in sources}):
        group = [str(cu) for cu in sources if ARCH_OF.get(cu.name, ARCH) == arch]
        subprocess.run([nvcc, f"-arch={arch}", "-ptx", *OPTIONS, *group, "-odir", str(out_dir)],
                       capture_output=True, text=True, check=True)
    return {cu.name: (out_dir / cu.with_suffix(".ptx").name).read_text() for cu in sources}


def main() -> int:
    for name, text in compile_all(HERE).items():
        print(f"wrote {Path(name).with_suffix('.ptx').name} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
