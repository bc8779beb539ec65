"""Warp-level emulation of the Marlin FP16 x INT4 GEMM kernel: what it writes, bit for bit.

Spec
----
computes        C (M, N) float16 = A (M, K) float16 @ W (K, N), W given in Marlin's packed format
                (``B`` int32 (K/16, 2N), ``s`` float16 (G, N), see :mod:`refsim.formats.marlin`),
                for one architecture's tensor core (:mod:`refsim.arith.tensor_core`) and one SM
                count (the grid size, which fixes the striped partition).
dataflow        in the kernel's order (IST-DASLab/marlin ``marlin/marlin_cuda_kernel.cu``):
                1. tile config and host M loop, striped partition: :func:`refsim.formats.stripes.stripes`;
                2. B operand: ``dequant`` (lop3 / ``__hsub2`` / ``__hfma2``, exact) and, grouped,
                   ``scale`` = ``__hmul2(b, s)`` (one fp16 rounding): :func:`refsim.formats.marlin.dequantize`;
                3. the 8 warps of a block are ``W_n = thread_n/64`` n-warps x ``W_k = 8/W_n`` k-warps;
                   k-warp w chains ``mma.m16n8k16.f32`` over k16 blocks ``tile*TKB + w + W_k*s``
                   (tiles of the slice in increasing order, s = 0 .. TKB/W_k - 1), from an fp32 zero;
                4. ``thread_block_reduce`` (fp32, shared memory): W_k = 4: ``a0 + (a1 + (a3 + a2))``,
                   W_k = 2: ``a0 + a1``;
                5. ``global_reduce`` when a column has several slices: slice_idx 0 (highest k) writes
                   ``fp16(P0)`` into C; each next slice computes ``P + float(H)`` in fp32 and, unless
                   it is the last (top) one, writes it back as fp16;
                6. ``write_result``: ``fp16(final)``; per-channel: ``__hmul2(fp16(final), s[n])``.
vectorised      over every row, column and k-warp at once: one fast T-FDPA call per k16 step of a
                tile (``mma_steps.mma_k16_f32_steps``: the compiled integer kernel of
                :mod:`refsim.native.emulators` when a C compiler is present, else the NumPy
                ``mma_steps.mma_k16_f32``; same bits, tested), slice boundaries handled by
                per-column masks.
oracle          :func:`marlin_gemm_reference` (plain loops over the same model using the scalar
                :func:`refsim.arith.tensor_core.fdpa`); the tests check both against exact
                products where every partial sum is exact, and against the exact-sum reference
                within the bound the model implies.
source          IST-DASLab/marlin ``marlin/marlin_cuda_kernel.cu`` (``matmul``, ``thread_block_reduce``,
                ``global_reduce``, ``write_result``, main loop), commit
                0f102e119bddf2f03cff9f944d065b04952028fa as stored in the search index (the lines
                read match the layout commit 2f6d7c1 recorded by refsim.formats.marlin).

One block's 8 warps for the m <= 16 tile (thread_k = thread_n = 128, W_n = 2, W_k = 4)::

                 n 0..63        n 64..127
    k16 block 0  warp 0         warp 1        k-warp 0  (also blocks 4)
    k16 block 1  warp 2         warp 3        k-warp 1  (also 5)
    k16 block 2  warp 4         warp 5        k-warp 2  (also 6)
    k16 block 3  warp 6         warp 7        k-warp 3  (also 7)
    reduce:  a0 + (a1 + (a3 + a2))   (k-warps, fp32, through shared memory)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import require_dtype, require_fields, require_finite, require_int, require_ndim
from refsim.arith import fp
from refsim.arith import mma_steps, tensor_core as tc
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin, stripes

__all__ = ["marlin_gemm", "marlin_gemm_reference", "Provenance", "provenance", "check_inputs"]


def check_inputs(A, B, s, arch, sms):
    """The rules of one Marlin GEMM call, shared by the emulator and the CUDA host (refsim.cuda.marlin):
    ``A`` float16 (M, K) finite; ``B`` int32 (K/16, 2N) packed tiles; ``s`` float16 (G, N) finite,
    G >= 1 (G = 1: per-channel, else group size K/G); ``arch`` a tensor-core model's name; ``sms``
    an int >= 1. Returns ``(A, B, s, sms, K, N, group_size)``, else the RefsimError naming the rule."""
    A = require_dtype("A", A, np.float16)
    require_ndim("A", A, 2)
    require_finite("A", A)                       # before the tensor-core model sees a NaN/Inf
    B = require_ndim("B", require_dtype("B", B, np.int32), 2)
    s = require_ndim("s", require_dtype("s", s, np.float16), 2)
    require_finite("s", s)
    tc.model(arch)
    sms = require_int("sms", sms, minimum=1)
    k, n = 16 * B.shape[0], B.shape[1] // 2
    if B.shape[1] % 2 or s.shape[1] != n or s.shape[0] < 1:
        raise ShapeError(f"B, s: B must be (K/16, 2N) and s (G, N) with G >= 1; got {B.shape} and {s.shape}")
    if A.shape[1] != k:
        raise ShapeError(f"A: must have K = 16 * B.shape[0] = {k} columns; got shape {A.shape}")
    group_size = None if s.shape[0] == 1 else k // s.shape[0]
    return A, B, s, sms, k, n, group_size


def _problem_rows(launch, problem: int, m_total: int) -> range:
    rows_per = 16 * launch.thread_m_blocks
    start = launch.row_start + problem * rows_per
    return range(start, min(start + rows_per, launch.row_start + launch.prob_m, m_total))


def _column_slices(launch, problem: int):
    """Per n-tile: slices sorted by k_tile_start (position 0 = top, holds k-tile 0)."""
    cols: dict[int, list] = {}
    for stripe in launch.blocks:
        for sl in stripe:
            if sl.problem == problem:
                cols.setdefault(sl.n_tile, []).append(sl)
    return {nt: sorted(v, key=lambda x: x.k_tile_start) for nt, v in cols.items()}


def _block_reduce(parts: np.ndarray) -> np.ndarray:
    """``thread_block_reduce`` over the k-warp axis 0 (fp32, the kernel's association)."""
    if parts.shape[0] == 4:
        return fp.f32_add(parts[0], fp.f32_add(parts[1], fp.f32_add(parts[3], parts[2])))
    if parts.shape[0] == 2:
        return fp.f32_add(parts[0], parts[1])
    return parts[0]


def marlin_gemm(A: np.ndarray, B: np.ndarray, s: np.ndarray, *, arch: str = "sm_80", sms: int = 108,
                max_par: int = 16, thread_k: int | None = None, thread_n: int | None = None) -> np.ndarray:
    """What the official Marlin kernel writes for ``C = A @ W`` on ``arch`` with ``sms`` SMs.

    A: float16 (M, K), finite. B: int32 (K/16, 2N), s: float16 (G, N) as from
    :func:`refsim.formats.marlin.pack` (grouped iff G > 1; group size 128). arch: 'sm_80' ..
    'sm_90' (the tensor-core model; Marlin itself needs sm_80+). sms: grid size (A100: 108).
    max_par: as the Python ``marlin.mul`` passes it (16). Returns float16 (M, N).
    """
    A, B, s, sms, k, n, group_size = check_inputs(A, B, s, arch, sms)
    return _gemm(A, B, s, arch, sms, max_par, thread_k, thread_n, native=None)


def _gemm(A, B, s, arch, sms, max_par, thread_k, thread_n, *, native):
    """The body of :func:`marlin_gemm` on checked inputs; ``native`` as in
    :func:`refsim.arith.mma_steps.mma_k16_f32_steps` (tests pin both paths)."""
    m, k = A.shape
    n = B.shape[1] // 2
    group_size = None if s.shape[0] == 1 else k // s.shape[0]
    plan = stripes.stripes(m, n, k, sms, group_size, max_par=max_par, thread_k=thread_k, thread_n=thread_n)
    cfg = plan.config
    Wk, TKB, tn = cfg.warps_k, cfg.thread_k_blocks, cfg.thread_n
    steps = TKB // Wk
    Bq = marlin.dequantize(B, s)                                   # (K, N) fp16 tensor-core operand
    b_op = mma_steps.MmaOperand(Bq)                                       # (K, N)
    a_op = mma_steps.MmaOperand(A)                                        # (M, K)
    out_scale = None if group_size is not None else marlin.unpermute_scales(s)[0]  # (N,)
    C = np.empty((m, n), np.float16)
    for launch in plan.launches:
        for problem in range(launch.parallel):
            rows = _problem_rows(launch, problem, m)
            if len(rows) == 0:
                continue
            R = len(rows)
            col_sl = _column_slices(launch, problem)
            # per column n: slice position of every k-tile, and the number of slices
            pos_t = np.zeros((launch.n_tiles, launch.k_tiles), np.int64)
            count_t = np.zeros(launch.n_tiles, np.int64)
            for nt, sls in col_sl.items():
                count_t[nt] = len(sls)
                for p_i, sl in enumerate(sls):
                    pos_t[nt, sl.k_tile_start:sl.k_tile_start + sl.k_tile_count] = p_i
            pos_n = np.repeat(pos_t, tn, axis=0)                   # (N, k_tiles)
            count_n = np.repeat(count_t, tn)                       # (N,)
            max_count = int(count_t.max())
            rows_sl = slice(rows.start, rows.stop)
            acc = np.zeros((Wk, R, n), np.float32)
            parts = np.zeros((max_count, Wk, R, n), np.float32)
            for tile in range(launch.k_tiles):
                if tile > 0:
                    changed = pos_n[:, tile] != pos_n[:, tile - 1]
                    if changed.any():
                        for q in np.unique(pos_n[changed, tile - 1]):
                            cols = changed & (pos_n[:, tile - 1] == q)
                            parts[q][..., cols] = acc[..., cols]
                            acc[..., cols] = 0.0
                for s2 in range(steps):
                    kbs = tile * TKB + np.arange(Wk) + Wk * s2          # k16 block of each k-warp
                    acc = mma_steps.mma_k16_f32_steps(arch, a_op, b_op, kbs, acc, rows=rows_sl, native=native)
            last = pos_n[:, -1]
            for q in np.unique(last):
                cols = last == q
                parts[q][..., cols] = acc[..., cols]
            P = np.stack([_block_reduce(parts[q]) for q in range(max_count)])  # (max_count, R, N)
            # global reduction: slice_idx 0 is position count-1 (bottom), the top (position 0) is last
            final = P[0].copy()
            H = np.take_along_axis(P, (count_n - 1)[None, None, :].repeat(R, axis=1), axis=0)[0]
            H = fp.cvt_f32_to_f16(H)
            for j in range(1, max_count):
                pos = count_n - 1 - j                               # (N,)
                active = pos >= 0
                Pj = np.take_along_axis(P, np.maximum(pos, 0)[None, None, :].repeat(R, axis=1), axis=0)[0]
                summed = fp.f32_add(Pj, fp.cvt_f16_to_f32(H))
                top = active & (pos == 0)
                final = np.where(top, summed, final)
                H = np.where(active & (pos > 0), fp.cvt_f32_to_f16(summed), H)
            out = fp.cvt_f32_to_f16(final)
            if out_scale is not None:
                out = fp.f16_mul(out, out_scale[None, :])
            C[rows.start:rows.stop] = out
    return C


def _check_cols(cols, n: int) -> list[int]:
    """``cols``: a list or tuple of column indices in [0, N)."""
    if not isinstance(cols, (list, tuple)):
        raise FormatRuleError(f"cols: must be None or a list of column indices; got {type(cols).__name__}")
    out = [require_int(f"cols[{i}]", c, minimum=0) for i, c in enumerate(cols)]
    if any(c >= n for c in out):
        raise ShapeError(f"cols: column indices must lie in [0, {n}); got {max(out)}")
    return out


def marlin_gemm_reference(A: np.ndarray, B: np.ndarray, s: np.ndarray, *, arch: str = "sm_80", sms: int = 108,
                          max_par: int = 16, thread_k: int | None = None, thread_n: int | None = None,
                          cols=None) -> np.ndarray:
    """Plain-loop twin of :func:`marlin_gemm`: one output element at a time, scalar T-FDPA blocks,
    the slices of its column visited in reduction order. Slow (about 0.5 ms per T-FDPA block):
    ``cols`` (a list of column indices) restricts the work; the result is then (M, len(cols))."""
    A, B, s, sms, k, n, group_size = check_inputs(A, B, s, arch, sms)
    m = A.shape[0]
    plan = stripes.stripes(m, n, k, sms, group_size, max_par=max_par, thread_k=thread_k, thread_n=thread_n)
    cfg = plan.config
    L = tc.model(arch).block
    Bq = marlin.dequantize(B, s)
    scales = None if group_size is not None else marlin.unpermute_scales(s)[0]
    cols = list(range(n)) if cols is None else _check_cols(cols, n)
    C = np.empty((m, len(cols)), np.float16)
    for launch in plan.launches:
        for problem in range(launch.parallel):
            rows = _problem_rows(launch, problem, m)
            col_sl = _column_slices(launch, problem)
            for row in rows:
                for ci, col in enumerate(cols):
                    sls = col_sl[col // cfg.thread_n]
                    partial = {}
                    for sl in sls:
                        accs = []
                        for w in range(cfg.warps_k):
                            acc = np.float32(0.0)
                            for tile in sl.k_tiles:
                                for s2 in range(cfg.thread_k_blocks // cfg.warps_k):
                                    kb = tile * cfg.thread_k_blocks + w + cfg.warps_k * s2
                                    for k0 in range(16 * kb, 16 * kb + 16, L):
                                        acc = tc.fdpa(arch, A[row, k0:k0 + L], Bq[k0:k0 + L, col],
                                                      np.asarray(acc, np.float32), np.float32)[()]
                            accs.append(np.float32(acc))
                        if len(accs) == 4:
                            p = accs[0] + (accs[1] + (accs[3] + accs[2]))
                        elif len(accs) == 2:
                            p = accs[0] + accs[1]
                        else:
                            p = accs[0]
                        partial[sl.slice_idx] = np.float32(p)
                    count = len(sls)
                    if count == 1:
                        final = partial[0]
                    else:
                        h = np.float16(partial[0])
                        for idx in range(1, count - 1):
                            h = np.float16(np.float32(partial[idx] + np.float32(h)))
                        final = np.float32(partial[count - 1] + np.float32(h))
                    out = np.float16(final)
                    if scales is not None:
                        out = np.float16(np.float32(out) * np.float32(scales[col]))
                    C[row, ci] = out
    return C


@dataclass(frozen=True)
class Provenance:
    """Where one output element C[row, col] of the Marlin kernel comes from."""

    row: int
    col: int
    launch: int
    problem: int
    n_tile: int
    n_warp: int          # warp column inside the block (64 columns each)
    sub_tile: int        # j: which 16-column sub-tile of the warp's 64 columns
    lane: int            # lane holding the fp32 accumulator (C fragment of m16n8k16)
    c_register: int      # c0..c3 inside that lane
    slices: tuple        # (block, first k-tile, last k-tile, slice_idx) in reduction order
    writer_block: int
    k_warps: int
    thread_k: int

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    def __str__(self) -> str:
        order = " -> ".join(f"block {b} (k-tiles {a}-{z}, slice_idx {i})" for b, a, z, i in self.slices)
        return (f"C[{self.row}, {self.col}]: launch {self.launch}, problem {self.problem}, n-tile {self.n_tile}; "
                f"n-warp {self.n_warp}, sub-tile {self.sub_tile}, lane {self.lane}, register c{self.c_register} "
                f"of each of {self.k_warps} k-warps; k-tiles of {self.thread_k} in reduction order: {order}; "
                f"written by block {self.writer_block}")


def provenance(m: int, n: int, k: int, row: int, col: int, *, group_size=None, sms: int = 108,
               max_par: int = 16) -> Provenance:
    """Which launch, block(s), warp, lane, register and k-tiles produce C[row, col] (ints)."""
    plan = stripes.stripes(m, n, k, sms, group_size, max_par=max_par)
    m, n = plan.m, plan.n
    row = require_int("row", row, minimum=0)
    col = require_int("col", col, minimum=0)
    if col >= n:
        raise ShapeError(f"col: must lie in [0, {n}); got {col}")
    cfg = plan.config
    for li, launch in enumerate(plan.launches):
        for problem in range(launch.parallel):
            rows = _problem_rows(launch, problem, m)
            if row in rows:
                nt = col // cfg.thread_n
                sls = sorted(_column_slices(launch, problem)[nt], key=lambda x: x.slice_idx)
                within = col % cfg.thread_n
                lane = 4 * (row % 8) + (col % 8) // 2
                return Provenance(row, col, li, problem, nt, within // 64, (within % 64) // 16, lane,
                                  2 * ((row % 16) // 8) + col % 2,
                                  tuple((x.block, x.k_tile_start, x.k_tile_start + x.k_tile_count - 1, x.slice_idx)
                                        for x in sls),
                                  sls[-1].block, cfg.warps_k, cfg.thread_k)
    raise ShapeError(f"row: must lie in [0, {m}); got {row}")
