"""Emulator benchmark and validation sweep.

What it measures, in one run:
  1. exact fp primitives: >= 10^6 random inputs per primitive (half random bit patterns, half
     adversarial cancellations / near-ties) plus every special-value triple, compared bit for bit
     with exact rational arithmetic (fractions.Fraction, refsim.arith.exact);
  2. tensor-core models on the hardware measurements (refsim/data/tensor_core_hw): mismatch
     counts of the chosen parameters, of wrong truncation widths and of a naive fp64 dot product;
  3. Marlin warp-level emulation at M=16, K=N=4096 (A100 partition, 108 SMs): wall time (min and
     median of 3) of the default path and of the NumPy reference path against the target of 2 s,
     and the ratio to np.matmul on the same shape;
  4. Any-Precision (M = 1, 8), Atom (M = 1, 16) and 2/4/16 (M = 1) emulators at N = K = 4096: default
     (fast) path vs the reference path, wall and CPU time, ratio fast / reference, bits equal.

Run:  python bench/bench_emulator.py [--n 1000000] [--skip-fp]
The fp sweep is pure Python (about 30-60 us per input per primitive): minutes for 10^6.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time

import numpy as np

from refsim.arith import fp
from refsim.emulator import marlin_kernel as mk
from refsim.arith import hw_samples as hw
from refsim.arith import tensor_core as tc
from refsim.formats import marlin

from _timing import repeat_timed  # bench/_timing.py (scripts run as python bench/NAME.py)

SAMPLES = hw.subset_path()


def _bits(rng, dtype, n):
    utype = np.uint16 if dtype == np.float16 else np.uint32
    return rng.integers(0, np.iinfo(utype).max, n, dtype=utype, endpoint=True).view(dtype)


def _near(rng, dtype, n):
    """Operands whose sums/products land near rounding boundaries: close exponents, cancellation."""
    e = rng.integers(-10, 10, n)
    a = (rng.standard_normal(n) * 2.0**e).astype(dtype)
    b = (rng.standard_normal(n) * 2.0**e).astype(dtype)
    with np.errstate(all="ignore"):
        c = (-(a.astype(np.float64) * b.astype(np.float64)) * (1 + rng.standard_normal(n) * 2.0**-20)).astype(dtype)
    return a, b, c


def _count_mismatch(got, want):
    g, w = got.copy(), want.copy()
    both_nan = np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
    width = g.dtype.itemsize
    ut = {2: np.uint16, 4: np.uint32}[width]
    return int(((g.view(ut) != w.view(ut)) & ~both_nan).sum())


def bench_fp(n: int) -> list[str]:
    rng = np.random.default_rng(2026)
    rows = []
    for dtype, name in ((np.float16, "fp16"), (np.float32, "fp32")):
        half = n // 2
        a = np.concatenate([_bits(rng, dtype, half), _near(rng, dtype, n - half)[0]])
        b = np.concatenate([_bits(rng, dtype, half), _near(rng, dtype, n - half)[1]])
        c = np.concatenate([_bits(rng, dtype, half), _near(rng, dtype, n - half)[2]])
        add = fp.f16_add if dtype == np.float16 else fp.f32_add
        mul = fp.f16_mul if dtype == np.float16 else fp.f32_mul
        fma = fp.f16_fma if dtype == np.float16 else fp.f32_fma
        for op, got, ref in (
            ("add", lambda: add(a, b), lambda: fp.add_reference(a, b)),
            ("mul", lambda: mul(a, b), lambda: fp.mul_reference(a, b)),
            ("fma (fused)", lambda: fma(a, b, c, fused=True), lambda: fp.fma_reference(a, b, c)),
        ):
            t0 = time.perf_counter()
            g = got()
            t1 = time.perf_counter()
            w = ref()
            t2 = time.perf_counter()
            rows.append(f"| {name} {op} | {n} | {_count_mismatch(g, w)} | {(t1 - t0) * 1e9 / n:.1f} ns | {(t2 - t1) * 1e6 / n:.1f} us |")
    # conversions: f32 -> f16, f64 -> bf16 (double-rounding prone)
    x32 = np.concatenate([_bits(rng, np.float32, n // 2), (rng.standard_normal(n - n // 2) * 2.0 ** rng.integers(-30, 17, n - n // 2)).astype(np.float32)])
    t0 = time.perf_counter(); g = fp.cvt_f32_to_f16(x32); t1 = time.perf_counter()
    w = fp.convert_reference(x32, "float16"); t2 = time.perf_counter()
    rows.append(f"| cvt f32->f16 | {n} | {_count_mismatch(g, w)} | {(t1 - t0) * 1e9 / n:.1f} ns | {(t2 - t1) * 1e6 / n:.1f} us |")
    # f64 values near bf16 midpoints: m + 2^-9 + tiny
    base = (rng.integers(128, 256, n) / 128.0 + 2.0**-8 * rng.choice([1, -1], n) * 0.5) * 2.0 ** rng.integers(-20, 20, n)
    x64 = base * (1 + rng.standard_normal(n) * 2.0**-40)
    t0 = time.perf_counter(); g = fp.cvt_f64_to_bf16(x64); t1 = time.perf_counter()
    # reference: exact rational rounding of the f64 value to bf16
    w = np.array([float(fp.exact.round_fraction(fp.exact.to_fraction(v), fp.exact.BF16, "rn")) for v in x64],
                 np.float32).astype(g.dtype)  # exact: representable in bf16
    t2 = time.perf_counter()
    naive = x64.astype(g.dtype)
    rows.append(f"| cvt f64->bf16 | {n} | {_count_mismatch(g.view(np.uint16).view(np.float16), w.view(np.uint16).view(np.float16))} "
                f"(ml_dtypes direct cast: {int((naive.view(np.uint16) != w.view(np.uint16)).sum())}) | "
                f"{(t1 - t0) * 1e9 / n:.1f} ns | {(t2 - t1) * 1e6 / n:.1f} us |")
    # every special-value triple
    specials = {np.float16: [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-24, -(2.0**-24), 2.0**-14, 65504.0, -65504.0, 1.0, -1.0, 1 + 2.0**-10],
                np.float32: [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-149, -(2.0**-149), 2.0**-126, float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max), 1.0, -1.0, 1 + 2.0**-23]}
    bad = 0
    total = 0
    for dtype, vals in specials.items():
        t = np.array(list(itertools.product(vals, repeat=3)), np.float64).astype(dtype)
        a, b, c = t[:, 0].copy(), t[:, 1].copy(), t[:, 2].copy()
        fma = fp.f16_fma if dtype == np.float16 else fp.f32_fma
        add = fp.f16_add if dtype == np.float16 else fp.f32_add
        mul = fp.f16_mul if dtype == np.float16 else fp.f32_mul
        bad += _count_mismatch(fma(a, b, c, fused=True), fp.fma_reference(a, b, c))
        bad += _count_mismatch(add(a, b), fp.add_reference(a, b)) + _count_mismatch(mul(a, b), fp.mul_reference(a, b))
        total += 3 * len(a)
    rows.append(f"| special-value triples (add, mul, fma; fp16 and fp32) | {total} | {bad} | | |")
    return ["| primitive | inputs | mismatches vs exact | vectorised per input | Fraction oracle per input |",
            "|---|---|---|---|---|"] + rows


def bench_tensor_core() -> list[str]:
    if not SAMPLES.exists():
        return [f"(hardware data not found at {SAMPLES}; skipped)"]
    data = hw.load(SAMPLES)
    rows = ["| GPU | model | fp32-out mismatches | fp16-out mismatches | naive fp64 dot + RN (fp32) |", "|---|---|---|---|---|"]
    for gpu, arch in hw.GPUS:
        a, b, c, d32, d16 = data[gpu]
        d32, d16 = d32.view(np.uint32), d16.view(np.uint16)
        naive = (c.astype(np.float64) + (a.astype(np.float64) * b.astype(np.float64)).sum(-1)).astype(np.float32)
        n_naive = int((naive.view(np.uint32) != d32).sum())
        base = tc.MODELS[arch]
        for F in sorted({base.frac_bits - 1, base.frac_bits, base.frac_bits + 1}):
            tc.MODELS[arch] = dataclasses.replace(base, frac_bits=F)
            try:
                m32 = int((tc.fdpa(arch, a, b, c, np.float32).view(np.uint32) != d32).sum())
                m16 = int((tc.fdpa(arch, a, b, c.astype(np.float16), np.float16).view(np.uint16) != d16).sum())
            finally:
                tc.MODELS[arch] = base
            tag = "(chosen)" if F == base.frac_bits else "(wrong F)"
            rows.append(f"| {gpu} | {arch} L={base.block} F={F} {tag} | {m32}/{len(c)} | {m16}/{len(c)} | {n_naive}/{len(c)} |")
    return rows


def bench_marlin(repeats: int = 3, numpy_path: bool = True) -> list[str]:
    """Marlin emulation M=16, K=N=4096: the default path (compiled when a compiler is present)
    and the NumPy path, min / median over ``repeats`` runs, against np.matmul in the same run."""
    from refsim.native import emulators as native

    rng = np.random.default_rng(0)
    m, k, n = 16, 4096, 4096
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    sc = (rng.random((k // 128, n)) * 0.02 + 0.001).astype(np.float16)
    B, s = marlin.pack(q, sc, 128)
    A = rng.standard_normal((m, k)).astype(np.float16)
    native.available()                                   # build outside the timed runs

    def timed(fn):
        """(min wall, median wall, min process CPU time, result): the CPU time is what a quiet core
        would take for this single-threaded work; the wall time includes being descheduled."""
        times, cpus, out = repeat_timed(fn, repeats)
        return min(times), float(np.median(times)), min(cpus), out

    t_min, t_med, t_cpu, C = timed(lambda: mk.marlin_gemm(A, B, s, arch="sm_80", sms=108))
    W32 = marlin.dequantize(B, s).astype(np.float32)
    A32 = A.astype(np.float32)
    t0 = time.perf_counter()
    for _ in range(5):
        A32 @ W32
    t_mm32 = (time.perf_counter() - t0) / 5
    rows = [
        f"path: {native.status()}",
        "",
        "| shape | path | emulator wall min / median | CPU min | np.matmul fp32 | ratio (min) | target |",
        "|---|---|---|---|---|---|---|",
        f"| M=16, K=N=4096, g128, sm_80, 108 SMs | default | {t_min:.2f} / {t_med:.2f} s | {t_cpu:.2f} s "
        f"| {t_mm32 * 1e3:.1f} ms | {t_min / t_mm32:.0f}x | <= 2 s: wall {'met' if t_min <= 2 else 'MISSED'}, "
        f"CPU {'met' if t_cpu <= 2 else 'MISSED'} |",
    ]
    if numpy_path:
        n_min, n_med, n_cpu, C_np = timed(lambda: mk._gemm(A, B, s, "sm_80", 108, 16, None, None, native=False))
        same = bool((C.view(np.uint16) == C_np.view(np.uint16)).all())
        rows.append(f"| (same) | NumPy reference path | {n_min:.2f} / {n_med:.2f} s | {n_cpu:.2f} s | "
                    f"| {n_min / t_mm32:.0f}x | bits equal to default: {same} |")
    return rows


def bench_gemv_emulators(repeats: int = 3) -> list[str]:
    """Any-Precision (M = 1 and 8, the kernel's largest M), Atom (M = 1 and 16) and 2/4/16 (a GEMV,
    M = 1) emulators at N = K = 4096: the default path against the readable reference path in the
    same run (Any-Precision, 2/4/16: the NumPy emulation, ``native=False``; Atom: the mma-slab form
    :func:`atom_group_gemm_slabs`), min wall / min CPU over ``repeats``, the ratio fast / reference
    and whether the bits are equal. No assertion: a measurement."""
    from refsim.emulator import anyprec_kernel as ek
    from refsim.emulator import atom_kernel as atk
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.native import emulators as native
    from refsim.formats import atom, bitplane

    native.available()                                   # build outside the timed runs
    rng = np.random.default_rng(1)
    n = k = 4096
    cases = []
    bits = 4
    q = bitplane.pack(rng.integers(0, 16, (n, k)).astype(np.uint8), bits)
    lut = (rng.standard_normal((n, 16)) * 0.05).astype(np.float16)
    for m in (1, 8):
        x = rng.standard_normal((m, k)).astype(np.float16)
        cases.append((f"Any-Precision GEMV M={m}, N=K=4096, 4-bit", "NumPy emulation",
                      lambda x=x: ek.anyprec_gemv(x, q, lut, bits),
                      lambda x=x: ek.anyprec_gemv(x, q, lut, bits, native=False)))
    keeper = 128
    wq = atom.AtomWeights(rng.integers(-8, 8, (k - keeper, n)).astype(np.int8),
                          (rng.random(((k - keeper) // 128, n)) * 0.1).astype(np.float16),
                          rng.integers(-128, 128, (keeper, n)).astype(np.int8),
                          (rng.random(n) * 0.01).astype(np.float16))
    for m in (1, 16):
        a = atom.AtomActivations(rng.integers(-8, 8, (m, k - keeper)).astype(np.int8),
                                 (rng.random((m, (k - keeper) // 128)) * 0.1).astype(np.float16),
                                 rng.integers(-128, 128, (m, keeper)).astype(np.int8),
                                 (rng.random(m) * 0.01).astype(np.float16))
        cases.append((f"Atom W4A4 M={m}, K=4096 (128 INT8), N=4096", "mma-slab form",
                      lambda a=a: atk.atom_group_gemm(a, wq), lambda a=a: atk.atom_group_gemm_slabs(a, wq)))
    from bench_mixed_2_4_16_kernel import _random_packed   # bench/ is on sys.path (run as a script)

    p = _random_packed(rng, k, n)
    xm = rng.standard_normal(k).astype(np.float16)
    cases.append(("2/4/16 GEMV K=N=4096, alpha 1/4, 0.2 % outliers", "NumPy emulation",
                  lambda: mx.mixed_gemv(p, xm), lambda: mx.mixed_gemv(p, xm, native=False)))
    rows = [f"path: {native.status()}", "",
            "| emulator | default wall / CPU (min) | reference | reference wall / CPU (min) | ratio CPU (wall) | bits equal |",
            "|---|---|---|---|---|---|"]
    for name, ref_name, fast, ref in cases:
        tf = repeat_timed(fast, repeats)
        tr = repeat_timed(ref, max(1, repeats - 1))
        same = bool(np.array_equal(tf.result.view(np.uint16), tr.result.view(np.uint16)))
        rows.append(f"| {name} | {min(tf.walls):.3f} / {min(tf.cpus):.3f} s | {ref_name} | "
                    f"{min(tr.walls):.3f} / {min(tr.cpus):.3f} s | {min(tf.cpus) / min(tr.cpus):.2f} "
                    f"({min(tf.walls) / min(tr.walls):.2f}) | {same} |")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000, help="random inputs per fp primitive")
    ap.add_argument("--skip-fp", action="store_true")
    ap.add_argument("--only-gemv", action="store_true", help="only section 4 (the GEMV/group-GEMM emulators)")
    args = ap.parse_args()
    if args.only_gemv:
        print("\n".join(bench_gemv_emulators()))
        return
    print("## tensor-core models on hardware data\n")
    print("\n".join(bench_tensor_core()))
    print("\n## Marlin warp-level emulation\n")
    print("\n".join(bench_marlin()))
    print("\n## Any-Precision, Atom and 2/4/16 emulators (fast path vs reference path)\n")
    print("\n".join(bench_gemv_emulators()))
    if not args.skip_fp:
        print(f"\n## fp primitives vs exact rationals ({args.n} random inputs each)\n")
        print("\n".join(bench_fp(args.n)))


if __name__ == "__main__":
    main()
