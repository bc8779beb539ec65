"""DeepGEMM's official FP8 GEMM launcher: the heuristics pick the committed instantiations, the tensor maps
decode to the boxes the kernel's TMA loads read (transposed TMA-aligned SFA included), and the kernel runs
through refsim.ptx on both executors with the emulator's bits."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.cuda import official_deepgemm as od
from refsim.errors import FormatRuleError
from refsim.formats import tensor_map
from refsim.testing import assert_bitexact

# the two instantiations the README records: (M, N, K, SMs) -> (BLOCK_M, BLOCK_N, stages, smem bytes, threads)
RECORDED = {(128, 4096, 4096, 132): (64, 64, 13, 224896, 256), (64, 256, 512, 4): (64, 64, 13, 224784, 256)}


@pytest.mark.parametrize("shape", sorted(RECORDED))
def test_heuristics_pick_the_committed_instantiation(shape):
    m, n, k, sms = shape
    c = od.config(m, n, k, sms)
    assert (c.block_m, c.block_n, c.stages, c.smem_bytes, c.threads) == RECORDED[shape]
    assert (c.block_k, c.cluster, c.swizzle_a, c.swizzle_b, c.swizzle_d) == (128, 1, 128, 128, 128)
    assert od._mangled(n, k, c, sms) in od.instantiations()


def test_heuristics_follow_m():
    # M <= 16 adds BLOCK_M 16 and the small tile wins; a larger M moves to wider tiles (DeepGEMM's cycle model)
    assert (od.config(1, 4096, 4096).block_m, od.config(1, 4096, 4096).block_n) == (16, 32)
    assert (od.config(256, 4096, 4096).block_m, od.config(256, 4096, 4096).block_n) == (64, 128)


def _problem(m=40, n=256, k=512, seed=0):
    rng = np.random.default_rng(seed)
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    A, B = rng.choice(codes, (m, k)), rng.choice(codes, (n, k))
    sfa = rng.uniform(0.5, 2, (m, k // 128)).astype(np.float32)
    sfb = rng.uniform(0.5, 2, (-(-n // 128), k // 128)).astype(np.float32)
    return A, sfa, B, sfb


def test_arguments_and_maps_decode_to_the_kernel_boxes():
    A, sfa, B, sfb = _problem()                        # M = 40: the A box runs past M, zero filled
    p = od.prepare(A, sfa, B, sfb, num_sms=4)
    assert (p.grid, p.block, p.cluster, p.shared_bytes) == (4, 256, 1, 224784)
    assert p.args[1:5] == (0, 40, 256, 512) and p.args[0] is dict(p.global_buffers)["sfb"]
    bufs = dict(p.global_buffers)
    for name, image in zip(("a", "b", "d", "sfa"), p.args[5:]):
        assert len(image) == 128 and tensor_map.decode_tiled(image) == p.maps[name]
        buf = {"sfa": "sfa_t"}.get(name, name)
        assert p.maps[name].global_address == p.addresses[buf]
    # A: TMA box (128 K, 64 M) at (k0, m0); rows >= 40 are out of bounds: zeros
    box = tensor_map.tile_box(bufs["a"], p.maps["a"], (256, 0))
    expect = np.zeros((64, 128), np.uint8)
    expect[:40] = A[:, 256:384]
    assert_bitexact(box, expect)
    assert_bitexact(tensor_map.tile_box(bufs["b"], p.maps["b"], (128, 192)), B[192:256, 128:256])
    # SFA: one K block's 64 row scales, read from the transposed TMA-aligned (K/128, align(M, 4)) copy
    sfa_box = tensor_map.tile_box(bufs["sfa_t"], p.maps["sfa"], (0, 3))
    assert sfa_box.shape == (1, 64)
    assert_bitexact(sfa_box[0, :40], sfa[:, 3])
    assert_bitexact(sfa_box[0, 40:], np.zeros(24, np.float32))
    assert bufs["sfa_t"].shape == (4, 40) and p.maps["sfa"].global_strides == (160,)
    # D: the epilogue's TMA store box is 64 bf16 columns (128 B swizzle span) x BLOCK_M rows
    assert p.maps["d"].box_dims == (64, 64) and p.maps["d"].global_strides == (512,)


def test_the_gpu_backend_asks_cuda_core_for_the_maps_refsim_ptx_encodes(monkeypatch):
    from fake_cuda import FakeCuda, TensorMapDataType as DT, TensorMapL2Promotion as L2, TensorMapOOBFill as OOB
    from fake_cuda import TensorMapInterleave as IL, TensorMapSwizzle as SW, image_request

    from refsim.cuda import gpu

    fake = FakeCuda()
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    A, sfa, B, sfb = _problem(m=40)                    # M = 40, N = 256, K = 512, 4 SMs: BLOCK 64 x 64
    od.deepgemm_fp8_gemm(A, sfa, B, sfb, num_sms=4, backend="gpu")
    (kernel, grid, block, shmem, args), = fake.launches()
    p = od.prepare(A, sfa, B, sfb, num_sms=4)
    assert (kernel, grid, block, shmem) == (p.kernel, (4, 1, 1), (256, 1, 1), 224784)
    assert [type(a) for a in args[1:5]] == [np.uint64, np.uint32, np.uint32, np.uint32]
    assert [int(a) for a in args[1:5]] == [0, 40, 256, 512]
    # by hand, from the module spec's table (DeepGEMM's make_tma_2d_desc): the four maps of M 40, N 256, K 512
    # with BLOCK_M = BLOCK_N = 64, all swizzles 128 B; sfa over the transposed (K/128, align(40, 4) = 40) copy
    common = {"element_strides": (1, 1), "interleave": IL.NONE, "l2_promotion": L2.L2_256B, "oob_fill": OOB.NONE}
    expect = [
        {"data_type": DT.UINT8, "global_dims": (512, 40), "global_strides": (512,), "box_dims": (128, 64),
         "swizzle": SW.SWIZZLE_128B},
        {"data_type": DT.UINT8, "global_dims": (512, 256), "global_strides": (512,), "box_dims": (128, 64),
         "swizzle": SW.SWIZZLE_128B},
        {"data_type": DT.BFLOAT16, "global_dims": (256, 40), "global_strides": (512,), "box_dims": (64, 64),
         "swizzle": SW.SWIZZLE_128B},
        {"data_type": DT.FLOAT32, "global_dims": (40, 4), "global_strides": (160,), "box_dims": (64, 1),
         "swizzle": SW.NONE}]
    reqs = fake.tensor_maps()
    assert [{k: v for k, v in r.items() if k != "address"} for r in reqs] == [dict(e, **common) for e in expect]
    # each at the start of its own device buffer (a fresh array: byte offset 0), the one the copies fill
    device = {c[2] for c in fake.calls if c[0] == "allocate" and c[1] == "device"}
    assert len({r["address"] for r in reqs}) == 4 and {r["address"] for r in reqs} <= device
    assert args[0] in device and args[0] not in {r["address"] for r in reqs}           # sfb: a pointer
    # field by field what refsim.ptx's images hold (the one definition, od.tensor_maps)
    for req, image in zip(reqs, p.args[5:]):
        assert image_request(image) == {key: v for key, v in req.items() if key != "address"}
    with pytest.raises(FormatRuleError, match="executor: only the 'ptx' backend"):
        od.deepgemm_fp8_gemm(A, sfa, B, sfb, num_sms=4, backend="gpu", executor="compiled")


def test_a_shape_without_a_committed_instantiation_is_refused():
    A, sfa, B, sfb = _problem(m=200)                  # the heuristics pick BLOCK 128x128: not committed
    with pytest.raises(FormatRuleError, match="no committed instantiation"):
        od.prepare(A, sfa, B, sfb, num_sms=4)
    with pytest.raises(FormatRuleError, match="even"):
        od.config(64, 256, 512, 5)


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
def test_the_official_kernel_equals_the_emulator_bit_for_bit(executor):
    # M = 64, N = 256, K = 512 on 4 SMs: 4 K blocks, a persistent grid of 4 blocks with 4 tiles; loads with
    # nothing refused, runs TMA, mbarrier, setmaxnreg, elect, wgmma, stmatrix and the TMA store
    from refsim.emulator import deepgemm_kernel

    A, sfa, B, sfb = _problem(m=64)
    p = od.prepare(A, sfa, B, sfb, num_sms=4)
    assert p.kernel not in od._module().unsupported
    got = od.deepgemm_fp8_gemm(A, sfa, B, sfb, num_sms=4, executor=executor)
    assert_bitexact(got.view(np.uint16), deepgemm_kernel.deepgemm_fp8_gemm(A, sfa, B, sfb).view(np.uint16))
    assert_bitexact(A, _problem(m=64)[0], "A unchanged")
