"""The tensor-core hardware measurements, decoded once for tests, the report and the bench.

Source data: the committed 400-row-per-GPU subset ``tests/emulator/data/tensor_core_hw_subset.npz``
of the workspace's ``shared/testdata/tensor_core_hw/samples.npz`` (5000 rows per GPU, from
north-numerical-computing/MATLAB-tensor-core ``model_validation``, BSD-2-Clause; licence and source in
``tests/emulator/data/``). Nothing here reads the sibling folder. The file holds, per GPU G, ``G_a_f16bits`` and
``G_b_f16bits`` uint16 (rows, L), ``G_c_f32bits`` uint32 (rows,), and the results
``G_d_fp32_as_f32bits`` / ``G_d_fp16_as_f32bits`` uint32 (rows,) (the fp16 result stored as the
fp32 bits of its value; the harness rounded c to fp16 first for the fp16-output runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["GPUS", "HwRows", "subset_path", "available_path", "load"]

#: (GPU in the data set, architecture model that must reproduce it)
GPUS: tuple[tuple[str, str], ...] = (("A100", "sm_80"), ("H100", "sm_90"), ("V100", "sm_70"))

_REPO = Path(__file__).resolve().parents[2]


class HwRows(NamedTuple):
    """One GPU's rows: a, b float16 (rows, L); c float32 (rows,); d32 float32; d16 float16."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d32: np.ndarray
    d16: np.ndarray


def subset_path() -> Path:
    """The committed 400-row subset (present in a source checkout)."""
    return _REPO / "tests" / "emulator" / "data" / "tensor_core_hw_subset.npz"


def available_path() -> Path | None:
    """The committed subset if present (a source checkout), else None (an installed wheel)."""
    path = subset_path()
    return path if path.exists() else None


def load(path: Path) -> dict[str, HwRows]:
    """Decode every GPU's rows of ``path`` (keys: the GPU names of :data:`GPUS`)."""
    data = np.load(path)
    rows = {}
    for gpu, _ in GPUS:
        rows[gpu] = HwRows(
            a=data[f"{gpu}_a_f16bits"].view(np.float16),
            b=data[f"{gpu}_b_f16bits"].view(np.float16),
            c=data[f"{gpu}_c_f32bits"].view(np.float32),
            d32=data[f"{gpu}_d_fp32_as_f32bits"].view(np.float32),
            d16=data[f"{gpu}_d_fp16_as_f32bits"].view(np.float32).astype(np.float16),  # exact: fp16 values
        )
    return rows
