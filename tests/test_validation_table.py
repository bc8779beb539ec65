"""Argument validation of the foundation's public API: each illegal call raises the right error,
with a message naming the rule that was broken."""

import dataclasses

import numpy as np
import pytest

from fractions import Fraction

from refsim.arith import fp
from refsim.arith import exact
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import anyprec_memory, stripes
from refsim.formats import anyprec_plan
from refsim.gpu_model import cycle
from refsim.gpu_model.kernels import predict
from refsim.quant import squeezellm, upscale
from refsim.arith import integer_mma, mma_steps
from refsim.emulator import marlin_kernel
from refsim.formats import atom, awq, bitplane, gptq, marlin, swizzle, uniform
from refsim.testing import ulp_distance
from refsim.arith import admissible
from refsim.cuda import marlin as cuda_marlin, registry as cuda_registry
from refsim.io import uniform as io_uniform
from refsim.io.readers import open_checkpoint
from refsim.ptx import PtxLaunchError, limits as ptx_limits
from refsim.testing.cases.base import Linear
from refsim.formats import mixed_2_4_16 as m24
from refsim.quant import mixed_2_4_16 as q24
from refsim.quant.gptq import HessianAccumulator, gptq_quantize
from refsim.quant.rtn import rtn_quantize

W = np.ones((64, 32), np.float32)
HUGE = np.broadcast_to(np.float32(1), (2**22, 2**14))  # 2**36 elements claimed, one stored
Q4 = np.zeros((64, 32), np.uint8)
NAN_W = W.copy()
NAN_W[3, 4] = np.nan
INF_S = np.ones((1, 32), np.float32)
INF_S[0, 0] = np.inf
ATOM_W = atom.quantize_weights(np.ones((192, 6), np.float16), group_size=64, keeper=64)
MARLIN_B_S = marlin.pack(np.zeros((256, 256), np.uint8), np.ones((1, 256), np.float16), None)
NAN_A = np.ones((1, 256), np.float16)
NAN_A[0, 3] = np.nan

CASES = [
    # (id, callable, exception, message fragment)
    ("uniform-bits-0", lambda: uniform.quantize(W, 0), FormatRuleError, "bit-width"),
    ("uniform-bits-9", lambda: uniform.quantize(W, 9), FormatRuleError, "bit-width"),
    ("uniform-bits-float", lambda: uniform.quantize(W, 4.0), FormatRuleError, "bit-width"),
    ("uniform-int-weights", lambda: uniform.quantize(W.astype(np.int32), 4), DtypeError, "float16, float32 or float64"),
    ("uniform-list-weights", lambda: uniform.quantize(W.tolist(), 4), DtypeError, "numpy.ndarray"),
    ("uniform-1d", lambda: uniform.quantize(np.ones(8, np.float32), 4), ShapeError, "2-D"),
    ("uniform-nan", lambda: uniform.quantize(NAN_W, 4), NonFiniteError, "(3, 4)"),
    ("uniform-group-not-dividing", lambda: uniform.quantize(W, 4, granularity="group", group_size=48), ShapeError, "divide K=64"),
    ("uniform-group-none", lambda: uniform.quantize(W, 4, granularity="group"), FormatRuleError, "group_size"),
    ("uniform-group-with-channel", lambda: uniform.quantize(W, 4, granularity="channel", group_size=32), FormatRuleError, "must be None"),
    ("uniform-group-zero", lambda: uniform.quantize(W, 4, granularity="group", group_size=0), FormatRuleError, ">= 1"),
    ("uniform-scheme", lambda: uniform.quantize(W, 4, scheme="nf4"), FormatRuleError, "scheme"),
    ("uniform-rounding", lambda: uniform.quantize(W, 4, rounding="stochastic"), FormatRuleError, "rounding"),
    ("uniform-granularity", lambda: uniform.quantize(W, 4, granularity="row"), FormatRuleError, "granularity"),
    ("uniform-clip-zero", lambda: uniform.quantize(W, 4, clip_ratio=0.0), FormatRuleError, "(0, 1]"),
    ("uniform-clip-above-one", lambda: uniform.quantize(W, 4, clip_ratio=1.5), FormatRuleError, "(0, 1]"),
    ("dequantize-float-codes", lambda: uniform.dequantize(W, np.ones((1, 32), np.float32), np.zeros((1, 32), np.int32)), DtypeError, "integer"),
    ("dequantize-zero-shape", lambda: uniform.dequantize(Q4, np.ones((2, 32), np.float32), np.zeros((1, 32), np.int32)), ShapeError, "shape"),
    ("gptq-bits-5", lambda: gptq.pack_qweight(Q4, 5), FormatRuleError, "[2, 3, 4, 8]"),
    ("gptq-code-16", lambda: gptq.pack_qweight(Q4 + 16, 4), FormatRuleError, "[0, 15]; got 16"),
    ("gptq-negative-code", lambda: gptq.pack_qweight(Q4.astype(np.int32) - 1, 4), FormatRuleError, "got -1"),
    ("gptq-float-codes", lambda: gptq.pack_qweight(Q4.astype(np.float32), 4), DtypeError, "integer"),
    ("gptq-k-not-32", lambda: gptq.pack_qweight(np.zeros((48, 32), np.uint8), 4), ShapeError, "multiple of 32"),
    ("gptq-unpack-wrong-rows", lambda: gptq.unpack_qweight(np.zeros((7, 32), np.int32), 4, 64), ShapeError, "rows"),
    ("gptq-unpack-uint32", lambda: gptq.unpack_qweight(np.zeros((8, 32), np.uint32), 4, 64), DtypeError, "int32"),
    ("gptq-unpack-k-not-32", lambda: gptq.unpack_qweight(np.zeros((8, 32), np.int32), 4, 40), ShapeError, "multiple of 32"),
    ("gptq-qzeros-n-not-32", lambda: gptq.pack_qzeros(np.ones((1, 40), np.int32), 4), ShapeError, "multiple of 32"),
    ("gptq-qzeros-format", lambda: gptq.pack_qzeros(np.ones((1, 32), np.int32), 4, "gptq_v3"), FormatRuleError, "checkpoint_format"),
    ("gptq-qzeros-reader", lambda: gptq.unpack_qzeros(np.zeros((1, 4), np.int32), 4, 32, reader="x"), FormatRuleError, "reader"),
    ("gptq-pack-inf-scale", lambda: gptq.pack(Q4, INF_S, np.ones((1, 32), np.int32), 4), NonFiniteError, "finite"),
    ("gptq-pack-scale-overflows-fp16", lambda: gptq.pack(Q4, np.full((1, 32), 1e6, np.float32), np.ones((1, 32), np.int32), 4), FormatRuleError, "float16"),
    ("gptq-pack-g_idx-range", lambda: gptq.pack(Q4, np.ones((1, 32), np.float32), np.ones((1, 32), np.int32), 4, g_idx=np.ones(64, np.int32)), FormatRuleError, "g_idx"),
    ("gptq-pack-g_idx-shape", lambda: gptq.pack(Q4, np.ones((1, 32), np.float32), np.ones((1, 32), np.int32), 4, g_idx=np.zeros(63, np.int32)), ShapeError, "g_idx"),
    ("awq-n-not-8", lambda: awq.pack_columns(np.zeros((4, 12), np.uint8)), ShapeError, "multiple of 8"),
    ("awq-code-16", lambda: awq.pack_columns(np.full((4, 8), 16, np.uint8)), FormatRuleError, "[0, 15]"),
    ("awq-scales-shape", lambda: awq.pack(Q4, np.ones((2, 32), np.float32), np.ones((1, 32), np.int32)), ShapeError, "scales"),
    ("gptq-algo-h-shape", lambda: gptq_quantize(W, np.eye(32), 4), ShapeError, "(64, 64)"),
    ("gptq-algo-bits", lambda: gptq_quantize(W, np.eye(64), 6), FormatRuleError, "bit-width"),
    ("gptq-algo-nan-h", lambda: gptq_quantize(W, np.full((64, 64), np.nan), 4), NonFiniteError, "H"),
    ("gptq-algo-static-without-groups", lambda: gptq_quantize(W, np.eye(64), 4, group_size=None, static_groups=True), FormatRuleError, "static_groups"),
    ("gptq-algo-percdamp", lambda: gptq_quantize(W, np.eye(64), 4, group_size=None, percdamp=2.0), FormatRuleError, "percdamp"),
    ("hessian-wrong-k", lambda: HessianAccumulator(8).add_batch(np.ones((2, 3, 7), np.float32)), FormatRuleError, "K=8"),
    # silent wraps, truncations and hangs a fuzz run once found: each must be a named error
    ("quantize-codes-bits-9-would-wrap", lambda: uniform.quantize_codes(W, np.ones((1, 32), np.float32), np.zeros((1, 32), np.int32), 9), FormatRuleError, "bit-width"),
    ("fp-add-reference-mismatched-shapes", lambda: fp.add_reference(np.ones(3, np.float32), np.ones(2, np.float32)), ShapeError, "broadcast"),
    ("fp-fma-reference-mixed-widths", lambda: fp.fma_reference(np.ones(2, np.float32), np.ones(2, np.float16), np.ones(2, np.float32)), DtypeError, "float32"),
    ("exact-from-fraction-int-dtype", lambda: exact.from_fraction(Fraction(1, 4), np.int64), DtypeError, "floating"),
    ("stripes-partition-nan", lambda: stripes.launch_partition(float("nan"), 1, 1, 8, 1), FormatRuleError, "k_tiles"),
    ("stripes-partition-huge-sms", lambda: stripes.launch_partition(8, 8, 1, 2**40, 1), FormatRuleError, "SM count"),
    ("stripes-reference-bool", lambda: stripes.stripes_reference(8, 8, True, 8, 1), FormatRuleError, "parallel"),
    ("predict-n-k-overflow-marlin-int32-index", lambda: predict("a10", "marlin", 1, 2**20, 2**16), ShapeError, "N*K/32"),
    ("predict-m-beyond-int32", lambda: predict("a10", "cublas-fp16", 2**31, 4096, 4096), ShapeError, "int32"),
    ("cycle-zero-iterations", lambda: cycle.simulate([], 4, None, 1e9, iterations=0), FormatRuleError, "iterations"),
    ("cycle-nan-clock", lambda: cycle.simulate([], 4, None, float("nan")), FormatRuleError, "f_sm"),
    ("kmeans-more-clusters-than-weights", lambda: squeezellm.kmeans_1d_rows(squeezellm.sort_rows(W, np.ones_like(W)), 2**40), FormatRuleError, "n_clusters"),
    ("upscale-parent-bits-32", lambda: upscale.upscale_rows(squeezellm.sort_rows(W, np.ones_like(W)), np.zeros((32, 8), np.float32), np.zeros((32, 9), np.int64), 32), FormatRuleError, "parent_bits"),
    ("lut-shared-bytes-bits-5-m-9", lambda: anyprec_plan.lut_shared_bytes(3, 9), FormatRuleError, "1..8"),
    ("decoder-shape-float-size", lambda: anyprec_memory.DecoderShape("x", 4096.0, 11008, 32, 32000), FormatRuleError, "hidden"),
    ("decoder-shape-bool-tied", lambda: anyprec_memory.DecoderShape("x", 4096, 11008, 32, 32000, tied_embeddings=1), FormatRuleError, "tied_embeddings"),
    ("rtn-h-negative-diagonal", lambda: rtn_quantize(W, 4, group_size=None, H=-np.eye(64)), FormatRuleError, "non-negative"),
    # 2/4/16-bit format: entry checks of its public helpers
    ("m24-coo-row-out-of-range", lambda: m24.csr_from_coo(np.array([0, 5]), np.array([1, 2]), np.ones(2, np.float16), 4),
     FormatRuleError, "rows: must lie in [0, 4)"),
    ("m24-coo-int-vals", lambda: m24.csr_from_coo(np.array([0]), np.array([1]), np.ones(1, np.int32), 4), DtypeError, "vals"),
    ("m24-select-nan", lambda: q24.select_4bit_groups(np.array([1.0, np.nan]), 0.5), NonFiniteError, "S"),
    ("m24-select-alpha", lambda: q24.select_4bit_groups(np.ones(4), 1.5), FormatRuleError, "alpha: must be a number in [0, 1]"),
    ("m24-average-bits-n4", lambda: m24.average_bits(64, 32, 5, 0), FormatRuleError, "at most G = K/16 = 4"),
    ("m24-pack-not-a-container", lambda: m24.pack(np.zeros((64, 32), np.uint8)), FormatRuleError, "must be a Mixed2416"),
    ("m24-sensitivity-zero-diag", lambda: q24.group_sensitivity(W, np.zeros(64)), FormatRuleError, "non-zero"),
    # reproducers an independent fuzz found: each must be a named error
    ("uniform-empty-matrix", lambda: uniform.quantize(np.zeros((0, 8), np.float32), 4), ShapeError, "K >= 1"),
    ("uniform-huge-zero-stride-view", lambda: uniform.quantize_reference(HUGE, 4), ShapeError, "element count"),
    ("gptq-pack-scales-list", lambda: gptq.pack(Q4, np.ones((1, 32), np.float32).tolist(), np.ones((1, 32), np.int32), 4),
     DtypeError, "numpy.ndarray"),
    ("gptq-pack-group-33-on-k-64", lambda: gptq.pack(Q4, np.ones((2, 32), np.float32), np.ones((2, 32), np.int32), 4,
                                                     group_size=33), ShapeError, "divide K=64"),
    ("atom-dequantize-dtype-64", lambda: atom.dequantize_weights(ATOM_W, dtype=64), DtypeError, "dtype"),
    ("marlin-gemm-nan-in-a", lambda: marlin_kernel.marlin_gemm(NAN_A, *MARLIN_B_S, sms=8), NonFiniteError, "A"),
    ("mma-int-reference-0d-c", lambda: integer_mma.mma_int_reference(np.zeros((16, 64), np.int8),
                                                                      np.zeros((64, 8), np.int8),
                                                                      np.asarray(0, np.int32)), ShapeError, "2-D"),
    ("ulp-distance-float16-vs-uint8", lambda: ulp_distance(np.ones(3, np.float16), np.ones(3, np.uint8)), DtypeError,
     "float16, bfloat16"),
    ("mma-steps-empty-kblocks", lambda: mma_steps.mma_k16_f32_steps("sm_80", mma_steps.MmaOperand(np.ones((1, 32), np.float16)),
                                                                    mma_steps.MmaOperand(np.ones((32, 8), np.float16)),
                                                                    np.zeros(0, np.int64), np.zeros((2, 1, 8), np.float32)),
     ShapeError, "kblocks"),
    ("atom-weights-code-out-of-range-after-replace", lambda: dataclasses.replace(ATOM_W, q4=ATOM_W.q4 + np.int8(9)),
     FormatRuleError, "[-8, 7]"),
    # second pass: the modules that landed since
    ("mma-k16-raw-operand-none", lambda: mma_steps.mma_k16_f32("sm_80", None, None, None, None, None), DtypeError, "a_vals"),
    ("fold-orders-add-not-callable", lambda: admissible.fold_orders([np.ones(2)], "add", np.zeros(2)),
     FormatRuleError, "add"),
    ("fold-orders-max-orders-past-10-factorial", lambda: admissible.fold_orders([np.ones(2)], np.add, np.zeros(2),
                                                                                max_orders=10**30),
     FormatRuleError, "max_orders"),
    ("gptq-percdamp-string", lambda: gptq_quantize(W, np.eye(64), 4, group_size=32, percdamp="x"), FormatRuleError,
     "percdamp"),
    ("rtn-clip-grid-int", lambda: rtn_quantize(W, 4, group_size=32, clip_grid=1), FormatRuleError, "clip_grid"),
    ("kmeans-max-iter-0", lambda: squeezellm.seed(W[:, :4], np.ones((64, 4), np.float32), 2, max_iter=0),
     FormatRuleError, "max_iter"),
    ("ptx-pointer-big-endian", lambda: ptx_module().launch("k", 1, 32, [np.zeros(32, ">f4")]), PtxLaunchError,
     "byte order"),
    ("ptx-limit-value-string", lambda: ptx_limits.check("registers", "100", 255), FormatRuleError, "registers"),
    ("cuda-host-module-unknown", lambda: cuda_registry.host_module("launch"), FormatRuleError, "source"),
    ("cuda-workspace-negative", lambda: cuda_marlin.workspace(-1), FormatRuleError, "n"),
    ("io-path-name-too-long", lambda: open_checkpoint("x" * 5000), FormatRuleError, "255 bytes"),
    ("io-exact-cast-nan-scale", lambda: io_uniform.exact_cast("s", np.full((1, 2), np.nan, np.float32), np.float16),
     NonFiniteError, "scales"),
    ("accuracy-linear-terms-2-64", lambda: Linear(np.ones((1, 2)), np.ones((2, 1)), 2**64), FormatRuleError, "terms"),
]


def ptx_module():
    from refsim import ptx
    return ptx.Module(""".version 7.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
	ret;
}
""")


@pytest.mark.parametrize("call,exc,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_illegal_call_raises_specific_error(call, exc, fragment):
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value)
    assert "got" in str(info.value) or "must" in str(info.value)


def test_table_has_at_least_thirty_cases_with_unique_ids():
    ids = [c[0] for c in CASES]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)


# ---- the same values in another byte order or integer width give the same result ----------------
def test_bitplane_unpack_of_big_endian_words_equals_native():
    p = np.random.default_rng(0).integers(-2**31, 2**31, (4, 2, 2)).astype(np.int32)
    assert np.array_equal(bitplane.unpack(p.astype(">i4"), 4), bitplane.unpack(p, 4))


def test_launch_partition_takes_uint8_sm_counts():
    assert stripes.launch_partition(*(np.uint8(v) for v in (3, 3, 1, 5, 1))) == stripes.launch_partition(3, 3, 1, 5, 1)


def test_swizzle_addresses_do_not_wrap_at_uint8():
    want = swizzle.marlin_a_read_addresses(128, 7, 3, 1)
    got = swizzle.marlin_a_read_addresses(np.uint8(128), np.uint8(7), np.uint8(3), np.uint8(1))
    assert got.dtype == want.dtype and np.array_equal(got, want) and int(want.max()) > 255
