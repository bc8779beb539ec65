"""Helpers shared by the kernel models: argument validation and the tensor-core GEMM tile model."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from refsim._validate import require_int
from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.roofline import FITTED, ModelParams, _dram_time
from refsim.gpu_model.specs import GPUSpec, get_gpu


def check_mnk(kernel: str, m, n, k) -> tuple[int, int, int]:
    if type(m) is int and type(n) is int and type(k) is int and m > 0 and n > 0 and k > 0:
        return m, n, k
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
    g = gpu if type(gpu) is GPUSpec else get_gpu(gpu)
    return g, (params or FITTED), _clock(g, clock)


# (id(gpu), clock) -> (gpu, f_sm): the spec is held in the value, so its id cannot be reused while the
# entry lives; only valid clocks of plain types are stored (an invalid one raises before the store)
_CLOCKS: dict = {}


def _clock(g: GPUSpec, clock) -> float:
    """``g.clock_hz(clock)``, remembered per (spec, clock) for str/int/float clocks."""
    if type(clock) is str or type(clock) is float or type(clock) is int:
        hit = _CLOCKS.get((id(g), clock))
        if hit is not None and hit[0] is g:
            return hit[1]
        f = g.clock_hz(clock)
        if len(_CLOCKS) > 4096:
            _CLOCKS.clear()
        _CLOCKS[(id(g), clock)] = (g, f)
        return f
    return g.clock_hz(clock)


_CTX: dict = {}


def hot_setup(gpu, clock) -> tuple:
    """:func:`setup` (without ``params``) and :func:`rates` in one call: ``(g, f_sm, g.sm_count * f_sm,
    g.l2_bytes_per_s(f_sm))``, remembered per (spec, clock) for str/int/float clocks."""
    g = gpu if type(gpu) is GPUSpec else get_gpu(gpu)
    if type(clock) is str or type(clock) is float or type(clock) is int:
        hit = _CTX.get((id(g), clock))
        if hit is None or hit[0] is not g:
            f = g.clock_hz(clock)
            if len(_CTX) > 4096:
                _CTX.clear()
            hit = _CTX[(id(g), clock)] = (g, f) + rates(g, f)
        return hit
    f = g.clock_hz(clock)
    return (g, f) + rates(g, f)


_RATES: dict = {}


def rates(g: GPUSpec, f_sm: float) -> tuple[float, float]:
    """``(g.sm_count * f_sm, g.l2_bytes_per_s(f_sm))`` for a resolved SM clock ``f_sm`` (float),
    remembered per (spec, clock): the same two numbers the models computed inline."""
    hit = _RATES.get((id(g), f_sm))
    if hit is not None and hit[0] is g:
        return hit[1]
    out = (g.sm_count * f_sm, g.l2_bytes_per_s(f_sm))
    if len(_RATES) > 4096:
        _RATES.clear()
    _RATES[(id(g), f_sm)] = (g, out)
    return out


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


# Fraction of the tensor rate a kernel built on warp-synchronous ``mma.sync`` reaches, per compute
# capability. The vendor peaks of Hopper (table 1.3) are wgmma (warpgroup, asynchronous) rates;
# ``mma.sync`` m16n8k16 on sm_90 reaches about 75 % of them (issue 15's figure; estimate — no primary
# microbenchmark of mma.sync vs wgmma was found in the stored sources, see docs/notes/issue-15-pmmech.md).
# Every other CC's peak is an mma.sync rate already.
MMA_SYNC_FRACTION = {"9.0": 0.75}


def mma_sync_rate(gpu: GPUSpec, op_per_clk_per_sm: float) -> float:
    """Tensor rate per SM per clock that an ``mma.sync`` kernel (Marlin, AWQ GEMM) reaches on ``gpu``:
    the table rate × :data:`MMA_SYNC_FRACTION` (1 where the peak is an mma.sync rate)."""
    return op_per_clk_per_sm * MMA_SYNC_FRACTION.get(gpu.compute_capability, 1.0)


@lru_cache(maxsize=None)
def compiled_registers(kernel: str) -> int:
    """Registers per thread of one of refsim's own CUDA kernels as ptxas reports them
    (``refsim/cuda/resources.json``, written by ``refsim.cuda.regenerate``; sm_80 build)."""
    path = Path(__file__).resolve().parents[2] / "cuda" / "resources.json"
    return int(json.loads(path.read_text(encoding="utf-8"))["kernels"][kernel]["registers_per_thread"])


TILE_CANDIDATES = ((128, 128), (64, 128), (64, 64))
SPLIT_K_CANDIDATES = (1, 2, 4, 8, 16)


@lru_cache(maxsize=4096)
def _best_gemm_config(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                      elem_bytes: float, stages: int, k_slice: int, overlap: float):
    best = None
    bytes_dram = elem_bytes * (n * k + m * k) + 2.0 * m * n
    l2_bw = gpu.l2_bytes_per_s(f_sm)
    for tile_m, tile_n in TILE_CANDIDATES:
        tile_m = min(tile_m, 16 * math.ceil(m / 16))
        m_pad = tile_m * math.ceil(m / tile_m)
        smem = stages * (tile_m + tile_n) * k_slice * elem_bytes
        ctas_per_sm = int(max(1, min(4, gpu.smem_per_sm_bytes // smem)))
        for split in SPLIT_K_CANDIDATES:
            if split > 1 and (k % split or (k // split) < 4 * k_slice):     # split-K 1 always runs (short K too)
                continue
            t, ctas, w = tile_tensor_time(gpu, f_sm, m_pad, n * split, k // split, tile_m, tile_n,
                                          ctas_per_sm, op_per_clk_per_sm)
            # split-K partial sums: (split-1) fp32 M×N slices written and read back through L2
            red_bytes = (split - 1) * m * n * 4 * 2
            # full predicted cost, as the kernel models combine it: DRAM stream (Little's law at this
            # tile's CTAs and stages), L2 re-reads (A by every N tile, W by every M tile, partial
            # sums) and tensor time, the largest plus (1 - overlap) of the second
            t_dram = _dram_time(bytes_dram, gpu, ctas, ctas_per_sm, smem)
            t_l2 = (elem_bytes * (m * k * math.ceil(n / tile_n) + n * k * math.ceil(m / tile_m)) + red_bytes) / l2_bw
            first, second = sorted((t, t_dram, t_l2), reverse=True)[:2]
            cost = first + (1.0 - overlap) * second
            cand = (cost, t, red_bytes, ctas, w, tile_m, tile_n, split, ctas_per_sm, smem)
            if best is None or cand[0] < best[0]:
                best = cand
    return best


def best_gemm_config(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                     elem_bytes: float = 2, stages: int = 3, k_slice: int = 32, overlap: float | None = None) -> dict:
    """The tile shape and split-K a tuned library (cuBLAS/CUTLASS heuristics) would pick: the
    candidate (tile_m × tile_n from :data:`TILE_CANDIDATES`, split-K from
    :data:`SPLIT_K_CANDIDATES`) with the least full predicted cost — DRAM, L2 re-reads (+ split-K
    partial sums) and tensor time overlapped as :func:`~refsim.gpu_model.roofline.combine` does
    (``overlap`` default: the fitted one). Tensor time alone would pick 64×64 tiles whose L2
    re-reads cost more than the tensor time they save.
    Returns dict(t_tc, red_bytes, ctas, waves, tile_m, tile_n, split, ctas_per_sm, bytes_in_flight)."""
    overlap = FITTED.overlap if overlap is None else overlap
    cost, t, red, ctas, w, tm, tn, split, cps, smem = _best_gemm_config(
        gpu, f_sm, m, n, k, op_per_clk_per_sm, elem_bytes, stages, k_slice, overlap)
    return {"t_tc": t, "red_bytes": red, "ctas": ctas, "waves": w, "tile_m": tm, "tile_n": tn,
            "split": split, "ctas_per_sm": cps, "bytes_in_flight": smem}


def spec_memo(memo: dict, key, g: GPUSpec, compute, limit: int = 4096):
    """``compute()`` cached in ``memo`` under ``key`` (a tuple that contains ``id(g)``) for the spec
    ``g``: the entry holds ``g`` itself, so its id cannot be reused by another spec while the entry
    lives, and a hit on a different object with the same id recomputes. At most ``limit`` entries
    (the memo is emptied when full); :func:`refsim.gpu_model.kernels.clear_caches` empties it too.
    The kernel models' one home for their per-spec memos of numbers that do not depend on M."""
    hit = memo.get(key)
    if hit is None or hit[0] is not g:
        if len(memo) > limit:
            memo.clear()
        hit = memo[key] = (g, compute())
    return hit[1]


def one_point(many):
    """The unchecked per-point entry ``_predict(gpu, m, n, k, bits, group_size, clock, params)`` of a
    kernel whose model is written once, batched, as ``many(g, ms, n, k, bits, group_size, clock,
    params)``: ``many`` over ``[m]`` (``gpu`` a name or a spec: ``hot_setup`` resolves both)."""
    def _predict(gpu, m, n, k, bits, group_size, clock, params):
        return many(gpu, [m], n, k, bits, group_size, clock, params)[0]
    _predict.__doc__ = f":func:`{many.__name__}` at one M (the kernel's per-point entry; m, n, k already checked)."
    return _predict
