"""Adversarial cases of accuracy mode: fixed data on which the next-weaker accumulation than the
stated one leaves the bound, with certainty, while the stated one stays within it (a theorem).

Drawn data rarely tells an fp16 accumulator from an fp32 one: the bound of
:mod:`refsim.testing.accuracy` is a worst case, and typical sums sit far inside it. These cases are
built so that a weaker accumulation loses terms that the stated one keeps. Every weight is exactly
1 (GPTQ/AWQ: ``q = 8, z = 7, s = 1``; Marlin: ``q = 9, s = 1``; Any-Precision: every table entry
1; the weight-only formats: each one's ``unit_weights``, e.g. Q4_0 ``q = 9, d = 1``), so output
``y[m, n] = sum_k x[m, k]`` and the terms are the activations below (zero elsewhere, the same in
every row and column). X = 2^10 has an fp16 ulp of 1::

    sequence              terms (K)                                     S        defeats (stated fp32)
    large_first_term      X at k 0, 2^-4 at k 1..7, -X at k K-1 (512)   7/16     fp16 sequential; fp16 inside a
                                                                                 chunk; fp32 slices of >= 8
                                                                                 contiguous k, added in fp16
    strided_small_terms   X at k 0, 2^-4 at k 64j (j 1..7), -X at K-1   7/16     fp32 slices k = s mod S
                                                                                 (S | 64), added in fp16
    many_small_addends    X at k 0, 2^-2 at k 1..K-1 (512)              1151.75  fp16 sequential, fp16 chunks
    alternating_signs     (-1)^j X at k 2j, 2^-2 at k 2j+1 (512)        64       fp16 sequential
    near_overflow         2^15, 2^15, -2^15, -2^15 repeated (512)       0        fp16 sequential (overflows)

                                                                                 (stated fp16)
    bf16_small_addends    1 at k 0, 2^-9 at k 1..255 (256)              1.498    bf16 sequential

(fp16 is the weakest accumulator accuracy mode states; the next weaker one with fewer significand
bits is bf16.) docs/harness.md derives each margin: why the weaker accumulation's output leaves
the bound and the ratio error / bound it reaches. The stated accumulation passes by the theorem the
bound is (Higham, Lemma 3.1), in any order. The cases run in accuracy mode after the pinned ones,
independent of the seed. Formats: gptq, gptq_v2, awq, marlin, anyprec and the weight-only GEMMs
of the block-scaled formats (fp8_channel, fp8_block, mxfp4, nvfp4, nf4, nf4_dq, q4_0, q8_0, q4_k)
(atom's K reduction is exact integer arithmetic inside a group and its activations are quantized, mixed_2_4_16's weights
come from its quantizer: neither can carry these sequences).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from refsim._validate import require_choice, require_fields, require_instance
from refsim.formats import bitplane, marlin
from refsim.testing.accuracy import ACCUMULATIONS
from refsim.testing.cases import FORMATS as SPECS
from refsim.testing.cases.base import Linear
from refsim.testing.cases.weight_only import WeightOnlyCases

__all__ = ["SEQUENCES", "FORMATS", "Adversarial", "sequence", "cases", "inputs", "exact_weights"]

_X = 2.0**10


def _large_first_term(k):
    x = np.zeros(k)
    x[0], x[1:8], x[k - 1] = _X, 2.0**-4, -_X
    return x


def _strided_small_terms(k):
    x = np.zeros(k)
    x[0], x[64:448 + 1:64], x[k - 1] = _X, 2.0**-4, -_X
    return x


def _many_small_addends(k):
    x = np.full(k, 2.0**-2)
    x[0] = _X
    return x


def _alternating_signs(k):
    x = np.full(k, 2.0**-2)
    x[0::2] = _X * (-1.0) ** np.arange(k // 2)
    return x


def _near_overflow(k):
    return np.tile([2.0**15, 2.0**15, -2.0**15, -2.0**15], k // 4)


def _bf16_small_addends(k):
    x = np.zeros(k)
    x[0], x[1:256] = 1.0, 2.0**-9
    return x


#: name -> (stated accumulation it serves, K, builder of the (K,) activations, the weaker accumulation it defeats)
SEQUENCES = {
    "large_first_term": ("fp32", 512, _large_first_term,
                         "an fp16 sequential sum, fp16 inside a chunk, or fp32 slices of >= 8 contiguous k added "
                         "in fp16"),
    "strided_small_terms": ("fp32", 512, _strided_small_terms,
                            "fp32 slices k = s mod S (S dividing 64) added in fp16"),
    "many_small_addends": ("fp32", 512, _many_small_addends, "an fp16 sequential sum or fp16 chunks"),
    "alternating_signs": ("fp32", 512, _alternating_signs, "an fp16 sequential sum"),
    "near_overflow": ("fp32", 512, _near_overflow, "an fp16 sequential sum (its partial sums overflow)"),
    "bf16_small_addends": ("fp16", 256, _bf16_small_addends, "a bf16 sequential sum"),
}


def sequence(name: str) -> np.ndarray:
    """The (K,) float64 activations of sequence ``name`` (every value exact in fp16), K its own (:data:`SEQUENCES`)."""
    name = require_choice("name", name, tuple(SEQUENCES))
    return SEQUENCES[name][2](SEQUENCES[name][1])


# --- one builder per format: (base case for K) and (the case's inputs with unit weights, activations x)

def _w4a16_case(fmt, k):
    return {"m": 1, "k": k, "n": 128, "group_size": None, "act_order": False,
            "kind": "zeros", "seed": 0}


def _w4a16_inputs(spec, case, x):
    k, n = case["k"], case["n"]
    q = np.full((k, n), 8, np.uint8)
    return spec.pack(x, q, np.full((1, n), 7), np.ones((1, n), np.float16), np.zeros(k, np.int32), case)


def _marlin_case(fmt, k):
    return {"m": 1, "k": k, "n": 256, "group_size": None, "kind": "zeros", "seed": 0}


def _marlin_inputs(spec, case, x):
    B, s = marlin.pack(np.full((case["k"], case["n"]), 9, np.uint8), np.ones((1, case["n"]), np.float16), None)
    return x, B, s


def _anyprec_case(fmt, k):
    return {"m": 1, "k": k, "n": 16, "bits": 3, "kind": "zeros", "seed": 0}


def _anyprec_inputs(spec, case, x):
    codes = np.zeros((case["n"], case["k"]), np.uint8)
    return x, bitplane.pack(codes, case["bits"]), np.ones((case["n"], 2 ** case["bits"]), np.float16)


def _weight_only_case(fmt, k):
    n = min(v for v in SPECS[fmt].fields["n"] if v >= 8)
    return {"m": 1, "k": k, "n": n, "edge": "none", "kind": "zeros", "seed": 0}


def _weight_only_inputs(spec, case, x):
    return (x,) + tuple(spec.unit_weights(case["k"], case["n"]))


_BUILDERS = {"gptq": (_w4a16_case, _w4a16_inputs), "gptq_v2": (_w4a16_case, _w4a16_inputs),
             "awq": (_w4a16_case, _w4a16_inputs), "marlin": (_marlin_case, _marlin_inputs),
             "anyprec": (_anyprec_case, _anyprec_inputs),
             **{name: (_weight_only_case, _weight_only_inputs) for name, spec in SPECS.items()
                if isinstance(spec, WeightOnlyCases)}}
#: the formats whose kernels can carry the sequences
FORMATS = tuple(sorted(_BUILDERS))


@dataclass(frozen=True)
class Adversarial:
    """One adversarial case: ``name`` (a key of :data:`SEQUENCES`), ``case`` (the format's case dict
    of the shape; its ``kind``/``seed`` are not the data), ``inputs`` (the kernel's input tuple),
    ``defeats`` (the weaker accumulation that must leave the bound on it)."""

    name: str
    case: dict
    inputs: tuple
    defeats: str

    def __post_init__(self):
        require_fields(self)  # plain strs and a tuple, whatever str subclasses or sequence came in


def inputs(fmt: str, name: str) -> tuple:
    """The kernel's input arrays of adversarial case ``name`` for ``fmt`` (what a report's
    ``rebuild:`` line of an adversarial case calls)."""
    fmt = require_choice("fmt", fmt, FORMATS)
    name = require_choice("name", name, tuple(SEQUENCES))
    case_of, inputs_of = _BUILDERS[fmt]
    k = SEQUENCES[name][1]
    case = case_of(fmt, k)
    x = sequence(name)[None, :].repeat(case["m"], axis=0).astype(np.float16)       # (M, K)
    return inputs_of(SPECS[fmt], case, x)


def cases(fmt: str, accumulation: str) -> list[Adversarial]:
    """The adversarial cases of ``fmt`` (a name of :data:`refsim.testing.cases.FORMATS`) for a
    stated ``accumulation`` ('fp32' or 'fp16'); [] for a format that cannot carry them."""
    accumulation = require_choice("accumulation", accumulation, ACCUMULATIONS)
    if require_choice("fmt", fmt, tuple(SPECS)) not in _BUILDERS:
        return []
    out = []
    for name, (acc, k, _, defeats) in SEQUENCES.items():
        if acc == accumulation:
            out.append(Adversarial(name, _BUILDERS[fmt][0](fmt, k), inputs(fmt, name), defeats))
    return out


def exact_weights(lin: Linear) -> Linear:
    """``lin`` without its ``pre`` roundings when every factor ``w`` is exact in fp16 (a rounding of
    an fp16-representable value is exact): the tighter, still rigorous, bound the margins use."""
    require_instance("lin", lin, Linear)
    with np.errstate(over="ignore"):
        exact = np.array_equal(lin.w.astype(np.float16).astype(np.float64), lin.w)
    return replace(lin, pre=0) if exact and lin.pre else lin
