"""backend="gpu" (refsim/cuda/gpu.py) against a fake cuda.core (fake_cuda.py): the calls it makes — the
dynamic-shared-memory attribute, the launch configuration, one device buffer per base array with views
as offsets — its refusals before anything is allocated, and CUDA errors named. The fake executes each
launch through refsim.ptx, so every kernel's GPU path also computes its emulator's bits here."""

from __future__ import annotations

import numpy as np
import pytest
from fake_cuda import CUDAError, FakeCuda
from hypothesis import given, settings
from hypothesis import strategies as st

import refsim.cuda as rc
from refsim.cuda import build, gpu, launch
from refsim.cuda import mma as rmma
from refsim.cuda import marlin as cm
from refsim.emulator import marlin_kernel as mk
from refsim.errors import FormatRuleError, RefsimError, ShapeError, ToolchainError
from refsim.formats import atom, awq, bitplane, gptq, marlin
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.ptx import PtxLaunchError
from refsim.testing import assert_bitexact


@pytest.fixture
def fake(monkeypatch):
    f = FakeCuda()
    monkeypatch.setattr(gpu, "_driver", lambda: f)
    return f


def _marlin_problem(rng, m, k, n, group_size):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)                      # (K, N)
    g = 1 if group_size is None else k // group_size
    B, s = marlin.pack(q, (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16), group_size)
    return rng.standard_normal((m, k)).astype(np.float16), B, s


def _calls(fake, name, kind=None):
    return [c for c in fake.calls if c[0] == name and (kind is None or c[1] == kind)]


# ---------------------------------------------------------------------------------------------
# marlin_gemm: the attribute, the launches, one buffer per base
# ---------------------------------------------------------------------------------------------
def test_marlin_gemm_raises_the_shared_memory_attribute_and_equals_the_emulator(fake):
    A, B, s = _marlin_problem(np.random.default_rng(0), 20, 256, 256, 128)
    C = rc.marlin_gemm(A, B, s, sms=3, backend="gpu")
    assert_bitexact(C, mk.marlin_gemm(A, B, s, arch="sm_90", sms=3), "marlin.cu on the fake GPU")
    (ln,) = cm.launch_plan(20, 256, 256, 3, 128)           # k64 x n256 tile, 2 m-blocks, grouped
    assert ln.shared_bytes == 4 * 16 * (16 * 2 * 64 // 8 + 4 * 256 // 2 + 256 // 8) == 51200
    attr = fake.bindings.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert _calls(fake, "set_attribute") == [("set_attribute", ln.kernel, attr, 51200)]
    (kernel, grid, block, shmem, _), = fake.launches()
    assert (kernel, grid, block, shmem) == (ln.kernel, (3, 1, 1), (256, 1, 1), 51200)


def test_marlin_gemm_without_the_attribute_fails_on_the_fake_as_on_a_gpu(fake, monkeypatch):
    # the fake refuses > 48 KiB without the attribute, as the driver does: so the test above can fail
    monkeypatch.setattr(gpu._Device, "allow_dynamic_shared", lambda *a: None)
    A, B, s = _marlin_problem(np.random.default_rng(0), 20, 256, 256, 128)
    with pytest.raises(gpu.GpuError, match="CUDA_ERROR_INVALID_VALUE") as err:
        rc.marlin_gemm(A, B, s, sms=3, backend="gpu")
    assert err.value.cuda_error == "CUDA_ERROR_INVALID_VALUE" and "launch 0 of 1" in err.value.step


def test_marlin_launches_share_one_buffer_per_base_with_row_views_as_offsets(fake):
    m, k, n = 70, 128, 256                                  # launch 0: rows 0..63 (m4), launch 1: rows 64..69 (m1)
    A, B, s = _marlin_problem(np.random.default_rng(1), m, k, n, None)
    locks = cm.workspace(n)
    C = cm.gemm(A, B, s, locks, sms=2, backend="gpu")
    assert_bitexact(C, mk.marlin_gemm(A, B, s, arch="sm_90", sms=2), "marlin.cu, two launches on the fake GPU")
    assert not locks.any()
    allocations = {c[2]: c[3] for c in _calls(fake, "allocate", "device")}
    assert sorted(allocations.values()) == sorted([m * k * 2, B.nbytes, m * n * 2, s.nbytes, locks.nbytes])
    (k0, _, _, sh0, args0), (k1, _, _, sh1, args1) = fake.launches()
    assert (k0, k1) == ("refsim_marlin_m4_n16_k4_channel", "refsim_marlin_m1_n16_k4_channel")
    assert (sh0, sh1) == (65536, 40960)
    a_buf, c_buf = args0[0], args0[2]
    assert allocations[a_buf] == m * k * 2 and allocations[c_buf] == m * n * 2
    assert args1[0] == a_buf + 64 * k * 2 and args1[2] == c_buf + 64 * n * 2      # A[64:], C[64:]
    assert args0[1] == args1[1] and args0[3] == args1[3] and args0[4] == args1[4]  # B, s, locks: one each
    assert [int(x) for x in args1[5:]] == [6, n, k] and all(isinstance(x, np.int32) for x in args1[5:])
    assert len(_calls(fake, "close", "device")) == 5                               # every buffer freed


def test_the_ptx_module_is_loaded_once_per_device(fake):
    A, B, s = _marlin_problem(np.random.default_rng(2), 1, 256, 256, 128)
    rc.marlin_gemm(A, B, s, sms=2, backend="gpu")
    rc.marlin_gemm(A, B, s, sms=2, backend="gpu")
    assert len(_calls(fake, "from_ptx")) == 1 and len(_calls(fake, "get_kernel")) == 1


# ---------------------------------------------------------------------------------------------
# every other kernel through the fake equals its ptx-backend result
# ---------------------------------------------------------------------------------------------
def _gptq(rng):
    return gptq.pack(rng.integers(0, 16, (64, 32)), (rng.random((2, 32)) * 0.02 + 0.001).astype(np.float32),
                     rng.integers(1, 16, (2, 32)), 4, group_size=32)


def _kernel_calls(rng):
    x = rng.standard_normal((2, 64)).astype(np.float16)
    ck = _gptq(rng)
    aw = awq.pack(rng.integers(0, 16, (64, 24)), (rng.random((4, 24)) * 0.02).astype(np.float32),
                  rng.integers(0, 16, (4, 24)), group_size=16)
    qw = bitplane.pack(rng.integers(0, 8, (4, 1024)).astype(np.uint8), 3)
    lut = rng.standard_normal((4, 8)).astype(np.float16)
    xa = rng.standard_normal((1, 1024)).astype(np.float16)
    W = (rng.standard_normal((128, 16)) * 0.05).astype(np.float32)
    X = rng.standard_normal((256, 128))
    p = m2416.pack(q2416.quantize(W, (X.T @ X) / 128, alpha=0.25, outlier_ratio=0.005))
    xm = rng.standard_normal(128).astype(np.float16)
    act = atom.quantize_activations(rng.standard_normal((16, 512)).astype(np.float16), "kernel", keeper=128)
    wq = atom.quantize_weights((rng.standard_normal((512, 16)) * 0.05).astype(np.float16), "kernel", keeper=128)
    kind = rmma.kind_of("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    regs = rmma.pack(kind, *rmma.probe_inputs(kind, "random", 5, rng))
    return {"mma_probe": lambda b: rc.mma_probe(kind, *regs, backend=b, arch="sm_90"),   # the fake is an sm_90
            "gptq_gemv": lambda b: rc.gptq_gemv(x, ck, backend=b), "awq_gemv": lambda b: rc.awq_gemv(x, aw, backend=b),
            "anyprec_gemv": lambda b: rc.anyprec_gemv(xa, qw, lut, 3, backend=b),
            "mixed_gemv": lambda b: rc.mixed_gemv(p, xm, backend=b),
            "atom_group_gemm": lambda b: rc.atom_group_gemm(act, wq, backend=b)}


def test_every_registered_kernel_runs_on_the_gpu_path(fake):
    calls = _kernel_calls(np.random.default_rng(3))
    # hopper_w4a16_gemm: the fake records its tensor-map launch without executing it (its maps' requests:
    # tests/cuda/test_hopper_w4a16.py); wgmma_probe's gpu path runs against the fake in tests/cuda/test_wgmma.py
    # (an sm_90a kernel)
    assert set(calls) | {"marlin_gemm", "hopper_w4a16_gemm", "wgmma_probe"} == {k.name for k in rc.kernels()}
    for name, call in calls.items():
        assert_bitexact(call("gpu"), call("ptx"), name)
    entries = set(calls) - {"mma_probe"} | {"probe_m16n8k16_f32_f16_f16_f32"}
    assert {c[1] for c in _calls(fake, "get_kernel")} == entries
    assert not _calls(fake, "set_attribute")                 # all under 48 KiB: the attribute stays


def test_user_kernel_runs_on_the_gpu_path(fake):
    def plan(x, ckpt):
        m, k = x.shape
        y = np.zeros((m, ckpt.qweight.shape[1]), np.float16)
        return rc.LaunchPlan(grid=1, block=128, args=(x, ckpt.qweight, ckpt.qzeros, ckpt.scales, ckpt.g_idx, y,
                                                      np.int32(m), np.int32(32), np.int32(k), np.int32(1)),
                             out=y, options={"race": True})               # ptx-only options are not sent
    f = rc.user_kernel(build.PTX_DIR / "gptq_awq.sm_80.ptx", kernel="gptq_gemv", launch=plan)
    rng = np.random.default_rng(4)
    x, ck = rng.standard_normal((1, 64)).astype(np.float16), _gptq(rng)
    assert_bitexact(f(x, ck, backend="gpu"), f(x, ck), "user kernel")
    with pytest.raises(FormatRuleError, match="only the 'ptx' backend"):
        f(x, ck, backend="gpu", options={"seed": 1})


# ---------------------------------------------------------------------------------------------
# refusals before anything is allocated, and named CUDA errors
# ---------------------------------------------------------------------------------------------
def test_a_launch_above_the_devices_opt_in_limit_is_refused_before_allocating(monkeypatch):
    fake = FakeCuda(arch="sm_86", optin=101376, name="Fake A10")
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    text = build.ptx("marlin")
    args = (np.zeros(4, np.float16),) * 5 + (np.int32(1),) * 3
    with pytest.raises(PtxLaunchError, match=r"must be <= 101376 bytes per block on sm_86; got 101377"):
        launch.run(text, [(launch.Launch("refsim_marlin_m1_n8_k8_grouped", 1, 256, 101377), args)], backend="gpu")
    assert not _calls(fake, "allocate")


@pytest.mark.parametrize("args,match", [
    ((np.zeros(4, np.float16),) * 5 + (1, np.int32(1), np.int32(1)), "NumPy scalar"),
    ((np.zeros(4, np.float16),) * 5 + (np.int64(1), np.int32(1), np.int32(1)), "parameter's size"),
    ((np.zeros(4, np.float16),) * 4, "takes 8 parameters; got 4"),
    ((np.zeros((4, 4), np.float16)[:, :2],) + (np.zeros(4, np.float16),) * 4 + (np.int32(1),) * 3, "C-contiguous"),
])
def test_bad_arguments_are_refused_before_allocating(fake, args, match):
    text = build.ptx("marlin")
    with pytest.raises(FormatRuleError, match=match):
        launch.run(text, [(launch.Launch("refsim_marlin_m1_n8_k8_grouped", 1, 256, 0), args)], backend="gpu")
    assert not _calls(fake, "allocate")


@pytest.mark.parametrize("grid,block,match", [(0, 32, "grid"), (1, 1025, "block"), (1, (1, 1, 65), "block"),
                                              ((1, 65536), 32, "grid"), (1.5, 32, "grid")])
def test_launch_shapes_outside_the_cuda_rules_are_refused(fake, grid, block, match):
    with pytest.raises(PtxLaunchError, match=match):
        launch.run(build.ptx("gptq_awq"), [(launch.Launch("gptq_gemv", grid, block), ())], backend="gpu")
    assert not _calls(fake, "allocate")


@pytest.mark.parametrize("grid,block,shared", [(0, 32, 0), (1, 1025, 0), ((1, 65536), 32, 0), (1, 32, -1),
                                               (1, 32, 232448 + 1)])
def test_both_backends_refuse_a_launch_shape_with_the_same_rule(fake, grid, block, shared):
    ln = launch.Launch("refsim_marlin_m1_n8_k8_grouped", grid, block, shared)
    args = (np.zeros(4, np.float16),) * 5 + (np.int32(1),) * 3
    messages = []
    for backend, arch in (("gpu", "sm_80"), ("ptx", "sm_90")):         # the fake device is an sm_90
        with pytest.raises(PtxLaunchError) as err:
            launch.run(build.ptx("marlin"), [(ln, args)], backend=backend, arch=arch)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert not _calls(fake, "allocate")


_STATIC_16K = """.version 8.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry k()
{
.shared .align 4 .b8 s[16384];
ret;
}
"""


def test_static_plus_dynamic_above_48_kib_raises_the_attribute_to_the_dynamic_bytes(fake):
    # 16 KiB static + 40 KiB dynamic: the dynamic part alone is under 48 KiB, the launch still needs the
    # opt-in (the driver's default allows 48 KiB - 16 KiB of dynamic memory; the fake enforces it)
    launch.run(_STATIC_16K, [(launch.Launch("k", 1, 32, 40 * 1024), ())], backend="gpu")
    assert [c[1:] for c in _calls(fake, "set_attribute")] == [("k", 8, 40 * 1024)]
    launch.run(_STATIC_16K, [(launch.Launch("k", 1, 32, 32 * 1024), ())], backend="gpu")     # fits: no call
    assert len(_calls(fake, "set_attribute")) == 1


def test_the_device_facts_are_its_archs_row_with_its_own_opt_in_limit():
    f = gpu.device_facts("sm_86", 100_000)
    assert (f.name, f.max_shared_bytes_per_block, f.max_threads_per_block) == ("sm_86", 100_000, 1024)
    newer = gpu.device_facts("sm_121", 101376)                 # not in the table: the sm_120 row's limits
    assert (newer.name, newer.sm, newer.max_shared_bytes_per_block) == ("sm_121", 121, 101376)
    assert (newer.max_grid_dims, newer.max_warps_per_sm, newer.max_ctas_per_sm) == ((2**31 - 1, 65535, 65535), 48, 24)


def test_a_device_the_table_lacks_still_launches(monkeypatch):
    fake = FakeCuda(arch="sm_121", optin=101376, name="Fake DGX Spark", exec_arch="sm_90")
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    rng = np.random.default_rng(8)
    x, ck = rng.standard_normal((1, 64)).astype(np.float16), _gptq(rng)
    assert_bitexact(rc.gptq_gemv(x, ck, backend="gpu"), rc.gptq_gemv(x, ck), "gptq_gemv on sm_121")


@pytest.mark.parametrize("step,name", [("sync", "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
                                       ("launch", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
                                       ("load", "CUDA_ERROR_INVALID_PTX"),
                                       ("set_attribute", "CUDA_ERROR_INVALID_VALUE")])
def test_driver_failures_are_named_gpu_errors_and_free_the_buffers(monkeypatch, step, name):
    fake = FakeCuda(fail={step: name})
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    A, B, s = _marlin_problem(np.random.default_rng(5), 20, 256, 256, 128)
    with pytest.raises(gpu.GpuError) as err:
        rc.marlin_gemm(A, B, s, sms=3, backend="gpu")
    assert err.value.cuda_error == name and name in str(err.value)
    assert isinstance(err.value, RefsimError) and isinstance(err.value, ToolchainError)
    expected_step = {"sync": "launch 0 of 1 (refsim_marlin_m2", "launch": "launch 0 of 1", "load": "loading the PTX",
                     "set_attribute": "raising the dynamic shared memory"}[step]
    assert expected_step in err.value.step
    freed = {c[2] for c in _calls(fake, "close")}
    assert {c[2] for c in _calls(fake, "allocate")} == freed


def test_a_kernel_writing_a_read_only_array_is_reported(fake):
    def plan(x):
        y = np.zeros((1, 32), np.float16)
        y.flags.writeable = False
        ck = _gptq(np.random.default_rng(6))
        return rc.LaunchPlan(grid=1, block=128, args=(x, ck.qweight, ck.qzeros, ck.scales, ck.g_idx, y, np.int32(1),
                                                      np.int32(32), np.int32(64), np.int32(1)), out=y)
    f = rc.user_kernel(build.PTX_DIR / "gptq_awq.sm_80.ptx", kernel="gptq_gemv", launch=plan)
    with pytest.raises(FormatRuleError, match="read-only"):
        f(np.ones((1, 64), np.float16), backend="gpu")


def test_no_device_is_a_toolchain_error(monkeypatch):
    fake = FakeCuda()

    def no_device(device_id=None):
        raise CUDAError("CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected")
    monkeypatch.setattr(fake.core, "Device", no_device)
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    with pytest.raises(ToolchainError, match="no usable CUDA GPU.*CUDA_ERROR_NO_DEVICE"):
        rc.gptq_gemv(np.zeros((1, 64), np.float16), _gptq(np.random.default_rng(0)), backend="gpu")


# ---------------------------------------------------------------------------------------------
# device_bases: the aliasing rule as data
# ---------------------------------------------------------------------------------------------
def test_views_of_one_array_become_offsets_into_one_buffer():
    C = np.zeros((130, 256), np.float16)
    other = np.zeros(8, np.int32)
    arrays = [((0, 0), C[0:128]), ((0, 1), other), ((1, 0), C[128:130]), ((1, 1), other)]
    bases, where = gpu.device_bases(arrays)
    assert len(bases) == 2 and bases[0].host.size == C.nbytes and bases[1].host.size == other.nbytes
    assert where == [(0, 0), (1, 0), (0, 128 * 256 * 2), (1, 0)]
    bases[0].host[-2:] = 0xFF                                 # the span is the array's memory, not a copy
    assert C.view(np.uint16)[129, 255] == 0xFFFF


def test_a_span_starts_on_a_256_byte_boundary_of_its_base_and_keeps_distances():
    buf = np.zeros(4096, np.uint8)
    bases, where = gpu.device_bases([((0, 0), buf[1000:1010]), ((0, 1), buf[1004:1100])])
    (base,) = bases
    assert where == [(0, 1000 - 768), (0, 1004 - 768)] and base.host.size == 1100 - 768


def test_overlapping_arrays_without_an_owning_array_are_refused():
    x = np.zeros(16, np.float32)
    a = np.lib.stride_tricks.as_strided(x, shape=(4,), strides=(4,))          # owned by no ndarray: a
    b = np.lib.stride_tricks.as_strided(x[2:], shape=(4,), strides=(4,))      # bytes 8..23 of x, inside a's
    with pytest.raises(FormatRuleError, match="overlap"):
        gpu.device_bases([((0, 0), a), ((0, 1), b)])


# ------------------------------------------------------- properties: device_bases over drawn arrays and views
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


# ---------------------------------------------------------------------------------------------
# tensor-map arguments and thread-block clusters
# ---------------------------------------------------------------------------------------------
_MAP_KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry tm(.param .u64 out, .param .align 64 .b8 map[128], .param .u32 n)
{
  ret;
}
"""
_CLUSTER_KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry cl(.param .u64 out)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


def _f32_map(rows, cols, box=(16, 2)):
    from refsim.formats.tensor_map import TensorMap

    return TensorMap("float32", 0, (cols, rows), (4 * cols,), box, (1, 1), swizzle="64B", l2_promotion="128B")


def test_a_tensor_map_is_encoded_at_its_arrays_device_buffer_plus_offset(fake):
    from fake_cuda import TensorMapDataType as DT, TensorMapL2Promotion as L2, TensorMapOOBFill as OOB
    from fake_cuda import TensorMapInterleave as IL, TensorMapSwizzle as SW

    big = np.arange(3 * 32, dtype=np.float32).reshape(3, 32)
    launch.run(_MAP_KERNEL, [(launch.Launch("tm", 1, 32), (big, gpu.TensorMapArg(big[1:], _f32_map(2, 32)),
                                                           np.uint32(0)))], backend="gpu")
    (_, _, _, _, args), = fake.launches()
    assert len(_calls(fake, "allocate", "device")) == 1                    # the view shares big's buffer
    assert _calls(fake, "from_handle") == [("from_handle", args[0] + 128, 2 * 32 * 4)]
    (req,) = fake.tensor_maps()
    # by hand: dims (32, 2) innermost first, one 128-byte row stride, box (16, 2), as the TensorMap says
    assert req == {"data_type": DT.FLOAT32, "address": args[0] + 128, "global_dims": (32, 2),
                   "global_strides": (128,), "box_dims": (16, 2), "element_strides": (1, 1), "interleave": IL.NONE,
                   "swizzle": SW.SWIZZLE_64B, "l2_promotion": L2.L2_128B, "oob_fill": OOB.NONE}
    assert args[1] is not None and args[1].request is req


def test_a_map_over_a_whole_array_uses_its_buffer_and_rank_3_reverses_every_field(fake):
    from refsim.formats.tensor_map import TensorMap

    a = np.zeros((2, 3, 8), np.uint16)                               # dims (8, 3, 2) innermost first
    t = TensorMap("uint16", 0, (8, 3, 2), (16, 48), (8, 2, 1), (1, 2, 1))
    launch.run(_MAP_KERNEL, [(launch.Launch("tm", 1, 32), (np.zeros(1, np.float32), gpu.TensorMapArg(a, t),
                                                           np.uint32(0)))], backend="gpu")
    assert _calls(fake, "from_handle") == []
    (req,) = fake.tensor_maps()
    assert (req["global_dims"], req["global_strides"], req["box_dims"], req["element_strides"]) == (
        (8, 3, 2), (16, 48), (8, 2, 1), (1, 2, 1))
    assert req["address"] in {c[2] for c in _calls(fake, "allocate", "device")}


def test_tensor_map_arguments_are_refused_where_they_do_not_fit(fake):
    big = np.zeros((3, 32), np.float32)
    with pytest.raises(FormatRuleError, match="fills a 128-byte CUtensorMap parameter; got a parameter of 8 bytes"):
        launch.run(_MAP_KERNEL, [(launch.Launch("tm", 1, 32), (gpu.TensorMapArg(big, _f32_map(3, 32)),
                                                               gpu.TensorMapArg(big, _f32_map(3, 32)),
                                                               np.uint32(0)))], backend="gpu")
    flat = np.zeros(3 * 32 + 1, np.float32)
    with pytest.raises(FormatRuleError, match="must start 16-byte aligned"):
        launch.run(_MAP_KERNEL, [(launch.Launch("tm", 1, 32), (big, gpu.TensorMapArg(flat[1:].reshape(3, 32),
                                                                                    _f32_map(3, 32)),
                                                               np.uint32(0)))], backend="gpu")
    with pytest.raises(FormatRuleError, match="must be a C-contiguous numeric NumPy array"):
        gpu.TensorMapArg(big[:, ::2], _f32_map(3, 16))
    with pytest.raises(ShapeError, match="reach byte 511; the array has 384 bytes"):
        gpu.TensorMapArg(big, _f32_map(4, 32))
    with pytest.raises(FormatRuleError, match="must be a refsim.formats.tensor_map.TensorMap"):
        gpu.TensorMapArg(big, b"\0" * 128)
    with pytest.raises(FormatRuleError, match="a TensorMapArg is a gpu-backend argument"):
        launch.run(_MAP_KERNEL, [(launch.Launch("tm", 1, 32), (big, gpu.TensorMapArg(big, _f32_map(3, 32)),
                                                               np.uint32(0)))], backend="ptx", arch="sm_90")
    assert _calls(fake, "allocate") == []


def test_a_cluster_launch_counts_the_grid_in_clusters_for_cuda_core(fake):
    out = np.full(8, 7, np.uint32)
    launch.run(_CLUSTER_KERNEL, [(launch.Launch("cl", 8, 32, cluster=2), (out,))], backend="gpu")
    (config,) = fake.configs
    assert (config.grid, config.cluster, config.block) == ((4, 1, 1), (2, 1, 1), (32, 1, 1))
    assert out.tolist() == [0, 1] * 4                       # 8 blocks ran, in clusters of 2
    ref = np.full(8, 7, np.uint32)
    launch.run(_CLUSTER_KERNEL, [(launch.Launch("cl", (8, 1), 32, cluster=(2, 1)), (ref,))], arch="sm_90")
    assert ref.tolist() == out.tolist()


def test_cluster_rules(monkeypatch):
    with pytest.raises(PtxLaunchError, match=r"multiple of the cluster's .*grid 6, cluster 4"):
        launch.Launch("cl", 6, 32, cluster=4)
    with pytest.raises(PtxLaunchError, match="at most 8 blocks"):
        launch.Launch("cl", 16, 32, cluster=16)
    with pytest.raises(PtxLaunchError, match="cluster: must be an int or a tuple"):
        launch.Launch("cl", 16, 32, cluster=(2, 2, 2, 2))
    with pytest.raises(PtxLaunchError, match="must be positive"):
        launch.Launch("cl", 16, 32, cluster=0)
    f = FakeCuda(arch="sm_80", optin=166912)
    monkeypatch.setattr(gpu, "_driver", lambda: f)
    with pytest.raises(PtxLaunchError, match="clusters need sm_90 or later; got sm_80"):
        launch.run(_CLUSTER_KERNEL, [(launch.Launch("cl", 8, 32, cluster=2), (np.zeros(8, np.uint32),))],
                   backend="gpu")
    assert _calls(f, "allocate") == []


def test_a_resident_call_launches_again_on_its_buffers_and_copies_back_once_asked(fake):
    """gpu.prepare: buffers and arguments set up once; each Resident.launch enqueues the launches again on
    the same device buffers (what a benchmark times), sync=False enqueues without waiting; the arrays
    change only at copy_back; close frees every buffer."""
    out = np.full(8, 7, np.uint32)
    r = gpu.prepare(_CLUSTER_KERNEL, [(launch.Launch("cl", 8, 32, cluster=2), (out,))])
    assert len(_calls(fake, "allocate")) == 2 and fake.launches() == []           # pinned + device
    syncs = len(_calls(fake, "sync"))
    r.launch(sync=False)
    r.launch(sync=False)
    assert len(fake.launches()) == 2 and len(_calls(fake, "sync")) == syncs       # enqueued, not waited for
    assert fake.launches()[0][4] == fake.launches()[1][4]                          # the same device pointer
    assert out.tolist() == [7] * 8                                                  # not copied back yet
    r.launch()
    assert len(_calls(fake, "sync")) == syncs + 1
    r.copy_back()
    assert out.tolist() == [0, 1] * 4
    r.close()
    assert {c[2] for c in _calls(fake, "close")} == {c[2] for c in _calls(fake, "allocate")}
    assert r.stream is not None

