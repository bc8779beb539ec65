"""Benchmark: refsim's generated QIGen qGEMV kernels vs NumPy's float32 GEMV on the same matrix.

    python bench/bench_qigen.py [--repeat 30] [--quick] [--threads 1] [--search] [--accumulators A]
                                [--path auto|bitcast|prescaled|shift] [--no-prefetch] [--meta f16u8|f32]

For each shape (K x N; the paper's 4096x4096 and LLaMA-7B's 11008-wide projections, both
orientations) at 3 and 4 bits, group size 128, batch 1, ``--threads`` threads for both sides
(OpenBLAS is limited with OPENBLAS_NUM_THREADS before NumPy loads; the kernel uses OpenMP when
threads > 1):

* speedup over NumPy ``x @ W`` with ``W`` float32 ``(K, N)`` (the same matrix dequantized), both
  "cold": the timed loop cycles through enough copies of each matrix (>= 160 MiB in all) that
  the weights come from DRAM, as in LLM decoding where each layer is read once per token;
  "warm" (one copy, L3-resident when it fits) is printed beside it;
* the bandwidth yardstick is NumPy's own fp32 GEMV DRAM rate, ``4 K N`` bytes of ``W`` / its cold
  time, per shape and best over the run (not ``np.copyto``, which also writes and is not what a
  GEMV does); the kernel's rate is its packed weight bytes / its cold time, and the model's
  predicted time (refsim.qigen.model.predict_time) uses the yardstick as its bandwidth;
* ``--search``: QIGen-style empirical choice of the micro-tile (tu, unroll, and refsim's
  partial sums per column A) on 4096x4096, then per shape of the (mb, tb) block among the
  L1-feasible ones (:func:`block_search`); without it everything comes from the model;
* ``--path``: the kernel path (default "auto": bitcast when x allows it; see docs/qigen.md);
* ``read ms``: the kernel's packed words read once, cold, by one sequential pass (``np.max``),
  last in each round; ``k/read`` = kernel time / that, i.e. how far the kernel is from merely
  streaming its own bytes as a single stream (NumPy's GEMV reads several rows at once and gets
  more DRAM bandwidth than one stream does; see docs/qigen.md, "Speed").

Targets: >= 4x NumPy fp32 GEMV at 4-bit on every shape; >= 60% of the
bandwidth yardstick (was: of the copy bandwidth). Times are the minimum over ``--repeat``
round-robin runs (the machine is shared; the minimum is the least disturbed). The last lines
(``RATIO ...``) are one per shape and bit-width, for collecting several runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _threads_from_argv() -> int:
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


_THREADS = _threads_from_argv()
os.environ["OPENBLAS_NUM_THREADS"] = str(_THREADS)  # before NumPy loads OpenBLAS
os.environ["OMP_NUM_THREADS"] = str(_THREADS)

import numpy as np  # noqa: E402

from refsim.formats import gptq  # noqa: E402
from refsim.qigen import codegen, kernel, model, oracle  # noqa: E402
from refsim.native.machine import detect_isa, machine_info  # noqa: E402

COLD_BYTES = 160 * 2**20


def best_time(fn, repeat: int) -> float:
    return best_times([fn], repeat)[0]


def best_times(fns, repeat: int) -> list[float]:
    """Minimum time of each callable, measured round-robin so that all of them see the same
    background load (the machine is shared; the minimum is the least disturbed run)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [min(t) for t in times]


def cycling(fns):
    """One callable that runs the next of ``fns`` on every call (cold-cache timing)."""
    state = [0]

    def run():
        fns[state[0] % len(fns)]()
        state[0] += 1
    return run


def search(info, isa: str, repeat: int, prefetch: bool) -> dict:
    """QIGen's ``gen_module_search`` idea: time micro-tile widths, unrolls and refsim's partial
    sums per column (accumulators), 4096x4096 g128.

    Returns {bits: ((m_u, t_u registers), accumulators)} of the fastest variant."""
    k = n = 4096
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, k)).astype(np.float32)
    print("\nempirical search (warm, 4096x4096, group 128): ms per call")
    winners = {}
    for bits in (4, 3, 2):
        q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
        s = np.full((k // 128, n), 0.01, dtype=np.float32)
        z = np.full((k // 128, n), 2 ** (bits - 1), dtype=np.float32)
        p = model.plan(k, n, bits, info, group_size=128)
        mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=128, mb=p.mb,
                             tb=max(p.tb, 64))
        specs = [codegen.KernelSpec(bits, tu=tu, unroll=u, isa=isa, accumulators=a, prefetch=prefetch)
                 for tu in (16, 32, 64) for u in ((2,) if bits == 3 else (1, 2, 4))
                 for a in (1, 2, 4) if a * tu <= 64]
        times = best_times([lambda sp=sp: kernel.qgemv(x, mat, sp) for sp in specs], repeat)
        best = min(range(len(specs)), key=times.__getitem__)
        row = ", ".join(f"tu={sp.tu} u={sp.unroll} A={sp.accumulators}: {t * 1e3:.3f}"
                        for sp, t in zip(specs, times))
        print(f"  {bits}-bit: {row}\n    -> best {specs[best].name}; model chose tu={p.tu_cols} u={p.mu} "
              f"A={p.accumulators}")
        winners[bits] = ((specs[best].unroll, specs[best].tu // 8), specs[best].accumulators)
    return winners


def block_search(x, qweight, s, z, bits, gs, p, spec, info, repeat: int):
    """Time the L1-feasible (mb, tb) blocks (for each tb the largest feasible mb, tb <= 128)
    next to the MILP's choice, warm; returns the fastest (mb, tb) and a printable row.

    The MILP maximises L1 use and is indifferent to the block's shape; with small mb (K=11008
    has only mb in {128, 256} at g128) a wide panel makes each micro-tile read its words with a
    tb*4-byte stride, which the hardware prefetcher streams worse than tb = tu."""
    k, n = x.shape[1], qweight.shape[1]
    mbs, tbs = model.cache_candidates(k, n, spec.tu, 1, gs)
    cands = [(p.mb, p.tb)]
    for tb in tbs:
        ok = [mb for mb in mbs if model.l1_bits(mb, tb, bits, 1) <= info.gamma_bits]
        if tb <= 128 and ok and (max(ok), tb) not in cands:
            cands.append((max(ok), tb))
    mats = [kernel.prepare(qweight, s, z, bits=bits, group_size=gs, mb=mb, tb=tb) for mb, tb in cands]
    times = best_times([lambda m=m: kernel.qgemv(x, m, spec) for m in mats], max(5, repeat // 3))
    best = min(range(len(cands)), key=times.__getitem__)
    row = ", ".join(f"({mb},{tb}) {t * 1e3:.3f}" for (mb, tb), t in zip(cands, times))
    return cands[best], row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="only 4096x4096")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--accumulators", type=int, default=None, choices=(1, 2, 4),
                    help="partial sums per column for every kernel (default: the model's choice, "
                         "or the search's; 1 = the single-chain order of the first version)")
    ap.add_argument("--meta", default="f16u8", choices=codegen.METAS,
                    help="scale/zero operands: fp16 bits + uint8 (3 bytes per group and column, the "
                         "default: the benchmark's scales are fp16 like a GPTQ checkpoint's) or fp32 (8)")
    ap.add_argument("--no-prefetch", action="store_true",
                    help="AVX2 kernels without software prefetch of the next block (as before)")
    ap.add_argument("--path", default="auto", choices=kernel.PATHS,
                    help="kernel path (all give the same bits; auto = bitcast when x allows it)")
    ap.add_argument("--search", action="store_true",
                    help="time tu x unroll variants on 4096x4096 first (QIGen's empirical search) "
                         "and use the fastest per bit-width in the main table")
    args = ap.parse_args()

    info = machine_info()
    isa = detect_isa()
    print(f"machine: L1d {info.l1d_bytes // 1024} KiB, L2 {info.l2_bytes // 1024} KiB, isa {isa}, "
          f"clock {info.clock_hz / 1e9:.2f} GHz ({info.provenance['clock_hz']}); load {os.getloadavg()}")
    prefetch = isa == "avx2" and not args.no_prefetch
    winners = search(info, isa, args.repeat, prefetch) if args.search else {}
    shapes = [(4096, 4096)] if args.quick else [(4096, 4096), (4096, 11008), (11008, 4096)]
    gs = 128
    rng = np.random.default_rng(0)
    rows = []
    blocks = []
    paths = set()
    threads = args.threads
    for k, n in shapes:
        x = rng.standard_normal((1, k)).astype(np.float32)
        w32 = [rng.standard_normal((k, n)).astype(np.float32)
               for _ in range(max(1, -(-COLD_BYTES // (k * n * 4))))]
        np_cold = cycling([lambda w=w: x @ w for w in w32])
        for bits in (4, 3):
            q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
            # fp16 scales, as GPTQ checkpoints store them (exactly representable in fp32)
            s = (rng.random((k // gs, n)) * 0.01 + 0.001).astype(np.float16).astype(np.float32)
            z = np.full((k // gs, n), 2 ** (bits - 1), dtype=np.float32)
            micro, acc = winners.get(bits, (None, None))
            acc = args.accumulators if args.accumulators is not None else acc
            p = model.plan(k, n, bits, info, group_size=gs, threads=threads, micro=micro, accumulators=acc)
            qweight = gptq.pack_qweight(q, bits)
            spec = codegen.KernelSpec(bits, tu=p.tu_cols, unroll=p.mu, isa=isa,
                                      openmp=threads > 1, accumulators=p.accumulators, meta=args.meta,
                                      prefetch=prefetch)
            mb, tb = p.mb, p.tb
            if args.search and threads == 1:
                (mb, tb), brow = block_search(x, qweight, s, z, bits, gs, p, spec, info, args.repeat)
                blocks.append(f"  {k}x{n} {bits}-bit (warm ms): {brow} -> mb={mb}, tb={tb} (MILP: {p.mb}, {p.tb})")
            mat = kernel.prepare(qweight, s, z, bits=bits, group_size=gs, mb=mb, tb=tb)
            y, used = kernel.qgemv_with_path(x, mat, spec, args.path)
            paths.add(used)
            cols = slice(0, 64)  # spot-check exactness on the benchmarked data
            ref = oracle.qgemv_oracle(x, q[:, cols].copy(), s[:, cols].copy(), z[:, cols].copy(), None,
                                      bits, gs, unroll=spec.unroll, accumulators=spec.accumulators)
            assert np.array_equal(y[:, cols].view(np.uint32), ref.view(np.uint32)), "kernel != oracle"
            copies = [mat] + [kernel.prepare(qweight, s, z, bits=bits, group_size=gs, mb=mb, tb=tb)
                              for _ in range(max(1, -(-COLD_BYTES // mat.packed.nbytes)) - 1)]
            # last in the round: the kernel's own packed words read once, cold, by one sequential
            # SIMD pass (np.max); the DRAM time of its bytes for a single stream, for reference
            t_np, t_k, t_np_warm, t_warm, t_read = best_times([
                np_cold,
                cycling([lambda m=m: kernel.qgemv(x, m, spec, args.path) for m in copies]),
                lambda: x @ w32[0],
                lambda: kernel.qgemv(x, mat, spec, args.path),
                cycling([lambda m=m: m.packed.max() for m in copies[::-1]]),
            ], args.repeat)
            rows.append(dict(k=k, n=n, bits=bits, mb=mb, tb=tb, t_k=t_k, t_np=t_np, wbytes=mat.packed.nbytes,
                             t_warm=t_warm, t_np_warm=t_np_warm, t_read=t_read, spec=spec, p=p, path=used))
            del copies
    # the yardstick: NumPy fp32 GEMV's DRAM rate, 4 K N bytes of W / its cold time, best over the run
    bw = max(4 * r["k"] * r["n"] / r["t_np"] for r in rows)
    if blocks:
        print("\nblock search (L1-feasible (mb, tb), largest mb per tb):")
        print("\n".join(blocks))
    print(f"yardstick: NumPy fp32 GEMV DRAM rate (4 K N bytes / NumPy cold time), best over the run: "
          f"{bw / 1e9:.2f} GB/s; '% gemv' below is the kernel's packed-weight rate as a fraction of it")
    print(f"threads: {threads} (kernel and OpenBLAS); cold = weights streamed from DRAM; micro-tiles "
          f"from {'the empirical search' if winners else 'the register model'}; kernel path(s): "
          f"{', '.join(sorted(paths))}")
    print(f"{'K x N':>12} {'bits':>4} {'mb':>5} {'tb':>5} {'kernel ms':>9} {'model ms':>9} {'bound':>7} "
          f"{'numpy ms':>9} {'np GB/s':>7} {'k GB/s':>6} {'% gemv':>7} {'x numpy':>8} | {'warm ms':>8} "
          f"{'np warm':>8} {'read ms':>8} {'k/read':>6}  kernel")
    for r in rows:
        k, n, bits, spec = r["k"], r["n"], r["bits"], r["spec"]
        est = model.predict_time(k, n, bits, 1, r["p"].tu_cols, gs, bw, info.clock_hz,
                                 accumulators=spec.accumulators, compact_meta=spec.meta == "f16u8",
                                 path=r["path"])
        k_rate, np_rate = r["wbytes"] / r["t_k"], 4 * k * n / r["t_np"]
        r["speed"], r["frac"] = r["t_np"] / r["t_k"], k_rate / bw
        print(f"{k:>5} x {n:<5} {bits:>4} {r['mb']:>5} {r['tb']:>5} {r['t_k'] * 1e3:>9.3f} "
              f"{est.seconds * 1e3:>9.3f} {est.bound:>7} {r['t_np'] * 1e3:>9.3f} {np_rate / 1e9:>7.2f} "
              f"{k_rate / 1e9:>6.2f} {100 * r['frac']:>6.1f}% {r['speed']:>7.2f}x | {r['t_warm'] * 1e3:>8.3f} "
              f"{r['t_np_warm'] * 1e3:>8.3f} {r['t_read'] * 1e3:>8.3f} {r['t_k'] / r['t_read']:>6.2f}  {spec.name}")
    print()
    worst_frac = min(r["frac"] for r in rows)
    worst_4 = min(r["speed"] for r in rows if r["bits"] == 4)
    print(f"target >= 4x NumPy fp32 GEMV at 4-bit on every shape: worst {worst_4:.2f}x -> "
          f"{'MET' if worst_4 >= 4 else 'NOT MET'}")
    print(f"target >= 60% of the yardstick: worst {100 * worst_frac:.1f}% -> "
          f"{'MET' if worst_frac >= 0.6 else 'NOT MET'}")
    for r in rows:
        print(f"RATIO {r['k']}x{r['n']} {r['bits']}-bit {r['speed']:.3f} kernel_ms {r['t_k'] * 1e3:.3f} "
              f"numpy_ms {r['t_np'] * 1e3:.3f} read_ms {r['t_read'] * 1e3:.3f} load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
