"""Roofline building blocks shared by every kernel model, and the plain DRAM-roofline baseline.

Each kernel model (``refsim.gpu_model.kernels.*``) counts, from how the kernel really works:

    bytes from DRAM ............ T_dram = Σ_waves bytes_wave / BW(resident CTAs · bytes in flight)
                                 BW(Q) = BW_eff · X / (1 + X^p)^(1/p), X = Q / (L0 · BW_eff)
                                 (Little's law, smoothed; + the write-back of a dirty L2)
    bytes L2 -> SM ............. T_l2   = bytes_l2 / BW_L2
    tensor-core instructions ... T_tc   = n_mma · flop_per_mma(padded shape) / (rate(acc type) · SMs · f_sm)
    ALU / issue slots .......... T_alu  = max(warp_instrs / (4 SMSP · SMs · f), pipe lanes / lanes/clk,
                                             steps per SMSP / warps per SMSP · C1 / f)   (refsim.gpu_model.loop)
    L1/shared wavefronts ....... T_smem = wavefronts / (SMs · f_sm)   (LUT lookups × bank-conflict degree)
    latency-bound chain ........ T_lat  = waves · steps per warp · (DRAM latency + C1 / f)   (no prefetch)
    fixed ...................... T0 per launch (the timing method's) + one DRAM latency (the first loads)

and combines them with :func:`combine`:

    T = T0·launches + tail + max(pipes) + (1 - a) · second_largest(pipes)

``a`` (overlap) and ``T0`` are the only fitted constants (:data:`FITTED`, fitted by
``refsim.gpu_model.calibrate`` on the RTX 4070 Laptop Any-Precision table); with CUDA-event timing
T0 is the GPU's measured empty kernel plus its first-wave ramp (conditions.with_timing). The binding
bottleneck is the name of the largest term (``launch`` when T0 + tail dominates, ``serial`` when a
serial chain such as Marlin's lock-ordered slice reduction does).
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass, field

import numpy as np

from refsim._validate import plain_scalar, require_fields, require_instance, require_int
from refsim.errors import FormatRuleError
from refsim.gpu_model.specs import FITTED_LAUNCH_OVERHEAD_S, GPUSpec

__all__ = ["ModelParams", "FITTED", "Breakdown", "combine", "dram_time", "stream_bandwidth", "writeback_bytes",
           "waves", "dram_roofline_s", "PIPE_TERMS"]

PIPE_TERMS = ("dram", "l2", "tensor", "alu", "smem", "latency")


@dataclass(frozen=True)
class ModelParams:
    """The few constants first principles cannot give (all tagged ``fitted``).

    launch_overhead_s:     T0, fixed cost per kernel launch as Nsight Compute times it.
    overlap:               a in [0, 1]: fraction of the second-largest pipe hidden under the largest,
                           for the models that combine pipe terms (cuBLAS, Marlin, AWQ, ...). Fitted
                           with T0 on the calibration table while the Any-Precision model combined
                           its terms this way (0.9243); the Any-Precision model now overlaps its
                           warps by a mechanism (the SASS census, kernels/anyprec.py), so the table
                           no longer constrains a and the value is kept, not refitted.

    The CUDA-core issue efficiency that used to be fitted here is now a mechanism: the per-SMSP
    issue model of :mod:`refsim.gpu_model.loop` (warps per SMSP from occupancy vs the dependent-issue
    cycles of one warp's step).
    """

    launch_overhead_s: float = FITTED_LAUNCH_OVERHEAD_S
    overlap: float = 0.9243

    def __post_init__(self) -> None:
        # checked on construction (and on dataclasses.replace); NumPy scalars stored as Python floats
        for name, hi in (("launch_overhead_s", 1e-2), ("overlap", 1.0)):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or getattr(v, "ndim", 0):
                raise FormatRuleError(f"ModelParams.{name}: must be a number; got {type(v).__name__}")
            v = float(v)
            if not (math.isfinite(v) and 0.0 <= v <= hi):
                raise FormatRuleError(f"ModelParams.{name}: must be a finite number in [0, {hi:g}]; got {v!r}")
            object.__setattr__(self, name, v)


FITTED = ModelParams()


@dataclass(frozen=True)
class Breakdown:
    """The named result of a kernel model: latency, its terms (seconds) and the bottleneck.

    terms: ``dram, l2, tensor, alu, smem`` (pipes that overlap), ``launch`` (T0 × launches) and
    ``tail`` (per-wave ramp), all in seconds. ``bytes_dram`` counts DRAM bytes, ``flops`` useful
    (unpadded) 2·M·N·K, ``ctas`` and ``waves`` the launch geometry of the main kernel.
    """

    kernel: str
    gpu: str
    m: int
    n: int
    k: int
    bits: int
    latency_s: float
    bottleneck: str
    terms: dict = field(default_factory=dict)
    bytes_dram: float = 0.0
    flops: float = 0.0
    ctas: int = 0
    waves: float = 0.0
    launches: int = 1
    notes: str = ""

    def __post_init__(self) -> None:
        # a Breakdown built by hand or by dataclasses.replace holds Python types (np.str_, NumPy
        # scalars converted; the models' hot path builds it from Python values without this)
        require_fields(self)

    @property
    def latency_us(self) -> float:
        return self.latency_s * 1e6

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.flops / self.bytes_dram if self.bytes_dram else math.inf

    def as_dict(self) -> dict:
        """JSON-ready dict (times in µs)."""
        return {
            "kernel": self.kernel, "gpu": self.gpu, "m": self.m, "n": self.n, "k": self.k,
            "bits": self.bits, "latency_us": self.latency_us, "bottleneck": self.bottleneck,
            "terms_us": {name: t * 1e6 for name, t in self.terms.items()},
            "bytes_dram": self.bytes_dram, "flops": self.flops, "ctas": self.ctas,
            "waves": self.waves, "launches": self.launches, "notes": self.notes,
        }


def _amounts(**values) -> tuple[float, ...]:
    """Every keyword must be a finite real number >= 0 (bytes, seconds, FLOPs; bools refused);
    returns them as Python floats, in keyword order."""
    out = []
    for name, v in values.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise FormatRuleError(f"{name}: must be a finite number >= 0; got {type(v).__name__}")
        try:
            f = float(v)
        except OverflowError:                   # an int beyond the largest double
            f = math.inf
        if not (math.isfinite(f) and f >= 0):
            raise FormatRuleError(f"{name}: must be a finite number >= 0; got {v!r}")
        out.append(f)
    return tuple(out)


#: The plain-type test of the public functions below: an amount that is a Python float or int
#: with ``0 <= v <= _MAX`` is finite, >= 0 and converts to a finite float (NaN and inf fail the
#: comparison, an int past the largest double too), so it skips :func:`_amounts`. Written inline
#: in each function: the kernel models call them thousands of times per sweep.
_PLAIN = (float, int)
_MAX = sys.float_info.max


def _stream_error(name: str, value) -> FormatRuleError:
    """The error of a DRAM stream whose bytes in flight ``name`` = ``value`` put the smoothed
    Little's-law curve outside double precision: a bandwidth that underflows to 0 (a time would
    divide by it) or an ``X^p`` that overflows."""
    return FormatRuleError(f"{name}: the DRAM stream's bandwidth with this many bytes in flight must be a "
                           f"finite number > 0 in double precision (the Little's-law curve under- or "
                           f"overflows); got {value!r}")


def waves(ctas: int, ctas_per_sm: int, gpu: GPUSpec) -> float:
    """Fractional number of waves: CTAs / (SMs × resident CTAs per SM)."""
    ctas, ctas_per_sm = require_int("ctas", ctas, minimum=0), require_int("ctas_per_sm", ctas_per_sm, minimum=0)
    require_instance("gpu", gpu, GPUSpec)
    return ctas / (gpu.sm_count * max(1, ctas_per_sm))


def dram_time(bytes_dram: float, gpu: GPUSpec, ctas: int, ctas_per_sm: int,
              bytes_in_flight_per_cta: float) -> float:
    """Seconds to stream ``bytes_dram`` with the launch's memory-level parallelism.

    Bytes are spread evenly over CTAs; full waves run with ``SMs × ctas_per_sm`` CTAs resident, the
    partial last wave with the remainder. Each wave's bandwidth is :func:`stream_bandwidth` of its
    resident CTAs' bytes in flight (Little's law, smoothed). On a dirty L2 (``gpu.l2_dirty_bytes``)
    the stream also carries :func:`writeback_bytes`. ``ctas`` and ``ctas_per_sm`` are integers
    >= 0 (0 counts as one CTA); the amounts finite numbers >= 0, ``bytes_in_flight_per_cta`` > 0
    when there are bytes to stream. The kernel models call this with the values they built: those
    pass the plain-type test and skip the conversions, nothing else is skipped.
    """
    if not (type(gpu) is GPUSpec and type(ctas) is int and type(ctas_per_sm) is int and ctas >= 0 and ctas_per_sm >= 0
            and type(bytes_dram) in _PLAIN and type(bytes_in_flight_per_cta) in _PLAIN
            and 0 <= bytes_dram <= _MAX and 0 <= bytes_in_flight_per_cta <= _MAX):
        require_instance("gpu", gpu, GPUSpec)
        bytes_dram, bytes_in_flight_per_cta = _amounts(bytes_dram=bytes_dram,
                                                       bytes_in_flight_per_cta=bytes_in_flight_per_cta)
        ctas, ctas_per_sm = require_int("ctas", ctas, minimum=0), require_int("ctas_per_sm", ctas_per_sm, minimum=0)
    if not bytes_dram:
        return 0.0
    if not bytes_in_flight_per_cta:
        raise FormatRuleError("bytes_in_flight_per_cta: must be > 0 when there are bytes to stream; got 0")
    if ctas < 1:                                   # an empty launch still streams in one CTA
        ctas = 1
    if ctas_per_sm < 1:
        ctas_per_sm = 1
    slots = gpu.sm_count * ctas_per_sm
    full = ctas // slots
    rem = ctas - full * slots                      # divmod(ctas, slots) of two positive ints
    per_cta = (bytes_dram + writeback_bytes(gpu, bytes_dram) if gpu.l2_dirty_bytes else bytes_dram) / ctas
    t = 0.0
    try:
        if full:                                   # full waves: every slot busy
            t += full * slots * per_cta / _littles_law(gpu, slots * bytes_in_flight_per_cta)
        if rem:                                    # the last, partial wave
            t += rem * per_cta / _littles_law(gpu, rem * bytes_in_flight_per_cta)
    except (ZeroDivisionError, OverflowError):
        t = math.nan
    if not 0.0 <= t <= _MAX:                        # NaN fails too
        raise _stream_error("bytes_in_flight_per_cta", bytes_in_flight_per_cta)
    return t


def stream_bandwidth(gpu: GPUSpec, bytes_in_flight: float) -> float:
    """Bytes/s a DRAM stream reaches with ``bytes_in_flight`` bytes outstanding device-wide (a finite
    number > 0): :func:`_littles_law`. A FormatRuleError names ``bytes_in_flight`` when the curve
    leaves double precision (a bandwidth of 0, or an overflow)."""
    if not (type(gpu) is GPUSpec and type(bytes_in_flight) in _PLAIN and 0 <= bytes_in_flight <= _MAX):
        require_instance("gpu", gpu, GPUSpec)
        (bytes_in_flight,) = _amounts(bytes_in_flight=bytes_in_flight)
    if not bytes_in_flight > 0:
        raise FormatRuleError(f"bytes_in_flight: must be > 0; got {bytes_in_flight!r}")
    try:
        bw = _littles_law(gpu, bytes_in_flight)
    except (ZeroDivisionError, OverflowError):
        bw = math.nan
    if not 0.0 < bw <= _MAX:                        # NaN fails too
        raise _stream_error("bytes_in_flight", bytes_in_flight)
    return bw


def _littles_law(gpu: GPUSpec, bytes_in_flight: float) -> float:
    """The curve of :func:`stream_bandwidth` and :func:`dram_time` (their arithmetic, after their
    checks): Little's law against the unloaded latency L0 (``gpu.dram_latency_s``), capped by the
    achievable bandwidth BW (``gpu.dram_eff_bytes_per_s``), the corner smoothed with the GPU's
    sharpness p::

        X  = bytes_in_flight / (L0 · BW)
        bw = BW · X / (1 + X^p)^(1/p)        (-> bytes_in_flight / L0 for X << 1, -> BW for X >> 1)

    The smooth corner is queueing: near the knee the latency grows with load. p = 2.3 reproduces the
    H100 SXM read sweep from 128 to 2048 threads per SM within 1 % (refsim.gpu_model.microbench)."""
    bw_eff = gpu.dram_peak_bytes_per_s * gpu.dram_achievable_fraction
    x = bytes_in_flight / (gpu.dram_latency_s * bw_eff)
    p = gpu.dram_curve_sharpness
    return bw_eff * x / (1.0 + x ** p) ** (1.0 / p)


def writeback_bytes(gpu: GPUSpec, bytes_dram: float) -> float:
    """DRAM bytes written back while a kernel streams ``bytes_dram`` (a finite number >= 0) into an
    L2 that holds ``gpu.l2_dirty_bytes`` of another buffer's dirty lines (0 on a clean L2): each line
    brought in evicts one, a dirty share of them is written first."""
    if not (type(gpu) is GPUSpec and type(bytes_dram) in _PLAIN and 0 <= bytes_dram <= _MAX):
        require_instance("gpu", gpu, GPUSpec)
        (bytes_dram,) = _amounts(bytes_dram=bytes_dram)
    if not gpu.l2_dirty_bytes:
        return 0.0
    return min(bytes_dram, gpu.l2_bytes) * (gpu.l2_dirty_bytes / gpu.l2_bytes)


def combine(kernel: str, gpu: GPUSpec, m: int, n: int, k: int, bits: int, pipes: dict,
            params: ModelParams, *, launches: int = 1, ctas: int = 0, n_waves: float = 0.0,
            bytes_dram: float = 0.0, extra_serial_s: float = 0.0, notes: str = "") -> Breakdown:
    """Overlap the pipe terms, add fixed costs, name the bottleneck.

    ``T = T0·launches + tail + max(pipes) + (1 - a)·second(pipes) + extra_serial_s`` where
    tail = one DRAM latency per launch (the first loads cannot be hidden; later waves start as
    CTAs retire, so there is no per-wave bubble). ``m, n, k, bits, launches`` are integers >= 1,
    ``ctas`` >= 0; ``pipes`` maps names to seconds; every amount is a finite number >= 0. The
    kernel models call this with Python values they built: those pass the plain-type test and skip
    the conversions (NumPy scalars become Python numbers), nothing else is skipped.
    """
    plain = (type(kernel) is str and type(notes) is str and type(gpu) is GPUSpec and type(params) is ModelParams
             and type(pipes) is dict and type(m) is int and type(n) is int and type(k) is int and type(bits) is int
             and type(launches) is int and type(ctas) is int and m >= 1 and n >= 1 and k >= 1 and bits >= 1
             and launches >= 1 and ctas >= 0 and type(n_waves) is float and type(bytes_dram) is float
             and type(extra_serial_s) is float and 0.0 <= n_waves <= _MAX and 0.0 <= bytes_dram <= _MAX
             and 0.0 <= extra_serial_s <= _MAX)
    if plain:
        for key, v in pipes.items():
            if type(key) is not str or type(v) is not float or not 0.0 <= v <= _MAX:
                plain = False
                break
    if not plain:
        kernel, notes = plain_scalar(kernel), plain_scalar(notes)     # a np.str_ name is the str it holds
        require_instance("gpu", gpu, GPUSpec)
        require_instance("params", params, ModelParams)
        require_instance("pipes", pipes, dict)
        require_instance("kernel", kernel, str)
        require_instance("notes", notes, str)
        m, n, k, bits, launches = (require_int(name, v, minimum=1) for name, v in
                                   (("m", m), ("n", n), ("k", k), ("bits", bits), ("launches", launches)))
        ctas = require_int("ctas", ctas, minimum=0)
        n_waves, bytes_dram, extra_serial_s = _amounts(n_waves=n_waves, bytes_dram=bytes_dram,
                                                       extra_serial_s=extra_serial_s)
        pipes = dict(zip(map(str, pipes), _amounts(**{f"pipes[{key!r}]": v for key, v in pipes.items()})))
    latency, terms, bottleneck = _overlap(gpu, pipes, params, launches, extra_serial_s)
    return _breakdown(kernel, gpu.name, m, n, k, bits, latency, bottleneck, terms, bytes_dram, 2.0 * m * n * k,
                      ctas, n_waves, launches, notes)


_new = object.__new__
_set = object.__setattr__


def _breakdown(kernel, gpu, m, n, k, bits, latency_s, bottleneck, terms, bytes_dram, flops, ctas, waves, launches,
               notes) -> Breakdown:
    """``Breakdown(kernel=kernel, gpu=gpu, ...)`` (every field, positional in field order) without the
    frozen dataclass ``__init__`` (15 ``object.__setattr__`` calls): the instance dict is filled in
    field order, so equality, repr, ``dataclasses.asdict``, ``as_dict`` and pickling are those of the
    ``__init__``-built object (tests/gpu_model/test_problem.py). No checks: the kernel models' hot path."""
    bd = _new(Breakdown)
    _set(bd, "__dict__", {"kernel": kernel, "gpu": gpu, "m": m, "n": n, "k": k, "bits": bits, "latency_s": latency_s,
                          "bottleneck": bottleneck, "terms": terms, "bytes_dram": bytes_dram, "flops": flops,
                          "ctas": ctas, "waves": waves, "launches": launches, "notes": notes})
    return bd


def _top_two(pipes: dict) -> tuple[float, float, str | None]:
    """``(largest, second largest, name of the largest)`` of the pipe times (first of ties; the
    overlap rule's two terms), one pass in insertion order."""
    first = second = 0.0
    top = None
    for name, v in pipes.items():
        if top is None or v > first:
            second, first, top = first, v, name
        elif v > second:
            second = v
    return first, second, top


def _overlap(gpu, pipes: dict, params, launches: int = 1, extra_serial_s: float = 0.0) -> tuple[float, dict, str]:
    """The arithmetic of :func:`combine`: ``(latency_s, terms, bottleneck)`` of one launch group,
    for models that add several launches before building one :class:`Breakdown`."""
    first, second, top = _top_two(pipes)
    launch = params.launch_overhead_s * launches
    tail = gpu.dram_latency_s          # first loads of the launch; CTAs of later waves are scheduled
                                       # as slots free up, so there is no bubble per wave
    latency = launch + tail + first + (1.0 - params.overlap) * second + extra_serial_s
    terms = dict(pipes)
    terms["launch"] = launch
    terms["tail"] = tail
    if extra_serial_s:
        terms["serial"] = extra_serial_s
    bottleneck = top if top is not None and first >= launch + tail else "launch"
    if extra_serial_s > max(first, launch + tail):
        bottleneck = "serial"
    return latency, terms, bottleneck


def dram_roofline_s(bytes_dram: float, flops: float, gpu: GPUSpec,
                    kind: str = "fp16_f32acc") -> float:
    """The plain roofline the issue compares against (LLM-Viewer style):
    ``max(bytes / peak DRAM bandwidth, flops / peak tensor rate)`` at boost clock, no fixed cost,
    no achievable fraction, no waves."""
    require_instance("gpu", gpu, GPUSpec)
    _amounts(bytes_dram=bytes_dram, flops=flops)
    peak = gpu.tensor_flops(kind, "boost")
    if not peak:
        raise FormatRuleError(f"kind: {gpu.name} has no {kind} tensor path (its rate is 0)")
    return max(float(bytes_dram) / gpu.dram_peak_bytes_per_s, float(flops) / peak)
