"""Admissible results: where the hardware may order operations differently, the set of outputs it may write.

This module is the floor every layer can use (the kernel emulators build sets with :func:`fold_orders`);
refsim.testing.admissible runs refsim.ptx launches in every order and re-exports these names.

A float atomic add (``atomicAdd`` on half/float/double; ``atom``/``red.add.f16/f16x2/bf16/f32/f64``)
that several warps or blocks aim at one address at once lands in an order the GPU does not fix, and
float addition rounds, so the result depends on that order. refsim's single answer (thread order,
"ascending") is one member of a set; a test must accept any member, and say which.

    contenders per address n   orders n!   refsim gives
    K-split, 4 slices          24          every order: the per-element set, exact
    n! above max_orders        -           refused (PTX) / an error-bound interval (emulators), stated

Rule (per element): an output element that receives its value from ONE address's atomic adds (the
K-split pattern: slices add into one accumulator, a barrier, one thread stores it) may hold the fold
of those adds in any order, independently of the other elements. The set of element i is
{fold(order)[i] : order in S_n}, computed by running every order; under the rule the product of
these per-element sets is exactly the admissible output. An element that mixes several contended
addresses gets a subset (the orders are applied alike to every address of a run).

:class:`AdmissibleSet` is what the set-valued functions return and what
:func:`refsim.testing.assert_bitexact` and ``check_kernel`` accept as the expected value::

    s = refsim.testing.admissible.ptx_admissible(module, "kernel", grid, block, args, outputs=[2])
    assert_bitexact(out_from_gpu, s)   # -> "in the admissible set of 24 orders; equal to refsim's
                                       #     ascending order: no"
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from refsim._validate import require_array, require_callable, require_fields, require_instance, require_int
from refsim.arith.fp import raw_bits
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["AdmissibleSet", "fold_orders", "DEFAULT_MAX_ORDERS"]

#: The most orders refsim enumerates (8! = 40320): beyond, a proven bound or a refusal.
DEFAULT_MAX_ORDERS = 40320
#: The bound on ``max_orders`` itself: 10! runs of the adds, minutes at most, never hours.
MAX_ENUMERATED = 3628800

_bits = raw_bits


@dataclass(frozen=True)
class AdmissibleSet:
    """The outputs the hardware may produce, elementwise.

    reference: refsim's deterministic answer (ascending / thread order), dtype and shape of the output.
    candidates: (C, *shape) the output of each enumerated order (C = ``orders`` when exhaustive), or
    None for a bound. lo, hi: float64 arrays of the bound's interval per element (None when
    enumerated). orders: how many orders the set covers. rule: one sentence saying how it was made.
    """

    reference: np.ndarray
    candidates: np.ndarray | None
    orders: int
    rule: str
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None

    def __post_init__(self):
        require_fields(self)  # plain native arrays, a Python int, a str: whatever came in

    @property
    def dtype(self):
        return self.reference.dtype

    @property
    def shape(self):
        return self.reference.shape

    @property
    def exhaustive(self) -> bool:
        """True when every order was run (membership is exact), False for an interval bound."""
        return self.candidates is not None

    def contains(self, actual: np.ndarray) -> np.ndarray:
        """Bool mask, per element: ``actual``'s bits equal one enumerated order's (or, for a bound,
        its value lies in [lo, hi]; NaN only where the bound allows it)."""
        actual = require_array("actual", actual)    # a big-endian array compares by its values
        if actual.dtype != self.dtype or actual.shape != self.shape:
            return np.zeros(self.shape, bool)
        if self.candidates is not None:
            return (_bits(self.candidates) == _bits(actual)[None]).any(axis=0)
        v = actual.astype(np.float64)
        return (v >= self.lo) & (v <= self.hi) | (_bits(actual) == _bits(self.reference))

    def verdict(self, actual: np.ndarray) -> str:
        """One line for a report: membership and whether it is refsim's own (ascending) answer."""
        inside = bool(self.contains(actual).all())
        same = bool(np.array_equal(_bits(actual), _bits(self.reference))) if inside else False
        kind = (f"the admissible set of {self.orders} orders" if self.exhaustive
                else f"the admissible bound over {self.orders} orders ({self.rule})")
        if not inside:
            return f"outside {kind}"
        return f"in {kind}; equal to refsim's ascending order: {'yes' if same else 'no'}"


def fold_orders(terms: list, add, start, *, max_orders: int = DEFAULT_MAX_ORDERS):
    """Every order of ``start (+) t_0 (+) ... (+) t_{n-1}`` with the rounding add ``add(x, y)``.

    terms: n arrays of one shape (the contributions, in refsim's ascending order); start: the
    initial value; ``add``: a callable; ``max_orders``: an int in [1, 10!]. Returns an
    :class:`AdmissibleSet` whose reference is the ascending order, or None when n! > max_orders
    (the caller states a bound instead).
    """
    terms = [require_array(f"terms[{i}]", t) for i, t in enumerate(require_instance("terms", terms, (list, tuple)))]
    if any(t.shape != terms[0].shape for t in terms):
        raise ShapeError(f"terms: must share one shape; got {[t.shape for t in terms][:8]}")
    require_callable("add", add)
    max_orders = require_int("max_orders", max_orders, minimum=1)
    if max_orders > MAX_ENUMERATED:
        raise FormatRuleError(f"max_orders: at most {MAX_ENUMERATED} (10!) orders are ever enumerated; got {max_orders}")
    n = len(terms)
    if n > 10 or math.factorial(n) > max_orders:
        return None
    outs = []
    for order in itertools.permutations(range(n)):
        acc = start
        for i in order:
            acc = add(acc, terms[i])
        outs.append(np.asarray(acc))
    cand = np.stack(outs)
    return AdmissibleSet(cand[0], cand, len(outs),
                         f"every order of {n} rounding additions, element by element")
