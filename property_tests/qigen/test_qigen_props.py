"""Hypothesis: generated kernels equal the oracle bit for bit over legal shapes, bits, groups."""

import shutil

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from refsim.formats import gptq
from refsim.formats import qigen as Q
from refsim.qigen import codegen, kernel, oracle
from refsim.native.machine import detect_isa
from refsim.testing import assert_bitexact, examples

ISAS = ["scalar"] + (["avx2"] if detect_isa() == "avx2" else [])
pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
                                reason="no C compiler on PATH")


@st.composite
def problems(draw):
    """Only legal problems: K multiple of mb (multiple of 32), N multiple of tb (multiple of tu)."""
    bits = draw(st.sampled_from([2, 3, 4]))
    tu = draw(st.sampled_from([8, 16, 32]))
    tb = tu * draw(st.integers(1, 3))
    n = tb * draw(st.integers(1, 3))
    mb = 32 * draw(st.integers(1, 3))
    k = mb * draw(st.integers(1, 3))
    gs = draw(st.sampled_from([None] + [g for g in (32, 64, 96, 128) if k % g == 0]))
    m = draw(st.integers(1, 3))
    order = draw(st.sampled_from(Q.ORDERS))
    unroll = draw(st.sampled_from([u for u in (1, 2, 4, 8) if bits == 3 or u <= 32 // bits]))
    isa = draw(st.sampled_from(ISAS))
    acc = draw(st.sampled_from([a for a in (1, 2, 4) if a * tu <= 64]))
    path = draw(st.sampled_from(kernel.PATHS))
    seed = draw(st.integers(0, 2**32 - 1))
    return bits, tu, tb, n, mb, k, gs, m, order, unroll, isa, acc, path, seed


@settings(max_examples=examples(40))
@given(problems())
def test_kernel_equals_oracle(p):
    bits, tu, tb, n, mb, k, gs, m, order, unroll, isa, acc, path, seed = p
    rng = np.random.default_rng(seed)
    groups = k // (gs or k)
    q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
    s = (rng.random((groups, n)) * 0.1).astype(np.float32)
    z = rng.integers(0, 2**bits, size=(groups, n)).astype(np.float32)
    x = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if seed % 2 else None
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=gs, mb=mb, tb=tb,
                         order=order, bias=b)
    y = kernel.qgemv(x, mat, codegen.KernelSpec(bits, tu=tu, unroll=unroll, isa=isa, accumulators=acc), path=path)
    assert_bitexact(y, oracle.qgemv_oracle(x, q, s, z, b, bits, gs, unroll=unroll, accumulators=acc),
                    name=f"kernel A={acc} path={path}")
    exact = x.astype(np.float64) @ ((q.astype(np.float64).reshape(groups, -1, n) - z[:, None, :])
                                    * s[:, None, :]).reshape(k, n)
    if b is not None:
        exact = exact + b
    assert np.all(np.abs(y - exact) <= oracle.error_bound(x, q, s, z, b, gs))


@settings(max_examples=examples(30))
@given(st.sampled_from([2, 3, 4]), st.integers(1, 4), st.integers(1, 4), st.sampled_from(Q.ORDERS),
       st.integers(0, 2**32 - 1))
def test_unpack_inverts_pack(bits, kbs, ps, order, seed):
    rng = np.random.default_rng(seed)
    lay = Q.QIGenLayout(bits, 32 * kbs, 8 * ps, 32, 8, order)
    qw = rng.integers(-(2**31), 2**31, size=(lay.k * bits // 32, lay.n), dtype=np.int64).astype(np.int32)
    packed = Q.pack(qw, lay)
    np.testing.assert_array_equal(packed, Q.pack_reference(qw, lay))
    np.testing.assert_array_equal(Q.unpack(packed, lay), qw)
