"""Measurement conditions as inputs of a prediction: SM clock, ECC, L2 cache state, timing method.

Spec block
----------
A kernel time holds for the conditions it was measured under; the model takes them as inputs
(``refsim predict --clock --ecc --cache --timing``, :func:`refsim.gpu_model.kernels.predict`)::

    input   values                   default       what changes
    ------  -----------------------  ------------  ------------------------------------------------
    clock   base | boost |           sustained     f_sm of every ALU / tensor / L2 / latency term
            sustained | Hz
    ecc     on | off | None          the card's    DRAM achievable fraction: GDDR cards pay inline
                                     own state     ECC (A10: 0.977 off -> 0.85 on); HBM ECC is
                                                   side-band (no change)
    cache   cold                     cold          L2 holds none of the kernel's data and nothing
                                                   dirty: Nsight Compute's default flush
                                                   (ncu --cache-control all)
            dirty                                  L2 holds another buffer's dirty lines: a buffer
                                                   >= 2 x L2 zeroed right before each launch
                                                   (triton.testing.do_bench, NVBench's flush, the
                                                   H100 tables); the kernel's reads evict them, and
                                                   l2_dirty_fraction of min(bytes, L2) is written
                                                   back to DRAM on the way (dirty_l2)
            warm                                   back-to-back launches on the same inputs: the
                                                   share of the working set the L2 keeps (all of it
                                                   up to l2_resident_bytes, a random-replacement
                                                   share beyond) streams at L2 speed (warm_l2)
    timing  kernel                   kernel        the kernel's own duration (Nsight Compute
                                                   gpu__time_duration, nsys): fixed cost T0 (fitted)
            events                                 CUDA events around one launch (torch.cuda.Event,
                                                   do_bench): fixed cost = the GPU's empty kernel
                                                   from event to event + the first wave's ramp

      cold   DRAM --BW(Q), L0--> L2 --> SM          warm  L2 (h of the bytes) + DRAM (1 - h) --> SM
      dirty  DRAM <--writeback-- L2 (dirty lines) <-- the kernel's reads

To reproduce: ``cold`` / ``kernel`` is ``ncu --metrics gpu__time_duration.sum`` with default cache
control; ``dirty`` / ``events`` is ``cache.zero_()`` on a 256 MiB buffer, then the launch between
two ``torch.cuda.Event``s, median of 30; ``warm`` / ``events`` is the same without the zeroing
(``torch.cuda._sleep`` between launches so the host does not run ahead).

Power-capped clocks: no vendor publishes an A10 (150 W) clock-vs-load curve; ``sustained`` is the
boost clock for the A10 (memory-bound kernels) and ``clock="base"`` gives the tensor-bound bound.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from refsim._validate import require_choice, require_instance
from refsim.errors import FormatRuleError
from refsim.gpu_model.roofline import ModelParams, _amounts
from refsim.gpu_model.specs import MAX_CLOCK_HZ, MIN_CLOCK_HZ, GPUSpec

__all__ = ["ECC_STATES", "CACHE_STATES", "TIMINGS", "with_ecc", "warm_l2", "dirty_l2", "fits_in_l2",
           "l2_hit_fraction", "with_timing"]

ECC_STATES = ("on", "off")
CACHE_STATES = ("cold", "dirty", "warm")
TIMINGS = ("kernel", "events")


def with_ecc(gpu: GPUSpec, ecc: str | None) -> GPUSpec:
    """``gpu`` with its DRAM achievable fraction for ECC state ``ecc`` ('on', 'off'; None = the
    card's default, returned unchanged). A card without an ECC switch (``gpu.ecc == 'none'``)
    refuses 'on' with FormatRuleError and returns itself for 'off'."""
    if type(gpu) is not GPUSpec:
        require_instance("gpu", gpu, GPUSpec)
    if ecc is None or (type(ecc) is str and ecc == gpu.ecc):
        return gpu
    require_choice("ecc", ecc, ECC_STATES)
    return _toggled(gpu, ecc)


@lru_cache(maxsize=256)
def _toggled(gpu: GPUSpec, ecc) -> GPUSpec:
    if gpu.ecc == "none":
        if ecc == "on":
            raise FormatRuleError(f"ecc: {gpu.name} has no ECC switch (its DRAM runs without ECC); got 'on'")
        return gpu
    return replace(gpu, ecc=ecc, dram_achievable_fraction=gpu.dram_fraction_ecc_toggled,
                   dram_fraction_ecc_toggled=gpu.dram_achievable_fraction)


def fits_in_l2(gpu: GPUSpec, bytes_dram: float) -> bool:
    """True when a working set of ``bytes_dram`` bytes (a finite number >= 0) stays resident in
    ``gpu``'s L2 between back-to-back runs (it fits the bytes the L2 keeps for one stream)."""
    require_instance("gpu", gpu, GPUSpec)
    (bytes_dram,) = _amounts(bytes_dram=bytes_dram)
    return bytes_dram <= _resident(gpu)


def _resident(gpu: GPUSpec) -> int:
    return gpu.l2_resident_bytes or gpu.l2_bytes


def l2_hit_fraction(gpu: GPUSpec, bytes_dram: float) -> float:
    """Share of a repeated stream of ``bytes_dram`` bytes that hits ``gpu``'s L2 on the next run.

    Up to C = the bytes the L2 keeps for one stream (``l2_resident_bytes``, all of ``l2_bytes`` on
    an unpartitioned L2) everything hits. Beyond, a line survives from one run to the next when none
    of the misses in between evicted it; with random replacement (NVIDIA does not publish its L2
    policy; a pure LRU would give 0 hits to any stream larger than C) the hit share h of a stream of
    B > C bytes solves h = exp(-(B / C) (1 - h)), its smallest root (iterated from 0)."""
    require_instance("gpu", gpu, GPUSpec)
    (bytes_dram,) = _amounts(bytes_dram=bytes_dram)        # a NumPy float as the Python float it holds
    if bytes_dram <= _resident(gpu):
        return 1.0
    r = bytes_dram / _resident(gpu)
    h = 0.0
    for _ in range(200):
        nxt = math.exp(-r * (1.0 - h))
        if abs(nxt - h) < 1e-12:
            break
        h = nxt
    return h


@lru_cache(maxsize=256)
def warm_l2(gpu: GPUSpec, f_sm: float, hit: float = 1.0) -> GPUSpec:
    """``gpu`` as a kernel sees it when a share ``hit`` (0 < hit <= 1) of its working set is already
    in L2: the "DRAM" stream mixes L2 (bandwidth at SM clock ``f_sm``, hit latency) and DRAM in that
    proportion (1 / BW = hit / BW_L2 + (1 - hit) / BW_DRAM; latency likewise). Every other field is
    unchanged."""
    require_instance("gpu", gpu, GPUSpec)
    f_sm = gpu.clock_hz(f_sm) if isinstance(f_sm, str) else f_sm
    if isinstance(f_sm, bool) or not isinstance(f_sm, (int, float)) or not MIN_CLOCK_HZ <= f_sm <= MAX_CLOCK_HZ:
        raise FormatRuleError(f"f_sm: an SM clock in Hz within [{MIN_CLOCK_HZ:.0e}, {MAX_CLOCK_HZ:.0e}]; got {f_sm!r}")
    if isinstance(hit, bool) or not isinstance(hit, (int, float)) or not 0.0 < hit <= 1.0:
        raise FormatRuleError(f"hit: a share of the working set in (0, 1]; got {hit!r}")
    l2_bw = gpu.l2_bytes_per_clk_per_sm * gpu.sm_count * f_sm
    l2_lat = gpu.l2_latency_clk / f_sm
    if hit == 1.0:
        return replace(gpu, dram_peak_bytes_per_s=l2_bw, dram_achievable_fraction=1.0, dram_latency_s=l2_lat)
    bw = 1.0 / (hit / l2_bw + (1.0 - hit) / gpu.dram_eff_bytes_per_s)
    return replace(gpu, dram_peak_bytes_per_s=bw, dram_achievable_fraction=1.0,
                   dram_latency_s=hit * l2_lat + (1.0 - hit) * gpu.dram_latency_s)


@lru_cache(maxsize=256)
def dirty_l2(gpu: GPUSpec) -> GPUSpec:
    """``gpu`` with its L2 full of another buffer's lines, ``l2_dirty_fraction`` of them dirty (the
    state a memset flush leaves): the kernel models add the write-back to their DRAM stream
    (:func:`refsim.gpu_model.roofline.writeback_bytes`)."""
    require_instance("gpu", gpu, GPUSpec)
    return replace(gpu, l2_dirty_bytes=gpu.l2_dirty_fraction * gpu.l2_bytes)


def with_timing(params, gpu: GPUSpec, timing: str):
    """``params`` with the fixed cost per launch of timing method ``timing``: 'kernel' keeps the
    fitted T0; 'events' uses ``gpu``'s empty kernel from event to event plus its first-wave ramp."""
    if type(params) is not ModelParams:
        require_instance("params", params, ModelParams)
    if type(timing) is not str or timing not in TIMINGS:
        require_choice("timing", timing, TIMINGS)
    if timing == "kernel":
        return params
    require_instance("gpu", gpu, GPUSpec)
    return replace(params, launch_overhead_s=gpu.launch_events_s + gpu.launch_ramp_s)
