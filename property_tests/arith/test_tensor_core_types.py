"""Property tests of the bf16/tf32/fp8 tensor-core models: the vectorised model equals the plain-loop
exact-rational twin on every row of the model table (specials, subnormals, tf32 low bits included),
and equals the exact result whenever nothing can round."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from refsim.arith import tensor_core_types as tt
from refsim.testing import assert_bitexact, examples

ROWS = sorted(tt.MODELS.values(), key=lambda m: (m.family, m.shape, m.arch))
NAMES = {"bf16": ("bf16",), "tf32": ("tf32",), "fp8": ("e4m3", "e5m2")}
K = {"m16n8k16": 16, "m16n8k8": 8, "m16n8k32": 32}
FINITE_TOP = {"bf16": 0x7F7F, "tf32": 0x7F7FFFFF, "e4m3": 0x7E, "e5m2": 0x7B}   # largest finite code


@st.composite
def operand(draw, t: str, shape: tuple[int, int]):
    """Raw bits of type t: finite codes of either sign, a few positions overwritten by any code
    (Inf, NaN, -0, subnormals); tf32 with arbitrary low 13 bits."""
    top = FINITE_TOP[t]
    sign = 1 << {"bf16": 15, "tf32": 31, "e4m3": 7, "e5m2": 7}[t]
    dtype = tt.TYPES[t][2]
    x = draw(hnp.arrays(np.int64, shape, elements=st.integers(0, top)))
    x = x | np.where(draw(hnp.arrays(bool, shape)), sign, 0)
    for _ in range(draw(st.integers(0, 3))):
        r, c = draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1))
        x[r, c] = draw(st.integers(0, 2 * sign - 1))
    return x.astype(dtype)


@st.composite
def instructions(draw):
    m = draw(st.sampled_from(ROWS))
    a, b = draw(st.sampled_from(NAMES[m.family])), draw(st.sampled_from(NAMES[m.family]))
    k = K[m.shape]
    A = draw(operand(a, (16, k)))
    B = draw(operand(b, (k, 8)))
    scale = draw(st.sampled_from([1.0, 2.0**-120, 2.0**40, 2.0**100]))
    C = draw(hnp.arrays(np.float32, (16, 8), elements=st.floats(-1e4, 1e4, width=32))) * np.float32(scale)
    if draw(st.booleans()):
        C[draw(st.integers(0, 15)), draw(st.integers(0, 7))] = draw(st.sampled_from([np.inf, -np.inf, np.nan, -0.0]))
    return m, a, b, A, B, C.astype(np.float32)


@settings(max_examples=examples(25), deadline=None)
@given(instructions())
def test_model_equals_the_exact_rational_reference(case):
    m, a, b, A, B, C = case
    got = tt.mma(m.arch, m.shape, a, b, A, B, C)
    assert_bitexact(got, tt.mma_reference(m.arch, m.shape, a, b, A, B, C), f"{m.arch} {m.shape} {a}.{b}")


SMALL = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


@settings(max_examples=examples(25), deadline=None)
@given(st.sampled_from(ROWS), st.data())
def test_model_is_exact_when_nothing_can_round(m, data):
    # integers in [-3, 3] and |C| <= 1000: every product, term and partial sum is an integer below
    # 2^13, exact on every grid and in every output format (e8m13 included)
    a, b = data.draw(st.sampled_from(NAMES[m.family])), data.draw(st.sampled_from(NAMES[m.family]))
    k = K[m.shape]
    Ai = data.draw(hnp.arrays(np.int64, (16, k), elements=st.integers(-3, 3)))
    Bi = data.draw(hnp.arrays(np.int64, (k, 8), elements=st.integers(-3, 3)))
    Ci = data.draw(hnp.arrays(np.int64, (16, 8), elements=st.integers(-1000, 1000)))
    enc = lambda x, t: (x.astype(np.float32) if t == "tf32" else x.astype(np.float32).astype(SMALL[t]))  # noqa: E731
    D = tt.mma(m.arch, m.shape, a, b, enc(Ai, a), enc(Bi, b), Ci.astype(np.float32))
    exact = (Ci + Ai @ Bi).astype(np.float32)
    assert_bitexact(D, np.where(exact == 0, np.float32(0), exact), f"{m.arch} {m.shape} {a}.{b}")
