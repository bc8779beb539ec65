"""Measurement conditions as inputs of a prediction: ECC, L2 cache state, SM clock.

Spec block
----------
A published kernel time holds for the conditions it was measured under; the model takes them as
inputs instead of baking one set in (``refsim predict --ecc --cache --clock``,
:func:`refsim.gpu_model.kernels.predict`)::

    input   values                      default              what changes
    ------  --------------------------  -------------------  ------------------------------------------
    clock   base | boost | sustained |  sustained            f_sm of every ALU/tensor/L2/latency term
            a frequency in Hz                                (GPUSpec.clock_hz; the CLI adds 1500MHz...)
    ecc     on | off | None             None = the card's    DRAM achievable fraction: GDDR cards pay
                                        default state        inline ECC (A10: 0.977 off -> 0.85 on);
                                        (GPUSpec.ecc)        HBM ECC is side-band (no change); cards
                                                             without an ECC switch accept only their state
    cache   cold | warm                 cold (Nsight         warm: when the kernel's whole DRAM working
                                        Compute flushes      set fits in L2, it is streamed at L2
                                        L2 between replays)  bandwidth with L2 latency (a PyTorch loop
                                                             re-running one layer); a working set larger
                                                             than L2 gets no hits (cyclic streaming
                                                             evicts every line before its reuse in LRU)

      cold  DRAM ──BW_eff, 500 ns──▶ L2 ──▶ SM        warm  (bytes ≤ L2) L2 ──BW_L2, ~200 clk──▶ SM

Power-capped clocks: no vendor publishes an A10 (150 W) clock-vs-load curve; the Marlin paper's
roofline figure shows A10 FLOP/s drifting from boost toward the base clock on long tensor-bound
runs. The model keeps ``sustained`` = boost for A10 (the memory-bound regime these kernels live in)
and leaves the tensor-bound bound to ``clock="base"``; docs/perf_model.md says so.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from refsim._validate import require_choice, require_instance
from refsim.errors import FormatRuleError
from refsim.gpu_model.roofline import _amounts
from refsim.gpu_model.specs import MAX_CLOCK_HZ, MIN_CLOCK_HZ, GPUSpec

__all__ = ["ECC_STATES", "CACHE_STATES", "L2_HIT_LATENCY_CLK", "with_ecc", "warm_l2", "fits_in_l2"]

ECC_STATES = ("on", "off")
CACHE_STATES = ("cold", "warm")
# L2 hit load-to-use ~190-200 cycles on Turing/Ampere (Jia et al., "Dissecting the NVIDIA Turing T4 GPU
# via microbenchmarking", 2019; Ampere/Ada similar): estimate, used for warm-L2 streams and Marlin's
# lock hand-off.
L2_HIT_LATENCY_CLK = 200


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
    ``gpu``'s L2 between runs."""
    require_instance("gpu", gpu, GPUSpec)
    _amounts(bytes_dram=bytes_dram)
    return bytes_dram <= gpu.l2_bytes


@lru_cache(maxsize=256)
def warm_l2(gpu: GPUSpec, f_sm: float) -> GPUSpec:
    """``gpu`` as a kernel sees it when its whole working set is already in L2: the "DRAM" stream
    comes at the L2 bandwidth at SM clock ``f_sm`` (achievable fraction 1: the L2 figures are
    measured rates) with the L2 hit latency. Every other field is unchanged."""
    require_instance("gpu", gpu, GPUSpec)
    f_sm = gpu.clock_hz(f_sm) if isinstance(f_sm, str) else f_sm
    if isinstance(f_sm, bool) or not isinstance(f_sm, (int, float)) or not MIN_CLOCK_HZ <= f_sm <= MAX_CLOCK_HZ:
        raise FormatRuleError(f"f_sm: an SM clock in Hz within [{MIN_CLOCK_HZ:.0e}, {MAX_CLOCK_HZ:.0e}]; got {f_sm!r}")
    return replace(gpu, dram_peak_bytes_per_s=gpu.l2_bytes_per_clk_per_sm * gpu.sm_count * f_sm,
                   dram_achievable_fraction=1.0, dram_latency_s=L2_HIT_LATENCY_CLK / f_sm)
