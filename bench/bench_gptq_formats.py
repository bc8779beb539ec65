"""Benchmark: GPTQ/AWQ pack and unpack throughput against np.copy bandwidth, measured in one run.

Target: pack and unpack each move data at >= 25% of np.copy's bandwidth on the same data.
Bytes counted for a kernel = bytes of its input + bytes of its output (uint8 codes <-> int32 words);
np.copy of the uint8 code matrix counts 2 * K * N bytes the same way.

    python bench/bench_gptq_formats.py [--k 4096] [--n 4096]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from refsim.formats import awq, gptq


def best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    args = ap.parse_args()
    k, n = args.k, args.n
    rng = np.random.default_rng(0)
    rows = []
    for bits in gptq.BITS:
        q = rng.integers(0, 1 << bits, (k, n), dtype=np.uint8)
        packed = gptq.pack_qweight(q, bits)
        t_copy = best_of(lambda: np.copy(q))
        copy_bw = 2 * q.nbytes / t_copy
        t_pack = best_of(lambda: gptq.pack_qweight(q, bits))
        t_unpack = best_of(lambda: gptq.unpack_qweight(packed, bits, k))
        moved = q.nbytes + packed.nbytes
        rows.append((f"gptq {bits}-bit", moved / t_pack / copy_bw, moved / t_unpack / copy_bw, t_pack, t_unpack))
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    packed = awq.pack_columns(q)
    t_copy = best_of(lambda: np.copy(q))
    copy_bw = 2 * q.nbytes / t_copy
    moved = q.nbytes + packed.nbytes
    rows.append(("awq 4-bit", moved / best_of(lambda: awq.pack_columns(q)) / copy_bw,
                 moved / best_of(lambda: awq.unpack_columns(packed, n)) / copy_bw, 0.0, 0.0))
    print(f"np.copy bandwidth on {k}x{n} uint8: {copy_bw / 1e9:.2f} GB/s (bytes read + written)")
    print(f"{'format':<12} {'pack/copy':>10} {'unpack/copy':>12}   target >= 0.25")
    ok = True
    for name, rp, ru, tp, tu in rows:
        ok &= rp >= 0.25 and ru >= 0.25
        extra = f"   pack {tp * 1e3:.1f} ms, unpack {tu * 1e3:.1f} ms" if tp else ""
        print(f"{name:<12} {rp:>10.2f} {ru:>12.2f}{extra}")
    print("PASS" if ok else "BELOW TARGET")


if __name__ == "__main__":
    main()
