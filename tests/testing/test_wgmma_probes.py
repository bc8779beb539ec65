"""The wgmma probes as data: every kind at N = 8 and 256 with its categories, inputs of the stated shapes
and kinds, flags that reach the model (checked on hand-built consequences, not recomputed)."""

from __future__ import annotations

import numpy as np

from refsim.arith import wgmma as w
from refsim.testing import wgmma_probes as wp


def test_every_kind_at_the_smallest_and_largest_n_with_its_categories():
    ps = wp.probes()
    assert [p.index for p in ps] == list(range(len(ps)))
    for kind in w.modelled():
        mine = [p for p in ps if p.kind == kind]
        assert {p.n for p in mine} == {8, 256}
        cats = {(p.category, p.satfinite) for p in mine}
        if kind.a == "b1":
            assert cats == {("random", False)}
        elif kind.d == "s32":
            assert cats == {(c, s) for c in ("random", "extremes", "hugeC") for s in (False, True)}
        else:
            assert cats == {(c, False) for c in ("random", "spread", "cancel", "subnormal", "nearmax", "hugeC",
                                                 "negated", "noC")}
    # 12 float kinds x 2 N x 8 categories + 4 integer kinds x 2 x 6 + b1 x 2
    assert len(ps) == 12 * 16 + 4 * 12 + 2


def find(name: str) -> wp.WgmmaProbe:
    return next(p for p in wp.probes() if p.name == name)


def test_inputs_have_the_instructions_shapes_and_the_categories_contents():
    p = find("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2 hugeC")
    A, B, C = p.inputs(seed=3, tiles=2)
    assert (A.shape, A.dtype, B.shape, B.dtype, C.shape, C.dtype) == (
        (2, 64, 32), np.uint8, (2, 32, 8), np.uint8, (2, 64, 8), np.uint32)
    assert np.abs(C.view(np.float32)).min() >= np.float32(3.4e38 * 2.0**-8 / 1.01)      # C far above the products
    A2, _, _ = p.inputs(seed=3, tiles=2)
    assert np.array_equal(A, A2) and not np.array_equal(A, p.inputs(seed=4, tiles=2)[0])
    b1 = find("wgmma.mma_async.sync.aligned.m64n256k256.s32.b1.b1.and.popc random")
    A, B, C = b1.inputs()
    assert A.shape == (1, 64, 256) and B.shape == (1, 256, 256) and set(np.unique(A)) <= {0, 1}


def test_expected_outputs_carry_the_flags():
    # noC: scale-d = 0, so D cannot depend on C: the product of tile 0 equals D with C replaced by anything
    p = find("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 noC")
    A, B, C = p.inputs()
    D = p.expected()
    assert D.dtype == np.uint32 and D.shape == (1, 64, 8)
    assert np.array_equal(D, w.wgmma(p.kind, A, B, np.zeros((1, 64, 8), np.float32) + 7, scale_d=False).view(np.uint32))
    # negated: imm-scale-a = imm-scale-b = -1 leaves every product's sign: D equals the un-negated instruction
    n = find("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 negated")
    A, B, C = n.inputs()
    assert np.array_equal(n.expected(), w.wgmma(n.kind, A, B, C.view(np.float32)).view(np.uint32))
    # satfinite hugeC: C near +-2^31 plus products clamps instead of wrapping somewhere in the tile
    s = find("wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.s8 hugeC")
    A, B, C = s.inputs()
    sat, wrap = s.expected(), w.wgmma(s.kind, A, B, C)
    assert sat.dtype == np.int32 and (sat != wrap).any()
    assert set(np.unique(sat[sat != wrap])) <= {2**31 - 1, -(2**31)}
