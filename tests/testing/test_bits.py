import numpy as np
import pytest

from refsim.testing import BitMismatch, assert_bitexact, ulp_distance


def test_identical_arrays_pass():
    x = np.linspace(-3, 3, 50, dtype=np.float32)
    assert_bitexact(x, x.copy())


def test_signed_zeros_differ_in_bits_but_are_zero_ulps_apart():
    with pytest.raises(BitMismatch, match=r"0x8000.*0x0000.*0 ULP"):
        assert_bitexact(np.array([-0.0], np.float16), np.array([0.0], np.float16))


def test_nan_payloads_are_compared_by_bits():
    a = np.array([0x7FC00000], np.uint32).view(np.float32)
    b = np.array([0x7FC00001], np.uint32).view(np.float32)
    with pytest.raises(BitMismatch, match="1 of 1"):
        assert_bitexact(a, b)


def test_report_counts_and_lists_at_most_ten_coordinates():
    a = np.zeros((4, 5), np.float32)
    b = a.copy()
    b[1:, :] = 1.0  # 15 mismatches
    with pytest.raises(BitMismatch) as info:
        assert_bitexact(a, b, name="C")
    msg = str(info.value)
    assert msg.startswith("C: 15 of 20 elements differ")
    assert msg.count("  at (") == 10
    assert "and 5 more" in msg
    assert "at (1, 0): actual 0x00000000" in msg and "expected 0x3f800000" in msg


def test_dtype_and_shape_mismatch_are_reported():
    with pytest.raises(BitMismatch, match="dtype differs"):
        assert_bitexact(np.zeros(2, np.float32), np.zeros(2, np.float16))
    with pytest.raises(BitMismatch, match="shape differs"):
        assert_bitexact(np.zeros(2, np.float32), np.zeros(3, np.float32))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_nextafter_steps_across_zero(dtype):
    x = dtype(-2.0)
    steps = [x]
    for _ in range(7):
        steps.append(np.nextafter(steps[-1], dtype(np.inf)))
    a = np.array(steps, dtype)
    assert list(ulp_distance(a, np.full_like(a, a[0]))) == list(range(8))
    tiny = np.array([np.nextafter(dtype(0), dtype(1))], dtype)
    # from -tiny to +tiny: -tiny -> -0/+0 (one point) -> +tiny = 2 steps
    assert int(ulp_distance(-tiny, tiny)[0]) == 2


def test_integer_mismatch_reports_difference():
    with pytest.raises(BitMismatch, match="difference -2"):
        assert_bitexact(np.array([3], np.int32), np.array([5], np.int32))


def test_check_kernel_is_reexported_and_rejects_a_wrong_kernel():
    from refsim.testing.harness import FORMATS, KernelMismatch
    from refsim.testing import check_kernel

    spec = FORMATS["mma_m16n8k16"]
    check_kernel(lambda A, B, C: spec.emulate((A, B, C), "sm_80", 108), "mma_m16n8k16", max_examples=3)

    def float64_then_round(A, B, C):  # one rounding of the exact sum: not what sm_80 computes
        return (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)

    with pytest.raises(KernelMismatch):
        check_kernel(float64_then_round, "mma_m16n8k16", max_examples=30)


def test_the_format_is_inferred_from_parameter_names_or_refused():
    from refsim.errors import FormatRuleError
    from refsim.testing.harness import infer_format

    def gemv(x, qweight, lut):
        return None

    def mma(A, B, C):
        return None

    assert infer_format(gemv) == "anyprec"
    with pytest.raises(FormatRuleError, match=r"its parameters \(A, B, C\) fit \['mma_m16n8k16', 'mma_m16n8k16_f16', "
                                              r"'mma_s4'\]"):
        infer_format(mma)
    with pytest.raises(FormatRuleError, match="its parameters cannot be read"):
        infer_format(lambda *inputs: None)
    lines = []
    from refsim.emulator import anyprec_kernel as ek
    from refsim.testing import check_kernel

    def x_qweight_lut(x, qweight, lut):      # a K-split launch's slices added in ascending order
        return ek.anyprec_gemv_admissible(x, qweight, lut, qweight.shape[0]).reference

    res = check_kernel(x_qweight_lut, max_examples=0, seed=0, progress=lines.append)
    assert res.fmt == "anyprec" and "checking it as anyprec" in lines[0]
