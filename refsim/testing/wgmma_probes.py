"""The wgmma probes of ``refsim validate``'s mma group, as data: inputs and the outputs refsim's model expects.

Spec
----
probes          :func:`probes`: for every kind of :func:`refsim.arith.wgmma.modelled`, at N = 8 and N = 256
                (the smallest and largest legal N of every kind), one :class:`WgmmaProbe` per category:
                    floats   random, spread (exponents across the format), cancel (+p and -p in one dot product
                             plus a small term), subnormal, nearmax, hugeC (C far above the products),
                             negated (random with imm-scale-a = imm-scale-b = -1), noC (random with scale-d = 0)
                    s8/u8    random, extremes (min/max/0/+-1), hugeC (C near +-2^31: wraps), each also with
                             .satfinite
                    b1       random (0/1 bits)
inputs          :meth:`WgmmaProbe.inputs`: A (tiles, 64, K), B (tiles, K, N), C (tiles, 64, N) drawn by
                :func:`refsim.cuda.mma.draw_operands` (raw bits for float types, values for integers) from
                ``numpy.random.default_rng([seed, probe.index])``.
expected        :meth:`WgmmaProbe.expected`: D (tiles, 64, N) = :func:`refsim.cuda.wgmma.wgmma_reference`
                (:func:`refsim.arith.wgmma.wgmma`) on the inputs (raw bits for float types): what the GPU must
                write for refsim's model to hold.
kernel          refsim/cuda/wgmma.cu (sm_90a, one warpgroup issuing one wgmma per probe tile, A and B from
                shared memory through a no-swizzle descriptor; :mod:`refsim.cuda.wgmma`), run by
                ``refsim validate`` (one case per probe, :mod:`refsim.testing.validate`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from refsim._validate import require_fields, require_int
from refsim.arith import wgmma as w
from refsim.cuda import mma as rmma

__all__ = ["FLOAT_CATEGORIES", "INT_CATEGORIES", "WgmmaProbe", "probes"]

#: probe category -> (the refsim.cuda.mma category that draws its inputs, imm-scale-a/b, scale-d)
FLOAT_CATEGORIES: dict[str, tuple[str, int, bool]] = {
    "random": ("random", 1, True), "spread": ("magnitudes", 1, True), "cancel": ("cancel", 1, True),
    "subnormal": ("subnormal", 1, True), "nearmax": ("nearmax", 1, True), "hugeC": ("bigC", 1, True),
    "negated": ("random", -1, True), "noC": ("random", 1, False),
}
INT_CATEGORIES: dict[str, str] = {"random": "random", "extremes": "extremes", "hugeC": "bigC"}
_NS = (8, 256)


@dataclass(frozen=True)
class WgmmaProbe:
    """One wgmma probe: a kind at one N, one input category and the instruction's flags (module spec)."""

    index: int
    kind: w.WgmmaKind
    n: int
    category: str
    satfinite: bool
    scale_ab: int         # imm-scale-a = imm-scale-b
    scale_d: bool

    def __post_init__(self):
        require_fields(self)

    @property
    def name(self) -> str:
        """The instruction text and the category, e.g. ``wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 spread``."""
        return f"{self.kind.ptx(self.n, self.satfinite)} {self.category}"

    def inputs(self, seed: int = 0, tiles: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A (tiles, 64, K), B (tiles, K, N), C (tiles, 64, N)): raw bits for float types, values for integers."""
        rng = np.random.default_rng([require_int("seed", seed, minimum=0), self.index])
        k = self.kind
        if k.a == "b1":
            tiles = require_int("tiles", tiles, minimum=1)
            return (rng.integers(0, 2, (tiles, w.M, k.k)).astype(np.uint8),
                    rng.integers(0, 2, (tiles, k.k, self.n)).astype(np.uint8),
                    rng.integers(-2**20, 2**20, (tiles, w.M, self.n)).astype(np.int32))
        cat = INT_CATEGORIES[self.category] if k.d == "s32" else FLOAT_CATEGORIES[self.category][0]
        return rmma.draw_operands(k.a, k.b, k.d, (w.M, k.k, self.n), cat, tiles, rng)

    def expected(self, seed: int = 0, tiles: int = 1) -> np.ndarray:
        """D (tiles, 64, N) under refsim's model: raw bits (uint32 / uint16) for float kinds, int32 values else."""
        from refsim.cuda import wgmma as rwg

        return rwg.wgmma_reference(self.kind, self.n, *self.inputs(seed, tiles), scale_d=self.scale_d,
                                   negate=self.scale_ab == -1, satfinite=self.satfinite)


@functools.lru_cache(maxsize=None)
def probes() -> tuple[WgmmaProbe, ...]:
    """Every wgmma probe (module spec), in a fixed order (``index`` seeds its inputs)."""
    rows = []
    for kind in w.modelled():
        for n in _NS:
            if kind.a == "b1":
                rows.append((kind, n, "random", False, 1, True))
            elif kind.d == "s32":
                rows += [(kind, n, c, sat, 1, True) for sat in (False, True) for c in INT_CATEGORIES]
            else:
                rows += [(kind, n, c, False, s, d) for c, (_, s, d) in FLOAT_CATEGORIES.items()]
    return tuple(WgmmaProbe(i, *r) for i, r in enumerate(rows))
