"""check_kernel on a CUDA/PTX *file*: compiled (or read), launched through refsim.ptx, compared.

The file is refsim's own committed Any-Precision PTX (refsim/cuda/ptx/anyprec.sm_80.ptx), so this
runs without nvcc; the launch function is written here the way a kernel author writes theirs.
"""

from pathlib import Path

import numpy as np
import pytest

import refsim
from refsim.cuda import LaunchPlan
from refsim.testing.harness import KernelMismatch
from refsim.errors import FormatRuleError
from refsim.formats import anyprec_plan as ak
from refsim.testing import check_kernel

PTX = Path(refsim.__file__).parent / "cuda" / "ptx" / "anyprec.sm_80.ptx"
SHAPES = [{"m": 1, "k": 256, "n": 16, "bits": 3}]


def _plan(x, qweight, lut, scale=1):
    """Launch of anyprec.cu's entry for these inputs (grid ceil(N/4), block 128, 4 table rows)."""
    bits = qweight.shape[0]
    m, n, k, bits = ak.check_inputs(x, qweight, lut, bits)
    out = np.zeros((m, n), np.float16)
    p = ak.plan(m, n, k, bits)   # a K-split launch (M = 1, K > 4096, 7-8 bits): slices of 4 chunks
    args = (x, qweight, (lut * np.float16(scale)).astype(np.float16), out, np.int32(m), np.int32(n), np.int32(k),
            np.int32(bits), np.int32(4 if p.ksplit > 1 else p.chunks))
    return LaunchPlan(grid=-(-n // 4), block=128, args=args, out=out, shared_bytes=4 * (1 << bits) * 2)


def test_a_ptx_file_with_its_launch_passes_against_the_emulator():
    res = check_kernel(str(PTX), fmt="anyprec", kernel="anyprec_gemv", launch=_plan, shapes=SHAPES,
                       max_examples=1, seed=0, progress=False)
    assert res.pinned + res.drawn >= 1


def test_a_wrong_launch_of_the_same_file_is_a_mismatch():
    # the author's launch doubles the table: every nonzero output differs
    with pytest.raises(KernelMismatch):
        check_kernel(str(PTX), fmt="anyprec", kernel="anyprec_gemv", launch=lambda x, q, lut: _plan(x, q, lut, 2),
                     shapes=SHAPES, max_examples=0, seed=0, shrink=False, diagnose_budget=1.0, progress=False)


def test_a_source_path_needs_its_entry_and_launch():
    with pytest.raises(FormatRuleError, match="kernel="):
        check_kernel(str(PTX), fmt="anyprec", launch=_plan)
    with pytest.raises(FormatRuleError, match="only for a CUDA/PTX source"):
        check_kernel(lambda *a: None, fmt="anyprec", kernel="anyprec_gemv")
