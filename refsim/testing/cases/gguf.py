"""Weight-only GEMM cases of llama.cpp's GGUF block types Q4_0, Q8_0 and Q4_K
(:mod:`refsim.testing.cases.weight_only` states the kernel contract; accuracy mode is the recommended
mode)::

    q4_0, q8_0, q4_k  kernel(x f16 (M,K), weight u8 (N, row_bytes)) -> y f16 (M,N)

``weight`` is the tensor's bytes as a GGUF file holds them (refsim.formats.gguf): N rows (ggml's
``ne[1]``), each the K values of one output column cut into blocks of 32 (Q4_0: 18 bytes, Q8_0: 34)
or super-blocks of 256 (Q4_K: 144 bytes), W as ggml's ``dequantize_row_*`` computes it in float32.

Edges (the first block of every even row)::

    edge               q4_0                        q8_0                     q4_k
    saturation         nibbles 0 / 15 (-8, +7)     qs -128 / 127            scales and mins 63, nibbles 15
    subnormal_scales   d fp16 subnormal (+-)       d fp16 subnormal         d, dmin fp16 subnormal
    zero_blocks        d = +0 / -0                 d = +0 / -0              d = dmin = +0 / -0
    largest_block_max  d = 8188: -8 d = -65504     d = 511.75: -128 d       d = 64, dmin 0, scales 63,
                                                   = -65504                 nibbles 15: 60480
"""

from __future__ import annotations

import numpy as np

from refsim.formats import gguf
from refsim.testing.cases.weight_only import EDGES, WeightOnlyCases, f16_bytes, fields

__all__ = ["Q4_0Cases", "Q8_0Cases", "Q4_KCases"]

_F32 = np.float32
_KS = (32, 64, 128, 256, 512, 1024, 4096, 11008)
_NS = (1, 2, 8, 64, 128, 256, 1024, 4096, 11008)
_EDGE = (slice(None, None, 2), 0)                  # the first block of every even row
_SATURATED = ("saturation", "largest_block_max")   # the edges whose codes are the extremes


def _subnormal_f16(rng, shape):
    """float16 subnormals (bits 0x0001..0x03FF, either sign) of ``shape``."""
    bits = rng.integers(1, 0x400, shape) | (rng.integers(0, 2, shape) << 15)
    return bits.astype(np.uint16).view(np.float16)


def _signed_zero(rng, shape):
    return np.where(rng.integers(0, 2, shape) == 1, np.float16(-0.0), np.float16(0.0))


def _draw_scales(rng, lo, shape):
    """float64 block scales of ``shape``: 2^e (1 + u), e drawn from [lo, lo + 4), u from [0, 1)."""
    return 2.0 ** rng.integers(lo, lo + 4, shape) * (1 + rng.random(shape))


def _set_edge_scales(rng, edge, largest, *scales):
    """Write the ``edge`` values into the edge blocks (:data:`_EDGE`) of each float16 (N, blocks) array of
    ``scales``, in order: random subnormals (subnormal_scales), +-0 (zero_blocks) or the matching value of
    ``largest`` (largest_block_max); other edges leave them alone."""
    for s, big in zip(scales, largest):
        if edge == "subnormal_scales":
            s[_EDGE] = _subnormal_f16(rng, s[_EDGE].shape)
        elif edge == "zero_blocks":
            s[_EDGE] = _signed_zero(rng, s[_EDGE].shape)
        elif edge == "largest_block_max":
            s[_EDGE] = big


def _rows(*fields):
    """uint8 (N, blocks x bytes per block): each block's ``fields`` (uint8 (N, blocks, bytes)) side by side."""
    raw = np.concatenate(fields, axis=2)                                # (N, blocks, bytes per block)
    return raw.reshape(raw.shape[0], -1)


class _GGUFCases(WeightOnlyCases):
    qtype: str
    inputs = ("x", "weight")

    def weights(self, inputs):
        x, raw = inputs
        return np.ascontiguousarray(gguf.dequantize(raw, self.qtype, (raw.shape[0], x.shape[1])).T)   # (K, N)

    def _blocks(self, raw):
        """The (N, blocks per row, bytes per block) view of a copy of ``raw``."""
        return raw.copy().reshape(raw.shape[0], -1, gguf.BLOCK_TYPES[self.qtype][1])

    def _with_blocks(self, inp, b):
        return self.weights((inp[0], b.reshape(inp[1].shape)))

    def _nibbles_swapped(self, first):
        """A bug that reads the two nibbles of every byte from byte ``first`` of each block on exchanged."""
        def weights(inp):
            b = self._blocks(inp[1])                                    # (N, blocks, bytes per block)
            b[..., first:] = (b[..., first:] >> 4) | (b[..., first:] << 4)
            return self._with_blocks(inp, b)
        return weights

    def _permuted(self, perm):
        """A bug that reads element ``perm[e]`` of each block where element e belongs."""
        def weights(inp):
            w = self.weights(inp)                                       # (K, N)
            bs = len(perm)
            return np.ascontiguousarray(w.reshape(-1, bs, w.shape[1])[:, perm].reshape(w.shape))
        return weights

    def _d(self, inp):
        """float32 (K, N): each weight's block scale d (the first fp16 of its block)."""
        d = self._blocks(inp[1])[..., :2].copy().view(np.float16)[..., 0].astype(_F32)      # (N, blocks)
        return np.repeat(d, gguf.BLOCK_TYPES[self.qtype][0], axis=1).T

    def _scale_twice(self):
        """The bug entry of a kernel that multiplies each weight by its block's d twice."""
        return ("scale applied twice", "each weight multiplied by its block's d twice",
                lambda inp: (self.weights(inp) * self._d(inp)).astype(_F32))


class Q4_0Cases(_GGUFCases):
    name = "q4_0"
    qtype = "Q4_0"
    signature = "kernel(x f16 (M,K), weight u8 (N, K/32*18) GGUF Q4_0 rows) -> y f16 (M,N)"
    k_block = 32
    fields = fields(_KS, _NS, EDGES[:5])
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in
                        [(1, 32, 2, "none"), (1, 64, 8, "saturation"), (1, 64, 8, "subnormal_scales"),
                         (1, 64, 8, "zero_blocks"), (1, 64, 2, "largest_block_max"), (8, 256, 64, "none")])

    def unit_weights(self, k, n):
        nb = k // 32                                   # (9 - 8) x 1
        return (_rows(f16_bytes(np.ones((n, nb))), np.full((n, nb, 16), 0x99, np.uint8)),)

    def draw(self, rng, k, n, edge):
        nb = k // 32
        d = (_draw_scales(rng, -10, (n, nb)) * rng.choice([-1, 1], (n, nb))).astype(np.float16)
        qs = rng.integers(0, 256, (n, nb, 16)).astype(np.uint8)
        if edge in _SATURATED:
            qs[_EDGE] = rng.choice(np.array([0x00, 0x0F, 0xF0, 0xFF], np.uint8), qs[_EDGE].shape)
        _set_edge_scales(rng, edge, (8188.0,), d)
        return (_rows(f16_bytes(d), qs),)                                         # blocks of 18 bytes

    def weight_bugs(self, case):
        def no_offset(inp):                                             # q * d instead of (q - 8) * d
            return (self.weights(inp) + 8 * self._d(inp)).astype(_F32)

        interleaved = np.empty(32, np.int64)
        interleaved[0::2], interleaved[1::2] = np.arange(16), np.arange(16, 32)
        return [("nibble order", "element j read from the HIGH nibble of byte j (ggml: the low nibble; element "
                                 "j + 16 in the high one)", self._nibbles_swapped(2)),
                ("nibble order", "elements 2j, 2j+1 read from byte j (ggml: elements j and j + 16)",
                 self._permuted(interleaved)),
                self._scale_twice(),
                ("zero point", "the -8 of Q4_0 left out: q * d", no_offset)]

class Q8_0Cases(_GGUFCases):
    name = "q8_0"
    qtype = "Q8_0"
    signature = "kernel(x f16 (M,K), weight u8 (N, K/32*34) GGUF Q8_0 rows) -> y f16 (M,N)"
    k_block = 32
    fields = fields(_KS, _NS, EDGES[:5])
    pinned_pool = Q4_0Cases.pinned_pool

    def unit_weights(self, k, n):
        nb = k // 32                                   # 1 x 1
        return (_rows(f16_bytes(np.ones((n, nb))), np.ones((n, nb, 32), np.uint8)),)

    def draw(self, rng, k, n, edge):
        nb = k // 32
        d = _draw_scales(rng, -12, (n, nb)).astype(np.float16)
        qs = rng.integers(-128, 128, (n, nb, 32)).astype(np.int8)
        if edge in _SATURATED:
            qs[_EDGE] = rng.choice(np.array([-128, 127], np.int8), qs[_EDGE].shape)
        _set_edge_scales(rng, edge, (511.75,), d)
        return (_rows(f16_bytes(d), qs.view(np.uint8)),)                          # blocks of 34 bytes

    def weight_bugs(self, case):
        def unsigned(inp):                      # qs read as uint8: a negative q gains 256
            b = self._blocks(inp[1])
            neg = (b[..., 2:] >= 128).astype(_F32).reshape(b.shape[0], -1).T          # (N, K) -> (K, N)
            return (self.weights(inp) + 256 * neg * self._d(inp)).astype(_F32)

        return [("sign", "the int8 codes read as uint8", unsigned),
                self._scale_twice()]

class Q4_KCases(_GGUFCases):
    name = "q4_k"
    qtype = "Q4_K"
    signature = "kernel(x f16 (M,K), weight u8 (N, K/256*144) GGUF Q4_K rows) -> y f16 (M,N)"
    k_block = 256
    fields = fields(_KS[3:], _NS, EDGES[:5])
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in
                        [(1, 256, 2, "none"), (1, 256, 4, "saturation"), (1, 256, 4, "subnormal_scales"),
                         (1, 256, 4, "zero_blocks"), (1, 256, 2, "largest_block_max"), (4, 512, 8, "none")])

    def unit_weights(self, k, n):
        nb = k // 256                                  # fl(1 x sc 1) x q 1 - fl(dmin 0 x m 0)
        scales = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], np.uint8)       # sc = 1, m = 0 (get_scale_min_k4)
        return (_rows(f16_bytes(np.ones((n, nb))), f16_bytes(np.zeros((n, nb))),
                      np.broadcast_to(scales, (n, nb, 12)), np.full((n, nb, 128), 0x11, np.uint8)),)

    def draw(self, rng, k, n, edge):
        nb = k // 256
        d = _draw_scales(rng, -12, (n, nb)).astype(np.float16)
        dmin = _draw_scales(rng, -12, (n, nb)).astype(np.float16)
        scales = rng.integers(0, 256, (n, nb, 12)).astype(np.uint8)
        qs = rng.integers(0, 256, (n, nb, 128)).astype(np.uint8)
        if edge in _SATURATED:
            scales[_EDGE], qs[_EDGE] = 0xFF, 0xFF
        _set_edge_scales(rng, edge, (64.0, 0.0), d, dmin)
        return (_rows(f16_bytes(d), f16_bytes(dmin), scales, qs),)               # blocks of 144 bytes

    def weight_bugs(self, case):
        def min_added(inp):                     # d*sc*q + dmin*m: dmin's sign bit flipped
            b = self._blocks(inp[1])
            b[..., 3] ^= 0x80
            return self._with_blocks(inp, b)

        return [("nibble order", "the two nibbles of every qs byte swapped (sub-blocks 2p and 2p+1 exchanged)",
                 self._nibbles_swapped(16)),
                ("min sign", "the sub-block minimum added instead of subtracted", min_added)]
