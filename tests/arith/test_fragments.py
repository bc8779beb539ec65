"""Fragment layouts against rows transcribed by hand from the PTX ISA fragment figures."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import fragments as fr
from refsim.arith import tensor_core as tc
from refsim.errors import ShapeError
from refsim.testing import assert_bitexact

# PTX ISA figure "MMA .m16n8k16 fragment layout for matrix A with .f16/.bf16 type", read per lane:
# (lane, [(row, col) of a0..a7])
PTX_A_ROWS = [
    (0, [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]),
    (5, [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]),
    (31, [(7, 6), (7, 7), (15, 6), (15, 7), (7, 14), (7, 15), (15, 14), (15, 15)]),
]
# figure for B (16x8): (lane, [(k, n) of b0..b3])
PTX_B_ROWS = [
    (0, [(0, 0), (1, 0), (8, 0), (9, 0)]),
    (6, [(4, 1), (5, 1), (12, 1), (13, 1)]),
    (31, [(6, 7), (7, 7), (14, 7), (15, 7)]),
]
# figure for C/D (16x8): (lane, [(row, col) of c0..c3])
PTX_C_ROWS = [(0, [(0, 0), (0, 1), (8, 0), (8, 1)]), (7, [(1, 6), (1, 7), (9, 6), (9, 7)])]
# m16n8k64 s4 A (16x64): lane 1 holds cols 8..15 of rows 0 / 8 and cols 40..47
PTX_S4_A_LANE1 = ([(0, c) for c in range(8, 16)] + [(8, c) for c in range(8, 16)]
                  + [(0, c) for c in range(40, 48)] + [(8, c) for c in range(40, 48)])
PTX_S4_B_LANE9 = [(k, 2) for k in range(8, 16)] + [(k, 2) for k in range(40, 48)]


@pytest.mark.parametrize("layout,rows", [(fr.mma_m16n8k16_a(), PTX_A_ROWS), (fr.mma_m16n8k16_b(), PTX_B_ROWS),
                                         (fr.mma_m16n8k16_c(), PTX_C_ROWS)])
def test_f16_fragments_match_ptx_figures(layout, rows):
    for lane, coords in rows:
        assert [tuple(x) for x in layout.coords[lane].tolist()] == coords


def test_s4_fragments_match_ptx_figures():
    assert [tuple(x) for x in fr.mma_m16n8k64_s4_a().coords[1].tolist()] == PTX_S4_A_LANE1
    assert [tuple(x) for x in fr.mma_m16n8k64_s4_b().coords[9].tolist()] == PTX_S4_B_LANE9


@pytest.mark.parametrize("layout", [fr.mma_m16n8k16_a(), fr.mma_m16n8k16_b(), fr.mma_m16n8k16_c(),
                                    fr.mma_m16n8k16_c(np.float16), fr.mma_m16n8k64_s4_a(),
                                    fr.mma_m16n8k64_s4_b(), fr.mma_m16n8k64_c()])
def test_every_layout_is_a_bijection_and_scatter_inverts_gather(layout):
    flat = layout.coords[..., 0] * layout.shape[1] + layout.coords[..., 1]
    assert sorted(flat.ravel().tolist()) == list(range(layout.shape[0] * layout.shape[1]))
    m = np.arange(layout.shape[0] * layout.shape[1]).reshape(layout.shape)
    assert_bitexact(layout.scatter(layout.gather(m)), m)
    lane, i = layout.owner(*layout.coords[13, 1])
    assert (lane, i) == (13, 1)


def test_ldmatrix_matches_reference_for_all_variants():
    rng = np.random.default_rng(0)
    for num in (1, 2, 4):
        mats = rng.integers(0, 2**16, (num, 8, 8), dtype=np.uint16)
        for trans in (False, True):
            assert_bitexact(fr.ldmatrix(mats, trans), fr.ldmatrix_reference(mats, trans), f"x{num} trans={trans}")


def test_canonical_ldmatrix_x4_of_a_tile_yields_the_mma_a_fragment():
    A = np.arange(256, dtype=np.uint16).reshape(16, 16)  # (M, K) row-major in shared memory
    # lane l supplies &A[l % 16][8 * (l // 16)]: matrix j = rows 8*(j%2).. , cols 8*(j//2)..
    mats = np.stack([A[8 * (j % 2):8 * (j % 2) + 8, 8 * (j // 2):8 * (j // 2) + 8] for j in range(4)])
    regs = fr.ldmatrix(mats)
    assert_bitexact(regs, fr.pack_registers(fr.mma_m16n8k16_a().gather(A), 16))


def test_ldmatrix_trans_of_k_major_b_yields_the_mma_b_fragment():
    B = np.arange(128, dtype=np.uint16).reshape(16, 8)  # (K, N), stored [k][n]: needs .trans
    mats = np.stack([B[0:8], B[8:16]])
    regs = fr.ldmatrix(mats, trans=True)
    assert_bitexact(regs, fr.pack_registers(fr.mma_m16n8k16_b().gather(B), 16))


def test_register_packing_puts_low_index_in_low_bits():
    regs = fr.pack_registers(np.array([[1, 2, 3, 4, 5, 6, 7, -8]]), 4)
    assert regs.tolist() == [[0x87654321]]
    assert fr.unpack_registers(regs, 4, signed=True).tolist() == [[1, 2, 3, 4, 5, 6, 7, -8]]
    assert fr.pack_registers(np.array([[0x1234, 0xABCD]], np.uint16), 16).tolist() == [[0xABCD1234]]


def test_warp_level_mma_through_fragments_equals_matrix_mma():
    # lanes exchange nothing: rebuilding the matrices from the fragments gives the same D
    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    C = np.zeros((16, 8), np.float32)
    fa, fb = fr.mma_m16n8k16_a().gather(A), fr.mma_m16n8k16_b().gather(B)
    D = tc.mma_m16n8k16("sm_80", fr.mma_m16n8k16_a().scatter(fa), fr.mma_m16n8k16_b().scatter(fb), C)
    assert_bitexact(D, tc.mma_m16n8k16("sm_80", A, B, C))


def test_bad_shapes_raise():
    with pytest.raises(ShapeError, match="trailing shape must be"):
        fr.mma_m16n8k16_a().gather(np.zeros((16, 8)))
    with pytest.raises(ShapeError, match="num, 8, 8"):
        fr.ldmatrix(np.zeros((3, 8, 8), np.uint16))


# the registers an H100 received (refsim/data/tensor_core_hw: every lane of every probe tile)
H100_MAPS = {  # probe kernel -> (A layout, B layout, element bits)
    "f16_k16_f32": (fr.mma_m16n8k16_a, fr.mma_m16n8k16_b, 16), "bf16_k16_f32": (fr.mma_m16n8k16_a, fr.mma_m16n8k16_b, 16),
    "f16_k8_f32": (fr.mma_m16n8k8_a, fr.mma_m16n8k8_b, 16), "bf16_k8_f32": (fr.mma_m16n8k8_a, fr.mma_m16n8k8_b, 16),
    "tf32_k8_f32": (fr.mma_m16n8k8_tf32_a, fr.mma_m16n8k8_tf32_b, 32),
    "tf32_k8_f32_lowbits": (fr.mma_m16n8k8_tf32_a, fr.mma_m16n8k8_tf32_b, 32),
    "e4m3_k32_f32": (fr.mma_m16n8k32_f8_a, fr.mma_m16n8k32_f8_b, 8), "e5m2_k32_f32": (fr.mma_m16n8k32_f8_a, fr.mma_m16n8k32_f8_b, 8),
}


@pytest.mark.parametrize("kernel", sorted(H100_MAPS))
def test_fragment_maps_equal_the_registers_each_h100_lane_received(kernel):
    from refsim.arith import hw_samples

    la, lb, bits = H100_MAPS[kernel]
    p = hw_samples.load_probes()[kernel]
    for tiles, layout, regs in ((p.A, la(), p.A_regs), (p.B, lb(), p.B_regs)):
        assert_bitexact(fr.unpack_registers(regs, bits), layout.gather(tiles).astype(np.int64), f"{kernel} {layout.name}")
        assert_bitexact(fr.pack_registers(layout.gather(tiles), bits), regs, f"{kernel} {layout.name} packed")
