"""Warp-level emulation of vLLM's Marlin kernel on FP8 and NVFP4 weights: what it writes, bit for bit.

Spec
----
computes        C (M, N) float16 = A (M, K) float16 @ W (K, N), W prepared by
                :func:`refsim.formats.marlin_fp.prepare_fp8` (``B`` int32 (K/16, 4N), ``s`` float16 (1, N))
                or :func:`refsim.formats.marlin_fp.prepare_nvfp4` (``B`` int32 (K/16, 2N), ``s`` uint8
                (K/16, N), ``g`` float32 (1,)), for one architecture's tensor core (:mod:`refsim.arith.tensor_core`).
kernel          ``Marlin<kFloat16, kFE4M3fn, kFloat16, kFloat16, 256, 1, 8, 8, false, 4, -1, false>`` and
                ``Marlin<kFloat16, kFE2M1f, kFloat16, kFE4M3fn, 256, 1, 8, 8, false, 4, 1, false>``: 256
                threads, 16 x 128 x 128 block tile (thread_m_blocks 1, thread_n_blocks 8, thread_k_blocks 8).
geometry        the launches :func:`refsim.cuda.official_vllm.vllm_marlin_fp_gemm` makes: the rows as the host
                loop splits them (:func:`row_launches`), ``sms`` blocks each (None: one block per tile, so
                every column tile is one slice over all of K); the kernel's striped partition
                (``init_slice``: part 1 whole tiles, part 2 ``iters`` k-tiles per block) is
                :func:`slices`; ``use_atomic_add`` false.
dataflow        in the kernel's order (vLLM 0.33.0 ``csrc/quantization/marlin/marlin_template.h``):
                1. B operand (``matmul``): fp8: the shift trick's exact ``e4m3 * 2^-8``; nvfp4: the shift
                   trick's ``e2m1 * 2^-14`` times the S0E5M3 scale of its 16-row group (``scale``,
                   ``__hmul2``, one fp16 RN): :func:`refsim.formats.marlin_fp.kernel_operand`;
                2. 8 warps = 2 n-warps x 4 k-warps; k-warp w chains ``mma.m16n8k16.f32`` over the k16
                   blocks ``8 tile + 2 w + s`` (s = 0, 1; ``b_sh_wr_iters`` = 2 consecutive blocks, unlike
                   the official Marlin's stride), tiles in increasing order, from an fp32 zero;
                3. ``thread_block_reduce``: ``a0 + (a1 + (a3 + a2))`` in fp32, per slice;
                4. fp8 (8-bit, per-channel): ``scale_float`` = ``__fmul_rn(c, float(s[n]))``, one fp32
                   rounding, on every slice's partial before the global reduction;
                5. global reduction when a tile has several slices, in slice_idx order (0 first): each
                   slice adds the carried value to its partial in fp32 and, unless last, carries the sum:
                   as fp16 in C (``global_reduce_fp16``) or as fp32 in C_tmp (``fp32_reduce``,
                   ``global_reduce_fp32``, vLLM's default);
                6. ``write``: nvfp4: ``c * global_scale`` (fp32); then ``__float2half_rn``.
oracle          :func:`vllm_marlin_fp_gemm_reference` (plain loops, the scalar
                :func:`refsim.arith.tensor_core.fdpa`); the compiled kernel through refsim.ptx is checked
                against :func:`vllm_marlin_fp_gemm` bit for bit (tests/cuda/test_official_vllm.py).
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (require_bool, require_bounded, require_choice, require_dtype, require_finite,
                              require_instance, require_int, require_ndim, require_shape)
from refsim.arith import fp
from refsim.arith import mma_steps, tensor_core as tc
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin, marlin_fp, stripes

__all__ = ["THREAD_K", "THREAD_N", "K_WARPS", "check_inputs", "row_launches", "slices", "vllm_marlin_fp_gemm",
           "vllm_marlin_fp_gemm_reference"]

THREAD_K = 128        # thread_k_blocks 8
THREAD_N = 128        # thread_n_blocks 8
K_WARPS = 4           # 256 threads / (thread_n / 64 n-warps * 32)
_STEPS = THREAD_K // 16 // K_WARPS     # b_sh_wr_iters: consecutive k16 blocks per k-warp and tile
MAX_TILES = 1 << 22    # bounds the partition's per-tile lists (a 2M x 64K x 64K GEMM fits)


def check_inputs(kind, A, B, s, global_scale, arch):
    """The rules of one call: ``kind`` in ``marlin_fp.KINDS``; ``A`` float16 (M, K) finite, M >= 1;
    fp8: ``B`` int32 (K/16, 4N), ``s`` float16 (1, N) finite; nvfp4: ``B`` int32 (K/16, 2N), ``s`` uint8
    (K/16, N), ``global_scale`` float32 (1,) finite; K % 128 and N % 128 (the instantiated tile);
    ``arch`` a tensor-core model. Returns ``(kind, A, B, s, global_scale, K, N)``."""
    kind = require_choice("kind", kind, marlin_fp.KINDS)
    A = require_finite("A", require_ndim("A", require_dtype("A", A, np.float16), 2))
    B = require_ndim("B", require_dtype("B", B, np.int32), 2)
    tc.model(arch)
    k = 16 * B.shape[0]
    n = B.shape[1] // (4 if kind == "fp8" else 2)
    if k % THREAD_K or n % THREAD_N or k == 0 or n == 0 or A.shape[0] == 0:
        raise ShapeError(f"B: the kernel's 128x128 tile needs K % 128 == 0 and N % 128 == 0, M >= 1; got B "
                         f"{B.shape} (K = {k}, N = {n}) and A {A.shape}")
    if A.shape[1] != k:
        raise ShapeError(f"A: must have K = 16 * B.shape[0] = {k} columns; got shape {A.shape}")
    if kind == "fp8":
        s = require_finite("s", require_shape("s", require_dtype("s", s, np.float16), (1, n)))
        if global_scale is not None:
            raise FormatRuleError("global_scale: only nvfp4 has a tensor scale; got one for fp8")
    else:
        s = require_shape("s", require_dtype("s", s, np.uint8), (k // 16, n))
        if global_scale is None:
            raise FormatRuleError("global_scale: nvfp4 needs the float32 (1,) tensor scale; got None")
        global_scale = require_finite("global_scale", require_shape(
            "global_scale", require_dtype("global_scale", global_scale, np.float32), (1,)))
    return kind, A, B, s, global_scale, k, n


def row_launches(m: int) -> list[tuple[int, int, int]]:
    """The host loop's launches for M rows with thread_m_blocks 1: ``[(row start, prob_m, parallel)]``:
    ``16 * (M // 16)`` rows as ``M // 16`` parallel 16-row chunks, then the ``M % 16`` tail."""
    m = require_int("M", m, minimum=1)
    out = [(0, 16 * (m // 16), m // 16), (16 * (m // 16), m % 16, 1)]
    return [x for x in out if x[1] > 0]


def _div_ceil(a: int, b: int) -> int:
    return -(-a // b)


def slices(parallel: int, n_tiles: int, k_tiles: int, grid: int) -> dict[tuple[int, int], list[tuple[int, int, int]]]:
    """The kernel's striped partition (``init_slice``, ``init_part1_slice``, ``init_part2_slice``, the
    main loop's slice advance), run on integers for every block: ``{(par_id, slice_col): [(block,
    first k-tile, k-tile count), ...] in slice_idx order}`` (slice_idx 0 first: the bottom slice, the one
    that starts the global reduction). group_blocks < thread_k_blocks (both instantiations), so
    ``iters`` is not rounded to whole groups."""
    parallel, n_tiles, k_tiles, grid = (require_int(n, v, minimum=1) for n, v in
                                        (("parallel", parallel), ("n_tiles", n_tiles), ("k_tiles", k_tiles),
                                         ("grid", grid)))
    require_bounded("grid", grid, stripes.MAX_SMS, what="SM count")
    require_bounded("parallel * n_tiles * k_tiles", parallel * n_tiles * k_tiles, MAX_TILES, what="tile count")
    total = parallel * n_tiles
    part2, part1_iters = total, 0
    if total > grid:
        part2 = total % grid
        if part2 * 3 <= grid:
            part2 += grid
        part1_iters = (total - part2) // grid
    iters = _div_ceil(k_tiles * part2, grid)
    out: dict = {}
    for b in range(grid):
        st = dict(col_par=b, row=0, iters_left=k_tiles, in_part2=False, part1=part1_iters, col=0, par=0,
                  idx=0, count=1)

        def init_slice():
            if not st["in_part2"] and not st["part1"]:
                st["in_part2"] = True
                st["col_par"], st["row"] = divmod(iters * b, k_tiles)
                st["par"], st["col"] = divmod(st["col_par"] + total - part2, n_tiles)
            if not st["in_part2"]:
                st["part1"] -= 1
                st["par"], st["col"] = divmod(st["col_par"], n_tiles)
                st["iters_left"], st["idx"], st["count"] = k_tiles, 0, 1
                return
            si = iters * (b + 1) - (k_tiles * st["col_par"] + st["row"])
            if si < 0 or st["col_par"] >= part2:
                si = 0
            st["iters_left"] = si
            if si == 0:
                return
            if st["row"] + si > k_tiles:
                st["iters_left"] = k_tiles - st["row"]
            st["count"], st["idx"] = 1, 0
            col_first = iters * _div_ceil(k_tiles * st["col_par"], iters)
            if col_first <= k_tiles * (st["col_par"] + 1):
                col_off = col_first - k_tiles * st["col_par"]
                st["count"] = _div_ceil(k_tiles - col_off, iters) + (1 if col_off > 0 else 0)
                delta_first = iters * b - col_first
                if delta_first < 0 or (col_off == 0 and delta_first == 0):
                    st["idx"] = st["count"] - 1
                else:
                    st["idx"] = st["count"] - 1 - delta_first // iters - (1 if col_off > 0 else 0)
            if st["col"] == n_tiles:
                st["col"], st["par"] = 0, st["par"] + 1

        init_slice()
        while st["iters_left"]:
            out.setdefault((st["par"], st["col"]), []).append((st["idx"], st["count"], b, st["row"], st["iters_left"]))
            st["row"] = 0
            if not st["in_part2"]:
                st["col_par"] += grid
            else:
                st["col_par"] += 1
                st["col"] += 1
            init_slice()
    result = {}
    for key, sl in out.items():
        sl.sort()
        assert [x[0] for x in sl] == list(range(len(sl))) and all(x[1] == len(sl) for x in sl), (key, sl)
        assert sorted(r for x in sl for r in range(x[3], x[3] + x[4])) == list(range(k_tiles)), (key, sl)
        result[key] = [(x[2], x[3], x[4]) for x in sl]
    assert sorted(result) == [(p, c) for p in range(parallel) for c in range(n_tiles)]
    return result


def _check_geometry(sms, fp32_reduce):
    if sms is not None:
        sms = require_bounded("sms", require_int("sms", sms, minimum=1), stripes.MAX_SMS, what="SM count")
    return sms, require_bool("fp32_reduce", fp32_reduce)


def _plan(m, n, k, sms):
    """Per launch of the host loop: ``(row ranges of each par_id, slices(...))``."""
    out = []
    for start, rows, parallel in row_launches(m):
        grid = parallel * (n // THREAD_N) if sms is None else sms
        par_rows = [range(start + 16 * p, start + 16 * p + min(rows, 16)) for p in range(parallel)]
        out.append((par_rows, slices(parallel, n // THREAD_N, k // THREAD_K, grid)))
    return out


def vllm_marlin_fp_gemm(kind: str, A: np.ndarray, B: np.ndarray, s: np.ndarray,
                        global_scale: np.ndarray | None = None, *, arch: str = "sm_80", sms: int | None = None,
                        fp32_reduce: bool = False) -> np.ndarray:
    """What vLLM's Marlin kernel writes for ``C = A @ W`` (``kind`` "fp8" or "nvfp4") on ``arch``:
    float16 (M, N). ``sms``: blocks per launch (None: one per tile, no global reduction);
    ``fp32_reduce``: the global reduction carries fp32 (C_tmp) instead of fp16 (C). Inputs as
    :func:`check_inputs` states; not modified."""
    kind, A, B, s, global_scale, k, n = check_inputs(kind, A, B, s, global_scale, arch)
    sms, fp32_reduce = _check_geometry(sms, fp32_reduce)
    return _gemm(kind, A, B, s, global_scale, arch, native=None, sms=sms, fp32_reduce=fp32_reduce)


def _gemm(kind, A, B, s, global_scale, arch, *, native, sms=None, fp32_reduce=False):
    m, k = A.shape
    W = marlin_fp.kernel_operand(kind, B, s)                                     # (K, N) fp16 operand
    n = W.shape[1]
    a_op = mma_steps.MmaOperand(A)                                               # (M, K)
    b_ops = [mma_steps.MmaOperand(np.ascontiguousarray(W[:, THREAD_N * c:THREAD_N * (c + 1)]))
             for c in range(n // THREAD_N)]                                      # (K, 128) per column tile
    chan = marlin.unpermute_scales(s)[0].astype(np.float32) if kind == "fp8" else None   # (N,)
    C = np.empty((m, n), np.float16)
    for par_rows, plan in _plan(m, n, k, sms):
        for (par, col), sls in plan.items():
            rows, cols = par_rows[par], slice(THREAD_N * col, THREAD_N * (col + 1))
            carry = None
            for i, (_block, first, count) in enumerate(sls):                   # slice_idx order
                acc = np.zeros((K_WARPS, len(rows), THREAD_N), np.float32)       # (W, R, 128)
                for tile in range(first, first + count):
                    for step in range(_STEPS):
                        kbs = tile * (THREAD_K // 16) + _STEPS * np.arange(K_WARPS) + step
                        acc = mma_steps.mma_k16_f32_steps(arch, a_op, b_ops[col], kbs, acc,
                                                          rows=slice(rows.start, rows.stop), native=native)
                P = fp.f32_add(acc[0], fp.f32_add(acc[1], fp.f32_add(acc[3], acc[2])))   # thread_block_reduce
                if chan is not None:
                    P = fp.f32_mul(P, chan[cols])                                # scale_float, per slice
                if carry is not None:
                    P = fp.f32_add(P, carry)                                     # global_reduce: P + carried
                carry = P if fp32_reduce else fp.cvt_f16_to_f32(fp.cvt_f32_to_f16(P))
            if chan is None:
                P = fp.f32_mul(P, global_scale)                                  # write: nvfp4 tensor scale
            C[rows.start:rows.stop, cols] = fp.cvt_f32_to_f16(P)
    return C


def vllm_marlin_fp_gemm_reference(kind: str, A: np.ndarray, B: np.ndarray, s: np.ndarray,
                                  global_scale: np.ndarray | None = None, *, arch: str = "sm_80",
                                  sms: int | None = None, fp32_reduce: bool = False, cols=None) -> np.ndarray:
    """Plain-loop twin of :func:`vllm_marlin_fp_gemm`: one output element at a time, scalar T-FDPA
    blocks in the kernel's chain order, its slices in reduction order. ``cols`` (a list of column
    indices) restricts the work; the result is then float16 (M, len(cols))."""
    kind, A, B, s, global_scale, k, n = check_inputs(kind, A, B, s, global_scale, arch)
    sms, fp32_reduce = _check_geometry(sms, fp32_reduce)
    L = tc.model(arch).block
    W = marlin_fp.kernel_operand(kind, B, s)
    if cols is None:
        cols = list(range(n))
    else:
        require_instance("cols", cols, (list, tuple), "a list of column indices")
        cols = [require_int(f"cols[{i}]", c, minimum=0) for i, c in enumerate(cols)]
    if any(c >= n for c in cols):
        raise ShapeError(f"cols: column indices must lie in [0, {n}); got {cols}")
    C = np.empty((A.shape[0], len(cols)), np.float16)
    for par_rows, plan in _plan(A.shape[0], n, k, sms):
        for (par, tile_col), sls in plan.items():
            for row in par_rows[par]:
                for ci, col in enumerate(cols):
                    if col // THREAD_N != tile_col:
                        continue
                    carry = None
                    for _block, first, count in sls:
                        accs = []
                        for w in range(K_WARPS):
                            acc = np.float32(0.0)
                            for tile in range(first, first + count):
                                for step in range(_STEPS):
                                    kb = tile * (THREAD_K // 16) + _STEPS * w + step
                                    for k0 in range(16 * kb, 16 * kb + 16, L):
                                        acc = tc.fdpa(arch, A[row, k0:k0 + L], W[k0:k0 + L, col],
                                                      np.asarray(acc, np.float32), np.float32)[()]
                            accs.append(np.float32(acc))
                        p = np.float32(accs[0] + np.float32(accs[1] + np.float32(accs[3] + accs[2])))
                        if kind == "fp8":
                            p = np.float32(p * np.float32(marlin.unpermute_scales(s)[0, col]))
                        if carry is not None:
                            p = np.float32(p + carry)
                        carry = p if fp32_reduce else np.float32(np.float16(p))
                    if kind == "nvfp4":
                        p = np.float32(p * global_scale[0])
                    C[row, ci] = np.float16(p)
    return C
