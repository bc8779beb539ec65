"""The one prepared GPU run for the Hopper side of the performance model (an H100 or H200).

    python bench/measure_hopper.py --out DIR            # everything, a few minutes on an H100
    python bench/measure_hopper.py --out DIR --quick    # fewer shapes and launches (~2 minutes)
    python bench/measure_hopper.py --out DIR --only issue,cublas

Needs CuPy (kernels from PTX through ``RawModule``, cuBLAS through ``cupy.matmul``, CUDA events) and,
for the ``calibrate`` and ``hopper`` parts, refsim's ``gpu`` extra (``cuda.core``). No network, no compiler: every
kernel is committed PTX the driver JIT-compiles (the official Marlin and Any-Precision PTX of
refsim/cuda/official/, the microbenchmarks bench/hopper/marlin_issue.ptx.gz and wgmma_rate.ptx.gz).

Before anything runs, refsim's predictions for every timed row are written (``predictions.csv``), so
the run answers the predictions made before it. Parts (``--only``):

    calibrate  ``refsim calibrate --measure --base h100 --out DIR/gpu_spec.json`` (the per-GPU constants)
    issue      bench/hopper/marlin_issue.ptx.gz: Marlin's dequant + mma.sync loop per tile, no memory traffic,
               one CTA per SM with 1, 2 (Marlin's) and 4 warps per SM sub-partition, m_blocks 1/2/4,
               modes mma only / dequant only / both / both + a barrier per tile / grouped: cycles per tile
               (clock64, slowest warp, median over SMs) -> ``issue.json``, the HMMA interval per SMSP and
               the SM clock under that load (clock64 cycles over %globaltimer nanoseconds)
    wgmma      bench/hopper/wgmma_rate.ptx.gz: wgmma.mma_async issue rate per SM, f16 -> f32 at N = 8..256 and
               e4m3 -> f32 at N = 64..256, 1 and 2 warpgroups per SM, both operands from shared memory, 4
               wgmmas per commit group (a 64-deep f16 / 128-deep e4m3 K tile) -> ``wgmma.json``: cycles per
               wgmma and FLOP per clock per SM beside the datasheet rate the model takes at every N
    cublas     ``cupy.matmul`` fp16 (cuBLAS, fp32 accumulation), Llama-2-7B layer shapes (those of the
               H100 tables, then the fused qkv and gate+up layers), M = 1..4096
    marlin     the official Marlin from its recorded PTX (the instantiations refsim/cuda/official holds:
               Marlin<256,4,16,4,4,8>, so M a multiple of 64 from 64, group 128), launched as the
               official host loop does (refsim.formats.stripes: the launches, 96 KiB shared, locks)
    anyprec    the official matmul_kbit_32 (all 50 instantiations), bits 3..8, M = 1, 4, 8, as main.cu
               dispatches (refsim.cuda.official_anyprec.launch_of)
    hopper     the two sm_90a kernels through refsim's gpu backend (``refsim.cuda.gpu.prepare``: cuda.core, the
               tensor maps encoded by the driver at the device buffers, cluster launches): refsim's W4A16 wgmma
               kernel (refsim/cuda/hopper_w4a16.cu, group 128) at every Llama-2-7B shape for M = 1..4096, and
               DeepGEMM's official FP8 GEMM (refsim/cuda/official/deepgemm_fp8_gemm.ptx.gz) where the committed
               PTX holds the instantiation DeepGEMM's heuristics pick (N = K = 4096, M = 128 on 132 SMs; the
               other rows are recorded with that reason, not timed)

Timing is the H100 tables' (refsim/data/timings/README.md): each launch (or the host loop's launches)
alone between two CUDA events; ``cold``: a 512 MiB buffer zeroed right before each timed launch (refsim
``cache="dirty"``); ``warm``: back to back, each after a GPU-side wait (``SPIN_PTX``); rows are median,
min and p90 of 30 (cold) / 60 (warm)
launches (10 / 20 with --quick). Output ``DIR/h100_hopper.csv`` has the columns of h100_*.csv (plus
``bits``), ``DIR/conditions.json`` the device, driver, clocks (``nvidia-smi`` before and after) and
versions. Nothing here is fitted: the rows join refsim/data/timings/ as a judged table.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Llama-2-7B's linear layers (N, K) as the H100 tables have them (q/k/v/o, gate/up, down), then the fused
# qkv and gate+up layers (N = 12288, 22016: more CTAs than one round, where the held-out rows of the
# larger models sit)
LLAMA2_7B = ((4096, 4096), (11008, 4096), (4096, 11008), (12288, 4096), (22016, 4096))
CUBLAS_M = (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MARLIN_M = (64, 128, 256, 512, 1024)
ANYPREC_M = (1, 4, 8)
HOPPER_M = (1, 16, 64, 128, 256, 512, 1024, 4096)
ANYPREC_BITS = (3, 4, 5, 6, 7, 8)
ISSUE_MODES = {1: "mma", 2: "dequant", 3: "dequant+mma", 7: "dequant+mma+barrier", 15: "grouped+barrier"}
ISSUE_M_BLOCKS = (1, 2, 4)
ISSUE_WARPS_PER_SMSP = (1, 2, 4)
ISSUE_TILES = 4096
WGMMA_KINDS = {"f16": (16, (8, 16, 32, 64, 128, 256)), "e4m3": (32, (64, 128, 256))}    # kind -> (K, N values)
WGMMA_WARPGROUPS = (1, 2)
WGMMA_GROUP = 4                  # wgmmas per commit group in wgmma_rate.cu
WGMMA_ITERS = 4096
FLUSH_BYTES = 512 << 20
MARLIN_SHARED = 96 * 1024
COLUMNS = ("gpu", "kernel", "m", "n", "k", "bits", "group_size", "cache", "median_us", "min_us", "p90_us")


def _table_kernels() -> dict:
    """refsim's kernel names -> the H100 tables' (the inverse of refsim.gpu_model.measured's map), so the
    output joins refsim/data/timings/ as it is."""
    from refsim.gpu_model.measured import _KERNELS
    return {ours: theirs for theirs, ours in _KERNELS.items()}


def _stats(times_us: list) -> dict:
    s = sorted(times_us)
    return {"median_us": round(statistics.median(s), 3), "min_us": round(s[0], 3),
            "p90_us": round(s[int(0.9 * (len(s) - 1))], 3)}


def _nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,"
                               "power.limit,ecc.mode.current,temperature.gpu,driver_version", "--format=csv"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return f"nvidia-smi failed: {err}"


# a GPU-side wait (the role torch.cuda._sleep played for the H100 tables): the GPU is busy while the host
# enqueues the timed launch, so host launch latency stays out of the warm figures
SPIN_PTX = """.version 7.0
.target sm_80
.address_size 64

.visible .entry spin(.param .u64 cycles)
{
    .reg .u64 %rd<4>;
    .reg .pred %p;
    ld.param.u64 %rd1, [cycles];
    mov.u64 %rd2, %clock64;
$L_spin:
    mov.u64 %rd3, %clock64;
    sub.u64 %rd3, %rd3, %rd2;
    setp.lt.u64 %p, %rd3, %rd1;
    @%p bra $L_spin;
    ret;
}
"""
SPIN_CYCLES = 200_000        # ~0.1 ms at 2 GHz


class Timer:
    """CUDA-event timing of one callable, cold (the flush buffer zeroed first) or warm (a GPU-side
    wait first); either way the GPU is busy while the host enqueues the timed launch."""

    def __init__(self, cp, reps_cold: int, reps_warm: int):
        self.cp = cp
        self.flush = cp.empty(FLUSH_BYTES, dtype=cp.uint8)
        self.reps = {"cold": reps_cold, "warm": reps_warm}
        self.spin = cp.RawModule(code=SPIN_PTX).get_function("spin")

    def time(self, fn, cache: str) -> dict:
        cp = self.cp
        fn()                                    # load / JIT / cuBLAS heuristics outside the timing
        cp.cuda.Device().synchronize()
        out = []
        for _ in range(self.reps[cache]):
            if cache == "cold":
                self.flush.fill(0)
            else:
                self.spin((1,), (1,), (np.uint64(SPIN_CYCLES),))
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            out.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)     # ms -> us
        return _stats(out)


def plan_rows(parts: set, quick: bool) -> list[dict]:
    """Every row the run will time (without its time), in order."""
    rows = []
    shapes = LLAMA2_7B[:2] if quick else LLAMA2_7B
    if "cublas" in parts:
        for n, k in shapes:
            for m in (CUBLAS_M[::2] if quick else CUBLAS_M):
                rows += [dict(kernel="cublas-fp16", m=m, n=n, k=k, bits=16, group_size=None, cache=c)
                         for c in ("cold", "warm")]
    if "marlin" in parts:
        for n, k in shapes:
            for m in (MARLIN_M[:3] if quick else MARLIN_M):
                rows += [dict(kernel="marlin", m=m, n=n, k=k, bits=4, group_size=128, cache=c)
                         for c in ("cold", "warm")]
    if "anyprec" in parts:
        for n, k in shapes:
            for bits in ANYPREC_BITS:
                for m in ANYPREC_M:
                    rows += [dict(kernel="anyprec", m=m, n=n, k=k, bits=bits, group_size=None, cache=c)
                             for c in ("cold", "warm")]
    if "hopper" in parts:
        for n, k in shapes:
            for m in (HOPPER_M[::2] if quick else HOPPER_M):
                rows += [dict(kernel="hopper-w4a16", m=m, n=n, k=k, bits=4, group_size=128, cache=c)
                         for c in ("cold", "warm")]
        for m in (HOPPER_M[::2] if quick else HOPPER_M):
            rows += [dict(kernel="deepgemm-fp8", m=m, n=4096, k=4096, bits=8, group_size=None, cache=c)
                     for c in ("cold", "warm")]
    return rows


def predictions(rows: list[dict], gpu: str) -> list[dict]:
    """refsim's prediction for each row under the tables' conditions (CUDA events; cold = dirty L2),
    made before anything runs."""
    from refsim.errors import RefsimError
    from refsim.gpu_model.kernels import predict
    from refsim.gpu_model.measured import TABLES
    from refsim.gpu_model.trust import trust

    conditions = dict(TABLES["h100_marlin_cublas.csv"][1])      # 1980 MHz, ECC on, CUDA events
    out = []
    for r in rows:
        kw = dict(conditions, cache="dirty" if r["cache"] == "cold" else "warm")
        try:
            bd = predict(gpu, r["kernel"], r["m"], r["n"], r["k"], r["bits"], r["group_size"], **kw)
            t = trust(gpu, r["kernel"], r["m"], r["n"], r["k"], r["bits"], **kw)
            out.append(dict(r, predicted_us=round(bd.latency_us, 3), bottleneck=bd.bottleneck,
                            trust=t.status + (" far-off" if t.far_off else "")
                            + (" known-deviation" if t.deviations else "")))
        except RefsimError as err:               # a refusal is a prediction too
            out.append(dict(r, predicted_us="", bottleneck=f"refused: {err}", trust="refused"))
    return out


def issue_ptx() -> str:
    """The committed PTX of bench/hopper/marlin_issue.cu (gzip -9 -n of nvcc's output)."""
    import gzip
    return gzip.decompress((ROOT / "bench" / "hopper" / "marlin_issue.ptx.gz").read_bytes()).decode()


def issue_words() -> np.ndarray:
    """The 256 int32 words marlin_issue reads (as packed 4-bit B and as fp16 A fragments): random
    nibbles with every 16-bit half a finite fp16 below 1 (the tensor cores see no NaN or inf)."""
    return (np.random.default_rng(0).integers(0, 2**31, 256, dtype=np.int64) & 0x3BFF3BFF).astype(np.int32)


def run_issue(cp, quick: bool) -> dict:
    """The Marlin issue microbenchmark: cycles per tile per (m_blocks, mode, warps per SMSP)."""
    ptx = issue_ptx()
    mod = cp.RawModule(code=ptx)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    words = cp.asarray(issue_words())
    tiles = ISSUE_TILES // (4 if quick else 1)
    out = []
    for mb in ISSUE_M_BLOCKS:
        for mode, what in ISSUE_MODES.items():
            fn = mod.get_function(f"marlin_issue_m{mb}_{mode}")
            for wps in ISSUE_WARPS_PER_SMSP:
                threads = 32 * 4 * wps
                cycles = cp.zeros(sms, dtype=cp.uint64)
                ns = cp.zeros(sms, dtype=cp.uint64)
                sink = cp.zeros(sms * threads, dtype=cp.float32)
                fn((sms,), (threads,), (words, cycles, ns, sink, np.int32(tiles)))
                cp.cuda.Device().synchronize()
                per_tile = cp.asnumpy(cycles).astype(np.float64) / tiles
                clock_mhz = cp.asnumpy(cycles).astype(np.float64) / np.maximum(cp.asnumpy(ns), 1) * 1e3
                rec = {"m_blocks": mb, "mode": mode, "what": what, "warps_per_smsp": wps, "tiles": tiles,
                       "cycles_per_tile_median": float(np.median(per_tile)),
                       "cycles_per_tile_min": float(per_tile.min()),
                       "cycles_per_tile_max": float(per_tile.max()),
                       "sm_clock_mhz_median": float(np.median(clock_mhz))}    # clock64 / %globaltimer
                if mode & 1:
                    # HMMA.16816 per SMSP per tile: 2 k16 steps x 8 x m_blocks per warp, wps warps
                    rec["hmma_per_smsp_per_tile"] = 16 * mb * wps
                    rec["cycles_per_hmma_per_smsp"] = rec["cycles_per_tile_median"] / (16 * mb * wps)
                out.append(rec)
    return {"sms": sms, "results": out}


def wgmma_ptx() -> str:
    """The committed PTX of bench/hopper/wgmma_rate.cu (gzip -9 -n of nvcc's output)."""
    import gzip
    return gzip.decompress((ROOT / "bench" / "hopper" / "wgmma_rate.ptx.gz").read_bytes()).decode()


def wgmma_operands(kind: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(init words, A, B^T) of wgmma_rate_<kind>_n<n>: A (64, K) and B^T (n, K) of small integers (0..2, exact
    in f16 and e4m3, and every sum exact in f32), init their bytes as uint32 words (A's 2,048, then B^T's)."""
    import ml_dtypes

    k = WGMMA_KINDS[kind][0]
    dtype = np.float16 if kind == "f16" else ml_dtypes.float8_e4m3fn
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, (64, k)).astype(dtype), rng.integers(0, 3, (n, k)).astype(dtype)
    init = np.concatenate([a.view(np.uint8).reshape(-1), b.view(np.uint8).reshape(-1)]).view(np.uint32).copy()
    return init, a, b


def run_wgmma(cp, gpu: str, quick: bool) -> dict:
    """The wgmma issue-rate microbenchmark: per (kind, N, warpgroups per SM), cycles per wgmma and FLOP per clock
    per SM (median over SMs), beside refsim's tensor rate for the GPU (the datasheet peak it takes at every N)."""
    from refsim.gpu_model.specs import get_gpu

    spec = get_gpu(gpu)
    mod = cp.RawModule(code=wgmma_ptx())
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    iters = WGMMA_ITERS // (4 if quick else 1)
    out = []
    for kind, (k, ns_) in WGMMA_KINDS.items():
        model = spec.tc_fp16_f32acc_flop_per_clk_per_sm * (2 if kind == "e4m3" else 1)   # FP8 at 2x (datasheet)
        for n in ns_:
            fn = mod.get_function(f"wgmma_rate_{kind}_n{n}")
            init = cp.asarray(wgmma_operands(kind, n)[0])
            for wg in WGMMA_WARPGROUPS:
                cycles = cp.zeros(sms, dtype=cp.uint64)
                ns = cp.zeros(sms, dtype=cp.uint64)
                sink = cp.zeros(sms * 128 * wg, dtype=cp.float32)
                fn((sms,), (128 * wg,), (init, cycles, ns, sink, np.int32(iters)))
                cp.cuda.Device().synchronize()
                c = cp.asnumpy(cycles).astype(np.float64)
                per_wgmma = c / (iters * WGMMA_GROUP)           # per warpgroup; wg of them run at once
                flop = wg * 2 * 64 * n * k / per_wgmma
                out.append({"kind": kind, "n": n, "k": k, "warpgroups_per_sm": wg, "iters": iters,
                            "cycles_per_wgmma_median": float(np.median(per_wgmma)),
                            "flop_per_clk_per_sm_median": float(np.median(flop)),
                            "flop_per_clk_per_sm_min": float(flop.min()),
                            "model_flop_per_clk_per_sm": float(model),
                            "sm_clock_mhz_median": float(np.median(c / np.maximum(cp.asnumpy(ns), 1) * 1e3))})
    return {"sms": sms, "gpu": gpu, "results": out}


def _marlin_launches(m: int, n: int, k: int, sms: int):
    from refsim.formats import stripes
    from refsim.gpu_model.kernels.marlin import MAX_PAR

    plan = stripes.stripes(m, n, k, sms, 128, max_par=MAX_PAR)
    return plan.config, plan.launches


def run_rows(cp, rows: list[dict], timer: Timer, gpu_name: str) -> list[dict]:
    from refsim.cuda import official, official_anyprec

    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    marlin_mod = anyprec_mod = None
    rng = np.random.default_rng(0)
    out = []
    for r in rows:
        m, n, k = r["m"], r["n"], r["k"]
        if r["kernel"] == "cublas-fp16":
            a = cp.asarray(rng.standard_normal((m, k)).astype(np.float16))
            w = cp.asarray(rng.standard_normal((n, k)).astype(np.float16))
            fn = lambda a=a, w=w: cp.matmul(a, w.T)                                  # noqa: E731
        elif r["kernel"] == "marlin":
            if marlin_mod is None:
                marlin_mod = cp.RawModule(code=official.load("off_marlin_m80n256k256_g128_sms2").ptx)
            cfg, launches = _marlin_launches(m, n, k, sms)
            a = cp.asarray(rng.standard_normal((m, k)).astype(np.float16))
            b = cp.asarray(rng.integers(-2**31, 2**31, (k // 16, 2 * n), dtype=np.int64).astype(np.int32))
            s = cp.asarray((rng.random((k // 128, n)) * 0.01).astype(np.float16))
            c = cp.zeros((m, n), dtype=cp.float16)
            locks = cp.zeros(n // 128 * 16, dtype=cp.int32)
            calls = []
            for ln in launches:
                fn_k = marlin_mod.get_function(official._marlin_entry(ln.thread_m_blocks, cfg.thread_n_blocks,
                                                                      cfg.thread_k_blocks, cfg.group_blocks or -1))
                fn_k.max_dynamic_shared_size_bytes = MARLIN_SHARED
                calls.append((fn_k, a[ln.row_start:ln.row_start + ln.prob_m], c[ln.row_start:ln.row_start + ln.prob_m],
                              np.int32(ln.prob_m)))

            def fn(calls=calls, b=b, s=s, locks=locks):
                for fk, aa, cc, pm in calls:
                    fk((sms,), (256,), (aa, b, cc, s, pm, np.int32(n), np.int32(k), locks), shared_mem=MARLIN_SHARED)
        else:
            if anyprec_mod is None:
                anyprec_mod = cp.RawModule(code=official_anyprec.ptx_text())
            la = official_anyprec.launch_of(m, n, k, r["bits"])
            x = cp.asarray(rng.standard_normal((m, k)).astype(np.float16))
            q = cp.asarray(rng.integers(0, 2**32, (r["bits"], n, k // 32), dtype=np.uint64).astype(np.uint32))
            lut = cp.asarray(rng.standard_normal((n, 2 ** r["bits"])).astype(np.float16))
            o = cp.zeros((m, n), dtype=cp.float16)
            fk = anyprec_mod.get_function(la.kernel)
            grid = la.grid if isinstance(la.grid, tuple) else (la.grid,)
            fn = lambda fk=fk, grid=grid, la=la, x=x, q=q, lut=lut, o=o: fk(                  # noqa: E731
                grid, la.block, (x, q, np.uint32(m), np.uint32(n), np.uint32(k), lut, o))
        row = dict(r, gpu=gpu_name, kernel=_table_kernels()[r["kernel"]])
        try:
            out.append(dict(row, **timer.time(fn, r["cache"])))
        except Exception as err:                 # noqa: BLE001 - record and go on
            out.append(dict(row, median_us="", min_us="", p90_us="", error=str(err)))
        print(f"{r['kernel']:12s} m={m:5d} {n}x{k} bits={r['bits']} {r['cache']}: {out[-1].get('median_us')} us",
              flush=True)
    return out


def hopper_launches(kernel: str, m: int, n: int, k: int, sms: int, rng) -> tuple[str, list]:
    """(PTX text, [(Launch, args)]) of one row of the ``hopper`` part for refsim's gpu backend, inputs drawn
    from ``rng`` (random weight words and fp16 / e4m3 activations: the kernels' time does not depend on the
    values). DeepGEMM raises FormatRuleError where the committed PTX lacks the instantiation its heuristics
    pick for (M, N, K, sms)."""
    if kernel == "hopper-w4a16":
        from refsim.cuda import build
        from refsim.cuda import hopper_w4a16 as hw

        x = rng.standard_normal((m, k)).astype(np.float16)
        wp = rng.integers(0, 2**32, (n // 64 * (k // 16), 128), dtype=np.uint64).astype(np.uint32)
        scales = (rng.random((k // 128, n)) * 0.01).astype(np.float16)
        ln, args, _ = hw.plan(x, wp, scales, backend="gpu")
        return build.ptx(hw.SOURCE, hw.PTX_ARCHS[0]), [(ln, args)]
    import ml_dtypes

    from refsim.cuda import official_deepgemm as od

    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    sfa = (rng.random((m, k // 128)) + 0.5).astype(np.float32)
    sfb = (rng.random((-(-n // 128), k // 128)) + 0.5).astype(np.float32)
    ln, args, _ = od.launch_args(a, sfa, b, sfb, num_sms=sms)
    return od.ptx_text(), [(ln, args)]


def run_hopper_rows(cp, rows: list[dict], timer: Timer, gpu_name: str) -> list[dict]:
    """Time the ``hopper`` rows: each row's launches made resident once (``refsim.cuda.gpu.prepare``), then
    timed by ``timer`` on that call's stream (CuPy's flush, wait kernel and events run on it too)."""
    from refsim.cuda import gpu

    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rng = np.random.default_rng(0)
    out = []
    for r in rows:
        row = dict(r, gpu=gpu_name, kernel=_table_kernels()[r["kernel"]])
        try:
            ptx, launches = hopper_launches(r["kernel"], r["m"], r["n"], r["k"], sms, rng)
            resident = gpu.prepare(ptx, launches)
            try:
                with cp.cuda.ExternalStream(int(resident.stream.handle)):
                    out.append(dict(row, **timer.time(lambda: resident.launch(sync=False), r["cache"])))
            finally:
                resident.close()
        except Exception as err:                 # noqa: BLE001 - record and go on
            out.append(dict(row, median_us="", min_us="", p90_us="", error=str(err)[:300]))
        print(f"{r['kernel']:12s} m={r['m']:5d} {r['n']}x{r['k']} {r['cache']}: {out[-1].get('median_us')} us",
              flush=True)
    return out


def _write_csv(path: Path, rows: list[dict], columns) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in columns})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="calibrate,issue,wgmma,cublas,marlin,anyprec,hopper")
    ap.add_argument("--gpu", default="h100-sxm", help="refsim's name of the GPU for the predictions")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    rows = plan_rows(parts, args.quick)
    pred = predictions(rows, args.gpu)
    _write_csv(args.out / "predictions.csv", pred, (*COLUMNS[1:8], "predicted_us", "bottleneck", "trust"))
    cond = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "nvidia_smi_before": _nvidia_smi(),
            "refsim_gpu": args.gpu, "quick": args.quick, "parts": sorted(parts)}
    if "calibrate" in parts:
        r = subprocess.run([sys.executable, "-m", "refsim", "calibrate", "--measure", "--base", "h100",
                            "--out", str(args.out / "gpu_spec.json")], capture_output=True, text=True, cwd=ROOT)
        cond["calibrate"] = {"rc": r.returncode, "stdout": r.stdout[-4000:], "stderr": r.stderr[-4000:]}
    try:
        import cupy as cp
    except ImportError as err:
        cond["error"] = f"CuPy is needed for the timed parts: {err}"
        (args.out / "conditions.json").write_text(json.dumps(cond, indent=1))
        print(cond["error"], file=sys.stderr)
        return 1
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    cond["device"] = {"name": props["name"].decode(), "sms": dev.attributes["MultiProcessorCount"],
                      "compute_capability": dev.compute_capability, "l2_bytes": props["l2CacheSize"],
                      "driver": cp.cuda.runtime.driverGetVersion(), "runtime": cp.cuda.runtime.runtimeGetVersion(),
                      "cupy": cp.__version__}
    if "issue" in parts:
        issue = run_issue(cp, args.quick)
        (args.out / "issue.json").write_text(json.dumps(issue, indent=1))
        for rec in issue["results"]:
            print(f"issue m_blocks={rec['m_blocks']} {rec['what']:22s} warps/SMSP={rec['warps_per_smsp']}: "
                  f"{rec['cycles_per_tile_median']:.0f} cycles/tile at {rec['sm_clock_mhz_median']:.0f} MHz"
                  + (f", {rec['cycles_per_hmma_per_smsp']:.2f} cycles/HMMA/SMSP"
                     if "cycles_per_hmma_per_smsp" in rec else ""),
                  flush=True)
    if "wgmma" in parts:
        wg = run_wgmma(cp, args.gpu, args.quick)
        (args.out / "wgmma.json").write_text(json.dumps(wg, indent=1))
        for rec in wg["results"]:
            print(f"wgmma {rec['kind']:5s} N={rec['n']:3d} warpgroups/SM={rec['warpgroups_per_sm']}: "
                  f"{rec['cycles_per_wgmma_median']:.1f} cycles/wgmma, {rec['flop_per_clk_per_sm_median']:.0f} "
                  f"FLOP/clk/SM (model {rec['model_flop_per_clk_per_sm']:.0f}) at {rec['sm_clock_mhz_median']:.0f} MHz",
                  flush=True)
    if rows:
        reps = (10, 20) if args.quick else (30, 60)
        timer = Timer(cp, *reps)
        hopper = [r for r in rows if r["kernel"] in ("hopper-w4a16", "deepgemm-fp8")]
        measured = run_rows(cp, [r for r in rows if r not in hopper], timer, args.gpu)
        if hopper:
            try:
                import cuda.core
                cond["cuda_core"] = cuda.core.__version__
            except ImportError as err:
                cond["cuda_core"] = f"missing: {err}"
            measured += run_hopper_rows(cp, hopper, timer, args.gpu)
        _write_csv(args.out / "h100_hopper.csv", measured, COLUMNS)
        errors = [r for r in measured if r.get("error")]
        cond["row_errors"] = [{k: r[k] for k in ("kernel", "m", "n", "k", "bits", "cache", "error")}
                              for r in errors[:20]]
    cond["nvidia_smi_after"] = _nvidia_smi()
    (args.out / "conditions.json").write_text(json.dumps(cond, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
