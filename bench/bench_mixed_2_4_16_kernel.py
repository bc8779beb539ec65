"""2/4/16-bit GEMV emulation benchmark (run: python bench/bench_mixed_2_4_16_kernel.py [--quick]).

What it measures (the 2/4 GEMV and its outlier SpMV):
1. speed of :func:`refsim.emulator.mixed_2_4_16_kernel.mixed_gemv` at K = N = 4096 (alpha = 1/4,
   0.2 % outliers), against ``np.dot`` in fp32 on the same shape, and of the plain-loop twin per row;
2. numerics on a real layer (MiniLM ``encoder.layer.0.intermediate.dense``, K = 384, N = 1536,
   quantized with H = X^T X of Gaussian inputs) over 20 random fp16 activations: how often the
   kernel's bits differ from the format's sequential-fp32 oracle (:func:`refsim.formats.
   mixed_2_4_16.gemv`) and from one rounding of the exact product, the largest ULP distance, and
   the error relative to the derived bound (tests/emulator/test_mixed_2_4_16_kernel.py).

Napkin math for (1): the emulation runs 16 vectorised fp16 fmas over (G, N) = (256, 4096) = 1 M
lanes (round-to-odd in float64, ~0.25 us per element, ~4 s), 8 fp32 lane steps, 5 tree levels.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from refsim.emulator import mixed_2_4_16_kernel as ek
from refsim.formats import mixed_2_4_16 as F
from refsim.quant import mixed_2_4_16 as Q
from refsim.testing import ulp_distance


def _random_packed(rng, k, n, alpha=0.25, ratio=0.002):
    """Legal packed fields drawn directly (quantizing 4096 x 4096 is not what is timed here)."""
    g = k // 16
    four = np.zeros(g, bool)
    four[rng.choice(g, int(np.floor(alpha * g + 0.5)), replace=False)] = True
    qmax = np.where(four, 15, 3)
    q = (rng.integers(0, 16, (k, n)) % (np.repeat(qmax, 16)[:, None] + 1)).astype(np.uint8)
    zero = (rng.integers(0, 16, (g, n)) % (qmax[:, None] + 1)).astype(np.uint8)
    code = (rng.integers(1, 8, (g, n)) * 2).astype(np.uint8)
    s2 = (rng.random((g, n // 16)) * 2e-3 + 1e-4).astype(np.float16)
    z2 = np.zeros((g, n // 16), np.uint8)
    two_rows = np.flatnonzero(np.repeat(~four, 16))
    nnz_row = int(ratio * k)
    rows = np.repeat(np.arange(n), nnz_row)
    cols = np.concatenate([np.sort(rng.choice(two_rows, nnz_row, replace=False)) for _ in range(n)])
    q[cols, rows] = zero[cols // 16, rows]
    vals = (rng.standard_normal(rows.size) * 0.1).astype(np.float16)
    row_ptr, col, val = F.csr_from_coo(rows, cols, vals, n)
    return F.pack(F.Mixed2416(q, zero, code, s2, z2, four, row_ptr, col, val))


def _bound(p, x, w):
    """The derived bound of tests/emulator/test_mixed_2_4_16_kernel.py::_error_bound (same formula):
    gamma_9(u16) per group sum + 17 fp16 underflow terms per group, gamma_R(u32) for the fp32 path
    (R = busiest lane's groups + 5 tree adds + nnz(row)), one final fp16 rounding."""
    u16, u32, tiny = 2.0**-11, 2.0**-24, 2.0**-25
    gamma = lambda m, u: m * u / (1 - m * u)                                   # noqa: E731
    A = np.abs(x.astype(np.float64)) @ np.abs(w)
    n = w.shape[1]
    O = np.zeros(n)
    for r in range(n):
        for e in range(int(p.row_ptr[r]), int(p.row_ptr[r + 1])):
            O[r] += abs(float(p.val[e]) * float(x[int(p.col[e])]))
    R = int((ek.lane_schedule(p.group_bits) >= 0).sum(axis=1).max()) + 5 + np.diff(p.row_ptr)
    e16 = gamma(9, u16) * A + 17 * tiny * (w.shape[0] // 16)
    e32 = gamma(R, u32) * (A + e16 + O)
    return e16 + e32 + u16 * (A + O + e16 + e32) + tiny


def speed(k=4096, n=4096):
    rng = np.random.default_rng(0)
    p = _random_packed(rng, k, n)
    x = rng.standard_normal(k).astype(np.float16)
    t0, c0 = time.perf_counter(), time.process_time()
    ek.mixed_gemv(p, x)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    W = ek.dequantized_weights(p).astype(np.float32)
    xf = x.astype(np.float32)
    t0 = time.perf_counter()
    for _ in range(10):
        xf @ W
    dot = (time.perf_counter() - t0) / 10
    print(f"mixed_gemv K={k} N={n} alpha=1/4 outliers {p.col.size}: {wall:.2f} s wall, {cpu:.2f} s CPU; "
          f"np.dot fp32 {dot * 1e3:.1f} ms -> {wall / dot:.0f}x")
    # the loop twin, 16 rows (N must be a multiple of the 2nd-order group of 16)
    sub = F.Packed2416(p.w_main[:16], p.w_side[:16], p.meta2[:16], p.meta4[:16], p.s2[:, :1], p.z2[:, :1],
                       p.group_bits, p.row_ptr[:17].copy(), p.col[:p.row_ptr[16]].copy(),
                       p.val[:p.row_ptr[16]].copy())
    t0 = time.perf_counter()
    ref = ek.mixed_gemv_reference(sub, x)
    per_row = (time.perf_counter() - t0) / 16
    assert np.array_equal(ref.view(np.uint16), ek.mixed_gemv(sub, x).view(np.uint16))
    print(f"mixed_gemv_reference (exact-rational fmas): {per_row:.2f} s per output row at K={k} (equal bits)")


def numerics(trials=20):
    from refsim.data import minilm

    W = minilm.weights()["encoder.layer.0.intermediate.dense.weight"].T.astype(np.float32)  # (K, N) = (384, 1536)
    k, n = W.shape
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4 * k, k))
    p = F.pack(Q.quantize(W, X.T @ X / k, alpha=0.25, outlier_ratio=0.002))
    m = F.unpack(p)
    diff_oracle = diff_exact = 0
    ulp_max = 0
    ratio_max = 0.0
    err_k, err_o = [], []
    for _ in range(trials):
        x = rng.standard_normal(k).astype(np.float16)
        y = ek.mixed_gemv(p, x)
        o = F.gemv(p, x)
        wk = ek.dequantized_weights(p).astype(np.float64)
        exact = x.astype(np.float64) @ wk
        for r in range(n):
            for e in range(int(p.row_ptr[r]), int(p.row_ptr[r + 1])):
                exact[r] += float(p.val[e]) * float(x[int(p.col[e])])
        rn = exact.astype(np.float16)
        diff_oracle += int((y.view(np.uint16) != o.view(np.uint16)).sum())
        diff_exact += int((y.view(np.uint16) != rn.view(np.uint16)).sum())
        ulp_max = max(ulp_max, int(ulp_distance(y, rn).max()))
        ratio_max = max(ratio_max, float((np.abs(y.astype(np.float64) - exact) / _bound(p, x, wk)).max()))
        err_k.append(np.abs(y.astype(np.float64) - exact).mean())
        err_o.append(np.abs(o.astype(np.float64) - exact).mean())
    total = trials * n
    print(f"MiniLM layer0 intermediate (K={k}, N={n}), {trials} activations, {p.col.size} outliers, "
          f"{float(F.average_bits(k, n, int(m.four.sum()), p.col.size)):.3f} bits/weight:")
    print(f"  kernel vs format oracle (sequential fp32): {diff_oracle}/{total} outputs differ")
    print(f"  kernel vs RN(exact): {diff_exact}/{total} differ, max {ulp_max} ULP (near-cancelling rows); "
          f"max |error| / derived bound = {ratio_max:.3f}")
    print(f"  mean |error| vs exact: kernel {np.mean(err_k):.3e}, format oracle {np.mean(err_o):.3e}")


def main(quick=False):
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    numerics(5 if quick else 20)
    speed(1024, 1024) if quick else speed()


if __name__ == "__main__":
    main("--quick" in sys.argv)
