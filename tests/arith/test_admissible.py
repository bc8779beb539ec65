"""refsim.arith.admissible: the set object, folds over every order, membership by raw bits."""

from __future__ import annotations

import itertools

import numpy as np

from refsim.arith import fp
from refsim.arith.admissible import AdmissibleSet, fold_orders


def test_fold_orders_enumerates_every_order_of_rounding_additions():
    terms = [np.array([2048.0, 1.0], np.float16), np.array([1.0, 2048.0], np.float16),
             np.array([1.0, 1.0], np.float16)]
    s = fold_orders(terms, fp.f16_add, np.zeros(2, np.float16))
    assert s.orders == 6 and s.candidates.shape == (6, 2)
    # 2048 + 1 rounds back to 2048 (ulp 2); 1 + 1 + 2048 = 2050: the set holds both, per element
    assert set(s.candidates[:, 0].astype(float)) == {2048.0, 2050.0}
    assert set(s.candidates[:, 1].astype(float)) == {2048.0, 2050.0}
    assert s.reference[0] == 2048.0                              # ascending: ((0 + 2048) + 1) + 1
    assert s.contains(np.array([2050.0, 2048.0], np.float16)).all()
    assert not s.contains(np.array([2052.0, 2048.0], np.float16))[0]


def test_membership_compares_bits_signed_zero_and_nan_included():
    ref = np.array([0.0, np.nan], np.float32)
    s = AdmissibleSet(ref, ref[None], 1, "one")
    assert s.contains(np.array([0.0, np.nan], np.float32)).all()
    assert not s.contains(np.array([-0.0, np.nan], np.float32))[0]
    assert not s.contains(np.array([0.0, 1.0], np.float16)).any()          # another dtype is never in it


def test_fold_orders_declines_when_the_orders_exceed_the_limit():
    terms = [np.array([float(i)], np.float16) for i in range(5)]
    assert fold_orders(terms, fp.f16_add, np.zeros(1, np.float16), max_orders=119) is None
    assert fold_orders(terms, fp.f16_add, np.zeros(1, np.float16), max_orders=120).orders == 120
    assert len(list(itertools.permutations(range(5)))) == 120


def test_a_big_endian_array_of_the_reference_values_is_inside_the_set():
    ref = np.array([1.5, -0.0, 65504.0], np.float16)
    cand = np.stack([ref, np.array([1.5, 0.0, 65504.0], np.float16)])
    for s in (AdmissibleSet(ref, cand, 2, "enumerated"),
              AdmissibleSet(ref, None, 2, "bound", lo=np.array([1.0, 0.0, 6e4]), hi=np.array([2.0, 0.0, 7e4]))):
        big = ref.astype(">f2")
        assert s.contains(big).tolist() == [True, True, True]
        assert s.verdict(big).startswith("in ") and s.verdict(big).endswith("ascending order: yes")
