"""The 2/4/16-bit GEMV model: the dense part's average bits (3/4 of the groups at 2 bits, 1/4 at 4, plus
the two orders of scales), the CSR outliers' bytes, two launches with their terms summed, and the
kernel's shape rules named."""

import pytest

from refsim.errors import ShapeError
from refsim.gpu_model.kernels import mixed_2_4_16, predict


def test_average_bits_of_the_dense_part():
    assert mixed_2_4_16.avg_bits() == pytest.approx(2 * 0.75 + 4 * 0.25 + 0.25 + 0.03, rel=1e-15)   # 2.78


def test_bytes_of_both_launches_by_hand():
    n = k = 4096
    dense = n * k * 2.78 / 8 + 2 * (k + n)                          # codes + scales, x, y
    nnz = 0.002 * n * k                                             # 0.2 % outliers
    sparse = nnz * 4 + (n + 1) * 4 + 2 * n * 2                      # value + column, row pointers, y read and written
    bd = predict("a10", "mixed-2-4-16", 1, n, k)
    assert bd.bytes_dram == pytest.approx(dense + sparse, rel=1e-12)   # 6,013,456.288 (a few float64 roundings)
    assert bd.launches == 2 and set(bd.terms) == {"dram", "alu", "l2", "launch", "tail"}
    assert bd.notes == "avg 2.78 bits dense + 0.2% CSR outliers"


@pytest.mark.parametrize("n,k,rule", [(4096, 4224, "2nd-order blocks of 16 groups of 16"), (4098, 4096, "4 rows per CTA")])
def test_the_kernels_rules_are_named(n, k, rule):
    with pytest.raises(ShapeError, match=rule):
        predict("a10", "mixed-2-4-16", 1, n, k)
