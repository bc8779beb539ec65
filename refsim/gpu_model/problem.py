"""What a prediction is: the kernel registry, the one validation of a problem, and the plain definition.

A prediction answers "how long does KERNEL take for C (M, N) = A (M, K) @ W (K, N) on GPU under
these measurement conditions". Its definition is three steps, written out in :func:`reference`::

    problem(...)         validate every argument once -> Problem (GPU spec with the ECC state,
                         SM clock in Hz, the kernel's module, bits and group size resolved)
    kernel.model(...)    the kernel's plain model on Machine(gpu, f_sm, params)
                         (refsim/gpu_model/kernels/<name>.py, one function per kernel)
    conditions           cache = "dirty": the machine's L2 holds dirty lines (conditions.dirty_l2);
                         timing = "events": the fixed cost per launch from CUDA-event timing
                         (conditions.with_timing); cache = "warm": the model again on the
                         machine whose L2 holds the working set's resident share
                         (conditions.l2_hit_fraction, warm_l2), with a note either way

Every kernel module provides::

    NAME, BITS, DEFAULT_BITS        the kernel's name, the bit-widths it runs, the default
    GROUPS, DEFAULT_GROUP, GROUP_RULE
                                    accepted group sizes (None = no grouping), the default, and the
                                    rule's text for a refused one (GROUPS None: group_size ignored)
    check(gpu, m, n, k, bits, group_size)     the kernel's own shape / GPU rules (RefsimError)
    model(machine, m, n, k, bits, group_size) -> Breakdown   the plain model (arguments valid)
    ESTIMATES (optional)            {label: why} of the model's own constants that are estimates (the
                                    trust statement lists them with the GPU's)
    INT32_INDEXES (optional)        the kernel's own int32 index expressions (label, fn(m, n, k), source)
    WEIGHTS_KEPT_IN_L2 (optional)   False when its weight loads evict first (a warm L2 keeps none)
    untrusted(m, n, k, bits, group_size) -> str | None  (optional)
                                    why the model is known to be far off for this problem (the
                                    evidence named); :func:`check_m` then refuses with
                                    UntrustedModelError instead of answering

:mod:`refsim.gpu_model.evaluate` is the fast path (result cache, batches over M); it gives the
same Breakdown as :func:`reference`, bit for bit (tests/gpu_model/test_evaluate.py).
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from refsim._validate import require_choice, require_instance
from refsim.errors import FormatRuleError, ShapeError, UntrustedModelError
from refsim.gpu_model.conditions import (CACHE_STATES, TIMINGS, dirty_l2, l2_hit_fraction, warm_l2, with_ecc,
                                        with_timing)
from refsim.gpu_model.names import resolve
from refsim.gpu_model.roofline import FITTED, Breakdown, ModelParams
from refsim.gpu_model.specs import GPUSpec, get_gpu

__all__ = ["KERNELS", "kernel_names", "kernel_module", "INT32_MAX", "Machine", "Problem", "problem",
           "check_size", "check_m", "reference"]

_MODULES = {
    "cublas-fp16": "cublas_fp16", "marlin": "marlin", "sparse-marlin": "sparse_marlin", "anyprec": "anyprec",
    "atom-w4a4": "atom_w4a4", "atom-w8a8": "atom_w8a8", "int8-w8a8": "int8_w8a8", "mixed-2-4-16": "mixed_2_4_16",
    "awq-w4a16": "awq_w4a16", "deepgemm-fp8": "deepgemm_fp8", "hopper-w4a16": "hopper_w4a16",
}
KERNELS = tuple(_MODULES)
#: sizes the kernels' host APIs take as C ``int`` (marlin_cuda, cublasGemmEx, the Any-Precision,
#: AWQ and Atom launchers): M, N and K above it are refused, never wrapped
INT32_MAX = (1 << 31) - 1
_LOADED: dict = {}


def kernel_names() -> list[str]:
    """Kernel names accepted by :func:`problem` (aliases: :data:`refsim.gpu_model.names.KERNEL_ALIASES`)."""
    return list(KERNELS)


def kernel_module(name: str):
    """The model module of kernel ``name`` (a name or alias); unknown names raise FormatRuleError
    listing the names and aliases."""
    mod = _LOADED.get(name) if type(name) is str else None
    if mod is None:
        key = resolve("kernel", name, KERNELS)
        mod = _LOADED[key] = importlib.import_module(f"refsim.gpu_model.kernels.{_MODULES[key]}")
    return mod


class Machine(NamedTuple):
    """The GPU as a kernel model sees it: the spec (ECC state and cache state applied), the SM clock
    in Hz and the fitted constants."""

    gpu: GPUSpec
    f_sm: float
    params: ModelParams


class Problem(NamedTuple):
    """Validated arguments of one prediction, except M (checked per entry: :func:`check_m`)."""

    gpu: GPUSpec          # the ECC state applied
    kernel: object        # the kernel's model module
    n: int
    k: int
    bits: int
    group_size: int | None
    f_sm: float
    params: ModelParams
    cache: str
    timing: str
    machine: Machine       # the GPU as the kernel sees it under these conditions (cold or dirty L2)


def check_size(name: str, value) -> int:
    """``value`` as a Python int in [1, INT32_MAX] (NumPy integers accepted); else ShapeError or
    FormatRuleError naming the rule."""
    if type(value) is int and 0 < value <= INT32_MAX:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise FormatRuleError(f"{name}: must be an integer; got {value!r:.80}")
    value = int(value)
    if value < 1:
        raise FormatRuleError(f"{name}: must be >= 1; got {value}")
    if value > INT32_MAX:
        raise ShapeError(f"{name}: the kernels' host APIs take int32 sizes, so {name} must be <= {INT32_MAX}; "
                         f"got {value}")
    return value


def _integer(value):
    """A NumPy integer as a Python int (so no NumPy scalar type reaches the arithmetic); anything
    else unchanged."""
    return int(value) if isinstance(value, np.integer) and not isinstance(value, np.bool_) else value


def _option(name: str, value, allowed, default, rule: str):
    """``value`` of a kernel option (bits, group size): ``default`` for None, else an int in
    ``allowed``; anything else a FormatRuleError stating ``rule``."""
    if value is None:
        return default
    value = _integer(value)
    if type(value) is not int or value not in allowed:
        raise FormatRuleError(f"{name}: {rule}; got {value!r:.80}")
    return value


def _bits(mod, bits) -> int:
    return _option("bits", bits, mod.BITS, mod.DEFAULT_BITS, f"kernel {mod.NAME} runs bit-widths {list(mod.BITS)}")


def _group(mod, group_size):
    if mod.GROUPS is None:          # the kernel has no grouping to choose
        return None
    return _option("group_size", group_size, mod.GROUPS, mod.DEFAULT_GROUP, f"kernel {mod.NAME} {mod.GROUP_RULE}")


def _params(params) -> ModelParams:
    if params is None:
        return FITTED
    if type(params) is not ModelParams:
        require_instance("params", params, ModelParams, "refsim.gpu_model.roofline.ModelParams or None")
    return params


def problem(gpu, kernel, n, k, bits=None, group_size=None, *, clock="sustained", params=None, ecc=None,
            cache="cold", timing="kernel") -> Problem:
    """Validate every argument of a prediction except M, once: ``gpu`` (name, alias or GPUSpec),
    ``kernel`` (name or alias), N and K (ints in [1, 2^31 - 1]), ``bits`` / ``group_size`` (the
    kernel's defaults for None), ``clock`` (base / boost / sustained or Hz), ``params``
    (ModelParams or None), ``ecc`` ('on' / 'off' / None), ``cache`` ('cold' / 'dirty' / 'warm'),
    ``timing`` ('kernel' / 'events'). Each rule broken is a RefsimError naming it and the value
    received."""
    mod = kernel_module(kernel)
    n, k = check_size("n", n), check_size("k", k)
    if type(cache) is not str or cache not in CACHE_STATES:
        cache = require_choice("cache", cache, CACHE_STATES)       # the table's str for a np.str_
    if type(timing) is not str or timing not in TIMINGS:
        timing = require_choice("timing", timing, TIMINGS)
    g = get_gpu(gpu)
    if ecc is not None:
        g = with_ecc(g, ecc)
    f_sm = g.clock_hz(clock)
    p = _params(params)
    run = with_timing(p, g, timing)
    machine = Machine(dirty_l2(g) if cache == "dirty" else g, f_sm, run)
    return Problem(g, mod, n, k, _bits(mod, bits), _group(mod, group_size), f_sm, p, cache, timing, machine)


def check_m(pb: Problem, m, *, trusted_only: bool = True) -> int:
    """M as a Python int after every rule that involves it: size, the kernel's int32 indexes and the
    kernel's own rules (some depend on M, e.g. Marlin's tile); RefsimError otherwise. Then, with
    ``trusted_only`` (always, except where :mod:`refsim.gpu_model.published` and
    :mod:`refsim.gpu_model.trust` measure how far off the refused model is), a kernel whose
    ``untrusted`` names a reason for this problem is refused with UntrustedModelError ("no
    trustworthy model: ...")."""
    if type(pb) is not Problem:
        require_instance("pb", pb, Problem, "refsim.gpu_model.problem.Problem (from problem())")
    m = check_size("m", m)
    mod = pb.kernel
    for label, fn, why in getattr(mod, "INT32_INDEXES", ()):
        value = fn(m, pb.n, pb.k)
        if value > INT32_MAX:
            raise ShapeError(f"{label}: kernel {mod.NAME} indexes it with int32 ({why}), so it must be <= "
                             f"{INT32_MAX}; got {value}")
    mod.check(pb.gpu, m, pb.n, pb.k, pb.bits, pb.group_size)
    untrusted = getattr(mod, "untrusted", None)
    if trusted_only and untrusted is not None:
        why = untrusted(m, pb.n, pb.k, pb.bits, pb.group_size)
        if why:
            raise UntrustedModelError(f"no trustworthy model: kernel {mod.NAME} at M = {m}: {why}")
    return m


def reference(gpu, kernel, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None, ecc=None,
              cache="cold", timing="kernel") -> Breakdown:
    """The definition of a prediction (module docstring): validate, the kernel's plain model under
    the conditions. :func:`refsim.gpu_model.evaluate.predict` returns the same Breakdown, faster."""
    pb = problem(gpu, kernel, n, k, bits, group_size, clock=clock, params=params, ecc=ecc, cache=cache,
                 timing=timing)
    return solve(pb, check_m(pb, m))


def solve(pb: Problem, m: int) -> Breakdown:
    """The prediction of a validated problem at a checked M (:func:`check_m`)."""
    mod, g, f = pb.kernel, pb.gpu, pb.f_sm
    bd = mod.model(pb.machine, m, pb.n, pb.k, pb.bits, pb.group_size)
    if pb.cache != "warm":
        return bd
    mib = bd.bytes_dram / 2**20
    keep = (g.l2_resident_bytes or g.l2_bytes) / 2**20
    if not getattr(mod, "WEIGHTS_KEPT_IN_L2", True):
        return replace(bd, notes=_join(bd.notes, "warm L2 changes little: the kernel fetches its weights with "
                                                  "an L2 evict_first policy, so they stream from DRAM every launch"))
    hit = l2_hit_fraction(g, bd.bytes_dram)
    if hit < 0.01:                  # under 1 % of the stream survives: nothing to model
        return replace(bd, notes=_join(bd.notes, f"warm L2 changes nothing: the {mib:.1f} MiB working set is "
                                                  f"far beyond the {keep:.0f} MiB the L2 keeps for one stream"))
    warm = mod.model(Machine(warm_l2(g, f, hit), f, pb.machine.params), m, pb.n, pb.k, pb.bits, pb.group_size)
    if hit == 1.0:
        note = f"warm L2: the {mib:.1f} MiB working set is L2-resident and streamed at L2 bandwidth"
    else:
        note = (f"warm L2: {hit:.0%} of the {mib:.1f} MiB working set stays in the {keep:.0f} MiB the L2 keeps "
                f"for one stream (random replacement)")
    return replace(warm, gpu=g.name, notes=_join(warm.notes, note))


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b
