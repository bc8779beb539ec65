"""The kernel emulators' tensor-core path: whole k16 steps of finite fp16 ``mma`` with fp32 accumulators.

Spec
----
computes        what ``mma.sync.m16n8k16.row.col.f32.f16.f16.f32`` gives for every (row, column) pair
                of a tile, bit for bit: the T-FDPA of :mod:`refsim.arith.tensor_core` chained over
                the arch's blocks (two of 8 on sm_80/86/87/89, one of 16 on sm_90, four of 4 on
                sm_70), the block result rounded toward zero to fp32 in between.
domain          finite fp16 operands (NaN/Inf: :func:`refsim.arith.tensor_core.mma_m16n8k16`),
                float32 accumulators; many instructions at once (broadcast blocks).
operands        :class:`MmaOperand`: an fp16 matrix prepared once (uint16 bits for the compiled
                path; float64 values and int64 alignment exponents e(x) = max(floor(log2|x|), -14)
                for NumPy), reused by every k16 step of a GEMM.
entry points    :func:`mma_k16_f32`  a_vals/a_exps (..., M, 1, 16), b_vals/b_exps (..., 1, N, 16),
                                     c float32 (..., M, N) -> float32 (..., M, N)
                :func:`mma_k16_f32_steps`  one k16 step of W k-warps: acc float32 (W, R, N) through
                                     the k16 blocks ``kblocks`` (W,) of A (R rows) and B
how             integer-valued float64: products exact (22 bits), scaling by 2^(F - E) exact,
                truncated terms integers below 2^27, their sum below 2^53; RN to fp32 then one
                step back toward zero where RN went past the exact value.
compiled twin   ``refsim_mma_k16_f32`` of :mod:`refsim.native.emulators` (``native=None`` uses it
                when a C compiler is available); tested equal to the NumPy path.
oracle          :func:`refsim.arith.tensor_core.mma_m16n8k16` (integer datapath), tested equal.

One k16 step of one k-warp w (Ampere, L = 8), k16 block kb = kblocks[w]::

    acc[w] --T-FDPA(A[:, 16kb:16kb+8],  B[16kb:16kb+8, :])--> RZ fp32
           --T-FDPA(A[:, 16kb+8:16kb+16], B[16kb+8:16kb+16, :])--> RZ fp32 = new acc[w]
"""

from __future__ import annotations

import functools

import numpy as np

from refsim._validate import (MAX_ELEMENTS, require_dtype, require_element_count, require_finite,
                              require_instance, require_integer_array, require_ndim, require_optional_bool,
                              require_shape)
from refsim.arith.tensor_core import TensorCoreModel, model
from refsim.errors import FormatRuleError, NonFiniteError, ShapeError

__all__ = ["MmaOperand", "mma_k16_f32", "mma_k16_f32_steps"]



class MmaOperand:
    """A finite fp16 operand prepared once for many :func:`mma_k16_f32` calls.

    bits: uint16 view of the fp16 data (what the compiled path reads); values: float64 copy
    (exact); exps: e(x) = max(floor(log2|x|), -14) as int64 (the alignment exponent of the T-FDPA
    model; zeros get -14 here and are handled by e_zero). values and exps are computed on first
    use (the compiled path never needs them).
    """

    def __init__(self, x: np.ndarray):
        x = require_dtype("operand", x, np.float16)
        if not np.isfinite(x).all():
            raise NonFiniteError("operand: the fast mma path needs finite fp16 values; use tensor_core.mma_m16n8k16 for NaN/Inf")
        self.bits = np.ascontiguousarray(x).view(np.uint16)

    @functools.cached_property
    def values(self) -> np.ndarray:
        return self.bits.view(np.float16).astype(np.float64)

    @functools.cached_property
    def exps(self) -> np.ndarray:
        _, ex = np.frexp(self.values)
        return np.maximum(ex.astype(np.int64) - 1, -14)


def mma_k16_f32(arch: str, a_vals, a_exps, b_vals, b_exps, c: np.ndarray) -> np.ndarray:
    """Chained T-FDPA over one k16 step with fp32 accumulation, on broadcast blocks (fast path).

    a_vals/a_exps: float64/int64 (..., M, 1, 16); b_vals/b_exps: (..., 1, N, 16) (k last);
    c: float32 (..., M, N). Returns float32 (..., M, N) = what ``mma.m16n8k16 .f32`` gives for every
    (row, column) pair, bit for bit equal to :func:`refsim.arith.tensor_core.fdpa` chained over the blocks of ``arch`` for
    finite inputs (tested). Integer-valued float64 arithmetic: products are exact, scaling by
    powers of two is exact, truncated terms are integers below 2^27 and their sum below 2^53.
    The operands are checked first (dtypes, shapes that broadcast to c's, values of fp16 range and
    exponents in [-14, 15], as :class:`MmaOperand` makes them); a ShapeError / DtypeError /
    FormatRuleError names the rule.
    """
    m = model(arch)
    a_vals, a_exps, b_vals, b_exps, c = _check_k16(a_vals, a_exps, b_vals, b_exps, c)
    return _mma_k16_f32(m, a_vals, a_exps, b_vals, b_exps, c)


def _check_k16(a_vals, a_exps, b_vals, b_exps, c):
    """The operands of :func:`mma_k16_f32`, checked from their shapes before any arithmetic."""
    out = []
    for name, x, dt in (("a_vals", a_vals, np.float64), ("a_exps", a_exps, np.int64),
                        ("b_vals", b_vals, np.float64), ("b_exps", b_exps, np.int64)):
        x = require_dtype(name, x, dt)
        one = -2 if name[0] == "a" else -3          # A's N axis and B's M axis are broadcast (length 1)
        if x.ndim < 3 or x.shape[-1] != 16 or x.shape[one] != 1:
            want = "(..., M, 1, 16)" if name[0] == "a" else "(..., 1, N, 16)"
            raise ShapeError(f"{name}: shape must be {want}; got {x.shape}")
        out.append(x)
    a_vals, a_exps, b_vals, b_exps = out
    if a_exps.shape != a_vals.shape or b_exps.shape != b_vals.shape:
        raise ShapeError(f"a_exps, b_exps: must have the shapes of a_vals, b_vals; got {a_exps.shape} for "
                         f"{a_vals.shape}, {b_exps.shape} for {b_vals.shape}")
    c = require_dtype("c", c, np.float32)
    try:
        shape = np.broadcast_shapes(a_vals.shape[:-1], b_vals.shape[:-1], c.shape)
    except ValueError:
        raise ShapeError(f"a_vals, b_vals, c: must broadcast to (..., M, N); got {a_vals.shape}, {b_vals.shape}, "
                         f"{c.shape}") from None
    if c.ndim < 2 or shape != c.shape:
        raise ShapeError(f"c: must be (..., M, N) = {shape}, the shape of the result; got {c.shape}")
    require_element_count("c", c, MAX_ELEMENTS // 16)      # the products are (..., M, N, 16) float64
    for name, v in (("a_vals", a_vals), ("b_vals", b_vals)):
        if v.size and float(np.abs(require_finite(name, v)).max()) > 65504.0:
            raise FormatRuleError(f"{name}: must hold fp16 values (|x| <= 65504); got max |x| "
                                  f"{float(np.abs(v).max())!r}")
    for name, e in (("a_exps", a_exps), ("b_exps", b_exps)):
        if e.size and (int(e.min()) < -14 or int(e.max()) > 15):
            raise FormatRuleError(f"{name}: fp16 alignment exponents lie in [-14, 15]; got "
                                  f"{int(e.min()) if int(e.min()) < -14 else int(e.max())}")
    return a_vals, a_exps, b_vals, b_exps, c


def _mma_k16_f32(m: TensorCoreModel, a_vals, a_exps, b_vals, b_exps, c: np.ndarray) -> np.ndarray:
    """:func:`mma_k16_f32` on checked operands."""
    F, e_zero = m.frac_bits, m.e_zero_f32
    d = c
    for k0 in range(0, 16, m.block):
        sl = slice(k0, k0 + m.block)
        p = a_vals[..., sl] * b_vals[..., sl]                     # exact products (..., M, N, L)
        ep = np.where(p == 0, e_zero, a_exps[..., sl] + b_exps[..., sl])
        d64 = d.astype(np.float64)
        _, cex = np.frexp(d64)
        ec = np.where(d64 == 0, e_zero, np.maximum(cex.astype(np.int64) - 1, -126))
        E = np.maximum(ep.max(axis=-1), ec)                        # (..., M, N)
        up = np.ldexp(1.0, F - E)                                  # 2^(F-E), exact
        S = np.trunc(p * up[..., None]).sum(axis=-1) + np.trunc(d64 * up)
        v = S * np.ldexp(1.0, E - F)                               # exact: |S| < 2^53
        with np.errstate(over="ignore"):
            f = v.astype(np.float32)                               # RN ...
            too_far = np.abs(f.astype(np.float64)) > np.abs(v)
            f = np.where(too_far, np.nextafter(f, np.float32(0)), f)  # ... corrected to RZ
            f = np.where(np.abs(v) >= 2.0**128, np.copysign(np.float32(np.inf), v).astype(np.float32), f)
        negzero = (S == 0) & np.signbit(d) & (d == 0) & ((p == 0) & np.signbit(p)).all(axis=-1)
        d = np.where(negzero, np.float32(-0.0), f).astype(np.float32)
    return d


def _check_steps(a, b, kblocks, acc, rows) -> tuple[np.ndarray, np.ndarray]:
    """The operands of :func:`mma_k16_f32_steps`, checked before the compiled path (which trusts
    them) reads any of them: ``(kblocks int64 (W,), acc float32 (W, R, N))``."""
    a, b = require_instance("a", a, MmaOperand), require_instance("b", b, MmaOperand)
    rows = require_instance("rows", rows, slice)
    ab, bb = a.bits[rows], b.bits
    if ab.ndim != 2 or bb.ndim != 2 or ab.shape[1] != bb.shape[0] or ab.shape[1] % 16:
        raise ShapeError(f"a, b: must be (R, K) and (K, N) operands with K a multiple of 16; "
                         f"got {ab.shape} and {bb.shape}")
    kblocks = require_ndim("kblocks", require_integer_array("kblocks", kblocks), 1)
    if kblocks.size == 0 or int(kblocks.min()) < 0 or int(kblocks.max()) >= ab.shape[1] // 16:
        raise ShapeError(f"kblocks: one k16 block index in [0, {ab.shape[1] // 16}) per k-warp (at least one); "
                         f"got {kblocks.tolist()[:8]}")
    acc = require_shape("acc", require_dtype("acc", acc, np.float32), (kblocks.size, ab.shape[0], bb.shape[1]))
    return kblocks.astype(np.int64), acc


def mma_k16_f32_steps(arch: str, a: MmaOperand, b: MmaOperand, kblocks: np.ndarray, acc: np.ndarray,
                      *, rows: slice = slice(None), native: bool | None = None) -> np.ndarray:
    """One k16 step of several k-warps: ``acc[w]`` chained through the k16 block ``kblocks[w]``.

    a: :class:`MmaOperand` of A (M, K) (``rows`` selects R of its rows); b: :class:`MmaOperand` of
    B (K, N); kblocks: int (W,) k16 block index per k-warp; acc: float32 (W, R, N). Returns the
    new float32 (W, R, N) accumulators, bit for bit what :func:`mma_k16_f32` gives on the
    gathered blocks. native: None = the compiled kernel of :mod:`refsim.native.emulators` when it
    is available, else NumPy; False = NumPy (the readable reference); True = compiled.
    """
    m = model(arch)
    kblocks, acc = _check_steps(a, b, kblocks, acc, rows)
    W = kblocks.size
    from refsim.native import emulators as nat

    native = require_optional_bool("native", native)
    use_native = nat.available() if native is None else native
    if use_native:
        out = np.array(acc, dtype=np.float32, order="C", copy=True)
        nat.mma_k16_f32_blocks(m.block, m.frac_bits, m.e_zero_f32, a.bits[rows], b.bits, 16 * kblocks, out)
        return out
    kidx = (16 * kblocks[:, None] + np.arange(16)).ravel()                 # (W*16,)
    av, ae = a.values[rows][:, kidx], a.exps[rows][:, kidx]                  # (R, W*16)
    R, n = av.shape[0], b.values.shape[1]
    av = av.reshape(R, W, 16).transpose(1, 0, 2)[:, :, None, :]              # (W, R, 1, 16)
    ae = ae.reshape(R, W, 16).transpose(1, 0, 2)[:, :, None, :]
    bv = b.values[kidx].reshape(W, 16, n).transpose(0, 2, 1)[:, None, :, :]  # (W, 1, N, 16)
    be = b.exps[kidx].reshape(W, 16, n).transpose(0, 2, 1)[:, None, :, :]
    return _mma_k16_f32(m, av, ae, bv, be, acc)
