"""The awq scheme on float16 input: the vectorised quantizer and its plain-loop twin agree bit for bit
(every step one fp16 operation, as AutoAWQ on .half() weights)."""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.formats import uniform
from refsim.testing import assert_bitexact

# |range| < 65504 so the fp16 scale is finite (a range that overflows fp16 is refused by both twins)
finite_f16 = st.floats(-30000, 30000, allow_nan=False, allow_infinity=False, width=16)


@given(st.sampled_from([2, 3, 4, 8]), st.sampled_from(uniform.ROUNDING_MODES), st.sampled_from([1.0, 0.9, 0.5]),
       st.integers(1, 3).flatmap(lambda g: arrays(np.float16, (4 * g, 3), elements=finite_f16)))
@example(2, "half_even", 1.0, np.ones((4, 3), np.float16))  # constant group: |min / scale| overflows to inf
def test_awq_float16_vectorised_equals_reference(bits, rounding, clip, w):
    kw = dict(scheme="awq", granularity="group", group_size=4, rounding=rounding, clip_ratio=clip)
    a = uniform.quantize(w, bits, **kw)
    b = uniform.quantize_reference(w, bits, **kw)
    assert_bitexact(a.q, b.q, name="q")
    assert_bitexact(a.scale, b.scale, name="scale")
    assert_bitexact(a.zero, b.zero, name="zero")
    assert np.array_equal(a.scale.astype(np.float16).astype(np.float32), a.scale)  # fp16 values
