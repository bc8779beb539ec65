"""Tests for refsim.formats.swizzle."""

import numpy as np
import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import swizzle as sw


def test_swizzle_prints_cute_name_and_is_an_involution_over_its_domain():
    s = sw.Swizzle(3, 4, 3)
    assert str(s) == "SW_3_4_3"
    x = np.arange(1 << 12)
    y = s(x)
    assert sorted(y.tolist()) == x.tolist()
    assert np.array_equal(s(y), x)
    # bit-level definition: bits 7..9 XORed into bits 4..6
    for v in [0, 0x80, 0x3F0, 0x2A5]:
        assert s(v) == v ^ (((v >> 7) & 7) << 4)


@pytest.mark.parametrize("thread_k,rows", [(128, 16), (64, 16), (64, 32), (64, 48), (64, 64)])
def test_marlin_transform_a_is_a_bijection_and_matches_reference(thread_k, rows):
    d = thread_k // 8
    i = np.arange(d * rows)
    phys = sw.marlin_transform_a(i, thread_k)
    assert sorted(phys.tolist()) == i.tolist()
    assert phys.tolist() == [sw.marlin_transform_a_reference(int(v), thread_k) for v in i]


def test_c_precedence_plus_binds_before_xor():
    # D=8, logical row 9, col 3: the C reading (D*row + col) ^ row differs from D*row + (col ^ row)
    i = 8 * 9 + 3
    c_reading = (8 * 9 + 3) ^ 9
    other_reading = 8 * 9 + (3 ^ 9)
    assert c_reading != other_reading
    assert sw.marlin_transform_a(i, 64) == c_reading
    # tk=128 with one m-block is the textbook swizzle SW_4_0_4
    x = np.arange(16 * 16)
    assert np.array_equal(sw.marlin_transform_a(x, 128), sw.Swizzle(4, 0, 4)(x))


def test_wavefront_counter_agrees_with_reference_and_known_cases():
    lanes = np.arange(32)
    assert sw.bank_wavefronts(lanes * 4, 4) == 1  # consecutive words
    assert sw.bank_wavefronts(lanes * 128, 4) == 32  # all in bank 0
    assert sw.bank_wavefronts(np.zeros(32, int), 4) == 1  # broadcast
    assert sw.bank_wavefronts(lanes * 16, 16) == 4  # 4 phases, each conflict-free
    assert sw.bank_wavefronts(lanes * 8, 8) == 2
    rng = np.random.default_rng(0)
    for width in (4, 8, 16):
        for _ in range(50):
            a = rng.integers(0, 512, 32) * width
            assert sw.bank_wavefronts(a, width) == sw.bank_wavefronts_reference(a, width)


@pytest.mark.parametrize("thread_k", [64, 128])
def test_marlin_a_reads_are_conflict_free_swizzled_and_conflicted_plain(thread_k):
    n_warps = 8
    m_blocks = 1 if thread_k == 128 else 4
    substeps = 2  # thread_k_blocks / warps_k: 8/4 for tk=128, 4/2 for tk=64
    for warp in range(n_warps):
        for sub in range(substeps):
            for mb in range(m_blocks):
                a = sw.marlin_a_read_addresses(thread_k, warp, sub, mb, swizzled=True)
                assert sw.bank_wavefronts(a, 16) == 4  # 4 matrices, one wavefront each
                plain = sw.marlin_a_read_addresses(thread_k, warp, sub, mb, swizzled=False)
                assert sw.bank_wavefronts(plain, 16) == 32  # 8-way conflict per matrix


@pytest.mark.parametrize("thread_k", [64, 128])
def test_marlin_a_writes_are_conflict_free_either_way(thread_k):
    for warp in range(8):
        for swz in (True, False):
            assert sw.bank_wavefronts(sw.marlin_a_write_addresses(thread_k, warp, 0, swz), 16) == 4


def test_bad_arguments_raise_named_errors():
    with pytest.raises(FormatRuleError, match="thread_k: must be one of"):
        sw.marlin_transform_a(3, 32)
    with pytest.raises(ShapeError, match="must have shape \\(32,\\)"):
        sw.bank_wavefronts(np.zeros(16, int), 4)
    with pytest.raises(ShapeError, match="aligned"):
        sw.bank_wavefronts(np.arange(32) * 4 + 2, 4)
    with pytest.raises(FormatRuleError, match="access_bytes"):
        sw.bank_wavefronts(np.zeros(32, int), 2)
