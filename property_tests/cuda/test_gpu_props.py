"""Properties of backend="gpu"'s buffer mapping (refsim.cuda.gpu.device_bases), on hypothesis-drawn arrays and
views: every view's device offset points at the view's own bytes inside its base's span, views of one
array share one span, spans start on a 256-byte boundary of their array, distinct arrays never share."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.cuda import gpu


@st.composite
def _views(draw):
    """Two or three owning arrays (any of four dtypes) and row-range views of them, in a random order."""
    arrays = []
    for _ in range(draw(st.integers(2, 3))):
        dtype = draw(st.sampled_from([np.float16, np.int32, np.uint8, np.float64]))
        arrays.append(np.zeros((draw(st.integers(1, 40)), draw(st.integers(1, 24))), dtype))   # (rows, cols)
    views = []
    for _ in range(draw(st.integers(1, 8))):
        a = arrays[draw(st.integers(0, len(arrays) - 1))]
        r0 = draw(st.integers(0, a.shape[0] - 1))
        r1 = draw(st.integers(r0 + 1, a.shape[0]))
        views.append((a, a[r0:r1] if draw(st.booleans()) else a[r0:r1].reshape(-1)))
    return arrays, views


@settings(max_examples=60, deadline=None)
@given(_views())
def test_each_view_maps_to_its_own_bytes_in_one_span_per_array(drawn):
    arrays, views = drawn
    bases, where = gpu.device_bases([((0, i), v) for i, (_, v) in enumerate(views)])
    owners = {id(a) for a, _ in views}
    assert len(bases) == len(owners)                                       # one buffer per owning array
    for (owner, view), (b, off) in zip(views, where):
        span = bases[b].host
        assert span[off:off + view.nbytes].ctypes.data == view.ctypes.data  # the device offset is the view
        assert (span.ctypes.data - owner.ctypes.data) % 256 == 0            # span starts on 256 B of its owner
        assert 0 <= off and off + view.nbytes <= span.size
    for i, b in enumerate(bases):
        for c in bases[i + 1:]:
            assert not np.shares_memory(b.host, c.host)
