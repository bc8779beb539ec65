"""Admissible sets of refsim.ptx launches: run a kernel in every order its contended float atomic adds
may land in (refsim.arith.admissible has the set itself and the rule)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from refsim.arith.admissible import DEFAULT_MAX_ORDERS, AdmissibleSet, fold_orders

__all__ = ["AdmissibleSet", "ptx_admissible", "fold_orders", "DEFAULT_MAX_ORDERS"]


def ptx_admissible(module, kernel: str, grid, block, args, *, outputs, max_orders: int = DEFAULT_MAX_ORDERS,
                   **launch_options):
    """Run ``kernel`` of a :class:`refsim.ptx.Module` under every order in which its contended float
    atomic adds may land; returns ``{argument index: AdmissibleSet}`` for the ``outputs`` indices.

    args are copied for every run (the caller's arrays are not written). The contention n comes from a
    first run in thread order (``LaunchStats.float_atomic_contention``); n <= 1 gives a one-member set
    (the launch is deterministic). n! > max_orders raises :class:`refsim.errors.FormatRuleError`
    naming n. The rule (module docstring) makes the per-element sets exact for outputs whose elements
    each come from one contended address.
    """
    from refsim import ptx
    from refsim._validate import require_instance, require_int
    from refsim.errors import FormatRuleError

    require_instance("module", module, ptx.Module, "refsim.ptx.Module")
    args = list(require_instance("args", args, (list, tuple), "list or tuple (one argument per .param)"))
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and not a.flags.c_contiguous:   # checked before any copy is made
            raise FormatRuleError(f"args[{i}]: a pointer argument must be C-contiguous (it is device memory); "
                                  f"got strides {a.strides}")
    outputs = [require_int("outputs[...]", i, minimum=0) for i in
               require_instance("outputs", outputs, (list, tuple), "list of argument indices")]
    for i in outputs:
        if i >= len(args) or not isinstance(args[i], np.ndarray):
            raise FormatRuleError(f"outputs: each must index an array argument of args (0..{len(args) - 1}); got {i}")
    max_orders = require_int("max_orders", max_orders, minimum=1)

    def run(order):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        stats = module.launch(kernel, grid, block, copies, atomic_order=order, **launch_options)
        return stats, [copies[i] for i in outputs]

    stats, first = run(None)
    n = max(stats.float_atomic_contention, 1)
    if math.factorial(n) > max_orders:
        raise FormatRuleError(f"max_orders: {n} float atomic adds reach one address at once, {math.factorial(n)} "
                              f"orders; at most {max_orders} are run; got a launch with contention {n}")
    runs = [first] + [run(order)[1] for order in itertools.permutations(range(n)) if order != tuple(range(n))]
    rule = (f"every order of the {n} float atomic adds that reach one address at once, element by element"
            if n > 1 else "no contended float atomics: deterministic")
    return {i: AdmissibleSet(first[j], np.stack([r[j] for r in runs]), math.factorial(n), rule)
            for j, i in enumerate(outputs)}
