"""refsim.cuda.hopper_w4a16: the committed sm_90a PTX loads in refsim.ptx and uses the Hopper forms its spec
states, the tensor maps describe X and Wp where refsim.ptx maps them, and the kernel runs through refsim.ptx (TMA, mbarrier, setmaxnreg, wgmma) on both executors, with
race=True, and equals its emulator bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.cuda import build, hopper_w4a16 as hc, launch
from refsim.emulator import hopper_w4a16 as ek
from refsim.formats import hopper_w4a16 as layout
from refsim.formats import tensor_map

PTX = build.ptx("hopper_w4a16", "sm_90a")


def _problem(m=5, k=384, n=64, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    s = (rng.random((k // 128, n)) * 0.02 + 2.0**-10).astype(np.float16)
    return rng.standard_normal((m, k)).astype(np.float16), layout.pack(q), s


def test_the_committed_ptx_loads_and_uses_exactly_the_stated_hopper_forms():
    assert ".target sm_90a" in PTX and "\n.maxnreg 128\n" in PTX
    module = ptx.Module(PTX)
    assert launch.entries(PTX) == ("hopper_w4a16_gemm",)
    assert [(t, size) for _, t, size in module.params("hopper_w4a16_gemm")] == (
        [("u64", 8)] * 4 + [("b8", 128)] * 2 + [("u32", 4)] * 3)       # X, Wp, scales, C, two maps, M, N, K
    mix = module.instruction_mix("hopper_w4a16_gemm")
    hopper = {op for op in mix if op.split(".")[0] in ("wgmma", "mbarrier", "setmaxnreg", "fence")
              or op.startswith("cp.async.bulk")}
    assert hopper == {
        "wgmma.fence.sync.aligned", "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
        "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.init.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
        "setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32", "fence.mbarrier_init.release.cluster"}
    assert mix["wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"] == 4       # one k-tile: 4 k16 steps


def test_the_tensor_maps_hold_the_spec_blocks_boxes():
    x_map, w_map = hc.tensor_maps(1 << 40, (1 << 40) + 8192, 70, 256, 128)
    x, w = tensor_map.decode_tiled(x_map), tensor_map.decode_tiled(w_map)
    assert (x.data_type, x.global_address, x.global_dims, x.global_strides, x.box_dims, x.swizzle) == (
        "float16", 1 << 40, (256, 70), (512,), (64, 64), "128B")
    assert (w.data_type, w.global_address, w.global_dims, w.global_strides, w.box_dims, w.swizzle) == (
        "uint32", (1 << 40) + 8192, (128, 2 * 16), (512,), (128, 4), "none")


# a kernel with hopper_w4a16_gemm's parameters that writes what it receives: its X and Wp pointers and the
# global address field (bytes 0-7) of each tensor map, into C
_ECHO = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry echo(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3,
    .param .align 64 .b8 m0[128], .param .align 64 .b8 m1[128], .param .u32 a, .param .u32 b, .param .u32 c)
{
    .reg .b64 %rd<6>;
    ld.param.u64 %rd0, [p0];
    ld.param.u64 %rd1, [p1];
    ld.param.u64 %rd2, [m0];
    ld.param.u64 %rd3, [m1];
    ld.param.u64 %rd4, [p3];
    st.global.u64 [%rd4], %rd0;
    st.global.u64 [%rd4+8], %rd1;
    st.global.u64 [%rd4+16], %rd2;
    st.global.u64 [%rd4+24], %rd3;
    ret;
}
"""


def test_the_maps_name_the_addresses_refsim_ptx_gives_x_and_wp():
    ln, args, c = hc.plan(*_problem(m=1, k=128))
    assert (ln.kernel, ln.grid, ln.block, ln.shared_bytes) == ("hopper_w4a16_gemm", (1, 1), 256, 0)
    ptx.Module(_ECHO).launch("echo", 1, 1, list(args), arch="sm_80")
    x_ptr, wp_ptr, x_map_addr, w_map_addr = c.view(np.uint64).reshape(-1)[:4]
    assert x_ptr == x_map_addr and wp_ptr == w_map_addr and x_ptr != wp_ptr


def test_a_second_token_tile_gets_a_second_row_of_blocks():
    ln, _, c = hc.plan(*_problem(m=65, k=128, n=128))
    assert ln.grid == (2, 2) and c.shape == (65, 128)


def test_the_gpu_backend_asks_cuda_core_for_the_maps_refsim_ptx_encodes(monkeypatch):
    from fake_cuda import FakeCuda, TensorMapDataType as DT, TensorMapL2Promotion as L2, TensorMapOOBFill as OOB
    from fake_cuda import TensorMapInterleave as IL, TensorMapSwizzle as SW, image_request

    from refsim.cuda import gpu

    fake = FakeCuda()
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    x, wp, s = _problem(m=5, k=128, n=64)                 # wp: (64/64 * 128/16, 128) = (8, 128) uint32
    hc.hopper_w4a16_gemm(x, wp, s, backend="gpu")
    (kernel, grid, block, shmem, args), = fake.launches()
    assert (kernel, grid, block, shmem) == ("hopper_w4a16_gemm", (1, 1, 1), (256, 1, 1), 0)
    assert fake.configs[0].cluster is None
    # by hand, from the .cu's spec block: X f16 dims (K=128, M=5), row 256 B, box 64 x 64, 128B swizzle;
    # Wp u32 dims (128, 8), row 512 B, box 128 x 4; the addresses: the device buffers of x and wp
    x_req, w_req = fake.tensor_maps()
    assert x_req == {"data_type": DT.FLOAT16, "address": args[0], "global_dims": (128, 5), "global_strides": (256,),
                     "box_dims": (64, 64), "element_strides": (1, 1), "interleave": IL.NONE,
                     "swizzle": SW.SWIZZLE_128B, "l2_promotion": L2.NONE, "oob_fill": OOB.NONE}
    assert w_req == {"data_type": DT.UINT32, "address": args[1], "global_dims": (128, 8), "global_strides": (512,),
                     "box_dims": (128, 4), "element_strides": (1, 1), "interleave": IL.NONE, "swizzle": SW.NONE,
                     "l2_promotion": L2.NONE, "oob_fill": OOB.NONE}
    # and field by field what refsim.ptx's images hold (the one definition, hc.maps)
    _, ptx_args, _ = hc.plan(x, wp, s)
    for req, image in zip((x_req, w_req), ptx_args[4:6]):
        assert image_request(image) == {key: v for key, v in req.items() if key != "address"}


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
def test_the_kernel_equals_its_emulator_bit_for_bit(executor):
    # M = 5 (a partial token tile), K = 384 (6 k-tiles: the 4-slot ring wraps; 3 scale groups), N = 64
    x, wp, s = _problem()
    got = hc.hopper_w4a16_gemm(x, wp, s, options={"executor": executor, "race": True})
    assert np.array_equal(got.view(np.uint16), ek.hopper_w4a16_gemm(x, wp, s).view(np.uint16))
