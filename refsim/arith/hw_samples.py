"""The tensor-core hardware measurements, decoded once for tests, the report and the bench.

Two data sets (provenance in ``refsim/data/tensor_core_hw/README.md``): the fp16 T-FDPA blocks below
(:func:`load`) and the H100 ``mma.sync`` probes of bf16/tf32/fp8/fp16 tiles (:func:`load_probes`).

Source data: ``refsim/data/tensor_core_hw/subset.npz``, 400 rows per GPU of the measurements in
north-numerical-computing/MATLAB-tensor-core ``model_validation`` (BSD-2-Clause; licence and source in
that folder). The file holds, per GPU G, ``G_a_f16bits`` and
``G_b_f16bits`` uint16 (rows, L), ``G_c_f32bits`` uint32 (rows,), and the results
``G_d_fp32_as_f32bits`` / ``G_d_fp16_as_f32bits`` uint32 (rows,) (the fp16 result stored as the
fp32 bits of its value; the harness rounded c to fp16 first for the fp16-output runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from refsim._validate import require_path
from refsim.errors import FormatRuleError

__all__ = ["GPUS", "HwRows", "subset_path", "available_path", "load", "PROBES", "Probe", "probes_path",
           "load_probes"]

#: (GPU in the data set, architecture model that must reproduce it)
GPUS: tuple[tuple[str, str], ...] = (("A100", "sm_80"), ("H100", "sm_90"), ("V100", "sm_70"))

_DATA = Path(__file__).resolve().parents[1] / "data" / "tensor_core_hw"


class HwRows(NamedTuple):
    """One GPU's rows: a, b float16 (rows, L); c float32 (rows,); d32 float32; d16 float16."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d32: np.ndarray
    d16: np.ndarray


def subset_path() -> Path:
    """The committed 400-row subset (package data)."""
    return _DATA / "subset.npz"


def available_path() -> Path | None:
    """The committed subset if present, else None (an install that dropped the package data)."""
    path = subset_path()
    return path if path.exists() else None


def load(path: Path) -> dict[str, HwRows]:
    """Decode every GPU's rows of ``path`` (keys: the GPU names of :data:`GPUS`).

    ``path``: an ``.npz`` file holding the arrays of the module docstring (uint16 (rows, L) a/b,
    uint32 (rows,) c/d); a missing or malformed file raises FormatRuleError naming it."""
    path = require_path("path", path)
    if not path.is_file():
        raise FormatRuleError(f"{path}: hardware-sample file must exist; got no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            raw = {key: np.array(data[key]) for key in _keys() if key in data.files}
    except (OSError, ValueError, EOFError) as err:
        raise FormatRuleError(f"{path}: must be a readable .npz file; got {type(err).__name__}: {err}") from None
    missing = [key for key in _keys() if key not in raw]
    if missing:
        raise FormatRuleError(f"{path}: must hold the arrays {missing[:3]}...; got no such arrays")
    rows = {}
    for gpu, _ in GPUS:
        a, b = raw[f"{gpu}_a_f16bits"], raw[f"{gpu}_b_f16bits"]
        vecs = [raw[f"{gpu}_{s}"] for s in ("c_f32bits", "d_fp32_as_f32bits", "d_fp16_as_f32bits")]
        if a.dtype != np.uint16 or b.dtype != np.uint16 or a.ndim != 2 or b.shape != a.shape or any(
                v.dtype != np.uint32 or v.shape != a.shape[:1] for v in vecs):
            raise FormatRuleError(f"{path}: {gpu} rows must be uint16 (rows, L) a/b and uint32 (rows,) c/d; "
                                  f"got {a.dtype}{a.shape}, {b.dtype}{b.shape}, "
                                  f"{[f'{v.dtype}{v.shape}' for v in vecs]}")
        rows[gpu] = HwRows(
            a=a.view(np.float16),
            b=b.view(np.float16),
            c=vecs[0].view(np.float32),
            d32=vecs[1].view(np.float32),
            d16=vecs[2].view(np.float32).astype(np.float16),  # exact: fp16 values
        )
    return rows


def _keys() -> list[str]:
    return [f"{gpu}_{s}" for gpu, _ in GPUS for s in ("a_f16bits", "b_f16bits", "c_f32bits",
                                                       "d_fp32_as_f32bits", "d_fp16_as_f32bits")]


# ----------------------------------------------------------------------------------------------
# the H100 mma.sync probes

#: probe kernel -> (mma shape, A type, B type); every one f32 accumulation, measured at sm_90
PROBES: dict[str, tuple[str, str, str]] = {
    "bf16_k16_f32": ("m16n8k16", "bf16", "bf16"),
    "bf16_k8_f32": ("m16n8k8", "bf16", "bf16"),
    "tf32_k8_f32": ("m16n8k8", "tf32", "tf32"),
    "tf32_k8_f32_lowbits": ("m16n8k8", "tf32", "tf32"),
    "e4m3_k32_f32": ("m16n8k32", "e4m3", "e4m3"),
    "e5m2_k32_f32": ("m16n8k32", "e5m2", "e5m2"),
    "f16_k8_f32": ("m16n8k8", "f16", "f16"),
    "f16_k16_f32": ("m16n8k16", "f16", "f16"),
}
_PROBE_FIELDS = ("A_bits", "B_bits", "C_f32", "D_f32", "A_regs", "B_regs")


class Probe(NamedTuple):
    """One probe kernel: A (tiles, 16, K), B (tiles, K, 8) raw format bits; C, D float32 (tiles, 16, 8)
    (D what the H100 wrote); A_regs, B_regs uint32 (tiles, 32, n) the registers per lane; category
    (tiles,) int: index into ``CATEGORIES`` of the json (tile j has category j // 16)."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    A_regs: np.ndarray
    B_regs: np.ndarray
    category: np.ndarray


def probes_path() -> Path:
    """The committed H100 probe file (package data)."""
    return _DATA / "h100_probes.npz"


def load_probes(path: Path | None = None) -> dict[str, Probe]:
    """Every kernel of :data:`PROBES` in ``path`` (default :func:`probes_path`), as :class:`Probe`.

    ``path``: an ``.npz`` with ``<kernel>/{A_bits,B_bits,C_f32,D_f32,A_regs,B_regs}`` per kernel (any
    number of tiles, categories of 16 tiles each); a missing file or array raises FormatRuleError."""
    path = require_path("path", probes_path() if path is None else path)
    if not path.is_file():
        raise FormatRuleError(f"{path}: probe file must exist; got no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            raw = {f"{k}/{f}": np.array(data[f"{k}/{f}"]) for k in PROBES for f in _PROBE_FIELDS
                   if f"{k}/{f}" in data.files}
    except (OSError, ValueError, EOFError) as err:
        raise FormatRuleError(f"{path}: must be a readable .npz file; got {type(err).__name__}: {err}") from None
    missing = [f"{k}/{f}" for k in PROBES for f in _PROBE_FIELDS if f"{k}/{f}" not in raw]
    if missing:
        raise FormatRuleError(f"{path}: must hold the arrays {missing[:3]}...; got no such arrays")
    out = {}
    for k in PROBES:
        A, B, C, D, Ar, Br = (raw[f"{k}/{f}"] for f in _PROBE_FIELDS)
        if C.dtype != np.float32 or D.dtype != np.float32 or C.shape != D.shape or A.shape[0] != C.shape[0]:
            raise FormatRuleError(f"{path}: {k} must hold float32 C/D of one shape and A of as many tiles; got "
                                  f"C {C.dtype}{C.shape}, D {D.dtype}{D.shape}, A {A.shape}")
        out[k] = Probe(A, B, C, D, Ar, Br, np.arange(A.shape[0]) // 16)
    return out
