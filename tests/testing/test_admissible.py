"""Float atomics from several warps, as a set: refsim.ptx runs every order they may land in
(``atomic_order``), refsim.testing.admissible.ptx_admissible collects the admissible outputs and
assert_bitexact accepts any member, saying which."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from refsim import ptx
from refsim.testing import BitMismatch, assert_bitexact
from refsim.testing.admissible import ptx_admissible

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
# every warp w adds v[32 w + lane] to out[lane]: 4 warps -> 4 float adds reach each address at once
RED = HEAD + """.visible .entry k(.param .u64 pv, .param .u64 pout)
{
.reg .b32 %r<6>; .reg .f32 %f<2>; .reg .b64 %rd<8>;
ld.param.u64 %rd1, [pv]; ld.param.u64 %rd2, [pout];
cvta.to.global.u64 %rd3, %rd1; cvta.to.global.u64 %rd4, %rd2;
mov.u32 %r1, %tid.x; and.b32 %r2, %r1, 31;
mul.wide.u32 %rd5, %r1, 4; add.s64 %rd6, %rd3, %rd5; ld.global.f32 %f1, [%rd6];
mul.wide.u32 %rd5, %r2, 4; add.s64 %rd7, %rd4, %rd5;
red.global.add.f32 [%rd7], %f1;
}
"""


def _problem():
    rng = np.random.default_rng(11)
    mag = 2.0 ** rng.integers(-8, 9, 128)                      # wide magnitudes: orders disagree
    v = (rng.standard_normal(128) * mag).astype(np.float32)
    out0 = (rng.standard_normal(32) * 0.01).astype(np.float32)
    return v, out0


def test_every_order_of_the_contended_adds_is_run_and_the_set_is_the_fold_over_all_orders():
    v, out0 = _problem()
    m = ptx.Module(RED)
    stats = m.launch("k", 1, 128, [v, out0.copy()])
    assert stats.float_atomic_contention == 4
    sets = ptx_admissible(m, "k", 1, 128, [v, out0], outputs=[1])
    s = sets[1]
    assert s.orders == 24 and s.exhaustive
    assert np.array_equal(out0, _problem()[1])                  # the caller's arrays are not written
    # independent: IEEE float32 adds (NumPy) in every order, lane by lane
    per_lane = v.reshape(4, 32)
    folds = []
    for order in itertools.permutations(range(4)):
        acc = out0.copy()
        for w in order:
            acc = acc + per_lane[w]
        folds.append(acc)
    folds = np.stack(folds)
    for lane in range(32):
        assert set(s.candidates[:, lane].view(np.uint32).tolist()) == set(folds[:, lane].view(np.uint32).tolist())
    assert len({tuple(f.view(np.uint32)) for f in folds}) > 1   # the data does make orders differ


def test_assert_bitexact_accepts_a_member_and_says_whether_it_is_refsims_own():
    v, out0 = _problem()
    s = ptx_admissible(ptx.Module(RED), "k", 1, 128, [v, out0], outputs=[1])[1]
    own = s.reference.copy()
    assert assert_bitexact(own, s, "out") == "out: in the admissible set of 24 orders; equal to refsim's ascending order: yes"
    other = next(c for c in s.candidates if not np.array_equal(c.view(np.uint32), own.view(np.uint32)))
    assert assert_bitexact(other, s, "out").endswith("equal to refsim's ascending order: no")
    mixed = np.where(np.arange(32) % 2 == 0, s.candidates[5], s.candidates[17])   # per-lane orders differ
    assert "in the admissible set" in assert_bitexact(mixed, s)
    bad = other.copy()
    bad[3] = np.float32(1e30)
    with pytest.raises(BitMismatch, match=r"(?s)1 of 32 elements differ.*\(3,\).*outside the admissible set of 24 orders"):
        assert_bitexact(bad, s, "out")


def test_atomic_order_is_validated_and_a_launch_without_contention_is_one_member():
    v, out0 = _problem()
    m = ptx.Module(RED)
    for bad in ((0, 0), (1, 2), (), "ab", (0, 1.0), [True, False]):
        with pytest.raises(ptx.PtxLaunchError, match="atomic_order: must be None or a permutation"):
            m.launch("k", 1, 128, [v, out0.copy()], atomic_order=bad)
    one = ptx_admissible(m, "k", 1, 32, [v, out0], outputs=[1])[1]          # one warp: no contention
    assert one.orders == 1 and one.candidates.shape == (1, 32)
