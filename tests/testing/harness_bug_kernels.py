"""Kernels a kernel author might write, each with one realistic bug, for the harness's own tests
and ``bench/bench_harness.py``.

``marlin_port`` is an independent Python port of the Marlin kernel written from the public parts
of refsim (the stripe plan, the packed format's dequantization, one k16 step of ``mma.m16n8k16`` at a
time through the tensor-core model's fast path :func:`refsim.arith.mma_steps.mma_k16_f32_steps`, fp16/fp32 primitives): with no bug it
must pass ``check_kernel``; each keyword switches one bug on. The other formats' bug kernels wrap
the emulator's public pieces with one step done the wrong way.
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fp
from refsim.arith import integer_mma, mma_steps
from refsim.formats import marlin, stripes


def _swap_byte_nibbles(B):
    u = B.view(np.uint32)
    lo, hi = u & np.uint32(0x0F0F0F0F), (u >> np.uint32(4)) & np.uint32(0x0F0F0F0F)
    return ((lo << np.uint32(4)) | hi).view(np.int32)


def _chain(arch, a_op, b_op, kb, acc, rows, a, b, fp32_accumulate):
    """acc (Wk, R, tn) f32 after one k16 step per k-warp (k16 block kb[w] for k-warp w): the tensor
    core through refsim's fast T-FDPA step (same bits as ``mma_m16n8k16``), or the bug: a
    k-ascending fp32 FFMA chain over a (Wk, R, 16) and b (Wk, tn, 16) fp16 (k last)."""
    if not fp32_accumulate:
        return mma_steps.mma_k16_f32_steps(arch, a_op, b_op, kb, acc, rows=rows)
    af, bf = fp.cvt_f16_to_f32(a), fp.cvt_f16_to_f32(b)
    for kk in range(16):
        acc = fp.f32_fma(af[:, :, None, kk], bf[:, None, :, kk], acc, fused=True)
    return acc


def marlin_port(A, B, s, *, arch="sm_80", sms=108, reduce_assoc="kernel", global_fp32=False,
                fp32_accumulate=False, nibbles_swapped=False, last_scale_from_previous=False):
    """C (M, N) float16 for Marlin's inputs, computed tile by tile like the kernel (see module doc).

    Bugs: ``sms`` other than the check's; ``reduce_assoc='left'`` (((a0+a1)+a2)+a3) instead of
    a0+(a1+(a3+a2)); ``global_fp32`` (carry the slice sums in fp32, no fp16 round trips);
    ``fp32_accumulate`` (FFMA chain instead of the tensor core); ``nibbles_swapped`` (high and low
    nibble of each byte read in the wrong order); ``last_scale_from_previous``."""
    m, k = A.shape
    n = B.shape[1] // 2
    grouped = s.shape[0] > 1
    if last_scale_from_previous and grouped:
        s = s.copy()
        s[-1] = s[-2]
    W = marlin.dequantize(_swap_byte_nibbles(B) if nibbles_swapped else B, s)       # (K, N) fp16
    plan = stripes.stripes(m, n, k, sms, 128 if grouped else None)
    cfg = plan.config
    Wk, TKB, tk, tn = cfg.warps_k, cfg.thread_k_blocks, cfg.thread_k, cfg.thread_n
    col_scale = None if grouped else marlin.unpermute_scales(s)[0]
    C = np.zeros((m, n), np.float16)
    a_op = mma_steps.MmaOperand(A)
    for la in plan.launches:
        rows_per = 16 * la.thread_m_blocks
        for p in range(la.parallel):
            r0 = la.row_start + p * rows_per
            r1 = min(r0 + rows_per, la.row_start + la.prob_m, m)
            if r1 <= r0:
                continue
            Ar = A[r0:r1]
            R = r1 - r0
            for nt in range(la.n_tiles):
                cols = slice(nt * tn, (nt + 1) * tn)
                Wt = W[:, cols].T                                                    # (tn, K)
                b_op = mma_steps.MmaOperand(np.ascontiguousarray(W[:, cols]))               # (K, tn)
                sls = sorted((x for b in la.blocks for x in b if x.problem == p and x.n_tile == nt),
                             key=lambda x: x.slice_idx)                          # bottom first
                carry = None
                for x in sls:
                    acc = np.zeros((Wk, R, tn), np.float32)
                    for tile in x.k_tiles:
                        for step in range(TKB // Wk):
                            kb = tile * TKB + np.arange(Wk) + Wk * step            # k16 block per warp
                            ks = (16 * kb[:, None] + np.arange(16)).ravel()
                            a = b = None
                            if fp32_accumulate:
                                a = Ar[:, ks].reshape(R, Wk, 16).transpose(1, 0, 2)   # (Wk, R, 16)
                                b = Wt[:, ks].reshape(tn, Wk, 16).transpose(1, 0, 2)  # (Wk, tn, 16)
                            acc = _chain(arch, a_op, b_op, kb, acc, slice(r0, r1), a, b, fp32_accumulate)
                    parts = [acc[w] for w in range(Wk)]
                    if Wk == 4 and reduce_assoc == "kernel":
                        P = fp.f32_add(parts[0], fp.f32_add(parts[1], fp.f32_add(parts[3], parts[2])))
                    elif Wk == 4:
                        P = fp.f32_add(fp.f32_add(fp.f32_add(parts[0], parts[1]), parts[2]), parts[3])
                    else:
                        P = fp.f32_add(parts[0], parts[1])
                    if carry is not None:
                        P = fp.f32_add(P, carry if global_fp32 else fp.cvt_f16_to_f32(carry))
                    carry = P if global_fp32 else fp.cvt_f32_to_f16(P)
                out = fp.cvt_f32_to_f16(P)                                       # (R, tn)
                if col_scale is not None:
                    out = fp.f16_mul(out, col_scale[cols][None, :])
                C[r0:r1, cols] = out
    return C


# ----------------------------------------------------------------------------------------------
# other formats


def anyprec_fp32_partials(x, q, lut):
    """Any-Precision GEMV whose lanes keep their chunk partials in fp32 (one fp16 rounding at the
    end of the lane) instead of ``__hadd`` in fp16: the chains and the tree are the kernel's."""
    from refsim.emulator import anyprec_kernel as ek
    from refsim.formats import bitplane

    m, k = x.shape
    bits = q.shape[0]
    W = np.take_along_axis(lut, bitplane.unpack(q[:bits]).astype(np.int64), axis=1)   # (N, K)
    k0, k1, active = ek.lane_indices(k)
    partial = np.zeros((m, W.shape[0], 32), np.float32)
    for i in range(k0.shape[0]):
        sx = np.zeros((m, W.shape[0], 32), np.float16)
        sy = np.zeros_like(sx)
        for step in range(16):
            sx = fp.f16_fma(W[:, k0[i, :, step]][None], x[:, k0[i, :, step]][:, None], sx, fused=True)
            sy = fp.f16_fma(W[:, k1[i, :, step]][None], x[:, k1[i, :, step]][:, None], sy, fused=True)
        upd = fp.f32_add(partial, fp.cvt_f16_to_f32(fp.f16_add(sx, sy)))
        partial = np.where(active[i][None, None, :], upd, partial)
    return ek.warp_reduce_sum(fp.cvt_f32_to_f16(partial))


def mixed_outliers_after_rounding(x, *packed):
    """2/4/16 GEMV that rounds the dense sum to fp16 and then adds the outliers (the
    ``fp16(fp16(dense) + sparse)`` double rounding of a separate SpMV launch)."""
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.formats import mixed_2_4_16 as mixed

    p = mixed.Packed2416(*packed)
    dense = fp.cvt_f16_to_f32(fp.cvt_f32_to_f16(mx.dense_rows(p, x)))
    return fp.cvt_f32_to_f16(mx.spmv_epilogue(dense, p, x))


def mma_fp32_chain(A, B, C):
    """One mma.m16n8k16 .f32 computed as a k-ascending fp32 FFMA chain (no truncated fused dot)."""
    af, bf = A.astype(np.float32), B.astype(np.float32)
    d = C.copy()
    for kk in range(16):
        d = fp.f32_fma(af[:, kk:kk + 1], bf[kk:kk + 1, :], d, fused=True)
    return d


def atom_fp32_scale_product(a_q4, a_s4, a_q8, a_s8, w_q4, w_s4, w_q8, w_s8):
    """Atom group GEMM whose epilogue multiplies the row and column scales in fp32 instead of
    ``__hmul2`` (fp16): the s4/s8 mma slabs and the FFMA order are the kernel's."""
    m, n = a_q4.shape[0], w_q4.shape[1]
    acc = np.zeros((m, n), np.float32)

    def epilogue(acc, c, sa, sb):
        s = fp.f32_mul(fp.cvt_f16_to_f32(sa)[:, None], fp.cvt_f16_to_f32(sb)[None, :])
        return fp.f32_fma(fp.cvt_int_to_f32(c), s, acc, fused=True)

    for gi in range(a_s4.shape[1]):
        c = np.zeros((m, n), np.int32)
        for k0 in range(128 * gi, 128 * gi + 128, 64):
            c = integer_mma.mma_int(a_q4[:, k0:k0 + 64], w_q4[k0:k0 + 64], c, atype="s4", btype="s4")
        acc = epilogue(acc, c, a_s4[:, gi], w_s4[gi])
    if a_q8.shape[1]:
        c = np.zeros((m, n), np.int32)
        for k0 in range(0, a_q8.shape[1], 32):
            c = integer_mma.mma_int(a_q8[:, k0:k0 + 32], w_q8[k0:k0 + 32], c, atype="s8", btype="s8")
        acc = epilogue(acc, c, a_s8, w_s8)
    return fp.cvt_f32_to_f16(acc)


# ----------------------------------------------------------------------------------------------
# W4A16 GEMV for GPTQ and AWQ checkpoints, ported from refsim/cuda/gptq_awq.cu's spec block


def _nibbles(words, shifts):
    """(R, C) uint32 words -> (R, len(shifts), C) nibbles at those bit shifts."""
    return (words.view(np.uint32)[:, None, :] >> shifts.astype(np.uint32)[None, :, None]) & np.uint32(0xF)


def _w4a16(x, W, *, accumulate):
    """y (M, N) f16 for x (M, K) f16 and dequantized W (K, N) f16, summed as ``accumulate`` says:
    'design' (per slab two 4-step fp16 hfma2 chains, fp16 add, fp32 across slabs), 'fp16' (the
    same slab sums in an fp16 accumulator), 'fp32_chain' (one fp32 FMA chain over k),
    'split_k_fp32' (4 warps, each an fp32 FMA chain over its contiguous quarter of K, their partials
    added in fp32: a legitimate split-K) or 'split_k_fp16' (the same with the cross-warp sum kept
    in fp16: the precision bug)."""
    m, k = x.shape
    n = W.shape[1]
    if accumulate in ("split_k_fp32", "split_k_fp16"):
        warps = 4
        total = np.zeros((m, n), np.float32 if accumulate == "split_k_fp32" else np.float16)
        for w in range(warps):
            part = _w4a16(x[:, w * k // warps:(w + 1) * k // warps], W[w * k // warps:(w + 1) * k // warps],
                          accumulate="fp32_partial")
            if accumulate == "split_k_fp32":
                total = fp.f32_add(total, part)
            else:
                total = fp.f16_add(total, fp.cvt_f32_to_f16(part))
        return fp.cvt_f32_to_f16(total) if accumulate == "split_k_fp32" else total
    if accumulate in ("fp32_chain", "fp32_partial"):
        acc = np.zeros((m, n), np.float32)
        for kk in range(k):
            acc = fp.f32_fma(fp.cvt_f16_to_f32(x[:, kk:kk + 1]), fp.cvt_f16_to_f32(W[kk:kk + 1]), acc, fused=True)
        return acc if accumulate == "fp32_partial" else fp.cvt_f32_to_f16(acc)
    acc = np.zeros((m, n), np.float32 if accumulate == "design" else np.float16)
    for k0 in range(0, k, 8):
        hx = np.zeros((m, n), np.float16)
        hy = np.zeros((m, n), np.float16)
        for i in range(4):
            hx = fp.f16_fma(W[k0 + 2 * i][None, :], x[:, k0 + 2 * i, None], hx, fused=True)
            hy = fp.f16_fma(W[k0 + 2 * i + 1][None, :], x[:, k0 + 2 * i + 1, None], hy, fused=True)
        h = fp.f16_add(hx, hy)
        acc = fp.f32_add(acc, fp.cvt_f16_to_f32(h)) if accumulate == "design" else fp.f16_add(acc, h)
    return acc if accumulate != "design" else fp.cvt_f32_to_f16(acc)


def _dequant(q, z, s):
    """fp16(q - z) * s in fp16 (one rounding), all (K, N)."""
    return (q.astype(np.int32) - z.astype(np.int32)).astype(np.float16) * s


def gptq_port(x, qweight, qzeros, scales, g_idx, *, v2=False, zero_plus_one=None, rows_reversed=False,
              ignore_g_idx=False, group_per_slab=False, accumulate="design"):
    """y (M, N) f16 of a GPTQ 4-bit checkpoint (v1 zeros read ``field + 1``; ``v2``: as stored).

    Bugs: ``zero_plus_one`` (True/False overrides the convention: v1 read as v2 or v2 read as v1);
    ``rows_reversed`` (row k0 + e from nibble 7 - e); ``ignore_g_idx`` (group k // group_size);
    ``group_per_slab`` (rows k0..k0+7 take g_idx[k0]); ``accumulate`` 'fp16' or 'fp32_chain'."""
    k, n = x.shape[1], scales.shape[1]
    shifts = 4 * (np.arange(7, -1, -1) if rows_reversed else np.arange(8))
    q = _nibbles(qweight, shifts).reshape(k, n)                                      # (K/8, 8, N) -> (K, N)
    plus = (not v2) if zero_plus_one is None else zero_plus_one
    z = _nibbles(qzeros.T.copy(), 4 * np.arange(8)).transpose(2, 0, 1).reshape(scales.shape[0], n) + int(plus)
    g = g_idx.astype(np.int64)
    if ignore_g_idx:
        g = np.arange(k) // (k // scales.shape[0])
    if group_per_slab:
        g = np.repeat(g[::8], 8)
    return _w4a16(x, _dequant(q, z[g], scales[g]), accumulate=accumulate)


def awq_port(x, qweight, qzeros, scales, *, interleave_ignored=False, zero_plus_one=False, accumulate="design"):
    """y (M, N) f16 of an AWQ checkpoint: column c of a word in nibble (c >> 1) + 4 (c & 1).

    Bugs: ``interleave_ignored`` (column 8j + i from nibble i, in qweight and qzeros);
    ``zero_plus_one`` (zeros read as stored + 1); ``accumulate`` as :func:`gptq_port`."""
    k, n = x.shape[1], scales.shape[1]
    c = np.arange(8)
    shifts = 4 * (c if interleave_ignored else (c >> 1) + 4 * (c & 1))
    q = _nibbles(qweight, shifts).transpose(0, 2, 1).reshape(k, n)                   # (K, N/8, 8) -> (K, N)
    z = _nibbles(qzeros, shifts).transpose(0, 2, 1).reshape(scales.shape[0], n) + int(zero_plus_one)
    g = np.arange(k) // (k // scales.shape[0])
    return _w4a16(x, _dequant(q, z[g], scales[g]), accumulate=accumulate)
