"""Helpers shared by the kernel models: shape-rule errors, the sm_90a refusal, the tensor-core GEMM tile
model, the mma.sync rate, the registers of refsim's own compiled kernels."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.roofline import FITTED, dram_time
from refsim.gpu_model.specs import GPUSpec


def require_multiple(kernel: str, what: str, value: int, mult: int, why: str) -> None:
    """ShapeError unless ``value`` is a multiple of ``mult`` (the message names the kernel and why)."""
    if value % mult:
        raise ShapeError(f"{what}: kernel {kernel} needs {what} to be a multiple of {mult} ({why}); got {value}")


def cc_at_least(gpu: GPUSpec, major: int, minor: int) -> bool:
    """True when ``gpu``'s compute capability is at least ``major.minor``."""
    return tuple(map(int, gpu.compute_capability.split("."))) >= (major, minor)


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
# kernels built on ``mma.sync`` top out near 63 % of them on an H100 (Spector et al., "GPUs Go Brrr",
# Hazy Research blog 2024-05-12, on ThunderKittens: "without [wgmma] the GPU seems to top out around
# 63% of its peak utilization"; Luo et al., arXiv:2501.12084, the same ceiling from microbenchmarks).
# Every other CC's peak is an mma.sync rate already.
MMA_SYNC_FRACTION = {"9.0": 0.63}


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

# The sm_90 GEMM family (what cuBLAS and CUTLASS 3.x run on Hopper besides the mma.sync kernels):
# persistent warp-specialized kernels, one CTA per SM holding all of its shared memory, TMA loads into a
# multi-stage ring and asynchronous ``wgmma`` from shared memory (CUTLASS
# ``KernelTmaWarpSpecialized{Pingpong,Cooperative}``, include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized*.hpp).
# wgmma exists on sm_90a only (PTX ISA, "wgmma.mma_async ... requires sm_90a"), so only CC 9.0 has it.
WGMMA_CCS = frozenset({"9.0"})
# CTA tiles: tile_m 64 is one consumer warpgroup (pingpong), 128 two (cooperative, 64 x N each), 256 x 128
# two warpgroups of 128 x 128; a warpgroup's f32 accumulators above 64 x 256 spill (NVIDIA/cutlass PR
# #3373, "Add tuning notes for Hopper 16-bit dense GEMM"), so 128 x 256 and 256 x 128 are the largest.
WGMMA_TILE_CANDIDATES = ((64, 128), (64, 256), (128, 128), (128, 256), (256, 128))
# Thread-block clusters (cluster_m, cluster_n): with TMA multicast one load of a tile lands in the shared
# memory of every CTA of the cluster that needs it (CUDA C++ Programming Guide, "Thread Block
# Clusters", "TMA multicast"; tile-ai/tilelang PR #1908: "a single CTA issues tma_load_multicast to
# broadcast a tile to multiple CTAs in the cluster"): a weight tile is read from L2 once per cluster_m
# CTAs that share its columns, an activation tile once per cluster_n CTAs that share its rows. cuBLAS
# runs clusters of 2 on an H100 SXM (NVIDIA/cutlass issue #1921: grid (60, 2, 1) for 4096^3).
WGMMA_CLUSTER_CANDIDATES = ((1, 1), (2, 1), (1, 2))
WGMMA_K_BYTES = 128          # the K depth of a stage: 64 halves (TileShape <_128,_128,_64>, issue #1921)


def has_wgmma(gpu: GPUSpec) -> bool:
    """True when ``gpu`` runs the sm_90 wgmma GEMM family (:data:`WGMMA_CCS`)."""
    return gpu.compute_capability in WGMMA_CCS


def require_sm90a(kernel: str, gpu: GPUSpec, features: str) -> None:
    """FormatRuleError unless ``gpu`` is sm_90a (:func:`has_wgmma`): the refusal of every kernel model built
    on wgmma; ``features`` names what the kernel uses that exists on compute capability 9.0 only."""
    if not has_wgmma(gpu):
        raise FormatRuleError(f"gpu: kernel {kernel} needs sm_90a ({features} exist on compute capability 9.0 "
                              f"only); {gpu.name} is {gpu.compute_capability}")


def gemm_l2_bytes(m: int, n: int, k: int, elem_bytes: float, tile_m: int, tile_n: int,
                  cluster: tuple[int, int] = (1, 1)) -> float:
    """Operand bytes a tiled GEMM reads from L2: A (M x K) once per N tile, W (K x N) once per M tile,
    each divided by the cluster's multicast (W by cluster_m, A by cluster_n)."""
    cm, cn = cluster
    return elem_bytes * (m * k * math.ceil(n / tile_n) / cn + n * k * math.ceil(m / tile_m) / cm)


def _wgmma_candidates(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                      elem_bytes: float, overlap: float, bytes_dram: float, l2_bw: float):
    """The sm_90 family's candidates (same tuple as :func:`gemm_config`'s, ``family`` 'wgmma ...')."""
    k_slice = int(WGMMA_K_BYTES // elem_bytes)
    for tile_m, tile_n in WGMMA_TILE_CANDIDATES:
        if tile_m > 64 and m <= 64:                 # a 64-row warpgroup tile already covers M
            continue
        m_pad = tile_m * math.ceil(m / tile_m)
        stage = (tile_m + tile_n) * k_slice * elem_bytes
        stages = int(gpu.smem_per_sm_bytes // stage)
        if stages < 2:
            continue
        for cm, cn in WGMMA_CLUSTER_CANDIDATES:
            if math.ceil(m / tile_m) < cm or math.ceil(n / tile_n) < cn:
                continue                            # nobody in the cluster to share with
            for split in SPLIT_K_CANDIDATES:
                if split > 1 and (k % split or (k // split) < 4 * k_slice):
                    continue
                t, ctas, w = tile_tensor_time(gpu, f_sm, m_pad, n * split, k // split, tile_m, tile_n, 1,
                                              op_per_clk_per_sm)
                red_bytes = (split - 1) * m * n * 4 * 2
                l2_bytes = gemm_l2_bytes(m, n, k, elem_bytes, tile_m, tile_n, (cm, cn)) + red_bytes
                t_dram = dram_time(bytes_dram, gpu, ctas, 1, stages * stage)
                first, second = sorted((t, t_dram, l2_bytes / l2_bw), reverse=True)[:2]
                yield (first + (1.0 - overlap) * second, t, red_bytes, ctas, w, tile_m, tile_n, split, 1,
                       stages * stage, l2_bytes, f"wgmma {tile_m}x{tile_n} cluster {cm}x{cn}")


@lru_cache(maxsize=4096)
def gemm_config(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                      elem_bytes: float, stages: int, k_slice: int, overlap: float,
                      wgmma_op_per_clk_per_sm: float = 0.0):
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
            t_dram = dram_time(bytes_dram, gpu, ctas, ctas_per_sm, smem)
            l2_bytes = gemm_l2_bytes(m, n, k, elem_bytes, tile_m, tile_n) + red_bytes
            first, second = sorted((t, t_dram, l2_bytes / l2_bw), reverse=True)[:2]
            cost = first + (1.0 - overlap) * second
            cand = (cost, t, red_bytes, ctas, w, tile_m, tile_n, split, ctas_per_sm, smem, l2_bytes,
                    f"mma.sync {tile_m}x{tile_n}")
            if best is None or cand[0] < best[0]:
                best = cand
    if wgmma_op_per_clk_per_sm:
        for cand in _wgmma_candidates(gpu, f_sm, m, n, k, wgmma_op_per_clk_per_sm, elem_bytes, overlap,
                                      bytes_dram, l2_bw):
            if cand[0] < best[0]:
                best = cand
    return best


def best_gemm_config(gpu: GPUSpec, f_sm: float, m: int, n: int, k: int, op_per_clk_per_sm: float,
                     elem_bytes: float = 2, stages: int = 3, k_slice: int = 32, overlap: float | None = None,
                     wgmma_op_per_clk_per_sm: float = 0.0) -> dict:
    """The tile shape and split-K a tuned library (cuBLAS/CUTLASS heuristics) would pick: the
    candidate (tile_m × tile_n from :data:`TILE_CANDIDATES`, split-K from
    :data:`SPLIT_K_CANDIDATES`) with the least full predicted cost — DRAM, L2 re-reads (+ split-K
    partial sums) and tensor time overlapped as :func:`~refsim.gpu_model.roofline.combine` does
    (``overlap`` default: the fitted one). Tensor time alone would pick 64×64 tiles whose L2
    re-reads cost more than the tensor time they save. ``op_per_clk_per_sm`` is the rate of the
    mma.sync family; a non-zero ``wgmma_op_per_clk_per_sm`` adds the sm_90 family's candidates
    (:data:`WGMMA_TILE_CANDIDATES` × :data:`WGMMA_CLUSTER_CANDIDATES`, one persistent CTA per SM, as many
    stages of 64-deep K slices as its shared memory holds, L2 reads divided by the cluster's multicast).
    Returns dict(t_tc, red_bytes, ctas, waves, tile_m, tile_n, split, ctas_per_sm, bytes_in_flight,
    l2_bytes, family)."""
    overlap = FITTED.overlap if overlap is None else overlap
    cost, t, red, ctas, w, tm, tn, split, cps, smem, l2, family = gemm_config(
        gpu, f_sm, m, n, k, op_per_clk_per_sm, elem_bytes, stages, k_slice, overlap, wgmma_op_per_clk_per_sm)
    return {"t_tc": t, "red_bytes": red, "ctas": ctas, "waves": w, "tile_m": tm, "tile_n": tn,
            "split": split, "ctas_per_sm": cps, "bytes_in_flight": smem, "l2_bytes": l2, "family": family}
