"""Legal calls of the kernel-facing public API: refsim.ptx's pinned API (Module, its launch, the
launch-shape and limit checks), refsim.cuda's host functions and kernels (run in the PTX engine
on the CPU, on the smallest shapes each kernel takes: about 0.1 s a call) and the kernel checks of
refsim.testing (admissible sets of a launch, accuracy bounds).

Merged into :data:`fuzz_seeds.SEEDS`, :data:`fuzz_seeds.SAMPLES` and :data:`fuzz_seeds.UNSEEDED`.
"""

from __future__ import annotations

import functools

import numpy as np

from fuzz_engine import Seed, call

from refsim import ptx
from refsim.cuda import build, launch as cl, marlin as cmarlin, mma as cmma, official, official_deepgemm, registry, user
from refsim.testing import validate as cvalidate, wgmma_probes
from refsim.formats import atom, hopper_w4a16 as fhopper, stripes
from refsim.testing import accuracy
from refsim.testing.cases.base import Linear

#: a hand-written kernel: y[i] = fma(x[i], a, y[i]) for i < n (two pointers, a float, a u32)
AXPY_PTX = """
.version 7.0
.target sm_80
.address_size 64

.visible .entry axpy(
	.param .u64 axpy_param_0,
	.param .u64 axpy_param_1,
	.param .f32 axpy_param_2,
	.param .u32 axpy_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [axpy_param_0];
	ld.param.u64 	%rd2, [axpy_param_1];
	ld.param.f32 	%f1, [axpy_param_2];
	ld.param.u32 	%r2, [axpy_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	cvta.to.global.u64 	%rd4, %rd2;
	mul.wide.u32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd3, %rd5;
	add.s64 	%rd7, %rd4, %rd5;
	ld.global.f32 	%f2, [%rd6];
	ld.global.f32 	%f3, [%rd7];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd7], %f4;
$L__BB0_2:
	ret;
}
"""


@functools.cache
def axpy_module() -> ptx.Module:
    return ptx.Module(AXPY_PTX)


def axpy_args() -> list:
    """x, y float32 (40,), a = 2.0, n = 40 (y is written in place)."""
    return [np.arange(40, dtype=np.float32), np.ones(40, np.float32), 2.0, 40]


@functools.cache
def k16_kind():
    return cmma.kind_of("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")


@functools.cache
def wg_inputs():
    """A (1, 64, 16), B (1, 16, 8) bf16 bits, C (1, 64, 8) f32 bits: a wgmma m64n8k16.f32.bf16.bf16 probe."""
    return next(p for p in wgmma_probes.probes() if p.kind.types == "f32.bf16.bf16" and p.n == 8).inputs()


@functools.cache
def k16_inputs():
    """A (1, 16, 16) float16, B (1, 16, 8) float16, C (1, 16, 8) float32 as raw bits."""
    return cmma.probe_inputs(k16_kind(), "random", 1, np.random.default_rng(0))


@functools.cache
def atom_official_pair():
    """Activations (4, 512) and weights (512, 128) in "kernel" mode: the official kernel's keeper of 128 and
    BLOCK_N of 128, a body of 384."""
    rng = np.random.default_rng(6)
    return (atom.quantize_activations(rng.standard_normal((4, 512)).astype(np.float16), "kernel", keeper=128),
            atom.quantize_weights((rng.standard_normal((512, 128)) * 0.05).astype(np.float16), "kernel", keeper=128))


@functools.cache
def atom_kernel_pair():
    """Activations (16, 512) and weights (512, 16) in "kernel" mode: atom.cu's group of 128, a body of 384
    (the official kernel's smallest)."""
    rng = np.random.default_rng(3)
    return (atom.quantize_activations(rng.standard_normal((16, 512)).astype(np.float16), "kernel", keeper=128),
            atom.quantize_weights((rng.standard_normal((512, 16)) * 0.05).astype(np.float16), "kernel", keeper=128))


def deepgemm_problem(m=3, n=16, k=128):
    """A (M, K), sfa, B (N, K), sfb of DeepGEMM's FP8 GEMM: finite e4m3 codes, scales near 1."""
    rng = np.random.default_rng(5)
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    return (rng.choice(codes, (m, k)), rng.uniform(0.5, 2, (m, k // 128)).astype(np.float32),
            rng.choice(codes, (n, k)), rng.uniform(0.5, 2, (-(-n // 128), k // 128)).astype(np.float32))


def hopper_codes() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 16, (128, 64)).astype(np.uint8)


def hopper_inputs() -> tuple:
    """x float16 (3, 128), wp, scales float16 (1, 64): a legal hopper_w4a16 problem."""
    x = np.random.default_rng(1).standard_normal((3, 128)).astype(np.float16)
    return x, fhopper.pack(hopper_codes()), np.full((1, 64), 0.01, np.float16)


def _launch_stats():
    return axpy_module().launch("axpy", 2, 32, axpy_args())


def linear() -> Linear:
    """A 4 x 8 x 3 product of small integers (exact in float64), one fp16 rounding after the sum."""
    rng = np.random.default_rng(1)
    return Linear(rng.integers(-4, 5, (4, 8)).astype(np.float64), rng.integers(-4, 5, (8, 3)).astype(np.float64), 8)


def linear_output() -> np.ndarray:
    lin = linear()
    return (lin.a @ lin.w).astype(np.float16)


SAMPLES = {
    "refsim.cuda.census.EntryResources": lambda: __import__("refsim.cuda.census", fromlist=["x"]).EntryResources(
        40, 1024, 0, 0, 0, 1),
    "refsim.cuda.official.RecordedCase": lambda: official.load(official.cases()[0]),
    "refsim.gpu_model.kernels.deepgemm_config.Config": lambda: official_deepgemm.config(64, 256, 512, 4),
    "refsim.cuda.official_deepgemm.Prepared": lambda: official_deepgemm.prepare(*deepgemm_problem(64, 256, 512),
                                                                                num_sms=4),
    "refsim.cuda.user.LaunchPlan": lambda: user.LaunchPlan(2, 32, (np.zeros(40, np.float32), 40), None),
    "refsim.testing.validate.Result": lambda: _result(),
    "refsim.testing.wgmma_probes.WgmmaProbe": lambda: wgmma_probes.probes()[0],
    "refsim.testing.accuracy.Accumulation": lambda: accuracy.Accumulation("fp16", "pairwise"),
    "refsim.testing.accuracy.Judgement": lambda: accuracy.judge(accuracy.Accumulation(), linear(), linear_output()),
    "refsim.testing.accuracy.Spread": lambda: accuracy.spread(np.array([0.1, 0.5, 0.2]), np.array([0.2, 0.4, 0.3])),
    "refsim.testing.adversarial.Adversarial": lambda: __import__("refsim.testing.adversarial",
                                                                 fromlist=["x"]).cases("awq", "fp32")[0],
    "refsim.cuda.launch.Launch": lambda: cl.Launch("axpy", (2, 1), 32, 0),
    "refsim.cuda.marlin.PlannedLaunch": lambda: cmarlin.launch_plan(1, 256, 256, 8, 128)[0],
    "refsim.cuda.registry.KernelEntry": lambda: registry.entries()[0],
    "refsim.archs.ArchFacts": lambda: ptx.arch.arch_facts("sm_89"),
    "refsim.ptx.arch.LaunchShape": lambda: ptx.check_launch_shape("sm_80", (2, 3), (32, 4), dynamic_shared_bytes=1024),
    "refsim.ptx.engine.LaunchStats": _launch_stats,
}


def seeds(fs) -> dict:
    """The seeds; ``fs`` is :mod:`fuzz_seeds` (its shared legal objects)."""
    from refsim.cuda import anyprec as canyprec, atom as catom, gptq_awq as cgptq, mixed_2_4_16 as cmixed

    return {
        # ---- refsim.ptx: the pinned API ------------------------------------------------------------
        "refsim.ptx.module.Module": lambda: call(AXPY_PTX),
        "refsim.ptx.module.Module.launch": lambda: Seed((axpy_module(), "axpy", 2, 32, axpy_args()),
                                                        dict(arch="sm_80", shared_bytes=0, seed=0,
                                                             buffers=[("extra", np.zeros(8, np.uint32))], cluster=None),
                                                        mutates=("args",)),
        "refsim.ptx.module.Module.params": lambda: call(axpy_module(), "axpy"),
        "refsim.ptx.module.Module.instruction_mix": lambda: call(axpy_module(), "axpy"),
        "refsim.ptx.module.Module.contractible": lambda: call(axpy_module(), "axpy"),
        "refsim.ptx.arch.arch_facts": lambda: call("sm_90"),
        "refsim.ptx.arch.sm_number": lambda: call("sm_86"),
        "refsim.ptx.arch.handler_arch": lambda: call("sm_120a"),
        "refsim.archs.parse_sm": lambda: call("sm_90a"),
        "refsim.archs.base_arch": lambda: call("sm_90a"),
        "refsim.cuda.gpu.device_facts": lambda: call("sm_90", 232448),
        "refsim.ptx.arch.check_launch_shape": lambda: call("sm_80", (2, 3), (32, 4), dynamic_shared_bytes=1024,
                                                           static_shared_bytes=4096),
        "refsim.ptx.limits.check": lambda: call("registers", 100, 255, "kernel k"),
        # ---- refsim.cuda: the launch path and host functions ---------------------------------------
        "refsim.cuda.launch.run": lambda: Seed((AXPY_PTX, [(cl.Launch("axpy", 2, 32), axpy_args())]),
                                               dict(backend="ptx", arch="sm_80", options={"seed": 1}),
                                               mutates=("launches",)),
        "refsim.cuda.launch.entries": lambda: call(AXPY_PTX),
        "refsim.cuda.launch.entry_text": lambda: call(AXPY_PTX, "axpy"),
        "refsim.cuda.launch.check_options": lambda: call({"schedule": "random", "seed": 3}),
        "refsim.cuda.marlin.entry_name": lambda: call(2, stripes.marlin_tile_config(32, 4096, 4096, 128)),
        "refsim.cuda.marlin.shared_bytes": lambda: call(2, stripes.marlin_tile_config(32, 4096, 4096, 128)),
        "refsim.cuda.marlin.launch_plan": lambda: call(80, 256, 256, 8, 128),
        "refsim.cuda.marlin.workspace": lambda: call(256),
        "refsim.cuda.marlin.marlin_gemm": lambda: call(fs.normal((1, 256), np.float16), *fs.marlin_problem()[2:],
                                                       arch="sm_80", sms=8, backend="ptx", options=None),
        "refsim.cuda.marlin.gemm": lambda: Seed((fs.normal((1, 128), np.float16), *fs.marlin_problem(None, 128)[2:],
                                                 cmarlin.workspace(256)), dict(sms=2), mutates=("locks", "stats")),
        "refsim.cuda.anyprec.anyprec_gemv": lambda: call(*fs.anyprec_problem(3, 16, 32), 3, None, arch="sm_80"),
        "refsim.cuda.anyprec.launch_of": lambda: call(16, 3),
        "refsim.cuda.official_anyprec.anyprec_gemv": lambda: call(*fs.anyprec_problem(3, 16, 32), 3, arch="sm_80"),
        "refsim.cuda.official_anyprec.entry_name": lambda: call(1, 8, True),
        "refsim.cuda.official_vllm.vllm_marlin_fp_gemm": lambda: call("fp8", *fs.marlin_fp_problem(), arch="sm_80"),
        "refsim.cuda.official_anyprec.launch_of": lambda: call(2, 16, 4128, 4),
        # ---- refsim's sm_90a W4A16 GEMM: layout, emulator, host plan --------------------------------
        "refsim.formats.hopper_w4a16.check_kn": lambda: call(128, 64),
        "refsim.formats.hopper_w4a16.pack": lambda: call(hopper_codes()),
        "refsim.formats.hopper_w4a16.unpack": lambda: call(fhopper.pack(hopper_codes()), 128, 64),
        "refsim.emulator.hopper_w4a16.check_inputs": lambda: call(*hopper_inputs()),
        "refsim.emulator.hopper_w4a16.weights": lambda: call(*hopper_inputs()[1:], 128),
        "refsim.emulator.hopper_w4a16.hopper_w4a16_gemm": lambda: call(*hopper_inputs()),
        "refsim.emulator.hopper_w4a16.hopper_w4a16_gemm_reference": lambda: call(*hopper_inputs()),
        "refsim.cuda.hopper_w4a16.tensor_maps": lambda: call(1 << 40, (1 << 40) + 4096, 3, 128, 64),
        "refsim.cuda.hopper_w4a16.maps": lambda: call(1 << 40, (1 << 40) + 4096, 3, 128, 64),
        "refsim.cuda.hopper_w4a16.plan": lambda: call(*hopper_inputs(), backend="ptx"),
        "refsim.cuda.hopper_w4a16.hopper_w4a16_gemm": lambda: call(*hopper_inputs()),
        "refsim.cuda.gptq_awq.gptq_gemv": lambda: call(fs.normal((1, 64), np.float16), fs.gptq_ckpt()),
        "refsim.cuda.gptq_awq.awq_gemv": lambda: call(fs.normal((1, 64), np.float16), fs.awq_ckpt()),
        "refsim.cuda.atom.atom_group_gemm": lambda: call(*atom_kernel_pair(), fused=True),
        "refsim.cuda.mixed_2_4_16.mixed_gemv": lambda: call(fs.m24_problem()[3], fs.normal(64, np.float16)),
        "refsim.cuda.mixed_2_4_16.group_ranks": lambda: call(np.array([2, 4, 2, 2, 4, 2], np.uint8)),
        "refsim.cuda.mma.kind_of": lambda: call("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"),
        "refsim.cuda.mma.instruction": lambda: call(k16_kind(), satfinite=False),
        "refsim.cuda.mma.entry": lambda: call(k16_kind(), satfinite=False),
        "refsim.cuda.mma.ptx_arch": lambda: call(k16_kind()),
        "refsim.cuda.mma.registers": lambda: call(k16_kind()),
        "refsim.cuda.mma.layouts": lambda: call(k16_kind()),
        "refsim.cuda.mma.categories": lambda: call(k16_kind()),
        "refsim.cuda.mma.probe_inputs": lambda: call(k16_kind(), "random", 1, np.random.default_rng(0)),
        "refsim.cuda.mma.pack": lambda: call(k16_kind(), *k16_inputs()),
        "refsim.cuda.mma.unpack": lambda: call(k16_kind(), cmma.pack(k16_kind(), *k16_inputs())[2], "c"),
        "refsim.cuda.mma.mma_reference": lambda: call(k16_kind(), "sm_80", *cmma.pack(k16_kind(), *k16_inputs()),
                                                      satfinite=False),
        "refsim.cuda.mma.mma_probe": lambda: call(k16_kind(), *cmma.pack(k16_kind(), *k16_inputs()), satfinite=False,
                                                  backend="ptx", arch="sm_80"),
        "refsim.cuda.wgmma.entry": lambda: call("f32.bf16.bf16", 8, negate=True),
        "refsim.cuda.wgmma.entries": lambda: call(),
        "refsim.cuda.wgmma.operands": lambda: call("f32.bf16.bf16", 8, *wg_inputs()),
        "refsim.cuda.wgmma.wgmma_reference": lambda: call("f32.bf16.bf16", 8, *wg_inputs(), scale_d=False),
        "refsim.cuda.wgmma.wgmma_probe": lambda: call("f32.bf16.bf16", 8, *wg_inputs(), negate=True, backend="ptx"),
        "refsim.cuda.registry.host_module": lambda: call("gptq_awq"),
        "refsim.cuda.build.source_path": lambda: call("gptq_awq"),
        "refsim.cuda.build.source_text": lambda: call("gptq_awq"),
        "refsim.cuda.build.source_hash": lambda: call("__global__ void k() {}"),
        "refsim.cuda.build.committed_ptx": lambda: call("gptq_awq", "sm_80"),
        "refsim.cuda.build.committed_archs": lambda: call("mma"),
        "refsim.cuda.census.ptx_mix": lambda: call(AXPY_PTX),
        "refsim.cuda.official.h100": lambda: call(official.cases()[0]),
        "refsim.cuda.official.uses_float_mma": lambda: call(official.cases()[-1]),
        "refsim.cuda.official.marlin_gemm": lambda: call(fs.normal((1, 256), np.float16), *fs.marlin_problem()[2:], sms=8,
                                                         max_par=16, thread_k=64, thread_n=256, arch="sm_80"),
        "refsim.cuda.official.atom_gemm": lambda: call(*atom_official_pair(), arch="sm_80"),
        "refsim.gpu_model.kernels.deepgemm_config.config": lambda: call(128, 4096, 4096, 132),
        "refsim.cuda.official_deepgemm.sfa_tma_aligned": lambda: call(deepgemm_problem(m=5)[1]),
        "refsim.cuda.official_deepgemm.prepare": lambda: call(*deepgemm_problem(64, 256, 512), num_sms=4),
        "refsim.cuda.official_deepgemm.launch_args": lambda: call(*deepgemm_problem(64, 256, 512), num_sms=4),
        "refsim.emulator.deepgemm_kernel.check_inputs": lambda: call(*deepgemm_problem()),
        "refsim.emulator.deepgemm_kernel.kblock_partials": lambda: call(deepgemm_problem()[0], deepgemm_problem()[2],
                                                                        native=False),
        "refsim.emulator.deepgemm_kernel.promote": lambda: call(np.ones((1, 3, 16), np.float32),
                                                                *deepgemm_problem()[1::2]),
        "refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm": lambda: call(*deepgemm_problem(), native=None),
        "refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm_reference": lambda: call(*deepgemm_problem(1, 8, 128)),
        # ---- refsim.testing: the checks of a kernel's output -----------------------------------------
        "refsim.testing.admissible.ptx_admissible": lambda: Seed((axpy_module(), "axpy", 2, 32, axpy_args()),
                                                                 dict(outputs=[1], max_orders=24)),
        "refsim.testing.accuracy.judge": lambda: call(accuracy.Accumulation("fp32", "sequential"), linear(),
                                                      linear_output()),
        "refsim.testing.accuracy.reference": lambda: call(accuracy.Accumulation("fp16", "pairwise"), linear()),
        "refsim.testing.adversarial.exact_weights": lambda: call(linear()),
        "refsim.testing.validate.cases": lambda: call(seed=0, tiles=1, groups=("mma",), only=("m16n8k16",)),
        "refsim.testing.validate.applicable": lambda: call(cvalidate.cases(tiles=1, groups=("mma",))[0], "ptx", "sm_80"),
        "refsim.testing.validate.exit_status": lambda: call([_result()]),
        "refsim.testing.validate.pending": lambda: call(groups=("mma",), only=("*mxf4*",)),
        "refsim.testing.validate.kinds": lambda: call([_result()]),
        "refsim.testing.validate.unmeasured_rules": lambda: call(),
        "refsim.cuda.mma.draw_operands": lambda: call("e4m3", "e5m2", "f16", (64, 32, 8), "cancel", 1,
                                                      np.random.default_rng(0)),
        "refsim.testing.validate.format_result": lambda: call(_result(), "ptx"),
    }


def _result():
    case = cvalidate.cases(tiles=1, groups=("mma",), only=("m16n8k16.row.col.f32.f16.f16.f32",))[0]
    return cvalidate.run_case(case, "ptx", "sm_80")


UNSEEDED = {
    "refsim.ptx.engine.Launch": "the engine's state of one launch, built by Module.launch (seeded) from parsed PTX",
    "refsim.cuda.build.compile_ptx": "runs nvcc",
    "refsim.cuda.census.compile_cubin": "runs nvcc",
    "refsim.cuda.census.tool_version": "runs a CUDA tool",
    "refsim.cuda.census.sass_mix": "runs nvdisasm on a cubin",
    "refsim.cuda.census.resources_table": "compiles every kernel with ptxas",
    "refsim.cuda.gpu.run": "runs a GPU (cuda.core)",
    "refsim.cuda.gpu.prepare": "allocates on a GPU (cuda.core): gpu.run's first step",
    "refsim.cuda.gpu.Resident": "a call's device buffers and launches, made by gpu.prepare on a GPU",
    "refsim.cuda.gpu.device_bases": "the GPU backend's buffer grouping, called by gpu.run with a launch's checked "
                                    "arguments (tests/cuda/test_gpu.py covers its aliasing rules)",
    "refsim.cuda.gpu.DeviceBase": "a record device_bases builds for the GPU backend",
    "refsim.cuda.gpu.TensorMapArg": "a kernel-argument record of gpu.run (which runs a GPU): its array is the host "
                                    "side of a device buffer, copied back in place and aliased by identity, so "
                                    "other layouts are refused by rule (tests/cuda/test_gpu.py), never converted",
    "refsim.cuda.gpu.device_info": "runs a GPU (cuda.core)",
    "refsim.cuda.marlin.entries": "no parameters",
    "refsim.cuda.marlin.engine_gap": "no parameters",
    "refsim.cuda.mma.forms_table": "no parameters",
    "refsim.cuda.registry.entries": "no parameters",
    "refsim.cuda.official.cases": "no parameters",
    "refsim.cuda.official.marlin_instantiations": "no parameters",
    "refsim.cuda.official_deepgemm.instantiations": "no parameters",
    "refsim.cuda.official_deepgemm.deepgemm_fp8_gemm": "runs the official kernel through refsim.ptx (seconds per call; "
                                                       "tests/cuda/test_official_deepgemm.py runs it)",
    "refsim.cuda.build.manifest": "no parameters",
    "refsim.cuda.official.replay": "replays a recorded H100 launch of an official kernel (seconds; tests/ptx/"
                                   "test_replay.py)",
    "refsim.cuda.regenerate.regenerate_ptx": "runs nvcc and rewrites the committed PTX",
    "refsim.cuda.regenerate.regenerate_resources": "runs ptxas and rewrites resources.json",
    "refsim.cuda.regenerate.stale_ptx": "compares the committed PTX with nvcc's output",
    "refsim.cuda.regenerate.main": "the regeneration command line",
    "refsim.cuda.user.user_kernel": "compiles a CUDA source with nvcc",
    "refsim.testing.validate.run_case": "runs one validation case's kernel (seconds); exit_status and format_result, "
                                     "which read its Result, are seeded",
    "refsim.testing.validate.validate": "runs every validation case (minutes)",
    "refsim.testing.validate.Case": "a record of callables cases() builds (seeded)",
}
