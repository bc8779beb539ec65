"""Independent ports of the weight-only GEMM kernels the block-scaled formats state, with bug switches:
each dequantizes from its format's spec (written here, not through refsim.testing.cases) and sums in
one fp32 chain over k ascending, rounded to fp16 once."""

import ml_dtypes
import numpy as np

from refsim.formats import bnb4, gguf

_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def chain(x, w, order=None):
    """y f16 (M, N) = fp16(sum_k x[:, k] * fp16(w[k])) in one fp32 chain (k ascending, or ``order``)."""
    w16 = w.astype(np.float16).astype(np.float32)
    acc = np.zeros((x.shape[0], w.shape[1]), np.float32)
    for k in (range(x.shape[1]) if order is None else order):
        acc = (acc + x[:, k:k + 1].astype(np.float32) * w16[k:k + 1]).astype(np.float32)
    with np.errstate(over="ignore"):
        y = acc.astype(np.float16)
    y[np.isnan(y)] = np.uint16(0x7FFF).view(np.float16)
    return y


def e4m3(codes, ftz=False):
    """float32 of e4m3 codes (ml_dtypes); ``ftz``: subnormals (exponent field 0) read as 0."""
    v = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return np.where((codes & 0x78) == 0, np.float32(0), v) if ftz else v


def fp8(x, weight, scale, block=False, ftz=False):
    """weight u8 (K, N), scale (1, N) or (K/128, N/128)."""
    s = np.repeat(np.repeat(scale, 128, 0), 128, 1)[:weight.shape[0], :weight.shape[1]] if block else scale
    return chain(x, (e4m3(weight, ftz) * s).astype(np.float32))


def _fp4_codes(blocks, swap=False):
    lo, hi = blocks & 0xF, blocks >> 4
    if swap:
        lo, hi = hi, lo
    return np.stack([lo, hi], -1).reshape(blocks.shape[0], -1)               # (N, K): low nibble first


def mxfp4(x, blocks, scales, swap=False, scale_twice=False):
    with np.errstate(over="ignore"):
        s = np.where(scales == 255, np.float32(np.nan), np.ldexp(np.float32(1), scales.astype(np.int32) - 127))
    s = np.repeat(s.astype(np.float32), 32, axis=1)                            # (N, K)
    w = (_E2M1[_fp4_codes(blocks, swap)] * s).astype(np.float32)
    if scale_twice:
        w = (w * s).astype(np.float32)
    return chain(x, np.ascontiguousarray(w.T))


def nvfp4(x, blocks, scales, t, scale_ftz=False):
    s = e4m3(scales, ftz=scale_ftz)
    s = np.where(np.isnan(s), s, (np.float32(t[0]) * s).astype(np.float32))
    w = (_E2M1[_fp4_codes(blocks)] * np.repeat(s, 16, axis=1)).astype(np.float32)
    return chain(x, np.ascontiguousarray(w.T))


def nf4(x, weight, absmax, swap=False):
    n, k = weight.size * 2 // x.shape[1], x.shape[1]
    hi, lo = weight >> 4, weight & 0xF
    if swap:
        hi, lo = lo, hi
    codes = np.stack([hi, lo], 1).reshape(-1)                                  # element 2i in the high nibble
    w = (bnb4.code_table("nf4")[codes] * np.repeat(absmax, 64)[:n * k]).astype(np.float32)
    return chain(x, np.ascontiguousarray(w.reshape(n, k).T))


def nf4_dq(x, weight, q, a2, code2, offset, no_offset=False):
    absmax = (code2[q] * np.repeat(a2, 256)[:q.size]).astype(np.float32)
    if not no_offset:
        absmax = (absmax + offset[0]).astype(np.float32)
    return nf4(x, weight, absmax)


def q4_0(x, weight, interleaved=False):
    b = weight.reshape(weight.shape[0], -1, 18)
    d = b[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)        # (N, blocks)
    qs = b[..., 2:]
    q = np.concatenate([qs & 0xF, qs >> 4], -1)                              # element j low, j + 16 high
    if interleaved:
        q = np.stack([qs & 0xF, qs >> 4], -1).reshape(q.shape)               # elements 2j, 2j+1 from byte j
    w = ((q.astype(np.float32) - 8) * d[..., None]).astype(np.float32).reshape(weight.shape[0], -1)
    return chain(x, np.ascontiguousarray(w.T))


def q8_0(x, weight, unsigned=False):
    b = weight.reshape(weight.shape[0], -1, 34)
    d = b[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    q = b[..., 2:].astype(np.float32) if unsigned else b[..., 2:].copy().view(np.int8).astype(np.float32)
    w = (q * d[..., None]).astype(np.float32).reshape(weight.shape[0], -1)
    return chain(x, np.ascontiguousarray(w.T))


def q4_k(x, weight, min_added=False):
    raw = weight.copy()
    if min_added:                                   # dmin's sign bit flipped: d*sc*q + dmin*m
        raw.reshape(raw.shape[0], -1, 144)[..., 3] ^= 0x80
    w = gguf.dequantize_reference(raw, "Q4_K", (weight.shape[0], x.shape[1]))
    return chain(x, np.ascontiguousarray(w.T))
