"""The per-GPU constants of the model, from microbenchmark results (the analysis ``refsim calibrate`` runs).

Spec block
----------
Input: the results of four small benchmarks on one GPU, as a dict (``refsim calibrate --measure``
writes it; ``refsim/data/timings/h100_microbenchmarks.json`` is one, recorded on an H100 SXM)::

    sms                  SMs of the GPU
    empty                {"cold"|"warm": {"median_us": t}}  an empty kernel, CUDA events around it
    read                 [{"bytes", "cache": "cold"|"warm", "median_us"}]  a streaming read (float4
                         loads, one in flight per thread, a full grid of 2048 threads per SM), sizes
                         256 KiB .. 1 GiB; "cold" = a buffer >= 2 x L2 zeroed before each launch
    read_occupancy       [{"blocks_per_sm", "threads", "bytes", "median_us"}]  the same read at one
                         size with 1..32 blocks of 128..512 threads per SM (cold)
    copy                 (optional; not used by the fit)

Model of a read of B bytes with Q bytes in flight device-wide (the one the kernel models use,
:func:`refsim.gpu_model.roofline.stream_bandwidth`)::

    T(B, Q) = T_empty + ramp + L0 + (B + dirty · min(B, L2)) / BW(Q)
    BW(Q)   = BW_max · X / (1 + X^p)^(1/p),   X = Q / (L0 · BW_max)          (Little's law, smoothed)
    Q       = SMs · min(threads per SM, max resident) · bytes in flight per thread

    T_empty   the empty kernel (measured directly)
    ramp      the first wave's launch beyond an empty kernel
    L0, BW_max, p   unloaded DRAM latency, streaming bandwidth, sharpness of the knee
    dirty     share of the L2 the flush left dirty: written back as the read evicts it ("cold" only)

:func:`fit` finds (BW_max, L0, p, dirty, ramp) by least squares of log time over the cold rows of
``read`` and ``read_occupancy`` (scipy), and the L2 (bandwidth, hit latency) by a line through the
warm reads that fit in half the L2. :func:`spec_fields` turns a fit into GPUSpec fields at the SM
clock the benchmark ran at. Nothing here sees a kernel timing the model is judged on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from refsim._validate import plain_scalar, require_fields, require_instance
from refsim.errors import FormatRuleError

__all__ = ["Fit", "fit", "spec_fields", "read_time_s", "BYTES_IN_FLIGHT_PER_THREAD"]

#: the read benchmark keeps one float4 load in flight per thread
BYTES_IN_FLIGHT_PER_THREAD = 16
#: most threads an SM holds resident (64 warps on CC 8.0 / 9.0; the benchmark grid never exceeds it)
MAX_THREADS_PER_SM = 2048


@dataclass(frozen=True)
class Fit:
    """Constants fitted from one GPU's microbenchmarks (seconds, bytes, bytes/s)."""

    sms: int
    empty_s: float
    ramp_s: float
    dram_bw_max: float
    dram_latency_s: float
    sharpness: float
    dirty_fraction: float
    l2_bytes_per_s: float
    l2_latency_s: float
    rows: int
    max_abs_log_error: float

    def __post_init__(self) -> None:
        # NaN L2 constants: the benchmark had too few warm reads inside half the L2 to fit them
        require_fields(self, nonfinite=("l2_bytes_per_s", "l2_latency_s"))
        if not 1 <= self.sms <= 1024 or self.rows < 1:
            raise FormatRuleError(f"Fit.sms, Fit.rows: must be in [1, 1024] and >= 1; got {self.sms}, {self.rows}")
        for name in ("empty_s", "dram_bw_max", "dram_latency_s", "sharpness"):
            _number(f"Fit.{name}", getattr(self, name))
        for name in ("ramp_s", "max_abs_log_error"):
            if getattr(self, name) < 0:
                raise FormatRuleError(f"Fit.{name}: must be >= 0; got {getattr(self, name)!r}")
        if not 0.0 <= self.dirty_fraction <= 1.0:
            raise FormatRuleError(f"Fit.dirty_fraction: must be in [0, 1]; got {self.dirty_fraction!r}")
        for name in ("l2_bytes_per_s", "l2_latency_s"):
            v = getattr(self, name)
            if not (math.isnan(v) or (math.isfinite(v) and v >= 0 and (v > 0 or name == "l2_latency_s"))):
                raise FormatRuleError(f"Fit.{name}: must be NaN (not fitted) or a finite number "
                                      f"{'>= 0' if name == 'l2_latency_s' else '> 0'}; got {v!r}")


def _number(where: str, value, positive: bool = True) -> float:
    value = plain_scalar(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
            positive and value <= 0):
        raise FormatRuleError(f"{where}: must be a finite number > 0; got {value!r:.80}")
    return float(value)


def _rows(results: dict):
    require_instance("results", results, dict)
    for key in ("sms", "empty", "read", "read_occupancy"):
        if key not in results:
            raise FormatRuleError(f"results: must have the key {key!r} (refsim calibrate --measure output); "
                                  f"got keys {sorted(results)}")
    sms = plain_scalar(results["sms"])
    if type(sms) is not int or not 1 <= sms <= 1024:
        raise FormatRuleError(f"results['sms']: must be an int in [1, 1024]; got {sms!r:.80}")
    empty = results["empty"]
    if not isinstance(empty, dict) or not isinstance(empty.get("cold"), dict):
        raise FormatRuleError("results['empty']: must be {'cold': {'median_us': t}, ...}")
    empty_s = _number("results['empty']['cold']['median_us']", empty["cold"].get("median_us")) * 1e-6
    cold, warm = [], []
    for name in ("read", "read_occupancy"):
        items = results[name]
        if not isinstance(items, list) or not items:
            raise FormatRuleError(f"results[{name!r}]: must be a non-empty list of measurements")
        for i, r in enumerate(items):
            where = f"results[{name!r}][{i}]"
            if not isinstance(r, dict):
                raise FormatRuleError(f"{where}: must be a dict; got {type(r).__name__}")
            b = _number(f"{where}['bytes']", r.get("bytes"))
            t = _number(f"{where}['median_us']", r.get("median_us")) * 1e-6
            if name == "read":
                threads = MAX_THREADS_PER_SM
                cache = r.get("cache")
                if cache not in ("cold", "warm"):
                    raise FormatRuleError(f"{where}['cache']: must be 'cold' or 'warm'; got {cache!r:.80}")
            else:
                cache = "cold"
                threads = _number(f"{where}['blocks_per_sm']", r.get("blocks_per_sm")) * _number(
                    f"{where}['threads']", r.get("threads"))
            q = sms * min(threads, MAX_THREADS_PER_SM) * BYTES_IN_FLIGHT_PER_THREAD
            (cold if cache == "cold" else warm).append((b, q, t))
    if len(cold) < 5:
        raise FormatRuleError(f"results: the fit needs at least 5 cold reads; got {len(cold)}")
    return sms, empty_s, cold, warm


def read_time_s(b: float, q: float, empty_s: float, ramp_s: float, bw_max: float, l0: float, p: float,
                dirty: float, l2_bytes: float) -> float:
    """T(B, Q) of the module spec block (seconds): every argument a finite number, > 0 except
    ``ramp_s`` and ``dirty`` (>= 0)."""
    b, q, empty_s, bw_max, l0, p, l2_bytes = (_number(n, v) for n, v in (
        ("b", b), ("q", q), ("empty_s", empty_s), ("bw_max", bw_max), ("l0", l0), ("p", p), ("l2_bytes", l2_bytes)))
    ramp_s, dirty = _number("ramp_s", ramp_s, positive=False), _number("dirty", dirty, positive=False)
    if ramp_s < 0 or dirty < 0:
        raise FormatRuleError(f"ramp_s, dirty: must be >= 0; got {ramp_s!r}, {dirty!r}")
    try:
        x = q / (l0 * bw_max)
        bw = bw_max * x / (1.0 + x ** p) ** (1.0 / p)
        t = empty_s + ramp_s + l0 + (b + dirty * min(b, l2_bytes)) / bw
    except (ZeroDivisionError, OverflowError):      # a bandwidth of 0 or beyond a double
        t = math.inf
    if not math.isfinite(t):
        raise FormatRuleError(f"q, bw_max, l0, p: the read model's bandwidth BW(Q) must be a finite number > 0 in "
                              f"double precision; got q={q!r}, bw_max={bw_max!r}, l0={l0!r}, p={p!r}")
    return t


def fit(results: dict, l2_bytes: int) -> Fit:
    """Fit the spec block's constants to ``results`` (the dict described there) of a GPU whose L2
    holds ``l2_bytes``. Raises FormatRuleError for a malformed ``results``."""
    from scipy.optimize import least_squares

    sms, empty_s, cold, warm = _rows(results)
    l2_bytes = plain_scalar(l2_bytes)
    if type(l2_bytes) is not int or l2_bytes < 1:
        raise FormatRuleError(f"l2_bytes: must be an int >= 1; got {l2_bytes!r:.80}")

    def residuals(x):
        bw_max, l0_ns, p, dirty, ramp_us = x
        return [math.log(read_time_s(b, q, empty_s, ramp_us * 1e-6, bw_max * 1e9, l0_ns * 1e-9, p, dirty,
                                     l2_bytes) / t) for b, q, t in cold]

    big = max(cold, key=lambda r: r[0])
    bw0 = big[0] / max(big[2] - empty_s, 1e-9) / 1e9          # GB/s of the largest read
    res = least_squares(residuals, [bw0, 400.0, 2.5, 0.3, 0.5],
                        bounds=([bw0 * 0.3, 50.0, 1.0, 0.0, 0.0], [bw0 * 3.0, 2000.0, 12.0, 1.0, 20.0]))
    bw_max, l0_ns, p, dirty, ramp_us = (float(v) for v in res.x)
    # L2: warm reads that fit in half the L2 (no partition or replacement effects): T - T_empty - ramp
    # = L_L2 + B / BW_L2, a least-squares line
    pts = [(b, t - empty_s - ramp_us * 1e-6) for b, _, t in warm if b <= l2_bytes / 2]
    if len(pts) >= 2:
        mb = sum(b for b, _ in pts) / len(pts)
        mt = sum(t for _, t in pts) / len(pts)
        slope = sum((b - mb) * (t - mt) for b, t in pts) / sum((b - mb) ** 2 for b, _ in pts)
        l2_bw, l2_lat = (1.0 / slope, max(mt - slope * mb, 0.0)) if slope > 0 else (math.nan, math.nan)
    else:
        l2_bw = l2_lat = math.nan
    worst = max(abs(r) for r in residuals(res.x))
    return Fit(sms, empty_s, ramp_us * 1e-6, bw_max * 1e9, l0_ns * 1e-9, p, dirty, l2_bw, l2_lat, len(cold),
               worst)


def spec_fields(f: Fit, dram_peak_bytes_per_s: float, clock_hz: float) -> dict:
    """GPUSpec fields from a fit, for a GPU of peak DRAM bandwidth ``dram_peak_bytes_per_s`` whose
    SMs ran at ``clock_hz`` during the benchmark (L2 rates are per SM per clock)."""
    require_instance("f", f, Fit)
    peak = _number("dram_peak_bytes_per_s", dram_peak_bytes_per_s)
    clock = _number("clock_hz", clock_hz)
    out = {"launch_events_s": f.empty_s, "launch_ramp_s": f.ramp_s,
           "dram_achievable_fraction": f.dram_bw_max / peak, "dram_latency_s": f.dram_latency_s,
           "dram_curve_sharpness": f.sharpness, "l2_dirty_fraction": f.dirty_fraction}
    if math.isfinite(f.l2_bytes_per_s):
        out["l2_bytes_per_clk_per_sm"] = f.l2_bytes_per_s / (f.sms * clock)
        out["l2_latency_clk"] = f.l2_latency_s * clock
    return out
