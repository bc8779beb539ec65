"""GPTQ (Frantar et al., ICLR 2023) as in its reference code, producing GPTQ checkpoints.

Matched: IST-DASLab/gptq ``gptq.py`` (``GPTQ.add_batch``, ``GPTQ.fasterquant``) and ``quant.py``
(``Quantizer``), and AutoGPTQ ``auto_gptq/quantization/gptq.py`` (which adds ``g_idx`` and
``static_groups``); behaviour as in AutoGPTQ ``gptq.py`` (docs/sources.md).

Notation follows the paper with refsim's (K, N) weights: the paper quantizes the columns of
W_paper = Wᵀ (N × K) one input feature at a time; here that is one *row* k of W (K, N). Internally
the loop walks the rows of W, and the intra-block rank-1 updates are applied to each row on demand
(one gemv per row, the same sums as the paper's outer products; contiguous rows are ~3x less memory
traffic than updating the whole remaining block after every row).

    H      = 2/n Σ_samples Σ_tokens x xᵀ              (K, K), n counts samples, not tokens
    damp   = percdamp · mean(diag H);  H += damp · I
    Hinv   = U ᵀ U  (U upper Cholesky factor of H⁻¹)
    for each block of B = 128 columns [i1, i2):
        for col in block:
            (group start, no static groups) scale, zero <- find_params(Wt[:, col:col+G])   # global W!
            q     = quant(w = W1[:, i]);   err = (w - q) / U[col, col]
            W1[:, i:] -= err ⊗ U[col, i1+i:i2];   Err1[:, i] = err
        Wt[:, i2:] -= Err1 @ U[i1:i2, i2:]                                              # lazy batch update

Quirk kept on purpose (it changes results for G < B): group parameters are computed from the global
weights, which has every lazy update of earlier blocks but not the intra-block updates of the current
one. Act-order permutes columns by descending diag(H); ``g_idx[k] = invperm[k] // G`` and the scales
are stored in processing order (AutoGPTQ). With ``static_groups`` the group parameters come from
the original weights, in original column order, and ``g_idx = k // G``. Dead inputs (diag H = 0)
get H[k, k] = 1 and weight 0.

Grids: the loop takes the element grid as a parameter: :class:`IntegerGrid` (this module's GPTQ) or
:class:`refsim.quant.gptq_float.FloatGrid` (e4m3 / e2m1 with fixed scales, llm-compressor's float presets).
``updates="gemv"`` (here) forms each row's intra-block update as one gemv (left-looking);
``updates="rank1"`` applies the reference's rank-1 updates row by row and right-looking block updates, in
the reference's order of roundings (what gptq_float needs to match llm-compressor bit for bit).

Arithmetic: float32 throughout, as the reference (which disables TF32); the Hessian is accumulated
in float64 and rounded to float32 once before the factorisation. Summation orders inside BLAS
differ from PyTorch's, so results match the reference in distribution, not bit for bit.

Threads: BLAS runs single-threaded (threadpoolctl) inside :func:`gptq_quantize`; the output columns,
independent given U, are split into two halves processed by two Python threads (NumPy and BLAS
release the GIL). Multi-threaded BLAS on the many small calls of the column loop synchronises its
threads thousands of times and collapses when another process holds a core (measured: 3 s quiet,
16-31 s loaded); two static halves degrade to the speed of one core at worst. The factorisation
stays on one thread too: OpenBLAS's 2-thread Cholesky is faster (1.26 → 0.74 s at K = 4096) but
rounds differently from its 1-thread one, and dask workers (OPENBLAS_NUM_THREADS=1) or a 1-core
machine would then get other bits than a serial run on 2 cores.

Determinism: every result is a fixed function of the inputs for one BLAS build and CPU kernel,
whatever the number of cores or workers (the two column halves are fixed, every BLAS call is
single-threaded). Both are load-bearing: with this OpenBLAS (0.3.31, Haswell kernels) the block
gemm's bits differ between 1 and 2 threads, and a gemv/gemm over a different number of output
columns (another split of N) also rounds some sums differently (observed on this OpenBLAS). Nothing bit-exact against the reference is claimed (see Arithmetic).
"""

from __future__ import annotations

import concurrent.futures
import functools
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
import threadpoolctl

from refsim._validate import (
    native_contiguous,
    require_bits,
    require_bool,
    require_bounded,
    require_choice,
    require_fields,
    require_finite,
    require_float_array,
    require_group_size,
    require_int,
    require_ndim,
    require_real,
    require_shape,
)
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import gptq as gptq_format
from refsim.arith.integral import INTEGRAL_MODES, round_to_integral
from refsim.formats.uniform import find_params, quantize_codes

__all__ = ["HessianAccumulator", "hessian", "GPTQResult", "IntegerGrid", "gptq_quantize", "layer_output_error",
           "upper_cholesky_of_inverse"]


class HessianAccumulator:
    """Running ``H = 2/n Σ x xᵀ`` over calibration batches, as ``GPTQ.add_batch`` computes it.

    ``add_batch(x)``: x float (batch, seq, K) counts ``batch`` samples; x (T, K) counts as ONE sample
    (the reference unsqueezes 2-D inputs). H is kept in float64.
    """

    def __init__(self, k: int):
        self.k = require_bounded("k", require_int("k", k, minimum=1), 1 << 15,
                                 what="input features (H is a dense K x K float64 matrix)")
        self.H = np.zeros((k, k), dtype=np.float64)
        self.nsamples = 0

    def add_batch(self, x: np.ndarray) -> None:
        x = require_float_array("x", x)
        require_finite("x", x)
        if x.ndim == 2:
            x = x[None]
        if x.ndim != 3 or x.shape[-1] != self.k:
            raise FormatRuleError(f"x: must be (batch, seq, K={self.k}) or (seq, K={self.k}); got shape {x.shape}")
        tmp = x.shape[0]
        xs = native_contiguous(x.reshape(-1, self.k), np.float64)  # (batch*seq, K), the layout BLAS gets
        self.H *= self.nsamples / (self.nsamples + tmp)
        self.nsamples += tmp
        xs = np.sqrt(2.0 / self.nsamples) * xs
        self.H += xs.T @ xs


def hessian(x: np.ndarray) -> np.ndarray:
    """float64 (K, K) Hessian ``2/n Σ x xᵀ`` of one batch x (batch, seq, K) or (T, K) (one sample)."""
    x = require_float_array("x", x)
    if x.ndim not in (2, 3):
        raise FormatRuleError(f"x: must be (batch, seq, K) or (seq, K); got shape {x.shape}")
    acc = HessianAccumulator(x.shape[-1])
    acc.add_batch(x)
    return acc.H


@dataclass(frozen=True)
class GPTQResult:
    """Output of :func:`gptq_quantize`.

    q        uint8 (K, N) codes, original row order
    scales   float32 (G, N), in processing order (act-order) as AutoGPTQ stores them
    zeros    int32 (G, N)
    g_idx    int32 (K,) group of each original row k
    perm     int64 (K,) processing order (identity without act-order)
    W_hat    float32 (K, N) fake-quantized weights ``scales[g_idx] * (q - zeros[g_idx])``
    losses   float32 (N,) Σ_k (w - q)² / d² / 2 per output column (the reference's ``Losses``)
    """

    q: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray
    g_idx: np.ndarray
    perm: np.ndarray
    W_hat: np.ndarray
    losses: np.ndarray
    bits: int
    group_size: int | None

    def __post_init__(self):
        require_fields(self)  # plain native arrays and Python ints, whatever came in

    def checkpoint(self, checkpoint_format: str = "gptq") -> gptq_format.GPTQCheckpoint:
        """Pack into a :class:`refsim.formats.gptq.GPTQCheckpoint` (K and N multiples of 32)."""
        return gptq_format.pack(self.q, self.scales, self.zeros, self.bits, g_idx=self.g_idx,
                                checkpoint_format=checkpoint_format)


def upper_cholesky_of_inverse(H: np.ndarray, percdamp: float) -> np.ndarray:
    """Upper Cholesky factor U of (H + damp·I)⁻¹, i.e. (H + damp·I)⁻¹ = Uᵀ U, float32 (K, K),
    Fortran order (GPTQ's loop reads U's columns).

    The reference computes chol(H) → cholesky_inverse → chol(upper), in float32. The same factor
    comes from one Cholesky and one triangular inverse: with P the reversal permutation and
    P H P = L̃ L̃ᵀ, H⁻¹ = P L̃⁻ᵀ L̃⁻¹ P = (P L̃⁻¹ P)ᵀ (P L̃⁻¹ P), and P L̃⁻¹ P is upper triangular
    with a positive diagonal, so by uniqueness U = P L̃⁻¹ P (about 4x fewer flops).
    """
    H = require_float_array("H", H)
    require_ndim("H", H, 2)
    if H.shape[0] != H.shape[1] or H.shape[0] == 0:
        raise ShapeError(f"H: must be square (K, K) with K >= 1; got {H.shape}")
    require_finite("H", H)
    return _upper_cholesky_of_inverse(H, _check_percdamp(percdamp))


def _check_percdamp(percdamp) -> float:
    """``percdamp`` as a Python float in [0, 1] (a NumPy scalar's width never reaches the damping)."""
    percdamp = require_real("percdamp", percdamp)
    if not 0.0 <= percdamp <= 1.0:
        raise FormatRuleError(f"percdamp: must be a number in [0, 1]; got {percdamp!r:.60}")
    return percdamp


_TILE = 256  # tile edge of the reversing float64 -> float32 copy into LAPACK's column-major layout


def _upper_cholesky_of_inverse(H: np.ndarray, percdamp: float, perm: np.ndarray | None = None) -> np.ndarray:
    """:func:`upper_cholesky_of_inverse` of ``H[perm][:, perm]`` (``perm`` None: of H) on validated
    inputs (square float H, finite, percdamp checked); the permuted copy of H is never formed."""
    k = H.shape[0]
    # one pass: float32 rounding (as the reference), the permutation and the reversal P H P into
    # LAPACK's layout. spotrf(lower) reads the lower triangle only, so only the tiles on or below
    # the diagonal are copied (the rest stays zero); tiling keeps the transposing access pattern
    # in cache (190 ms -> ~55 ms at K = 4096; act-order: no (K, K) float64 permuted copy, 230 ms)
    Hr = np.zeros((k, k), dtype=np.float32, order="F")          # P H P (lower part), column-major
    if perm is None:
        src = H[::-1, ::-1]
        for j in range(0, k, _TILE):
            for i in range(j, k, _TILE):
                np.copyto(Hr[i:i + _TILE, j:j + _TILE], src[i:i + _TILE, j:j + _TILE], casting="same_kind")
    else:
        rp = np.asarray(perm)[::-1]                              # Hr[i, j] = H[rp[i], rp[j]]
        for i in range(0, k, _TILE):
            strip = H[rp[i:i + _TILE]]                           # (T, K) rows, one gather
            for j in range(0, i + 1, _TILE):
                np.copyto(Hr[i:i + _TILE, j:j + _TILE], strip[:, rp[j:j + _TILE]], casting="same_kind")
    diag = np.ascontiguousarray(np.diag(Hr)[::-1])               # diag H in original order
    damp = percdamp * float(np.mean(diag, dtype=np.float64))
    Hr[np.diag_indices_from(Hr)] += np.float32(damp)
    fail = None
    with _single_threaded_blas():
        Lt, info = scipy.linalg.lapack.spotrf(Hr, lower=1, clean=1, overwrite_a=1)
        if info == 0:
            Lt_inv, info = scipy.linalg.lapack.strtri(Lt, lower=1, overwrite_c=1)
            if info != 0:  # pragma: no cover - a successful Cholesky has a non-singular factor
                fail = f"the triangular inverse failed (LAPACK info {info})"
        else:
            fail = f"the Cholesky factorisation failed at leading minor {info}"
    if fail:
        raise FormatRuleError(
            f"H: must be positive definite after dampening by percdamp={percdamp} × mean(diag H) "
            f"= {damp:.3g}; got {fail}. Raise percdamp (e.g. 0.1) or use more calibration data")
    return np.asfortranarray(Lt_inv[::-1, ::-1])  # Fortran order: the loop reads U's columns


def gptq_quantize(W: np.ndarray, H: np.ndarray, bits: int, *, group_size: int | None = 128,
                  sym: bool = False, act_order: bool = False, static_groups: bool = False,
                  percdamp: float = 0.01, blocksize: int = 128,
                  rounding: str = "half_even") -> GPTQResult:
    """Quantize ``W`` float (K, N) with GPTQ given the Hessian ``H`` float (K, K) of its inputs.

    ``group_size`` None is per-channel (the reference's ``-1``). ``sym`` selects the ``gptq_sym``
    scheme (zero = 2**(bits-1)). Inputs are not modified. Returns :class:`GPTQResult`.
    """
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    require_finite("W", W)
    k, n = W.shape
    H = require_float_array("H", H)
    require_shape("H", H, (k, k))
    require_finite("H", H)
    bits = require_bits(bits, gptq_format.BITS)
    group_size = require_group_size(group_size, k)
    blocksize = require_int("blocksize", blocksize, minimum=1)
    require_choice("rounding", rounding, INTEGRAL_MODES)
    percdamp = _check_percdamp(percdamp)  # the factorisation's own rule, checked before any work
    sym, act_order = require_bool("sym", sym), require_bool("act_order", act_order)
    static_groups = require_bool("static_groups", static_groups)
    if static_groups and group_size is None:
        raise FormatRuleError("static_groups: True requires an integer group_size; got group_size=None")
    scheme = "gptq_sym" if sym else "gptq_asym"

    dead = np.diag(H) == 0
    if dead.any():
        W = W.astype(np.float32)  # (K, N) copy; row k of W is the paper's column k
        H = H.astype(np.float64)  # copy (rounded to float32 in the factorisation)
        H[dead, dead] = 1.0
        W[dead, :] = 0.0
    else:  # only read from here on: no copy when W is already C-ordered float32
        W = np.ascontiguousarray(W, dtype=np.float32)

    def params(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # rows (g, N) -> (N,), (N,)
        return find_params(rows, bits, scheme, rounding=rounding)

    static = None
    if static_groups:
        static = [params(W[i:i + group_size]) for i in range(0, k, group_size)]
    scales, zeros = [], []
    if group_size is None:
        scale, zero = params(W)
        scales.append(scale)
        zeros.append(zero)

    perm = np.arange(k)
    if act_order:
        perm = np.argsort(-np.diag(H), kind="stable")
        W = W[perm]
    invperm = np.argsort(perm)

    # (K, K) upper float32 factor of the permuted H (validated above)
    U = _upper_cholesky_of_inverse(H, percdamp, perm if act_order else None)

    # the output columns are independent given U: two halves run in two threads, each with
    # single-threaded BLAS (no fine-grained thread synchronisation to collapse under load)
    halves = [slice(0, n)] if n < _SPLIT_MIN_N else [slice(0, n // 2), slice(n // 2, n)]
    loop = functools.partial(_column_loop, U=U, perm=perm, grid=IntegerGrid(bits, rounding), group_size=group_size,
                             params=params, blocksize=blocksize)

    def half(sl: slice):  # static group parameters are (N,) rows: each half reads its own columns
        return loop(W[:, sl], static=None if static is None else [(s[sl], z[sl]) for s, z in static])

    with _single_threaded_blas():
        if len(halves) == 1:
            parts = [half(halves[0])]
        else:
            with concurrent.futures.ThreadPoolExecutor(len(halves)) as pool:
                parts = list(pool.map(half, halves))
    codes = np.concatenate([c for c, _, _, _ in parts], axis=1)          # (K, N) processing order
    losses = np.concatenate([lo for _, lo, _, _ in parts])
    if group_size is not None and static is None:
        scales = [np.concatenate(gs) for gs in zip(*(sc for _, _, sc, _ in parts))]
        zeros = [np.concatenate(gz) for gz in zip(*(z for _, _, _, z in parts))]

    if static is not None:
        scales = [s for s, _ in static]
        zeros = [z for _, z in static]
        g_idx = (np.arange(k) // group_size).astype(np.int32)
    elif group_size is None:
        g_idx = np.zeros(k, dtype=np.int32)
    else:
        g_idx = (invperm // group_size).astype(np.int32)

    scales_arr = np.stack(scales).astype(np.float32)  # (G, N)
    zeros_arr = np.stack(zeros).astype(np.int32)
    q_orig = codes[invperm] if act_order else codes  # (K, N) original row order
    if static is None and group_size is not None:
        # processing-order row j reads scale row j // G (g_idx[perm[j]] = j // G): dequantize in
        # processing order, then one gather of the rows (act-order)
        W_hat = _dequantize_grouped(codes, scales_arr, zeros_arr, group_size)
        if act_order:
            W_hat = W_hat[invperm]
    else:  # static groups: g_idx = k // G in original order; per-channel: one row
        W_hat = _dequantize_grouped(q_orig, scales_arr, zeros_arr, group_size or k)
    return GPTQResult(q_orig, scales_arr, zeros_arr, g_idx, perm.astype(np.int64), W_hat,
                      losses.astype(np.float32), bits, group_size)


def _dequantize_grouped(q: np.ndarray, scales: np.ndarray, zeros: np.ndarray, group_size: int) -> np.ndarray:
    """float32 (K, N) ``scales[r // G] * (q[r] - zeros[r // G])`` for q uint8 (K, N), scales float32
    and zeros int32 (K / G, N): the same two roundings as ``(q - z[g_idx]) * s[g_idx]`` (q - z is
    exact), without the two (K, N) gathered temporaries."""
    k, n = q.shape
    out = np.empty((k, n), dtype=np.float32)
    view = out.reshape(k // group_size, group_size, n)
    np.subtract(q.reshape(view.shape), zeros.astype(np.float32)[:, None, :], out=view, dtype=np.float32)
    np.multiply(view, scales[:, None, :], out=view)
    return out


_SPLIT_MIN_N = 512  # below this many output columns one thread does the loop


class IntegerGrid:
    """GPTQ's integer grid: code ``clip(round(w / s) + z, 0, 2**bits - 1)``, value ``s * (code - z)``
    (float32; ``rounding`` one of :data:`refsim.arith.integral.INTEGRAL_MODES`)."""

    def __init__(self, bits: int, rounding: str = "half_even"):
        self.bits = require_bits(bits, range(1, 9))
        self.rounding = require_choice("rounding", rounding, INTEGRAL_MODES)

    def quantize_reference(self, w, scale, zero_f):
        """(codes uint8 (n,), values float32 (n,)) of the row w float32 (n,), plainly."""
        qc = quantize_codes(w, scale, zero_f, self.bits, self.rounding)
        return qc, scale * (qc.astype(np.float32) - zero_f)

    def bind(self, n: int):
        """``quantize(w, scale, zero_f, codes_out, t)``: the codes of ``quantize_reference`` into the uint8
        (n,) row ``codes_out`` and its values into the float32 (n,) buffer ``t``, without temporaries
        (the float code ``clip(rint(w / s) + z)`` is the integer code exactly)."""
        lo = np.zeros(n, dtype=np.float32)            # clip bounds as arrays: np.clip's wrapper costs
        hi = np.full(n, (1 << self.bits) - 1, dtype=np.float32)  # more than the work at these sizes
        half_even, rounding = self.rounding == "half_even", self.rounding

        def quantize(wv, scale, zero_f, codes_out, t):
            np.divide(wv, scale, out=t)
            if half_even:
                np.rint(t, out=t)
            else:
                t[...] = round_to_integral(t, rounding)
            np.add(t, zero_f, out=t)
            np.maximum(t, lo, out=t)                     # = np.clip(t, 0, maxq), NaN included
            np.minimum(t, hi, out=t)
            codes_out[...] = t                           # integral, in [0, maxq]: exact
            np.subtract(t, zero_f, out=t)
            np.multiply(scale, t, out=t)
        return quantize


def _rank1_update(W1: np.ndarray, U_row: np.ndarray, err: np.ndarray) -> None:
    """``W1 -= U_row[:, None] * err`` in place: the reference's rank-1 update, each product rounded to
    float32 before the subtraction (W1 (r, n), U_row (r,), err (n,) float32)."""
    np.subtract(W1, U_row[:, None] * err, out=W1)


def _single_threaded_blas():
    """Context: BLAS (and OpenMP) pools limited to one thread (threadpoolctl)."""
    return threadpoolctl.threadpool_limits(limits=1)


def _column_loop_reference(W, *, U, perm, grid, group_size, static, params, blocksize, updates="gemv"):
    """The GPTQ block loop, readable form (:func:`_column_loop` is the same arithmetic with fewer calls) over the rows of ``W`` float32 (K, n), a set of output columns (each is
    independent of the others given U). ``W`` is only read. ``grid``: the element grid
    (:class:`IntegerGrid`, :class:`refsim.quant.gptq_float.FloatGrid`): its ``quantize_reference(w,
    scale, zero_f)`` gives a row's codes and values. Returns (codes uint8 (K, n) in processing order,
    losses float64 (n,), scales list of (n,) per group, zeros list).

    ``updates`` "rank1" is the reference's own order of the updates (llm-compressor's
    ``gptq_block_update``): after each row, ``W1[i+1:] -= U[col, col+1:i2] ⊗ err`` (each product
    rounded, then subtracted), and after each block the later rows get ``U[i1:i2, i2:]ᵀ Err[i1:i2]``
    (right-looking); it needs static group parameters (``static``, or ``group_size`` None).

    Left-looking form of the paper's lazy batch updates: a block's rows receive every earlier
    block's update in one gemm at the block's start, ``W[i1:i2] - U[:i1, i1:i2]ᵀ Err[:i1]``, instead
    of each block subtracting its update from all later rows. The same products are summed (in
    another order), but the (K - i2, n) read-modify-write of W per block disappears: 0.96 s instead
    of 1.22 s for two parallel halves of 4096² here.
    """
    k, n = W.shape
    codes = np.empty((k, n), dtype=np.uint8)  # processing order
    Err = np.empty((k, n), dtype=np.float32)  # (w - q) / U[col, col] of every processed row
    losses = np.zeros(n, dtype=np.float64)
    scales, zeros = [], []

    def lazily_updated(rows: slice, i1: int) -> np.ndarray:
        """Rows of W after the updates of every block before row ``i1`` (the paper's global W)."""
        return W[rows] - U[:i1, rows].T @ Err[:i1] if i1 else W[rows]

    rank1 = updates == "rank1"
    Wc = W.copy() if rank1 else None          # rank1: the global W, right-looking block updates
    if group_size is None:
        scale, zero = params(W)
        zero_f = zero.astype(np.float32)
    for i1 in range(0, k, blocksize):
        i2 = min(i1 + blocksize, k)
        if rank1:
            W1 = Wc[i1:i2].copy()               # (B, n) updated row by row below
        else:
            W1 = lazily_updated(slice(i1, i2), i1)  # (B, n) the block, before its intra-block updates
        for i in range(i2 - i1):
            col = i1 + i
            if group_size is not None:
                if static is not None:
                    scale, zero = static[int(perm[col]) // group_size]
                    zero_f = zero.astype(np.float32)
                elif col % group_size == 0:
                    # the reference reads the global W here: lazy updates of earlier blocks only
                    inside = W1[i:i + group_size]
                    if col + group_size > i2:  # the group reaches into later blocks
                        inside = np.concatenate([inside, lazily_updated(slice(i2, col + group_size), i1)])
                    scale, zero = params(inside)
                    zero_f = zero.astype(np.float32)
                    scales.append(scale)
                    zeros.append(zero)
            if rank1:
                w = W1[i].copy()
            else:
                # intra-block updates of this row, applied on demand: the paper's
                # W1[:, i:] -= err ⊗ U[col, i:] for every earlier column, summed as one gemv
                w = W1[i] - U[i1:col, col] @ Err[i1:col] if i else W1[0]
            qc, qv = grid.quantize_reference(w, scale, zero_f)
            e = w - qv                                          # w - q
            d = U[col, col]
            codes[col] = qc
            Err[col] = e / d
            losses += (e.astype(np.float64) / d) ** 2 / 2
            if rank1:
                _rank1_update(W1[i + 1:], U[col, col + 1:i2], Err[col])
        if rank1 and i2 < k:
            Wc[i2:] -= U[i1:i2, i2:].T @ Err[i1:i2]
    return codes, losses, scales, zeros


def _column_loop(W, *, U, perm, grid, group_size, static, params, blocksize, updates="gemv"):
    """Same arguments, returns and bits as :func:`_column_loop_reference` (tests pin the equality),
    with fewer NumPy calls and allocations per row: every BLAS call keeps the reference's shapes
    and layouts (OpenBLAS's sums depend on them), elementwise steps write into preallocated (n,)
    buffers, the float code ``clip(rint(w / s) + z)`` stands in for ``qc.astype(float32)`` (it is
    that integer exactly), and the float64 losses are formed once per block and added row by row
    in the reference's order.
    """
    k, n = W.shape
    codes = np.empty((k, n), dtype=np.uint8)
    Err = np.empty((k, n), dtype=np.float32)
    losses = np.zeros(n, dtype=np.float64)
    scales, zeros = [], []
    quantize = grid.bind(n)
    rank1 = updates == "rank1"
    Wc = W.copy() if rank1 else None              # rank1: the global W, right-looking block updates
    B = min(blocksize, k)
    E = np.empty((B, n), dtype=np.float32)        # w - q of the block's rows
    L = np.empty((B, n), dtype=np.float64)        # their losses
    upd = np.empty((B, n), dtype=np.float32)      # left-looking update of the block
    w = np.empty(n, dtype=np.float32)
    t = np.empty(n, dtype=np.float32)
    diag = np.diagonal(U)                         # float32 (K,) U[col, col]
    diag64 = diag.astype(np.float64)              # the same values (the reference's e64 / d)

    def lazily_updated(rows: slice, i1: int) -> np.ndarray:
        return W[rows] - U[:i1, rows].T @ Err[:i1] if i1 else W[rows]

    if group_size is None:
        scale, zero = params(W)
        zero_f = zero.astype(np.float32)
    for i1 in range(0, k, blocksize):
        i2 = min(i1 + blocksize, k)
        b = i2 - i1
        if rank1:
            W1 = upd[:b]
            np.copyto(W1, Wc[i1:i2])
        elif i1:
            W1 = np.subtract(W[i1:i2], U[:i1, i1:i2].T @ Err[:i1], out=upd[:b])
        else:
            W1 = W[i1:i2]
        for i in range(b):
            col = i1 + i
            if group_size is not None:
                if static is not None:
                    scale, zero = static[int(perm[col]) // group_size]
                    zero_f = zero.astype(np.float32)
                elif col % group_size == 0:
                    inside = W1[i:i + group_size]
                    if col + group_size > i2:
                        inside = np.concatenate([inside, lazily_updated(slice(i2, col + group_size), i1)])
                    scale, zero = params(inside)
                    zero_f = zero.astype(np.float32)
                    scales.append(scale)
                    zeros.append(zero)
            if rank1 or not i:
                wv = W1[i]
            else:
                wv = np.subtract(W1[i], U[i1:col, col] @ Err[i1:col], out=w)  # no out= on matmul: slower path
            quantize(wv, scale, zero_f, codes[col], t)
            e = np.subtract(wv, t, out=E[i])
            np.divide(e, diag[col], out=Err[col])
            if rank1:
                _rank1_update(W1[i + 1:], U[col, col + 1:i2], Err[col])
        Lb = L[:b]
        np.copyto(Lb, E[:b])
        np.divide(Lb, diag64[i1:i2, None], out=Lb)
        np.square(Lb, out=Lb)
        np.divide(Lb, 2, out=Lb)
        for i in range(b):
            np.add(losses, Lb[i], out=losses)
        if rank1 and i2 < k:
            Wc[i2:] -= U[i1:i2, i2:].T @ Err[i1:i2]
    return codes, losses, scales, zeros


def layer_output_error(X: np.ndarray, W: np.ndarray, W_hat: np.ndarray) -> float:
    """Relative layer-output error ``‖X W − X Ŵ‖_F / ‖X W‖_F`` in float64; X (T, K), W, Ŵ (K, N)."""
    X, W, W_hat = (require_float_array(n, a) for n, a in (("X", X), ("W", W), ("W_hat", W_hat)))
    require_ndim("X", X, 2)
    require_ndim("W", W, 2)
    require_shape("W_hat", W_hat, W.shape)
    if X.shape[1] != W.shape[0]:
        raise ShapeError(f"X: must have K={W.shape[0]} columns; got shape {X.shape}")
    for n, a in (("X", X), ("W", W), ("W_hat", W_hat)):
        require_finite(n, a)
    X64, W64, W_hat64 = (native_contiguous(a, np.float64) for a in (X, W, W_hat))  # BLAS sees one layout
    ref = X64 @ W64
    return float(np.linalg.norm(ref - X64 @ W_hat64) / np.linalg.norm(ref))
