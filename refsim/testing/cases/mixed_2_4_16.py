"""2/4/16-bit GEMV cases (dense 2/4-bit groups and the fused outlier SpMV; refsim's documented
kernel design, no official code): ``kernel(x f16 (K,), w_main, w_side, meta2, meta4, s2, z2,
group_bits, row_ptr, col, val) -> y f16 (N,)`` (the fields of ``Packed2416``).

Legality: ``refsim.formats.mixed_2_4_16.check_kn`` (K % 16 for the groups, N % 16 for the
second-order groups, K <= 2^16 for the CSR columns) and ``check_alpha_ratio`` (outlier ratio
<= 0.5 %). Regimes: outliers or none; lanes owning two or more 128-bit units (K = 2048) or at most
one; 2-bit only, 4-bit only, mixed. One warp per output channel::

    lane t: units t, t+32, ...  -> fp16 hfma2 chains per group of 16 -> fp32 lane sum
    fp32 shfl_down tree -> lane 0 adds the row's outliers in stored order -> y[n] = fp16(acc)

The cases are quantized with ``refsim.quant.mixed_2_4_16.quantize_hinv`` on diag(H^-1) of a damped low-rank
calibration Hessian computed by Woodbury (:func:`lowrank_hinv_diag`), so K = 11008 needs no 1 GB
Hessian and no K^3 Cholesky.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from refsim.emulator import mixed_2_4_16_kernel as mx
from refsim.formats import mixed_2_4_16 as mixed
from refsim.quant import mixed_2_4_16 as mixed_quant
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, keep_columns, values


def lowrank_hinv_diag(X: np.ndarray, percdamp: float = 0.01) -> np.ndarray:
    """diag(H_d^-1) float64 (K,) for H = X^T X / r + I (X float64 (r, K), r calibration rows)
    damped as the quantizer damps it (+ percdamp · mean diag H), without forming the (K, K) H:
    H_d = c I + U U^T with U = X^T / sqrt(r), c = 1 + damp, and by Woodbury
    H_d^-1 = (I - U (c I_r + U^T U)^-1 U^T) / c, so only an (r, r) system is solved (O(K r^2)
    instead of the K^3 Cholesky; equal to ``mixed_quant.inverse_hessian_diag(H)`` up to rounding, tested)."""
    r = X.shape[0]
    U = X.T / np.sqrt(r)                                               # (K, r)
    c = 1.0 + percdamp * (1.0 + float(np.mean(np.einsum("kr,kr->k", U, U))))
    V = np.linalg.solve(c * np.eye(r) + U.T @ U, U.T)                  # (r, K)
    return (1.0 - np.einsum("kr,rk->k", U, V)) / c


class Mixed2416Cases(Format):
    name = "mixed_2_4_16"
    signature = ("kernel(x f16 (K,), w_main u32 (N,U,4), w_side u32 (N,n4), meta2 u16 (N,T), meta4 u8 (N,n4), "
                 "s2 f16 (G,N/16), z2 u16 (G,N/16), group_bits u8 (G,), row_ptr i32 (N+1,), col u16 (nnz,), "
                 "val f16 (nnz,)) -> y f16 (N,)")
    inputs = ("x",) + tuple(f.name for f in dataclasses.fields(mixed.Packed2416))
    fields = {"k": (16, 128, 192, 640, 1024, 2048, 4096, 11008), "n": (16, 32, 64, 128, 4096, 11008),
              "alpha": (0.0, 0.25, 1.0), "outlier_ratio": (0.0, 0.005), "kind": DATA_KINDS, "seed": None}
    shape_fields = ("k", "n", "alpha", "outlier_ratio")
    default_max_size = 1 << 18
    pinned_pool = tuple({"k": k, "n": n, "alpha": a, "outlier_ratio": o} for k, n, a, o in
                        [(640, 32, 0.25, 0.005), (2048, 16, 0.25, 0.005), (128, 16, 0.0, 0.0), (192, 16, 1.0, 0.005),
                         (1024, 64, 0.25, 0.0), (16, 16, 0.0, 0.0), (4096, 16, 0.0, 0.005)])
    hints = (("outliers in the row", 0,
              "the outlier SpMV epilogue (rows without outliers match): the order or precision in which the "
              "outliers are added to the dense sum"),)

    def legal(self, case):
        mixed.check_kn(case["k"], case["n"])
        mixed_quant.check_alpha_ratio(case["alpha"], case["outlier_ratio"])

    def cost(self, case):
        return case["k"] * case["n"]

    def regimes(self, case, sms):
        g = case["k"] // 16
        n4 = int(round(case["alpha"] * g))
        units = n4 + max(0, -(-(g - n4 - 3 * n4) // 4))
        bits = np.array([4] * n4 + [2] * (g - n4), np.uint8)             # the counts alpha fixes, in some order
        rows = np.full(case["n"], 1 if case["outlier_ratio"] > 0 else 0)
        return {"outliers" if case["outlier_ratio"] > 0 else "no outliers",
                "lanes owning two or more units" if units > 32 else "at most one unit per lane",
                {0.0: "2-bit only", 1.0: "4-bit only"}.get(case["alpha"], "mixed 2- and 4-bit groups")} | {
            f"plan branch {b}" for b in mx.plan_branches(bits, case["n"], rows)}

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        k, n = case["k"], case["n"]
        W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
        X = rng.standard_normal((64, k))                                   # low-rank calibration, damped below
        p = mixed.pack(mixed_quant.quantize_hinv(W, lowrank_hinv_diag(X), alpha=case["alpha"],
                                           outlier_ratio=case["outlier_ratio"]))
        x = values(rng, case["kind"], (k,)).astype(np.float16)
        return (x,) + tuple(getattr(p, f.name) for f in dataclasses.fields(p))

    def emulate(self, inputs, arch, sms):
        return mx.mixed_gemv(mixed.Packed2416(*inputs[1:]), inputs[0])

    def locate(self, case, inputs, idx, arch, sms):
        row_ptr, group_bits = inputs[8], inputs[7]
        r = idx[0]
        units = mx.unit_groups(group_bits)
        busy = sorted({u % 32 for u in range(len(units))})
        return (f"y[{r}]: warp {r} (one warp per output channel); lanes {busy[0]}..{busy[-1]} own the row's "
                f"{len(units)} 128-bit units round-robin (fp16 hfma2 chains per group of 16, fp32 lane sums), "
                f"fp32 shfl_down tree to lane 0, then lane 0 adds the row's {int(row_ptr[r + 1] - row_ptr[r])} "
                f"outliers in stored order and writes fp16(acc)")

    def structure(self, case, inputs, shape, sms):
        counts = np.diff(inputs[8].astype(np.int64))
        n = np.arange(shape[0])
        return {"outliers in the row": np.minimum(counts, 3), "channel mod 16 (second-order group)": n % 16}

    def probes(self, case, inputs):
        x, *packed = inputs
        out = []
        if packed[9].size:
            no_out = list(packed)
            no_out[9] = np.zeros_like(packed[9])
            out.append(Probe("outlier values zeroed (dense part only)", (x,) + tuple(no_out),
                             "the dense 2/4-bit part (dequantization, hfma2 chains, lane sums, tree)"))
        out.append(Probe("group 0 only (k 0..15)", (keep_columns(x, slice(0, 16)),) + tuple(packed),
                         "one group: dequantization and the two hfma2 chains"))
        return out

    def linear(self, case, inputs):
        """``y = x @ ((q - z) s_hat + outliers)``: the dense weights are dequantized to fp16 (one
        rounding); an outlier sits where the dense weight is exactly 0, so one term per k."""
        W = mixed.dequantize(mixed.unpack(mixed.Packed2416(*inputs[1:])))            # (K, N) f32, exact
        nnz = int(np.diff(inputs[8].astype(np.int64)).max(initial=0))
        return Linear(inputs[0].astype(np.float64)[None, :], W.astype(np.float64), terms=case["k"] + nnz, pre=1)
