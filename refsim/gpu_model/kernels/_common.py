"""Helpers shared by the kernel models: argument validation and the tensor-core GEMM tile model."""

from __future__ import annotations

import math
from functools import lru_cache

from refsim._validate import require_int
from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.roofline import ModelParams, FITTED
from refsim.gpu_model.specs import GPUSpec, get_gpu


def check_mnk(kernel: str, m, n, k) -> tuple[int, int, int]:
    m = require_int("m", m, minimum=1)
    n = require_int("n", n, minimum=1)
    k = require_int("k", k, minimum=1)
    return m, n, k


def check_bits(kernel: str, bits, allowed: tuple[int, ...], default: int) -> int:
    if bits is None:
        return default
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in allowed:
        raise FormatRuleError(f"bits: kernel {kernel} runs bit-widths {list(allowed)}; got {bits!r}")
    return bits


def check_group(kernel: str, group_size, allowed: tuple, default):
    if group_size is None and None in allowed:
        return None if default is None else default
    if group_size not in allowed:
        raise FormatRuleError(f"group_size: kernel {kernel} supports {list(allowed)}; got {group_size!r}")
    return group_size


def require_multiple(kernel: str, what: str, value: int, mult: int, why: str) -> None:
    if value % mult:
        raise ShapeError(f"{what}: kernel {kernel} needs {what} to be a multiple of {mult} ({why}); got {value}")


def setup(gpu, params: ModelParams | None, clock) -> tuple[GPUSpec, ModelParams, float]:
    g = get_gpu(gpu)
    return g, (params or FITTED), g.clock_hz(clock)


def tile_tensor_time(gpu: GPUSpec, f_sm: float, m_pad: int, n: int, k: int, tile_m: int, tile_n: int,
                     ctas_per_sm: int, op_per_clk_per_sm: float) -> tuple[float, int, float]:
    """Tensor time of a tiled GEMM with wave quantisation.

    Every CTA computes a ``tile_m × tile_n`` output tile over all of K at the padded shape
    (``m_pad`` already rounded to the MMA/tile granularity): per-CTA time =
    2·tile_m·tile_n·K / (rate per SM / ctas_per_sm). ``ceil(waves)`` waves run back to back.
    Returns (seconds, ctas, fractional waves).
    """
    ctas = math.ceil(m_pad / tile_m) * math.ceil(n / tile_n)
    w = ctas / (gpu.sm_count * ctas_per_sm)
    per_cta_s = 2.0 * tile_m * tile_n * k / (op_per_clk_per_sm / ctas_per_sm * f_sm)
    return math.ceil(w - 1e-9) * per_cta_s, ctas, w


TILE_CANDIDATES = ((128, 128), (64, 128), (64, 64))
SPLIT_K_CANDIDATES = (1, 2, 4, 8, 16)


@lru_cache(maxsize=4096)
def _best_gemm_config(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                      elem_bytes: float, stages: int, k_slice: int):
    best = None
    for tile_m, tile_n in TILE_CANDIDATES:
        tile_m = min(tile_m, 16 * math.ceil(m / 16))
        m_pad = tile_m * math.ceil(m / tile_m)
        smem = stages * (tile_m + tile_n) * k_slice * elem_bytes
        ctas_per_sm = int(max(1, min(4, gpu.smem_per_sm_bytes // smem)))
        for split in SPLIT_K_CANDIDATES:
            if k % split or (k // split) < 4 * k_slice:
                continue
            t, ctas, w = tile_tensor_time(gpu, f_sm, m_pad, n * split, k // split, tile_m, tile_n,
                                          ctas_per_sm, op_per_clk_per_sm)
            # split-K partial sums: (split-1) fp32 M×N slices written and read back through L2
            red_bytes = (split - 1) * m * n * 4 * 2
            cost = t + red_bytes / gpu.l2_bytes_per_s(f_sm) * 2
            cand = (cost, t, red_bytes, ctas, w, tile_m, tile_n, split, ctas_per_sm, smem)
            if best is None or cand[0] < best[0]:
                best = cand
    return best


def best_gemm_config(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                     elem_bytes: float = 2, stages: int = 3, k_slice: int = 32) -> dict:
    """The tile shape and split-K a tuned library (cuBLAS/CUTLASS heuristics) would pick: the
    candidate (tile_m × tile_n from :data:`TILE_CANDIDATES`, split-K from
    :data:`SPLIT_K_CANDIDATES`) with the least tensor time + split-K reduction traffic.
    Returns dict(t_tc, red_bytes, ctas, waves, tile_m, tile_n, split, ctas_per_sm, bytes_in_flight)."""
    cost, t, red, ctas, w, tm, tn, split, cps, smem = _best_gemm_config(
        gpu, f_sm, m, n, k, op_per_clk_per_sm, elem_bytes, stages, k_slice)
    return {"t_tc": t, "red_bytes": red, "ctas": ctas, "waves": w, "tile_m": tm, "tile_n": tn,
            "split": split, "ctas_per_sm": cps, "bytes_in_flight": smem}
