"""Weight-only GEMM cases of the FP8 and microscaling formats (:mod:`refsim.testing.cases.weight_only`
states the kernel contract and the dataflow; accuracy mode is the recommended mode)::

    fp8_channel  kernel(x f16 (M,K), weight u8 e4m3 (K,N), weight_scale f32 (1,N)) -> y f16 (M,N)
    fp8_block    kernel(x f16 (M,K), weight u8 e4m3 (K,N), weight_scale_inv f32 (ceil(K/128),ceil(N/128)))
    mxfp4        kernel(x f16 (M,K), blocks u8 (N,K/2), scales u8 E8M0 (N,K/32)) -> y f16 (M,N)
    nvfp4        kernel(x f16 (M,K), blocks u8 (N,K/2), scales u8 E4M3 (N,K/16), per_tensor_scale f32 (1,))

FP8 uses refsim.formats.fp8's (K, N) weight layout (compressed-tensors' "channel" and DeepGEMM's
128x128 "block128" scales; W = fl32(e4m3(code) * s)); the fp4 formats use refsim.formats.mx's
layout, blocks along the last axis of torch's (N, K) weight, two codes per byte, low nibble first
(W = fl32(e2m1(code) * 2^(s-127)) for MXFP4; fl32(e2m1(code) * fl32(t * e4m3(s))) for NVFP4).

Edges (the even columns of W; FP8-block: the tiles (i, j) with i + j even; fp4: the first block of every even row)::

    edge               fp8_channel / fp8_block        mxfp4                      nvfp4
    saturation         codes +-448 (0x7E / 0xFE)      codes +-6 (7 / 15)         codes +-6, scale 448
    subnormal_scales   e4m3 subnormal codes 0x01..07  e2m1 0.5 (codes 1 / 9);    E4M3 subnormal scale
                       (|sign), scales ~2^-14: fp16-  E8M0 0 (2^-127) and         codes 0x01..0x07
                       subnormal weights              105..111 (fp16-subnormal)
    zero_blocks        codes 0x00 / 0x80 (+-0)        codes 0 / 8 (+-0)          codes +-0; scale 0
    largest_block_max  448 x fl32(65504/448)          +-6 x 2^13 (E8M0 140)      +-6 x 448 x t, t = 24
    nan_scales         -                              E8M0 0xFF                  E4M3 0x7F
"""

from __future__ import annotations

import numpy as np

from refsim.formats import fp8, mx
from refsim.testing.cases.weight_only import EDGES, WeightOnlyCases, fields

__all__ = ["FP8ChannelCases", "FP8BlockCases", "MXFP4Cases", "NVFP4Cases"]

_F32 = np.float32
_E4M3_FINITE = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)   # every code but NaN
_SHAPES_FP8 = ((1, 128, 64, "none"), (1, 256, 128, "saturation"), (1, 128, 192, "subnormal_scales"),
               (1, 256, 64, "zero_blocks"), (1, 128, 64, "largest_block_max"), (8, 384, 256, "none"))


def _ftz_e4m3(codes: np.ndarray) -> np.ndarray:
    """e4m3 codes with every subnormal (exponent field 0) flushed to +-0: a decode without subnormals."""
    return np.where(codes & 0x78, codes, codes & 0x80).astype(np.uint8)


class _FP8Cases(WeightOnlyCases):
    scheme = "channel"
    k_block = 128

    def _scales(self, rng, shape):
        return (2.0 ** rng.integers(-10, -5, shape) * (1 + rng.random(shape))).astype(_F32)

    def _mask(self, k, n):
        """bool (K, N): the weights an edge is written into."""
        if self.scheme == "channel":
            return np.broadcast_to(np.arange(n) % 2 == 0, (k, n))
        i, j = np.indices((k, n)) // 128
        return (i + j) % 2 == 0

    def _scale_mask(self, s_shape, k, n):
        return self._mask(k, n)[::128, ::128] if self.scheme != "channel" else (np.arange(n) % 2 == 0)[None]

    def draw(self, rng, k, n, edge):
        codes = rng.choice(_E4M3_FINITE, (k, n))
        s = self._scales(rng, fp8.scale_shape((k, n), "channel" if self.scheme == "channel" else "block128"))
        w, sm = self._mask(k, n), self._scale_mask(s.shape, k, n)
        sign = (rng.integers(0, 2, (k, n)) << 7).astype(np.uint8)
        if edge == "saturation":
            codes = np.where(w, 0x7E | sign, codes)
        elif edge == "subnormal_scales":
            codes = np.where(w, rng.integers(1, 8, (k, n)).astype(np.uint8) | sign, codes)
            s = np.where(sm, (2.0**-14 * (1 + rng.random(s.shape))).astype(_F32), s)
        elif edge == "zero_blocks":
            codes = np.where(w, sign, codes)
        elif edge == "largest_block_max":
            codes = np.where(w, 0x7E | sign, codes)
            s = np.where(sm, _F32(65504) / _F32(448), s)
        return codes.astype(np.uint8), s.astype(_F32)

    def unit_weights(self, k, n):
        scheme = "channel" if self.scheme == "channel" else "block128"
        return np.full((k, n), 0x38, np.uint8), np.ones(fp8.scale_shape((k, n), scheme), _F32)   # e4m3 1.0 x 1

    def weights(self, inputs):
        _, codes, s = inputs
        scheme = "channel" if self.scheme == "channel" else "block128"
        return fp8.dequantize(fp8.FP8Quant(codes, s, scheme))

    def more_regimes(self, case):
        if self.scheme == "channel":
            return set()
        k, n = case["k"], case["n"]
        return {"partial 128x128 tiles" if (k % 128 or n % 128) else "whole 128x128 tiles",
                "several tile columns" if n > 128 else "one tile column"}

    def weight_bugs(self, case):
        scheme = "channel" if self.scheme == "channel" else "block128"

        def no_subnormals(inp):
            return fp8.dequantize(fp8.FP8Quant(_ftz_e4m3(inp[1]), inp[2], scheme))

        def scale_twice(inp):
            s = fp8.dequantize(fp8.FP8Quant(np.full(inp[1].shape, 0x38, np.uint8), inp[2], scheme))   # e4m3 1.0 x s
            return (self.weights(inp) * s).astype(_F32)

        out = [("e4m3 decode", "e4m3 subnormals (exponent field 0) decoded as 0 (a decode without subnormals)",
                no_subnormals),
               ("scale applied twice", "each weight multiplied by its scale twice: fl32(fl32(e4m3 * s) * s)",
                scale_twice)]
        if self.scheme != "channel" and case["k"] == case["n"] and case["k"] > 128:
            def transposed(inp):
                return fp8.dequantize(fp8.FP8Quant(inp[1], np.ascontiguousarray(inp[2].T), scheme))
            out.append(("block scale layout", "the (K/128, N/128) scales read transposed (as the (N/128, K/128) "
                                              "weight_scale_inv of a torch (N, K) weight)", transposed))
        return out


class FP8ChannelCases(_FP8Cases):
    name = "fp8_channel"
    signature = "kernel(x f16 (M,K), weight u8 e4m3 (K,N), weight_scale f32 (1,N)) -> y f16 (M,N)"
    inputs = ("x", "weight", "weight_scale")
    scheme = "channel"
    k_block = 32               # no blocks along K; 32 for the probes
    fields = fields((32, 64, 128, 256, 512, 1024, 4096, 11008), (8, 64, 128, 192, 256, 1024, 4096, 11008),
                    EDGES[:5])
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in _SHAPES_FP8)


class FP8BlockCases(_FP8Cases):
    name = "fp8_block"
    signature = ("kernel(x f16 (M,K), weight u8 e4m3 (K,N), weight_scale_inv f32 (ceil(K/128),ceil(N/128))) "
                 "-> y f16 (M,N)")
    inputs = ("x", "weight", "weight_scale_inv")
    scheme = "block128"
    k_block = 128
    k_multiple = 64            # K = 192: a partial last tile along K (edge tiles hold fewer rows)
    fields = fields((128, 192, 256, 384, 512, 1024, 4096, 11008), (64, 128, 192, 256, 512, 1024, 4096, 11008),
                    EDGES[:5])
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in
                        _SHAPES_FP8 + ((1, 256, 256, "saturation"), (1, 192, 192, "none")))


class _FP4Cases(WeightOnlyCases):
    kind: str
    n_scale_codes: tuple

    def _nibble_swapped(self, inp):
        b = inp[1]
        return self.weights((inp[0], ((b >> 4) | (b << 4)).astype(np.uint8)) + tuple(inp[2:]))

    def _record(self, inp):
        raise NotImplementedError

    def weights(self, inputs):
        return np.ascontiguousarray(mx.dequantize(self._record(inputs)).T)      # (N, K) -> (K, N)

    def _edge_codes(self, rng, codes, edge, n):
        """codes uint8 (N, K): the first block of every even row rewritten for ``edge``."""
        rows, blk = slice(0, n, 2), slice(0, self.k_block)
        sign = (rng.integers(0, 2, codes[rows, blk].shape) << 3).astype(np.uint8)
        if edge in ("saturation", "largest_block_max"):
            codes[rows, blk] = 7 | sign
        elif edge == "subnormal_scales":
            codes[rows, blk] = 1 | sign
        elif edge == "zero_blocks":
            codes[rows, blk] = sign
        return codes

    def more_regimes(self, case):
        return {"one row of blocks" if case["n"] == 1 else "several rows"}


class MXFP4Cases(_FP4Cases):
    name = "mxfp4"
    signature = "kernel(x f16 (M,K), blocks u8 (N,K/2), scales u8 E8M0 (N,K/32)) -> y f16 (M,N)"
    inputs = ("x", "blocks", "scales")
    k_block = 32
    fields = fields((32, 64, 128, 256, 512, 1024, 4096, 11008), (1, 8, 64, 128, 256, 1024, 4096, 11008), EDGES)
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in
                        [(1, 32, 8, "none"), (1, 64, 8, "saturation"), (1, 64, 8, "subnormal_scales"),
                         (1, 64, 8, "zero_blocks"), (1, 64, 8, "largest_block_max"), (1, 64, 8, "nan_scales"),
                         (8, 256, 64, "none")])

    def unit_weights(self, k, n):
        return mx.pack_fp4(np.full((n, k), 2, np.uint8)), np.full((n, k // 32), 127, np.uint8)   # 1.0 x 2^0

    def _record(self, inp):
        _, blocks, scales = inp
        return mx.MXQuant("mxfp4", (blocks.shape[0], 2 * blocks.shape[1]), blocks, scales)

    def draw(self, rng, k, n, edge):
        codes = rng.integers(0, 16, (n, k)).astype(np.uint8)
        s = rng.integers(119, 126, (n, k // 32)).astype(np.uint8)
        codes = self._edge_codes(rng, codes, edge, n)
        edge_s = {"subnormal_scales": rng.choice(np.array([0, 105, 108, 111], np.uint8), s[0::2, 0].shape),
                  "largest_block_max": 140, "nan_scales": 255}.get(edge)
        if edge_s is not None:
            s[0::2, 0] = edge_s
        return mx.pack_fp4(codes), s

    def weight_bugs(self, case):
        def scale_twice(inp):
            s = np.repeat(mx.e8m0_to_float32(inp[2]), 32, axis=1).T                  # (K, N)
            return (self.weights(inp) * s).astype(_F32)

        def no_subnormals(inp):
            c = mx.unpack_fp4(inp[1])
            c = np.where(c & 7 == 1, c & 8, c).astype(np.uint8)                    # 0.5 read as 0
            return self.weights((inp[0], mx.pack_fp4(c), inp[2]))
        return [("nibble order", "the two codes of every byte swapped (high nibble first)", self._nibble_swapped),
                ("scale applied twice", "each element multiplied by 2^(s-127) twice", scale_twice),
                ("e2m1 decode", "e2m1's subnormal 0.5 (codes 1 and 9) decoded as 0", no_subnormals)]


class NVFP4Cases(_FP4Cases):
    name = "nvfp4"
    signature = ("kernel(x f16 (M,K), blocks u8 (N,K/2), scales u8 E4M3 (N,K/16), per_tensor_scale f32 (1,)) "
                 "-> y f16 (M,N)")
    inputs = ("x", "blocks", "scales", "per_tensor_scale")
    k_block = 16
    fields = fields((16, 32, 64, 128, 256, 512, 1024, 4096, 11008), (1, 8, 64, 128, 256, 1024, 4096, 11008), EDGES)
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in
                        [(1, 16, 8, "none"), (1, 32, 8, "saturation"), (1, 32, 8, "subnormal_scales"),
                         (1, 32, 8, "zero_blocks"), (1, 32, 8, "largest_block_max"), (1, 32, 8, "nan_scales"),
                         (8, 256, 64, "none")])

    def unit_weights(self, k, n):
        return (mx.pack_fp4(np.full((n, k), 2, np.uint8)), np.full((n, k // 16), 0x38, np.uint8),   # 1.0 x 1.0 x 1
                np.ones(1, _F32))

    def _record(self, inp):
        _, blocks, scales, t = inp
        return mx.MXQuant("nvfp4", (blocks.shape[0], 2 * blocks.shape[1]), blocks, scales, float(t[0]))

    def draw(self, rng, k, n, edge):
        codes = self._edge_codes(rng, rng.integers(0, 16, (n, k)).astype(np.uint8), edge, n)
        # E4M3 scale codes 0x20..0x3F: 2^-3 .. 1.875 (normal); t around 2^-4
        s = rng.integers(0x20, 0x40, (n, k // 16)).astype(np.uint8)
        t = _F32(2.0**-4 * (1 + rng.random()))
        if edge == "largest_block_max":
            s = rng.integers(0x08, 0x18, s.shape).astype(np.uint8)        # 2^-6 .. 2^-4: the rest stays small
            t = _F32(24.0)
        edge_s = {"saturation": 0x7E, "subnormal_scales": rng.integers(1, 8, s[0::2, 0].shape).astype(np.uint8),
                  "zero_blocks": 0, "largest_block_max": 0x7E, "nan_scales": 0x7F}.get(edge)
        if edge_s is not None:
            s[0::2, 0] = edge_s
        return mx.pack_fp4(codes), s, np.array([t], _F32)

    def weight_bugs(self, case):
        def no_subnormal_scales(inp):
            s = inp[2]
            return self.weights((inp[0], inp[1], np.where(s & 0x78, s, 0).astype(np.uint8), inp[3]))

        def tensor_scale_ignored(inp):
            return self.weights(tuple(inp[:3]) + (np.array([1.0], _F32),))

        return [("nibble order", "the two codes of every byte swapped (high nibble first)", self._nibble_swapped),
                ("e4m3 decode", "E4M3 block scales decoded without subnormals (codes 0x01..0x07 read as 0)",
                 no_subnormal_scales),
                ("scale missing", "the per-tensor scale t not applied", tensor_scale_ignored)]

