"""What every case module builds on: the :class:`Format` interface, data kinds, probes, masks.

A format is a subclass of :class:`Format` (one module per format in this package): the case space
as data (``fields``: the legal values of every field, simplest first), the kernel's legality rule
(the function refsim's emulator enforces, called, never copied), the regimes a case exercises, how
to build the inputs of a case, the emulator, and the diagnosis hooks (structure labels of every
output element, probes that switch parts of the kernel off, known bug classes replayed on the
emulator) and, for accuracy mode, the kernel's product as an exact linear form.

A case is a plain dict of Python scalars, e.g. ``{'m': 1, 'k': 2048, 'n': 2048, 'group_size': 128,
'kind': 'normal', 'seed': 7}``; ``make(case)`` rebuilds the same inputs from it on any machine
(NumPy's PCG64 stream of ``case['seed']``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (require_choice, require_fields, require_finite, require_float_array, require_instance,
                              require_int, require_ndim, require_shape_arg, set_fields)
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError

__all__ = ["Format", "Probe", "Linear", "DATA_KINDS", "values", "int4_weights", "keep_columns", "fragment_labels"]

#: data kinds, simplest first (the shrinker walks toward the front)
DATA_KINDS = ("zeros", "ones", "small_integers", "normal", "wide_exponents")


def values(rng: np.random.Generator, kind: str, shape, scale: float = 1.0) -> np.ndarray:
    """float64 array of ``shape`` for a data kind (zeros, ones, small integers in [-3, 3], standard
    normal times ``scale``, or normal with exponents spread over 2^-14 .. 2^7).

    ``rng`` a ``numpy.random.Generator``; ``kind`` one of :data:`DATA_KINDS`; ``shape`` an int or a
    tuple of ints (element count at most 2**31 - 1); ``scale`` a finite real number."""
    require_instance("rng", rng, np.random.Generator)
    kind = require_choice("kind", kind, DATA_KINDS)
    shape = require_shape_arg("shape", shape)
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise FormatRuleError(f"scale: must be a real number; got {type(scale).__name__}")
    if not np.isfinite(scale):
        raise NonFiniteError(f"scale: must be finite; got {scale!r}")
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "ones":
        return np.ones(shape)
    if kind == "small_integers":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "normal":
        return rng.standard_normal(shape) * scale
    return rng.standard_normal(shape) * 2.0 ** rng.integers(-14, 8, shape)  # wide_exponents


def int4_weights(rng: np.random.Generator, k: int, n: int, group_size: int | None) -> tuple:
    """Uniform 4-bit codes uint8 (K, N) and group scales float16 (G, N) in [2^-10, 0.021)
    (G = K / group_size, 1 per-channel): small scales keep every sum far from fp16 overflow."""
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    scales = (rng.random((1 if group_size is None else k // group_size, n)) * 0.02 + 2.0**-10).astype(np.float16)
    return q, scales


def keep_columns(x: np.ndarray, keep) -> np.ndarray:
    """A zeroed copy of ``x`` (..., K) with only the columns ``keep`` (index, slice or bool mask
    along the last axis) copied over: activations that switch the rest of a reduction off."""
    out = np.zeros_like(x)
    out[..., keep] = x[..., keep]
    return out


def fragment_labels(layout, shape) -> dict:
    """Structure labels of an mma output fragment: ``{lane, register, row, column}`` int arrays of
    ``shape`` (rows, cols), from a :mod:`refsim.arith.fragments` layout's ``owner(row, col)``."""
    rows, cols = np.indices(shape)
    owner = np.array([[layout.owner(r, c) for c in range(shape[1])] for r in range(shape[0])])
    return {"lane": owner[..., 0], "register": owner[..., 1], "row": rows, "column": cols}


@dataclass(frozen=True)
class Probe:
    """One diagnostic re-run: the inputs with part of the kernel switched off (zeros elsewhere)."""

    name: str          # what stays active, e.g. "k 0..15 only (one mma, no reductions)"
    inputs: tuple
    meaning: str       # what a mismatch that survives this probe points at
    family: str | None = None   # probes of one family (e.g. each quantization group alone) are read
                                # together: only a strict subset differing points at those members


#: the longest reduction and the most fp16 roundings a Linear form states: its error bound is
#: computed in exact rationals, (1 + 2^-24)^T with T terms (0.07 s at 2^16)
MAX_TERMS = 1 << 16
MAX_ROUNDINGS = 16


@dataclass(frozen=True)
class Linear:
    """The kernel's output as an exact linear form, for accuracy mode (refsim.testing.accuracy).

    ``y[m, n] ~ post(sum_t a[m, t] * w[t, n] + c[m, n])``: ``a`` float64 (M, T) and ``w`` float64
    (T, N) hold exactly representable values (each product exact in float64), ``c`` float64 (M, N)
    or None (an accumulator the kernel starts from). ``terms``: how many terms the kernel adds in
    floating point for one output (its reduction length); ``pre``: fp16 roundings a term may take
    before it is added (a weight dequantized to fp16: ``fp16(q - z) * s``); ``post``: fp16
    roundings after the sum (1: the fp16 output; 2: an fp16 output then a per-channel fp16 scale).
    ``cofactor``: float64 broadcastable to (M, N), the sum over terms of the magnitude of what
    multiplies the rounded factor (default: the row sums of ``|a|``), for the subnormal part of
    the ``pre`` roundings. ``nan``: bool broadcastable to (M, N) or None, the outputs the exact product
    makes NaN (a NaN weight: NaN times any activation, 0 included): those must be NaN, whatever
    ``a`` and ``w`` say there."""

    a: np.ndarray
    w: np.ndarray
    terms: int
    pre: int = 0
    post: int = 1
    c: np.ndarray | None = None
    cofactor: np.ndarray | None = None
    nan: np.ndarray | None = None

    def __post_init__(self):
        require_fields(self)  # plain native arrays and Python ints, whatever came in
        a, w = (require_finite(n, require_ndim(n, require_float_array(n, getattr(self, n)), 2)) for n in "aw")
        if a.shape[1] != w.shape[0] or 0 in a.shape + w.shape:
            raise ShapeError(f"a, w: must be (M, T) and (T, N), none of them 0; got {a.shape}, {w.shape}")
        if not 1 <= require_int("terms", self.terms) <= MAX_TERMS:
            raise FormatRuleError(f"terms: must lie in [1, {MAX_TERMS}] (the bound is exact-rational); "
                                  f"got {self.terms}")
        for name in ("pre", "post"):
            if not 0 <= require_int(name, getattr(self, name)) <= MAX_ROUNDINGS:
                raise FormatRuleError(f"{name}: fp16 roundings must lie in [0, {MAX_ROUNDINGS}]; "
                                      f"got {getattr(self, name)}")
        c = self.c if self.c is None else require_finite("c", require_float_array("c", self.c)).astype(np.float64)
        if c is not None and c.shape != (a.shape[0], w.shape[1]):
            raise ShapeError(f"c: must be (M, N) = {(a.shape[0], w.shape[1])}; got {c.shape}")
        cof = self.cofactor
        if cof is not None:
            cof = require_finite("cofactor", require_float_array("cofactor", cof)).astype(np.float64)
            try:
                np.broadcast_shapes(cof.shape, (a.shape[0], w.shape[1]))
            except ValueError:
                raise ShapeError(f"cofactor: must broadcast to (M, N) = {(a.shape[0], w.shape[1])}; "
                                 f"got {cof.shape}") from None
        nan = self.nan
        if nan is not None:
            if nan.dtype != np.bool_:
                raise DtypeError(f"nan: must be a bool array; got dtype {nan.dtype}")
            try:
                nan = np.broadcast_to(nan, (a.shape[0], w.shape[1])).copy()
            except ValueError:
                raise ShapeError(f"nan: must broadcast to (M, N) = {(a.shape[0], w.shape[1])}; "
                                 f"got {nan.shape}") from None
        set_fields(self, a=a.astype(np.float64), w=w.astype(np.float64), c=c, cofactor=cof, nan=nan)

    @property
    def c_shape(self) -> tuple:
        """(M, N): the shape of the product."""
        return (self.a.shape[0], self.w.shape[1])


class Format:
    """Everything the harness needs about one kernel format. Subclasses set the class attributes
    and implement the methods; the optional hooks default to "nothing to say"."""

    name: str                      # what check_kernel(kernel, fmt) and `refsim check --fmt` call it
    signature: str                 # the kernel's call, for messages and docs
    inputs: tuple                  # the input names, in call order (messages name a modified input)
    fields: dict                   # field -> legal values, simplest first (seed: None)
    shape_fields: tuple            # fields ``shapes=`` fixes (the rest are drawn)
    default_max_size: int          # largest default case, in multiply-adds (the unit of ``cost``)
    pinned_pool: tuple = ()        # candidate shapes for the pinned cases
    pinned_kind: str = "normal"    # data kind of the pinned cases (one that rounds)
    hints: tuple = ()              # (label, value, meaning): outputs with that label value never
                                   # differ, others do -> meaning
    no_accuracy: str | None = None   # why accuracy mode does not apply to the format, or None

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    def legal(self, case: dict) -> None:
        """None, or raises the RefsimError of the rule ``case`` breaks (the emulator's own check)."""

    def cost(self, case: dict) -> int:
        """Multiply-adds of the case (the unit of ``max_size``)."""
        raise NotImplementedError

    def regimes(self, case: dict, sms: int) -> set:
        """Names of the regimes of the kernel's structure this case exercises."""
        raise NotImplementedError

    def make(self, case: dict) -> tuple:
        """The kernel's inputs for ``case``, deterministic from ``case['seed']``."""
        raise NotImplementedError

    def emulate(self, inputs: tuple, arch: str, sms: int) -> np.ndarray:
        """refsim's emulator of the kernel on ``inputs``: the expected output."""
        raise NotImplementedError

    def locate(self, case: dict, inputs: tuple, idx: tuple, arch: str, sms: int) -> str:
        """One line: which thread, register and reduction produce output ``idx``."""
        raise NotImplementedError

    def structure(self, case: dict, inputs: tuple, shape: tuple, sms: int) -> dict:
        """``{label: int array of the output's shape}``: where each output sits in the kernel."""
        raise NotImplementedError

    def probes(self, case: dict, inputs: tuple) -> list:
        """Diagnostic re-runs, narrowest part of the kernel first (:class:`Probe`)."""
        return []

    def known_bugs(self, case: dict, inputs: tuple, arch: str, sms: int):
        """``(bug class, description, alt)`` with ``alt(inputs)`` what a kernel with that bug writes."""
        return []

    def linear(self, case: dict, inputs: tuple) -> Linear:
        """The exact linear form of the kernel's output (accuracy mode)."""
        raise NotImplementedError
