"""Weight-only GEMM cases of bitsandbytes' NF4 (blocksize 64), without and with double quantization
(:mod:`refsim.testing.cases.weight_only` states the kernel contract; accuracy mode is the recommended
mode)::

    nf4     kernel(x f16 (M,K), weight u8 (N*K/2,), absmax f32 (ceil(N*K/64),)) -> y f16 (M,N)
    nf4_dq  kernel(x f16 (M,K), weight u8 (N*K/2,), absmax u8 (B,), nested_absmax f32 (ceil(B/256),),
                   nested_code f32 (256,), offset f32 (1,)) -> y f16 (M,N)        B = ceil(N*K/64)

The layout is refsim.formats.bnb4's: torch's (N, K) weight flattened row-major, blocks of 64
consecutive values (a block spans rows when K < 64 or K % 64 != 0), two codes per byte, element 2i
in the HIGH nibble; W = fl32(nf4[code] * absmax), with double quantization
absmax = fl32(nested_code[q] * nested_absmax) + offset (bitsandbytes' QuantState and its state2).
Two formats, not a flag: the kernel's inputs differ.

Edges (the even blocks of the flattened weight)::

    edge               nf4                                   nf4_dq
    saturation         codes 0 / 15 (-1, +1)                 codes 0 / 15, absmax code 255 (1.0)
    subnormal_scales   absmax 2^-22 .. 2^-15 (fp16-subnormal  offset 2^-20, nested absmax 2^-21
                       weights)                              (every block: the offset is global)
    zero_blocks        absmax 0 (blocks 0 mod 4), code 7     code 7 (NF4's 0.0)
                       (0.0) (blocks 2 mod 4)
    largest_block_max  absmax 65504, codes 0 / 15            offset 65472, nested absmax 32, code
                                                             255: absmax 65504; other blocks code 7
"""

from __future__ import annotations

import numpy as np

from refsim.formats import bnb4
from refsim.testing.cases.weight_only import EDGES, WeightOnlyCases, fields

__all__ = ["NF4Cases", "NF4DQCases"]

_F32 = np.float32
_BLOCK = 64
_KS = (32, 64, 96, 128, 256, 512, 1024, 4096, 11008)
_NS = (1, 2, 8, 64, 128, 256, 1024, 4096, 11008)


class _NF4Base(WeightOnlyCases):
    k_block = 32               # K % 32: blocks of 64 may span rows

    def record(self, inputs) -> bnb4.BnB4:
        raise NotImplementedError

    def weights(self, inputs):
        n = inputs[1].size * 2 // inputs[0].shape[1]
        rec = self.record(inputs)
        return np.ascontiguousarray(bnb4.dequantize(rec).reshape(n, -1).T)     # (N, K) -> (K, N)

    def _codes(self, rng, k, n, edge):
        """uint8 (N*K,) codes with the even blocks rewritten for ``edge``."""
        c = rng.integers(0, 16, n * k).astype(np.uint8)
        even = (np.arange(n * k) // _BLOCK) % 2 == 0
        if edge in ("saturation", "largest_block_max"):
            c = np.where(even, 15 * rng.integers(0, 2, c.shape), c).astype(np.uint8)
        return c, even

    def more_regimes(self, case):
        k, n = case["k"], case["n"]
        out = {"blocks span rows" if k % _BLOCK else "blocks inside rows"}
        if (n * k) % _BLOCK:
            out.add("a partial last block")
        return out

    def _swapped(self, inp):
        w = inp[1]
        return self.weights((inp[0], ((w >> 4) | (w << 4)).astype(np.uint8)) + tuple(inp[2:]))

    def _absmax_twice(self, inp):
        rec = self.record(inp)
        n, k = inp[1].size * 2 // inp[0].shape[1], inp[0].shape[1]
        a = np.repeat(rec.block_absmax(), _BLOCK)[:n * k].reshape(n, k).T            # (K, N)
        return (self.weights(inp) * a).astype(_F32)


class NF4Cases(_NF4Base):
    name = "nf4"
    signature = "kernel(x f16 (M,K), weight u8 (N*K/2,), absmax f32 (ceil(N*K/64),)) -> y f16 (M,N)"
    inputs = ("x", "weight", "absmax")
    fields = fields(_KS, _NS, EDGES[:5])
    pinned_pool = tuple({"m": m, "k": k, "n": n, "edge": e} for m, k, n, e in
                        [(1, 64, 4, "none"), (1, 64, 8, "saturation"), (1, 32, 8, "subnormal_scales"),
                         (1, 64, 8, "zero_blocks"), (1, 64, 4, "largest_block_max"), (1, 96, 4, "none"),
                         (1, 96, 1, "none"), (8, 256, 64, "none")])

    def unit_weights(self, k, n):
        return bnb4.pack(np.full(n * k, 15, np.uint8)), np.ones(-(-n * k // _BLOCK), _F32)        # 1.0 x 1

    def record(self, inputs):
        x, weight, absmax = inputs
        return bnb4.BnB4(weight, absmax, (weight.size * 2 // x.shape[1], x.shape[1]), "nf4", _BLOCK)

    def draw(self, rng, k, n, edge):
        codes, _ = self._codes(rng, k, n, edge)
        blocks = -(-n * k // _BLOCK)
        a = (rng.random(blocks) * 0.09 + 0.01).astype(_F32)
        b = np.arange(blocks)
        if edge == "subnormal_scales":
            a = np.where(b % 2 == 0, 2.0 ** rng.integers(-22, -15, blocks) * (1 + rng.random(blocks)), a)
        elif edge == "zero_blocks":
            a = np.where(b % 4 == 0, 0.0, a)
            codes = np.where((np.arange(n * k) // _BLOCK) % 4 == 2, 7, codes).astype(np.uint8)
        elif edge == "largest_block_max":
            a = np.where(b % 2 == 0, 65504.0, a)
        return bnb4.pack(codes), a.astype(_F32)

    def weight_bugs(self, case):
        return [("nibble order", "the two codes of every byte swapped (element 2i read from the low nibble)",
                 self._swapped),
                ("scale applied twice", "each weight multiplied by its block's absmax twice", self._absmax_twice)]


class NF4DQCases(_NF4Base):
    name = "nf4_dq"
    signature = ("kernel(x f16 (M,K), weight u8 (N*K/2,), absmax u8 (B,), nested_absmax f32 (ceil(B/256),), "
                 "nested_code f32 (256,), offset f32 (1,)) -> y f16 (M,N), B = ceil(N*K/64)")
    inputs = ("x", "weight", "absmax", "nested_absmax", "nested_code", "offset")
    fields = fields(_KS, _NS, EDGES[:5])
    pinned_pool = NF4Cases.pinned_pool + ({"m": 1, "k": 1024, "n": 32, "edge": "none"},)   # 512 blocks: 2 nested

    def unit_weights(self, k, n):
        blocks = -(-n * k // _BLOCK)                   # absmax = fl32(code2[255] * 0.5) + 0.5 = 1
        return (bnb4.pack(np.full(n * k, 15, np.uint8)), np.full(blocks, 255, np.uint8),
                np.full(-(-blocks // bnb4.NESTED_BLOCKSIZE), 0.5, _F32), bnb4.dynamic_map(), np.array([0.5], _F32))

    def record(self, inputs):
        x, weight, q, a2, code2, offset = inputs
        return bnb4.BnB4(weight, None, (weight.size * 2 // x.shape[1], x.shape[1]), "nf4", _BLOCK,
                         qabsmax=q, absmax2=a2, code2=code2, offset=float(offset[0]))

    def more_regimes(self, case):
        blocks = -(-case["n"] * case["k"] // _BLOCK)
        return super().more_regimes(case) | {"several nested blocks" if blocks > bnb4.NESTED_BLOCKSIZE
                                             else "one nested block"}

    def draw(self, rng, k, n, edge):
        codes, even = self._codes(rng, k, n, edge)
        blocks = -(-n * k // _BLOCK)
        q = rng.integers(0, 256, blocks).astype(np.uint8)
        a2 = (rng.random(-(-blocks // bnb4.NESTED_BLOCKSIZE)) * 0.02 + 0.02).astype(_F32)
        offset = 0.06
        if edge == "saturation":
            q = np.where(np.arange(blocks) % 2 == 0, 255, q).astype(np.uint8)
        elif edge == "subnormal_scales":
            offset, a2 = 2.0**-20, np.full(a2.shape, 2.0**-21, _F32)
        elif edge == "zero_blocks":
            codes = np.where(even, 7, codes).astype(np.uint8)
        elif edge == "largest_block_max":
            offset, a2 = 65472.0, np.full(a2.shape, 32.0, _F32)
            q = np.where(np.arange(blocks) % 2 == 0, 255, q).astype(np.uint8)
            codes = np.where(even, codes, 7).astype(np.uint8)
        return bnb4.pack(codes), q, a2, bnb4.dynamic_map(), np.array([offset], _F32)

    def weight_bugs(self, case):
        def no_offset(inp):
            return self.weights(tuple(inp[:5]) + (np.zeros(1, _F32),))

        return [("nibble order", "the two codes of every byte swapped (element 2i read from the low nibble)",
                 self._swapped),
                ("double quantization", "the offset (mean absmax) not added back to the dequantized absmax",
                 no_offset),
                ("scale applied twice", "each weight multiplied by its block's absmax twice", self._absmax_twice)]
