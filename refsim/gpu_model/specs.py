"""GPU specification table: one frozen dataclass per GPU, every number with a source and a tag.

Spec block
----------
Units are in the field names (``*_hz``, ``*_bytes``, ``*_bytes_per_s``, ``*_per_clk_per_sm``).
Tensor-core rates are **dense** (no 2:4 sparsity), per SM per clock, split by input type and by
accumulator type: GeForce parts (Turing/GA10x GeForce/Ada) run FP16 inputs with FP32 accumulation at
half the FP16-accumulator rate; datacenter/pro parts and Orin run it at full rate.

Provenance tags (``GPUSpec.provenance[field] = (tag, source)``):

    datasheet        vendor datasheet / whitepaper / spec sheet
    whitepaper       NVIDIA architecture whitepaper or CUDA programming-guide table
    microbenchmark   measured by a public microbenchmark (source named)
    estimate         first-principles or same-die proxy estimate (reasoning in the source string)
    fitted           fitted on refsim/data/timings/anyprec_rtx4070_laptop.csv (see calibrate.py)

Derived numbers (peak TFLOPS, effective bandwidth, ridge points) are properties computed from the
table, never typed. A row's provenance cites source tags listed with their addresses in
:data:`SOURCES`.

    GPUSpec ──┬─ counts:  sm_count, max_warps_per_sm, max_ctas_per_sm
              ├─ clocks:  base / boost / sustained (what a long kernel runs at)
              ├─ memory:  DRAM peak × achievable fraction, DRAM latency, L2 size and bandwidth
              ├─ per SM:  shared memory, registers, tensor rates (f16acc, f32acc, int8, int4),
              │           ALU lanes (int32 logic, fp32 FMA, half2 FMA), L1/SMEM bytes/clk
              └─ fixed:   kernel launch + ramp cost (fitted)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields

import numpy as np

from refsim._validate import plain_scalar, require_choice
from refsim.archs import ARCHS
from refsim.gpu_model.names import resolve
from refsim.errors import FormatRuleError

#: explicit SM clocks accepted by :meth:`GPUSpec.clock_hz` (Hz): every GPU here runs between
MIN_CLOCK_HZ, MAX_CLOCK_HZ = 1e8, 1e10
#: a card's SMs never run above its rated boost by more than this (GPU Boost takes an RTX 4090 rated
#: 2520 MHz to ~2.8 GHz, x 1.11): an explicit clock above it is refused
MAX_OVER_BOOST = 1.2

__all__ = ["GPUSpec", "GPUS", "get_gpu", "gpu_names", "FITTED_LAUNCH_OVERHEAD_S", "expand_provenance",
           "estimated_fields", "PROVENANCE_TAGS"]

# Fixed launch-to-first-instruction + ramp + drain cost of one kernel as Nsight Compute's
# gpu__time_duration sees it. Fitted on the calibration CSV (refsim.gpu_model.calibrate); one value
# for every GPU (no per-GPU fudge factor).
FITTED_LAUNCH_OVERHEAD_S = 2.812e-6

_CUDA_GUIDE = "CUDA C++ Programming Guide, arithmetic-instruction throughput table (per CC)"


@dataclass(frozen=True)
class GPUSpec:
    """One GPU. All rates are per SM per clock unless the name says otherwise.

    ``sustained_clock_hz`` is the SM clock a long kernel runs at in the default power state;
    ``base_clock_hz`` is what Nsight Compute locks to (``--clock-control base``).
    """

    name: str
    arch: str
    compute_capability: str
    sm_count: int
    base_clock_hz: float
    boost_clock_hz: float
    sustained_clock_hz: float
    dram_peak_bytes_per_s: float
    dram_achievable_fraction: float
    dram_latency_s: float
    l2_bytes: int
    l2_bytes_per_clk_per_sm: float
    smem_per_sm_bytes: int
    smem_per_block_bytes: int
    regs_per_sm: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    tc_fp16_f16acc_flop_per_clk_per_sm: float
    tc_fp16_f32acc_flop_per_clk_per_sm: float
    tc_int8_op_per_clk_per_sm: float
    tc_int4_op_per_clk_per_sm: float  # 0 = no INT4 tensor path
    int32_lanes_per_clk_per_sm: float
    fp32_fma_lanes_per_clk_per_sm: float
    hfma2_lanes_per_clk_per_sm: float
    l1_smem_bytes_per_clk_per_sm: float
    launch_overhead_s: float
    # occupancy rules (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability",
    # and the CUDA Occupancy Calculator's per-CC allocation table)
    reg_alloc_unit_per_warp: int = 256        # registers are allocated per warp in units of 256
    max_regs_per_thread: int = 255
    max_threads_per_block: int = 1024
    smem_alloc_unit_bytes: int = 128          # 256 on CC 7.5
    smem_reserved_per_block_bytes: int = 1024  # system use per resident block on CC >= 8.0; 0 on 7.5
    # measurement conditions (refsim.gpu_model.conditions): the ECC state ``dram_achievable_fraction``
    # holds for ('on', 'off', or 'none' = the card has no ECC switch) and the fraction with the other
    # state (0.0 when 'none')
    ecc: str = "none"
    dram_fraction_ecc_toggled: float = 0.0
    # the DRAM stream (roofline.stream_bandwidth): Little's law against dram_latency_s (the unloaded
    # latency), smoothed with this sharpness near the knee
    dram_curve_sharpness: float = 2.3
    # the L2 as a repeated stream sees it: the bytes it keeps for one stream (0 = all of l2_bytes;
    # half on the partitioned A100/H100 L2) and its hit latency
    l2_resident_bytes: int = 0
    l2_latency_clk: float = 200.0
    l2_far_latency_clk: float = 0.0       # the far half of a partitioned L2 (0: not partitioned)
    # launch costs under CUDA-event timing (conditions: timing="events"): an empty kernel from event
    # to event, and the first wave's extra ramp of a full grid
    launch_events_s: float = 2.976e-6
    launch_ramp_s: float = 0.733e-6
    # share of the L2 a memset flush leaves dirty (cache="dirty"), and the state itself: dirty bytes
    # in L2 when the kernel starts (0 = clean; conditions.dirty_l2 sets it)
    l2_dirty_fraction: float = 0.393
    l2_dirty_bytes: float = 0.0
    provenance: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        # every field checked once, here: a spec built by hand, read from a file or made by
        # dataclasses.replace is refused with the field named instead of failing deep in a model;
        # NumPy scalars are stored as Python numbers so no NumPy type reaches a result
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in _TEXT_FIELDS:
                v = plain_scalar(v)                   # a np.str_ name is the str it holds
                if type(v) is not str or not v:
                    raise FormatRuleError(f"GPUSpec.{f.name}: must be a non-empty string; got {v!r:.80}")
                object.__setattr__(self, f.name, v)
            elif f.name == "provenance":
                if not isinstance(v, dict):
                    raise FormatRuleError(f"GPUSpec.provenance: must be a dict; got {type(v).__name__}")
            else:
                object.__setattr__(self, f.name, _spec_number(f.name, v, f.name in _INT_FIELDS,
                                                              f.name in _ZERO_OK_FIELDS))
        if self.ecc not in ("on", "off", "none"):
            raise FormatRuleError(f"GPUSpec.ecc: must be one of ['on', 'off', 'none']; got {self.ecc!r:.80}")
        if self.dram_achievable_fraction > 1.0 or self.dram_fraction_ecc_toggled > 1.0:
            raise FormatRuleError(f"GPUSpec.dram_achievable_fraction: must be in (0, 1]; got "
                                  f"{self.dram_achievable_fraction!r}")
        if self.l2_dirty_fraction > 1.0:
            raise FormatRuleError(f"GPUSpec.l2_dirty_fraction: must be in [0, 1]; got {self.l2_dirty_fraction!r}")
        if not MIN_CLOCK_HZ <= self.base_clock_hz <= self.boost_clock_hz <= MAX_CLOCK_HZ or not (
                MIN_CLOCK_HZ <= self.sustained_clock_hz <= MAX_CLOCK_HZ):
            raise FormatRuleError(f"GPUSpec clocks: need {MIN_CLOCK_HZ:.0e} <= base <= boost <= {MAX_CLOCK_HZ:.0e} "
                                  f"Hz and a sustained clock in that range; got base {self.base_clock_hz!r}, "
                                  f"boost {self.boost_clock_hz!r}, sustained {self.sustained_clock_hz!r}")

    def __hash__(self) -> int:
        # the hash of every compared field, computed once per object: the kernel models' per-shape
        # caches hash the spec on every prediction (the generated __hash__ rebuilds a ~35-field tuple
        # each time)
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        # str hashes differ between processes: a pickled spec recomputes its hash where it lands
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    # ---- derived numbers -------------------------------------------------------------------
    @property
    def dram_eff_bytes_per_s(self) -> float:
        """Achievable streaming-read bandwidth = peak × achievable fraction."""
        return self.dram_peak_bytes_per_s * self.dram_achievable_fraction

    def clock_hz(self, clock: str | float = "sustained") -> float:
        """SM clock for ``clock`` in {'base', 'boost', 'sustained'} or an explicit frequency in Hz
        (a finite number from 100 MHz to 1.2 x the card's boost clock; anything else is a
        FormatRuleError naming the card's range). Returns a Python float."""
        if type(clock) is str and clock == "sustained":
            return self.sustained_clock_hz
        if type(clock) is float and MIN_CLOCK_HZ <= clock <= MAX_OVER_BOOST * self.boost_clock_hz \
                and clock <= MAX_CLOCK_HZ:
            return clock                  # the models' hot path: an already resolved clock
        if isinstance(clock, numbers.Real) and not isinstance(clock, (bool, np.bool_)) and not getattr(clock, "ndim", 0):
            hz = float(clock)
            top = min(MAX_CLOCK_HZ, MAX_OVER_BOOST * self.boost_clock_hz)
            if not (math.isfinite(hz) and MIN_CLOCK_HZ <= hz <= top):
                raise FormatRuleError(f"clock: {self.name} runs its SMs between {MIN_CLOCK_HZ / 1e6:g} and "
                                      f"{top / 1e6:g} MHz ({MAX_OVER_BOOST:g} x its {self.boost_clock_hz / 1e6:g} MHz "
                                      f"boost); got {hz / 1e6:g} MHz")
            return hz
        require_choice("clock", clock, ("base", "boost", "sustained"))
        return {"base": self.base_clock_hz, "boost": self.boost_clock_hz,
                "sustained": self.sustained_clock_hz}[clock]

    def tensor_flops(self, kind: str = "fp16_f32acc", clock: str | float = "sustained") -> float:
        """Dense tensor-core FLOP/s (or OP/s) for ``kind`` in
        {'fp16_f16acc', 'fp16_f32acc', 'int8', 'int4'} at ``clock``."""
        per = {"fp16_f16acc": self.tc_fp16_f16acc_flop_per_clk_per_sm,
               "fp16_f32acc": self.tc_fp16_f32acc_flop_per_clk_per_sm,
               "int8": self.tc_int8_op_per_clk_per_sm,
               "int4": self.tc_int4_op_per_clk_per_sm}
        require_choice("kind", kind, tuple(per))
        return per[kind] * self.sm_count * self.clock_hz(clock)

    def l2_bytes_per_s(self, clock: str | float = "sustained") -> float:
        return self.l2_bytes_per_clk_per_sm * self.sm_count * self.clock_hz(clock)

    def ridge_flop_per_byte(self, kind: str = "fp16_f32acc", clock: str | float = "sustained") -> float:
        """Arithmetic intensity (FLOP per DRAM byte) where the roofline turns compute-bound."""
        return self.tensor_flops(kind, clock) / self.dram_eff_bytes_per_s


_TEXT_FIELDS = frozenset({"name", "arch", "compute_capability", "ecc"})
_INT_FIELDS = frozenset({"sm_count", "l2_bytes", "smem_per_sm_bytes", "smem_per_block_bytes", "regs_per_sm",
                         "max_warps_per_sm", "max_ctas_per_sm", "reg_alloc_unit_per_warp", "max_regs_per_thread",
                         "max_threads_per_block", "smem_alloc_unit_bytes", "smem_reserved_per_block_bytes",
                         "l2_resident_bytes"})
# fields where 0 means "none" (no INT4 path, not partitioned, clean L2, no ECC switch, ...)
_ZERO_OK_FIELDS = frozenset({"tc_int4_op_per_clk_per_sm", "smem_reserved_per_block_bytes", "dram_fraction_ecc_toggled",
                             "l2_resident_bytes", "l2_far_latency_clk", "l2_dirty_fraction", "l2_dirty_bytes",
                             "launch_ramp_s"})
_SPEC_LIMIT = 1e20          # far above any rate, size or count a GPU has


def _spec_number(name: str, value, integer: bool, zero_ok: bool):
    """``value`` as a Python int (``integer``) or float: finite, > 0 (>= 0 when ``zero_ok``), below
    1e20; bools, strings, arrays and NaN are a FormatRuleError naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or getattr(value, "ndim", 0):
        raise FormatRuleError(f"GPUSpec.{name}: must be {'an integer' if integer else 'a number'}; got "
                              f"{type(value).__name__}")
    if integer:
        if not isinstance(value, numbers.Integral):
            raise FormatRuleError(f"GPUSpec.{name}: must be an integer; got {value!r:.80}")
        value = int(value)
    else:
        value = float(value)
    if not (math.isfinite(value) and (value >= 0 if zero_ok else value > 0) and value < _SPEC_LIMIT):
        raise FormatRuleError(f"GPUSpec.{name}: must be a finite number {'>= 0' if zero_ok else '> 0'}; "
                              f"got {value!r:.80}")
    return value


# Per-CC ALU lanes (CUDA guide): int32 add/logic/shift 64/clk/SM on 7.5-9.0; FP32 FMA 64 on 7.5 and
# 8.0, 128 on 8.6/8.7/8.9/9.0; half2 FMA: 128 lanes (256 fp16 results) on 8.0/8.7/9.0, 64 on 7.5, and
# 64 lanes (128 fp16 results = the FP32 rate) on GA102/AD102-class 8.6/8.9: the GA102 and Ada
# whitepapers list non-tensor FP16 TFLOPS equal to FP32 (RTX 3090 35.6 / 35.6, RTX 4090 82.6 / 82.6).
_ALU = {
    "7.5": dict(int32_lanes_per_clk_per_sm=64, fp32_fma_lanes_per_clk_per_sm=64, hfma2_lanes_per_clk_per_sm=64),
    "8.0": dict(int32_lanes_per_clk_per_sm=64, fp32_fma_lanes_per_clk_per_sm=64, hfma2_lanes_per_clk_per_sm=128),
    "8.6": dict(int32_lanes_per_clk_per_sm=64, fp32_fma_lanes_per_clk_per_sm=128, hfma2_lanes_per_clk_per_sm=64),
    "8.7": dict(int32_lanes_per_clk_per_sm=64, fp32_fma_lanes_per_clk_per_sm=128, hfma2_lanes_per_clk_per_sm=128),
    "8.9": dict(int32_lanes_per_clk_per_sm=64, fp32_fma_lanes_per_clk_per_sm=128, hfma2_lanes_per_clk_per_sm=64),
    "9.0": dict(int32_lanes_per_clk_per_sm=64, fp32_fma_lanes_per_clk_per_sm=128, hfma2_lanes_per_clk_per_sm=128),
}
# Per-SM tensor rates derived from the vendor dense peaks / (SMs × boost clock) ([nv-whitepapers]).
_TC = {
    "turing-geforce": (1024, 512, 2048, 4096),
    "ga10x-pro": (1024, 1024, 2048, 4096),
    "ga10x-geforce": (1024, 512, 2048, 4096),
    "ga100": (2048, 2048, 4096, 8192),
    "ada-geforce": (1024, 512, 2048, 4096),
    "ada-pro": (1024, 1024, 2048, 4096),
    "hopper": (4096, 4096, 8192, 0),
}
_SMEM = {f.compute_capability: (f.max_shared_bytes_per_sm, f.max_shared_bytes_per_block, f.max_warps_per_sm,
                                f.max_ctas_per_sm) for f in ARCHS.values()}   # refsim.archs: the CUDA guide's table


def _gpu(*, name: str, arch: str, cc: str, tensor_class: str, sms: int, base_mhz: float, boost_mhz: float,
         sustained_mhz: float, dram_gb_s: float, dram_fraction: float, dram_latency_ns: float, l2_mib: float,
         l2_bytes_per_clk_per_sm: float, sources: dict, ecc: str = "none",
         dram_fraction_ecc_toggled: float = 0.0, l2_partitioned: bool = False, l2_latency_clk: float = 200.0,
         l2_far_latency_clk: float = 0.0, **measured) -> GPUSpec:
    """One row of :data:`GPUS`, every number named: the per-CC tables (:data:`_ALU`, :data:`_SMEM`) and
    the tensor class (:data:`_TC`) fill the rest; ``sources`` maps a field (or a group of fields) to
    its ``(tag, source)`` (tags in the module spec block, source tags in :data:`SOURCES`)."""
    f16, f32, i8, i4 = _TC[tensor_class]
    smem, smem_blk, warps, ctas = _SMEM[cc]
    common = {
        "dram_curve_sharpness": ("microbenchmark", "fit of the H100 SXM read-occupancy sweep ([h100-microbench]): 2.30; "
                                 "the gpu-stream occupancy sweeps of A100 40GB, H200 and L40 ([gpu-benches]) fit "
                                 "within 7 % at the same value"),
        "l2_resident_bytes": ("whitepaper", "partitioned L2 (A100/H100 whitepapers: each half caches for its own "
                              "GPCs): half of l2_bytes for a stream read by every SM; else all of it"),
        "launch_events_s/launch_ramp_s/l2_dirty_fraction": ("estimate", "the H100 SXM's fit ([h100-microbench]); not "
                                                            "measured on this GPU (refsim calibrate --measure does)"),
        "l2_latency_clk": ("estimate", "L2 hit ~200 cycles (Jia et al. 2019, Turing/Ampere pointer chase)"),
        "l2_far_latency_clk": ("whitepaper", "0 unless the row sets it: only the A100/H100 L2 is partitioned "
                               "(whitepapers)"),
        "dram_fraction_ecc_toggled": ("datasheet", "0: the card has no ECC switch (rows with one cite their source)"),
        "ecc": ("datasheet", "the card's default ECC state: GeForce and Jetson parts have no ECC switch ('none'); "
                "rows with a switch cite their datasheet"),
        "tc_*": ("whitepaper", f"vendor dense peaks / (SMs x boost clock), class {tensor_class} ([nv-whitepapers])"),
        "alu_*": ("whitepaper", _CUDA_GUIDE),
        "smem/regs/warps/ctas": ("whitepaper", "CUDA guide per-CC limits ([cuda-guide])"),
        "l1_smem_bytes_per_clk_per_sm": ("whitepaper", "32 banks x 4 B per clock (CUDA guide, shared memory)"),
        "reg_alloc_unit_per_warp/max_regs_per_thread/max_threads_per_block/smem_alloc_unit_bytes/smem_reserved_per_block_bytes":
            ("whitepaper", "CUDA guide per-CC technical specifications; CUDA Occupancy Calculator allocation units"),
        "launch_overhead_s": ("fitted", "calibrate.py on anyprec_rtx4070_laptop.csv (one value for all GPUs)"),
    }
    common = expand_provenance(common)        # per field; the row's own sources win over these defaults
    common.update(expand_provenance(sources))
    return GPUSpec(
        name=name, arch=arch, compute_capability=cc, sm_count=sms, base_clock_hz=base_mhz * 1e6,
        boost_clock_hz=boost_mhz * 1e6, sustained_clock_hz=sustained_mhz * 1e6, dram_peak_bytes_per_s=dram_gb_s * 1e9,
        dram_achievable_fraction=dram_fraction, dram_latency_s=dram_latency_ns * 1e-9, l2_bytes=int(l2_mib * 2**20),
        l2_bytes_per_clk_per_sm=l2_bytes_per_clk_per_sm, smem_per_sm_bytes=smem, smem_per_block_bytes=smem_blk,
        regs_per_sm=65536, max_warps_per_sm=warps, max_ctas_per_sm=ctas,
        tc_fp16_f16acc_flop_per_clk_per_sm=f16, tc_fp16_f32acc_flop_per_clk_per_sm=f32,
        tc_int8_op_per_clk_per_sm=i8, tc_int4_op_per_clk_per_sm=i4, l1_smem_bytes_per_clk_per_sm=128,
        launch_overhead_s=FITTED_LAUNCH_OVERHEAD_S, provenance=common, **_ALU[cc],
        smem_alloc_unit_bytes=256 if cc == "7.5" else 128,
        smem_reserved_per_block_bytes=0 if cc == "7.5" else 1024,
        ecc=ecc, dram_fraction_ecc_toggled=dram_fraction_ecc_toggled,
        l2_resident_bytes=int(l2_mib * 2**20) // 2 if l2_partitioned else 0, l2_latency_clk=l2_latency_clk,
        l2_far_latency_clk=l2_far_latency_clk,
        **measured,
    )


#: the short names the rows' provenance keys use for groups of fields
_PROVENANCE_GROUPS = {
    "clocks": ("base_clock_hz", "boost_clock_hz", "sustained_clock_hz"),
    "dram": ("dram_peak_bytes_per_s",),
    "l2": ("l2_bytes",),
    "smem": ("smem_per_sm_bytes", "smem_per_block_bytes"),
    "regs": ("regs_per_sm",),
    "warps": ("max_warps_per_sm",),
    "ctas": ("max_ctas_per_sm",),
    "alu_*": ("int32_lanes_per_clk_per_sm", "fp32_fma_lanes_per_clk_per_sm", "hfma2_lanes_per_clk_per_sm"),
}
PROVENANCE_TAGS = ("datasheet", "whitepaper", "microbenchmark", "estimate", "fitted")


def expand_provenance(sources: dict, *, any_tag: bool = False) -> dict:
    """``{field: (tag, source)}`` for every field a provenance dict names, one entry per field: a key
    may name one field, several joined by ``/``, a glob (``tc_*``) or a group of :data:`_PROVENANCE_GROUPS`
    (``clocks``); where two keys name a field, the key naming fewer fields wins (``sustained_clock_hz``
    over ``sm_count/clocks/dram/l2``), later keys on a tie. An unknown name, or a tag outside
    :data:`PROVENANCE_TAGS` (any string with ``any_tag``: a spec file's own words), is a FormatRuleError."""
    import fnmatch
    if not isinstance(sources, dict):
        raise FormatRuleError(f"sources: must be a dict of field -> (tag, source); got {type(sources).__name__}")
    names = [f.name for f in fields(GPUSpec) if f.name != "provenance"]
    out: dict = {}
    width: dict = {}
    for key, value in sources.items():
        if (not isinstance(value, (tuple, list)) or len(value) != 2 or type(value[0]) is not str
                or (value[0] not in PROVENANCE_TAGS and not any_tag) or type(value[1]) is not str):
            raise FormatRuleError(f"provenance[{key!r:.80}]: must be (tag, source) with a tag in {list(PROVENANCE_TAGS)}; "
                                  f"got {value!r:.80}")
        named = []
        for part in str(key).split("/"):
            hit = _PROVENANCE_GROUPS.get(part) or (part,) if part in names or part in _PROVENANCE_GROUPS \
                else tuple(fnmatch.filter(names, part))
            if not hit:
                raise FormatRuleError(f"provenance key {key!r:.80}: {part!r:.80} names no GPUSpec field")
            named.extend(hit)
        for name in named:
            if len(named) <= width.get(name, len(named)):
                out[name], width[name] = tuple(value), len(named)
    return out


def estimated_fields(gpu: GPUSpec) -> dict:
    """``{field: source}`` of ``gpu``'s numbers whose provenance tag is ``estimate`` (not measured on
    that card, nor read off a datasheet), in field order."""
    if type(gpu) is not GPUSpec:
        raise FormatRuleError(f"gpu: must be a GPUSpec (refsim.gpu_model.specs.get_gpu); got {type(gpu).__name__}")
    prov = gpu.provenance
    return {f.name: prov[f.name][1] for f in fields(GPUSpec)
            if f.name in prov and prov[f.name][0] == "estimate"}


#: source tags cited by the rows' provenance, with where each number was read
SOURCES = {
    "sysrqmts-A10": "https://sysrqmts.com/ru/gpus/compare/nvidia-a10-pcie-vs-nvidia-quadro-rtx-4000",
    "sysrqmts-A6000": "https://sysrqmts.com/pl/gpus/compare/nvidia-rtx-a6000-vs-nvidia-tesla-p40",
    "baseten": "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
    "marlin-plot": "IST-DASLab/marlin_artifact plotting script (flops = 125e12, bandwidth = 600e9, base clock 885/1695)",
    "thefpsreview": "https://www.thefpsreview.com/gpu-family/nvidia-geforce-rtx-4090-gpu-family-specifications",
    "pcspecchart": "https://pcspecchart.com/pc_parts/gpu/25",
    "mzph-orin-brief": "http://mzph.cn/web/30785.shtml (summary of the Jetson AGX Orin technical brief)",
    "apxinf-74": "https://github.com/infinigence/ApxInf/pull/74 (Orin measured roofline)",
    "oemdrivers-4070L": "https://oemdrivers.com/graphics-nvidia-rtx-4070-laptop",
    "chaynikam-4070M": "https://www.chaynikam.info/ukr/GeForce_RTX_4070_Mobile.html",
    "ninfer-50": "ninfer RTX 3090 benchmark issue #50 (854.2 GB/s uint4 read)",
    "tomshw-tu104": "https://www.tomshardware.com/reviews/nvidia-turing-gpu-architecture-explored,5801-2.html",
    "llm-analysis": "cli99/llm-analysis llm_analysis/gpu_configs/*.json",
    "glennklockwood-h100": "https://glennklockwood.com/garden/processors/h100",
    "glennklockwood-a100": "https://glennklockwood.com/garden/processors/A100",
    "hpctech-h100": "https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html (H100 SXM5 / PCIe table)",
    "tpu-h100-pcie": "TechPowerUp GPU database, H100 PCIe (copy: https://cputronic.com/de/gpu/nvidia-h100-pcie)",
    "tpu-a100-40": "https://www.techpowerup.com/gpu-specs/a100-sxm4-40-gb.c3506",
    "tpu-l4": "TechPowerUp GPU database, L4 (copy: https://fpsbench.com/compare/gpu/nvidia-l4-vs-nvidia-tesla-m40)",
    "nv-l4": "NVIDIA L4 datasheet (copy: https://store.sourcecode.com/en-us/bg-bucket-compare/125/9820): 242 TFLOPS FP16 sparse, 485 TOPS INT8 sparse",
    "tpu-l40s": "TechPowerUp GPU database, L40S (copy: https://computizer.com/products/nvidia-l40s-48gb-gddr6-graphics-card-for-ai-and-graphics-performance)",
    "nv-l40s": "NVIDIA L40/L40S datasheet table (copy: https://www.mullet.se/product.html?product_id=355414): FP16 tensor 362.05 TFLOPS dense",
    "gpu-benches": "te42kyfo/gpu-benches result files (gpu-stream, gpu-l2-cache, gpu-latency)",
    "h100-microbench": "refsim/data/timings/h100_microbenchmarks.json (measured on this H100 SXM, see its README)",
    "nv-whitepapers": "NVIDIA Turing, GA100, GA102 v2.0, Ada v2.1 and Hopper architecture whitepapers",
    "cuda-guide": "CUDA C++ Programming Guide, technical specifications per compute capability",
}

_GDDR_LAT = ("estimate", "GDDR6/6X load-to-use DRAM latency ~500 ns (Ampere/Ada microbenchmark range 450-600 ns)")
_HBM_LAT = ("estimate", "HBM load-to-use DRAM latency ~450 ns (A100/H100 microbenchmarks, Luo et al. 2402.13499)")
_HBM_ECC = ("whitepaper", "HBM ECC is side-band (extra ECC bits per burst, no inline check bytes): switching it off frees no bandwidth, same fraction")
_L2_GA10X = ("estimate", "no public L2 microbenchmark for GA10x/AD10x; 32 B/clk/SM (L40: 5.25 TB/s measured, gpu-benches, ~15 B/clk/SM at 142 SMs is a lower bound)")

GPUS: dict[str, GPUSpec] = {g.name: g for g in [
    _gpu(name="a10", arch="GA102", cc="8.6", tensor_class="ga10x-pro", sms=72, base_mhz=885, boost_mhz=1695,
         sustained_mhz=1695, dram_gb_s=600, dram_fraction=0.85, dram_latency_ns=500, l2_mib=6,
         l2_bytes_per_clk_per_sm=32, ecc="on", dram_fraction_ecc_toggled=0.977, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[sysrqmts-A10], [baseten], [marlin-plot]"),
             "dram_achievable_fraction": ("microbenchmark", "ECC on (the A10's default): 0.85 = the ECC-off 0.977 x (1 - 0.13), the 10-15 % ECC cost the Marlin README measured on A10"),
             "dram_fraction_ecc_toggled": ("microbenchmark", "ECC off: A40 (same GA102 die, GDDR6, 384-bit) reads 97.7 % of peak ([gpu-benches] gpu-stream)"),
             "dram_latency_s": _GDDR_LAT, "l2_bytes_per_clk_per_sm": _L2_GA10X}),
    _gpu(name="rtx4090", arch="AD102", cc="8.9", tensor_class="ada-geforce", sms=128, base_mhz=2235, boost_mhz=2520,
         sustained_mhz=2520, dram_gb_s=1008, dram_fraction=0.91, dram_latency_ns=500, l2_mib=72,
         l2_bytes_per_clk_per_sm=32, ecc="off", dram_fraction_ecc_toggled=0.79, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[thefpsreview], [pcspecchart]"),
             "dram_achievable_fraction": ("microbenchmark", "clpeak #106: 910-921 GB/s of 1008 (ECC off, the GeForce default)"),
             "dram_fraction_ecc_toggled": ("estimate", "ECC on (nvidia-smi -e 1): 0.91 x (1 - 0.13), the GDDR inline-ECC cost measured on A10 (Marlin README); not measured on a 4090"),
             "dram_latency_s": _GDDR_LAT, "l2_bytes_per_clk_per_sm": _L2_GA10X}),
    _gpu(name="orin-agx-64gb", arch="GA10B", cc="8.7", tensor_class="ga100", sms=16, base_mhz=1301, boost_mhz=1301,
         sustained_mhz=1301, dram_gb_s=204.8, dram_fraction=0.746, dram_latency_ns=650, l2_mib=4,
         l2_bytes_per_clk_per_sm=32, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[mzph-orin-brief], MAXN mode 1301 MHz"),
             "dram_achievable_fraction": ("microbenchmark", "[apxinf-74]: 152.8 GB/s 2 GB read of 204.8"),
             "dram_latency_s": ("estimate", "LPDDR5 behind the SoC fabric, ~650 ns"),
             "l2_bytes_per_clk_per_sm": ("estimate", "GA100-style SM; 32 B/clk/SM")}),
    _gpu(name="rtx4070-laptop", arch="AD106", cc="8.9", tensor_class="ada-geforce", sms=36, base_mhz=1395,
         boost_mhz=2175, sustained_mhz=2175, dram_gb_s=256, dram_fraction=0.967, dram_latency_ns=500, l2_mib=32,
         l2_bytes_per_clk_per_sm=32, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[oemdrivers-4070L], [chaynikam-4070M]; base clock OEM/TGP-dependent, 1395 MHz assumed"),
             "dram_achievable_fraction": ("fitted", "calibrate.py: cuBLAS FP16 GEMV rows of anyprec_rtx4070_laptop.csv (247.5 GB/s)"),
             "dram_latency_s": _GDDR_LAT, "l2_bytes_per_clk_per_sm": _L2_GA10X}),
    _gpu(name="rtx3090", arch="GA102", cc="8.6", tensor_class="ga10x-geforce", sms=82, base_mhz=1395, boost_mhz=1695,
         sustained_mhz=1695, dram_gb_s=936.2, dram_fraction=0.913, dram_latency_ns=500, l2_mib=6,
         l2_bytes_per_clk_per_sm=32, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[ninfer-50], GA102 whitepaper ([nv-whitepapers])"),
             "dram_achievable_fraction": ("microbenchmark", "[ninfer-50]: 854.2 GB/s uint4 read"),
             "dram_latency_s": _GDDR_LAT, "l2_bytes_per_clk_per_sm": _L2_GA10X}),
    _gpu(name="rtx2080", arch="TU104", cc="7.5", tensor_class="turing-geforce", sms=46, base_mhz=1515, boost_mhz=1710,
         sustained_mhz=1710, dram_gb_s=448, dram_fraction=0.90, dram_latency_ns=500, l2_mib=4,
         l2_bytes_per_clk_per_sm=32, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[tomshw-tu104], Turing whitepaper (reference card)"),
             "dram_achievable_fraction": ("estimate", "GDDR6 streaming read ~90 % (same class as 3090/4090 measurements)"),
             "dram_latency_s": _GDDR_LAT, "l2_bytes_per_clk_per_sm": _L2_GA10X}),
    _gpu(name="rtx-a6000", arch="GA102", cc="8.6", tensor_class="ga10x-pro", sms=84, base_mhz=1410, boost_mhz=1800,
         sustained_mhz=1800, dram_gb_s=768, dram_fraction=0.90, dram_latency_ns=500, l2_mib=6,
         l2_bytes_per_clk_per_sm=32, ecc="off", dram_fraction_ecc_toggled=0.78, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[sysrqmts-A6000]"),
             "dram_achievable_fraction": ("estimate", "GDDR6 ~90 %, ECC off by default"),
             "dram_fraction_ecc_toggled": ("estimate", "ECC on: 0.90 x (1 - 0.13), the GDDR6 inline-ECC cost measured on A10 (Marlin README)"),
             "dram_latency_s": _GDDR_LAT, "l2_bytes_per_clk_per_sm": _L2_GA10X}),
    _gpu(name="a100-80gb", arch="GA100", cc="8.0", tensor_class="ga100", sms=108, base_mhz=1275, boost_mhz=1410,
         sustained_mhz=1410, dram_gb_s=2039, dram_fraction=0.871, dram_latency_ns=450, l2_mib=40,
         l2_bytes_per_clk_per_sm=34.8, ecc="on", dram_fraction_ecc_toggled=0.871, l2_partitioned=True,
         l2_latency_clk=213, l2_far_latency_clk=426, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[llm-analysis], [gpu-benches], [glennklockwood-a100]"),
             "l2_latency_clk/l2_far_latency_clk": ("microbenchmark", "[gpu-benches] cuda-latency a100_40: 213 cycles (near half), 426 (far half)"),
             "dram_achievable_fraction": ("microbenchmark", "[gpu-benches] gpu-stream a100_80: 1776 GB/s read"),
             "dram_latency_s": _HBM_LAT, "dram_fraction_ecc_toggled": _HBM_ECC,
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "[gpu-benches] gpu-l2-cache A100: ~5.3 TB/s / (108 x 1.41 GHz)")}),
    _gpu(name="h100-sxm", arch="GH100", cc="9.0", tensor_class="hopper", sms=132, base_mhz=1590, boost_mhz=1980,
         sustained_mhz=1980, dram_gb_s=3350, dram_fraction=0.927, dram_latency_ns=390.8, l2_mib=50,
         l2_bytes_per_clk_per_sm=32.06, ecc="on", dram_fraction_ecc_toggled=0.927, l2_partitioned=True,
         l2_latency_clk=265, l2_far_latency_clk=475, launch_events_s=2.976e-6, launch_ramp_s=0.733e-6, l2_dirty_fraction=0.393,
         dram_curve_sharpness=2.30, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[glennklockwood-h100], [hpctech-h100]; vendor tensor peaks at 1830 MHz"),
             "sustained_clock_hz": ("microbenchmark", "1980 MHz under load (nvidia-smi after each kernel timing run, [h100-microbench])"),
             "dram_achievable_fraction/dram_latency_s/dram_curve_sharpness/launch_ramp_s/l2_dirty_fraction": (
                 "microbenchmark", "refsim.gpu_model.microbench.fit of [h100-microbench]: BW_max 3.105 TB/s, "
                 "L0 390.8 ns, p 2.30, ramp 0.733 us, 39.3 % of L2 dirty after the 512 MiB memset"),
             "launch_events_s": ("microbenchmark", "empty kernel 2.976 us from event to event ([h100-microbench])"),
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "warm reads of 0.25-16 MiB: 8.38 TB/s / (132 x 1.98 GHz) ([h100-microbench])"),
             "l2_latency_clk/l2_far_latency_clk": ("microbenchmark", "L2 hit 265.5 cycles in the near half, ~475 in the far half ([gpu-benches] gpu-latency h100_pcie, same GH100 die)"),
             "dram_fraction_ecc_toggled": _HBM_ECC}),
    _gpu(name="h200", arch="GH100", cc="9.0", tensor_class="hopper", sms=132, base_mhz=1590, boost_mhz=1980,
         sustained_mhz=1830, dram_gb_s=4800, dram_fraction=0.81, dram_latency_ns=450, l2_mib=50,
         l2_bytes_per_clk_per_sm=39.0, ecc="on", dram_fraction_ecc_toggled=0.81, l2_partitioned=True,
         l2_latency_clk=265, l2_far_latency_clk=475, sources={
             "l2_latency_clk/l2_far_latency_clk": ("microbenchmark", "same GH100 die: [gpu-benches] gpu-latency h100_pcie 265.5 / ~475 cycles"),
             "sm_count/clocks/dram/l2": ("datasheet", "[glennklockwood-h100] (H100 + HBM3e)"),
             "dram_achievable_fraction": ("microbenchmark", "[gpu-benches] gpu-l2-cache h200: ~3888 GB/s plateau of 4800"),
             "dram_latency_s": _HBM_LAT, "dram_fraction_ecc_toggled": _HBM_ECC,
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "[gpu-benches] H200 ~10.2 TB/s / (132 x 1.98 GHz)")}),
    _gpu(name="h100-pcie", arch="GH100", cc="9.0", tensor_class="hopper", sms=114, base_mhz=1095, boost_mhz=1755,
         sustained_mhz=1755, dram_gb_s=2039, dram_fraction=0.952, dram_latency_ns=375, l2_mib=50,
         l2_bytes_per_clk_per_sm=35.0, ecc="on", dram_fraction_ecc_toggled=0.952, l2_partitioned=True,
         l2_latency_clk=265, l2_far_latency_clk=475, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[hpctech-h100] (114 SMs, 50 MB L2), [tpu-h100-pcie] (1095 / 1755 MHz, 2039 GB/s HBM2e)"),
             "sustained_clock_hz": ("estimate", "boost: 1755 MHz held through [gpu-benches] gpu-latency h100_pcie, a "
                                    "pointer chase that draws little power; under tensor load the 350 W card may run "
                                    "lower (no published clock-vs-load curve)"),
             "dram_achievable_fraction": ("microbenchmark", "[gpu-benches] cuda-stream h100_pcie: 1942 GB/s read of 2039"),
             "dram_latency_s": ("microbenchmark", "[gpu-benches] gpu-latency h100_pcie: 658 cycles at 1755 MHz beyond the L2"),
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "[gpu-benches] gpu-l2-cache h100_pcie: ~7.0 TB/s / (114 x 1.755 GHz)"),
             "l2_latency_clk/l2_far_latency_clk": ("microbenchmark", "[gpu-benches] gpu-latency h100_pcie: 265.5 cycles up to ~20 MB (near half), ~475 from ~32 to ~50 MB (far half)"),
             "dram_fraction_ecc_toggled": _HBM_ECC}),
    _gpu(name="a100-40gb", arch="GA100", cc="8.0", tensor_class="ga100", sms=108, base_mhz=1095, boost_mhz=1410,
         sustained_mhz=1410, dram_gb_s=1555, dram_fraction=0.958, dram_latency_ns=407, l2_mib=40,
         l2_bytes_per_clk_per_sm=34.8, ecc="on", dram_fraction_ecc_toggled=0.958, l2_partitioned=True,
         l2_latency_clk=213, l2_far_latency_clk=426, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[tpu-a100-40] (A100 SXM4 40 GB: 108 SMs, 1095 / 1410 MHz, 1555 GB/s, 40 MB L2), [glennklockwood-a100]"),
             "dram_achievable_fraction": ("microbenchmark", "[gpu-benches] gpu-stream a100_40: 1490 GB/s read of 1555 at full occupancy"),
             "dram_latency_s": ("microbenchmark", "[gpu-benches] cuda-latency a100_40: 574.6 cycles at 1410 MHz beyond the L2"),
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "same GA100 L2 as a100-80gb: [gpu-benches] gpu-l2-cache A100 ~5.3 TB/s / (108 x 1.41 GHz)"),
             "l2_latency_clk/l2_far_latency_clk": ("microbenchmark", "[gpu-benches] cuda-latency a100_40: 213 cycles up to ~20 MB (near half), 426 beyond (far half)"),
             "dram_fraction_ecc_toggled": _HBM_ECC}),
    _gpu(name="l4", arch="AD104", cc="8.9", tensor_class="ada-pro", sms=58, base_mhz=795, boost_mhz=2040,
         sustained_mhz=2040, dram_gb_s=300, dram_fraction=0.85, dram_latency_ns=254, l2_mib=48,
         l2_bytes_per_clk_per_sm=14.8, ecc="on", dram_fraction_ecc_toggled=0.977, l2_latency_clk=276, sources={
             "sm_count/clocks/dram/l2": ("datasheet", "[tpu-l4] (795 / 2040 MHz, 300 GB/s GDDR6, 48 MB L2); 58 SMs = [nv-l4]'s 121 TFLOPS dense FP16 / (1024 x 2.04 GHz)"),
             "sustained_clock_hz": ("estimate", "boost; the 72 W card may run lower under tensor load (no published clock-vs-load curve)"),
             "ecc": ("datasheet", "[nv-l4]: ECC protection on by default"),
             "dram_achievable_fraction": ("estimate", "GDDR6 with inline ECC on: the A10's 0.85 (same cost model); not measured on an L4"),
             "dram_fraction_ecc_toggled": ("estimate", "ECC off: the GDDR6 A40's 97.7 % ([gpu-benches] gpu-stream)"),
             "dram_latency_s": ("microbenchmark", "Ada GDDR6 proxy: [gpu-benches] gpu-latency l40: 632 cycles at 2490 MHz beyond the L2"),
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "Ada proxy: [gpu-benches] gpu-l2-cache l40 5.25 TB/s / (142 x 2.49 GHz)"),
             "l2_latency_clk": ("microbenchmark", "Ada proxy: [gpu-benches] gpu-latency l40: 276.5 cycles")}),
    _gpu(name="l40s", arch="AD102", cc="8.9", tensor_class="ada-pro", sms=142, base_mhz=1110, boost_mhz=2520,
         sustained_mhz=2520, dram_gb_s=864, dram_fraction=0.977, dram_latency_ns=254, l2_mib=96,
         l2_bytes_per_clk_per_sm=14.8, ecc="on", dram_fraction_ecc_toggled=0.977, l2_latency_clk=276, sources={
             "sm_count/clocks/dram": ("datasheet", "[tpu-l40s] (142 SMs, 1110 / 2520 MHz, 864 GB/s GDDR6), [nv-l40s] (362.05 TFLOPS dense FP16 = 142 x 1024 x 2.49 GHz)"),
             "l2_bytes": ("microbenchmark", "96 MB: [gpu-benches] gpu-latency l40 (same AD102 configuration) holds L2 latency to ~92 MiB ([tpu-l40s] lists 48 MB)"),
             "sustained_clock_hz": ("estimate", "boost; no published clock-vs-load curve"),
             "ecc": ("datasheet", "[nv-l4] table: L40S 48 GB GDDR6 with ECC, on by default"),
             "dram_achievable_fraction": ("microbenchmark", "[gpu-benches] gpu-stream l40: 844 GB/s read of 864 (ECC state not stated)"),
             "dram_fraction_ecc_toggled": ("estimate", "no measured difference: the same 0.977"),
             "dram_latency_s": ("microbenchmark", "[gpu-benches] gpu-latency l40 (same die): 632 cycles at 2490 MHz beyond the L2"),
             "l2_bytes_per_clk_per_sm": ("microbenchmark", "[gpu-benches] gpu-l2-cache l40: 5.25 TB/s / (142 x 2.49 GHz)"),
             "l2_latency_clk": ("microbenchmark", "[gpu-benches] gpu-latency l40: 276.5 cycles")}),
]}


def gpu_names() -> list[str]:
    """Names accepted by :func:`get_gpu` (sorted)."""
    return sorted(GPUS)


def get_gpu(name: str | GPUSpec) -> GPUSpec:
    """The :class:`GPUSpec` for ``name`` (case-insensitive; the aliases of
    :data:`refsim.gpu_model.names.GPU_ALIASES` accepted); an unknown name raises FormatRuleError
    listing the names and aliases."""
    if isinstance(name, GPUSpec):
        return name
    return GPUS[resolve("gpu", name, GPUS)]
