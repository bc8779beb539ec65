"""refsim/cuda/gptq_awq.cu through refsim.ptx: gptq_gemv (v1 and v2 zero points, act-order) and awq_gemv
equal their emulators bit for bit on pinned and on hypothesis-drawn legal shapes and values (K and N
tails, partial thread blocks), and return the exact product where no partial sum can round.
Budget: every drawn example is one interpreted launch (0.3-3 s on a busy 2-core machine), so the example
counts are small; the heavy sweep is bench/bench_cuda_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernel_inputs import cases
from kernel_inputs import gptq_checkpoint as _gptq
from kernel_inputs import special_values as _values

import refsim.cuda as rc
from refsim.emulator import gptq_awq_kernel
from refsim.formats import awq, gptq
from refsim.testing import assert_bitexact


@pytest.mark.parametrize("fmt,act_order,m", [("gptq", False, 1), ("gptq_v2", True, 3)])
def test_gptq_gemv_equals_its_emulator(fmt, act_order, m):
    rng = np.random.default_rng(1)
    ckpt = _gptq(rng, 64, 32, 32, fmt, act_order)
    x = rng.standard_normal((m, 64)).astype(np.float16)
    assert_bitexact(rc.gptq_gemv(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


def test_gptq_v1_zero_of_zero_is_read_as_the_checkpoint_stores_it():
    rng = np.random.default_rng(2)
    zeros = rng.integers(1, 16, (1, 32))
    zeros[0, 3] = 0                                   # v1 corrupts column 3..7 of that word: reads 16
    with pytest.warns(gptq.ZeroPointOverflowWarning):
        ckpt = gptq.pack(rng.integers(0, 16, (32, 32)), np.full((1, 32), 0.01), zeros, 4)
    x = rng.standard_normal((1, 32)).astype(np.float16)
    assert_bitexact(rc.gptq_gemv(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


def test_awq_gemv_equals_its_emulator():
    rng = np.random.default_rng(3)
    k, n, group = 48, 24, 16
    ckpt = awq.pack(rng.integers(0, 16, (k, n)), (rng.random((k // group, n)) * 0.02).astype(np.float32),
                    rng.integers(0, 16, (k // group, n)), group_size=group)
    x = rng.standard_normal((2, k)).astype(np.float16)
    assert_bitexact(rc.awq_gemv(x, ckpt), gptq_awq_kernel.awq_gemv(x, ckpt), name="y")


@settings(max_examples=3)
@given(c=cases, m=st.integers(1, 8), kw=st.integers(1, 2), fmt=st.sampled_from(["gptq", "gptq_v2"]),
       act_order=st.booleans())
@example(c={"seed": 0, "special": 0.9}, m=8, kw=1, fmt="gptq", act_order=False)
def test_gptq_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, m, kw, fmt, act_order):
    rng = np.random.default_rng(c["seed"])
    k, n = 32 * kw, 32                                      # the format's K, N % 32 rule
    group = 32 if kw > 1 else None
    g = k // 32 if group else 1
    g_idx = (rng.permutation(np.arange(k) // 32).astype(np.int32) if act_order and group else None)
    ckpt = gptq.pack(rng.integers(0, 16, (k, n)), np.abs(_values(rng, (g, n), 0.02, c["special"])).astype(np.float32),
                     rng.integers(1, 16, (g, n)), 4, g_idx=g_idx, group_size=group, checkpoint_format=fmt)
    x = _values(rng, (m, k), 1.0, c["special"])
    assert_bitexact(rc.gptq_gemv(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


@settings(max_examples=3)
@given(c=cases, m=st.integers(1, 3), k8=st.integers(1, 4), nw=st.integers(1, 5), gsel=st.sampled_from([8, None]))
def test_awq_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, m, k8, nw, gsel):
    rng = np.random.default_rng(c["seed"])
    k, n = 8 * k8, 8 * nw                                   # odd K / 8 and N / 8, partial thread block
    group = gsel if gsel else None
    g = k // group if group else 1
    ckpt = awq.pack(rng.integers(0, 16, (k, n)), np.abs(_values(rng, (g, n), 0.02, c["special"])).astype(np.float32),
                    rng.integers(0, 16, (g, n)), group_size=group)
    x = _values(rng, (m, k), 1.0, c["special"])
    assert_bitexact(rc.awq_gemv(x, ckpt), gptq_awq_kernel.awq_gemv(x, ckpt), name="y")


@settings(max_examples=2)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 2))
def test_gptq_gemv_is_exact_when_no_partial_sum_rounds(seed, m):
    # scales 1, integer weights q - z in [-15, 15], x in {-1, 0, 1}: every fp16/fp32 partial is an
    # integer below 2^11, so the kernel must return the exact product
    rng = np.random.default_rng(seed)
    k, n = 32, 32
    ckpt = gptq.pack(rng.integers(0, 16, (k, n)), np.ones((1, n)), rng.integers(0, 16, (1, n)), 4,
                     checkpoint_format="gptq_v2")
    x = rng.integers(-1, 2, (m, k)).astype(np.float16)
    W = gptq.dequantize(ckpt).astype(np.int64)
    exact = (x.astype(np.int64) @ W).astype(np.float16) + np.float16(0)     # +0 for exact zeros
    assert_bitexact(rc.gptq_gemv(x, ckpt), exact, name="y")

