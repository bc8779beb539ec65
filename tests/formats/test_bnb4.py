"""bitsandbytes NF4/FP4: goldens made by bitsandbytes 0.50.2 itself (tests/formats/data/bnb4_goldens.npz,
see its README) reproduced bit for bit (codes, absmax, double quantization, dequantized fp32/fp16/bf16);
hand-worked blocks; the CUDA decision trees beside the CPU midpoints; plain references equal the fast
paths on drawn inputs; bad input refused by name."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import bnb4
from refsim.testing import assert_bitexact, examples

GOLDENS = np.load(Path(__file__).parent / "data" / "bnb4_goldens.npz")
CASES = sorted({k.split(".")[0] for k in GOLDENS.files if "." in k})
F32 = np.float32


def _golden_record(name: str) -> bnb4.BnB4:
    g = {k.split(".", 1)[1]: GOLDENS[k] for k in GOLDENS.files if k.startswith(name + ".")}
    blocksize, kind, dq = (int(v) for v in g["meta"])
    shape, kind = tuple(g["x"].shape), bnb4.KINDS[kind]
    if dq:
        return bnb4.BnB4(g["packed"], None, shape, kind, blocksize, "cpu", g["qabsmax"], g["absmax2"], g["code2"],
                         float(g["offset"]))
    return bnb4.BnB4(g["packed"], g["absmax"], shape, kind, blocksize)


def test_goldens_cover_both_kinds_blocksizes_double_quant_and_odd_counts():
    metas = [tuple(GOLDENS[c + ".meta"]) for c in CASES]
    assert {m[1] for m in metas} == {0, 1} and {m[0] for m in metas} >= {32, 64, 128, 4096}
    assert any(m[2] for m in metas) and any(GOLDENS[c + ".x"].size % 2 for c in CASES)
    # a partial last block of midpoints (the CPU kernel divides it by absmax instead of multiplying)
    assert {"nf4_partial", "fp4_partial"} <= set(CASES)
    assert "bitsandbytes 0.50.2" in str(GOLDENS["versions"])


def test_code_tables_and_dynamic_map_equal_the_librarys():
    assert_bitexact(bnb4.code_table("nf4"), GOLDENS["nf4_code"], name="nf4 table")
    assert_bitexact(bnb4.code_table("fp4"), GOLDENS["fp4_code"], name="fp4 table")
    assert_bitexact(bnb4.dynamic_map(), GOLDENS["dynamic_map"], name="create_dynamic_map()")


@pytest.mark.parametrize("name", CASES)
def test_quantize_equals_bitsandbytes_bit_for_bit(name):
    blocksize, kind, dq = (int(v) for v in GOLDENS[name + ".meta"])
    r = bnb4.quantize(GOLDENS[name + ".x"], bnb4.KINDS[kind], blocksize, bool(dq))
    assert_bitexact(r.packed, GOLDENS[name + ".packed"], name="packed")
    if dq:
        assert_bitexact(r.qabsmax, GOLDENS[name + ".qabsmax"], name="qabsmax")
        assert_bitexact(r.absmax2, GOLDENS[name + ".absmax2"], name="absmax2")
        assert_bitexact(r.code2, GOLDENS[name + ".code2"], name="code2")
        assert_bitexact(np.array(r.offset, F32), GOLDENS[name + ".offset"], name="offset")
    else:
        assert_bitexact(r.absmax, GOLDENS[name + ".absmax"], name="absmax")


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("tag,dtype", [("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_dequantize_equals_bitsandbytes_bit_for_bit(name, tag, dtype):
    out = bnb4.dequantize(_golden_record(name), dtype)
    want = GOLDENS[f"{name}.{tag}"]
    assert out.dtype == np.dtype(dtype) and out.shape == want.shape
    assert_bitexact(out.view(np.uint16 if tag != "f32" else np.uint32), want.view(out.view(
        np.uint16 if tag != "f32" else np.uint32).dtype), name=f"dequantize {tag}")


def test_one_nf4_block_worked_by_hand():
    x = np.zeros(32, F32)
    x[:4] = [2.0, -1.0, 0.08, 0.0]          # absmax 2: s = 1.0, -0.5, 0.04, 0.0
    r = bnb4.quantize(x, "nf4", 32)
    # 1.0 -> 15; -0.5 in (-0.61063, -0.46000] -> 2; 0.04 > 0.039790 (the 7/8 midpoint) -> 8; 0 -> 7
    assert list(r.packed[:3]) == [0xF2, 0x87, 0x77]
    assert r.absmax.tolist() == [2.0]
    y = bnb4.dequantize(r)
    t = bnb4.code_table("nf4")
    assert y[:4].tolist() == [2.0, float(t[2] * F32(2)), float(t[8] * F32(2)), 0.0]
    assert float(t[2]) == pytest.approx(-0.5250730514526367, abs=0) and y[1] == F32(-1.0501461)


def test_a_value_on_a_midpoint_takes_the_lower_entry_in_both_kernels():
    mid = (bnb4.code_table("nf4")[7] + bnb4.code_table("nf4")[8]) / F32(2)     # 0.0397901...
    x = np.array([1.0, mid, np.nextafter(mid, F32(1))] + [0.0] * 29, F32)     # absmax 1: s = x
    for kernel in bnb4.KERNELS:
        codes = bnb4.unpack(bnb4.quantize(x, "nf4", 32, kernel=kernel).packed)
        assert codes[:3].tolist() == [15, 7, 8]


def test_fp4_cpu_and_cuda_differ_where_their_thresholds_differ():
    # CPU midpoint 7/12 (0.58333337) vs the CUDA tree's 0.583333f: a value between takes different codes
    s = F32(0.58333325)
    assert F32(0.583333) < s <= (F32(8) / F32(12) + F32(6) / F32(12)) / F32(2)
    x = np.array([1.0, s, -s, 1e-4, -1e-4, 0.0] + [0.0] * 26, F32)
    cpu = bnb4.unpack(bnb4.quantize(x, "fp4", 32, kernel="cpu").packed)[:6]
    cuda = bnb4.unpack(bnb4.quantize(x, "fp4", 32, kernel="cuda").packed)[:6]
    # codes: 0.5 = 5, 0.6667 = 2; tiny positive: CPU's second +0 (code 8), CUDA's +0 (0); tiny negative:
    # CPU +0 (0, the first zero in sorted order), CUDA the sign bit (8)
    assert cpu.tolist() == [3, 5, 13, 8, 0, 0]
    assert cuda.tolist() == [3, 2, 10, 0, 8, 0]


def test_a_block_of_zeros_codes_zero_on_the_cpu_and_nan_code_0_on_cuda():
    x = np.zeros(64, F32)
    assert set(bnb4.unpack(bnb4.quantize(x, "nf4").packed)) == {7}
    cuda = bnb4.quantize(x, "nf4", kernel="cuda")
    assert set(bnb4.unpack(cuda.packed)) == {0}
    y = bnb4.dequantize(cuda)
    assert np.all(y == 0) and np.all(np.signbit(y))              # -1.0 * 0 = -0.0


def test_fp4_code_8_reads_as_negative_zero():
    r = bnb4.BnB4(np.array([0x80], np.uint8), np.array([3.0], F32), (2,), "fp4", 32)
    y = bnb4.dequantize(r)
    assert y.tolist() == [0.0, 0.0] and bool(np.signbit(y[0])) and not np.signbit(y[1])


def test_odd_count_pads_one_nibble_with_the_code_of_zero():
    for kind, pad in (("nf4", 7), ("fp4", 0)):
        r = bnb4.quantize(np.array([1.0, -1.0, 0.5], F32), kind, 32)
        assert r.packed.size == 2 and r.packed[1] & 15 == pad


def test_nested_lut_takes_the_bin_centre_not_the_value():
    # a value just nearer entry 108 than 107 of the dynamic map, whose 65536-bin bin centre is nearer 107
    code, lut = bnb4.dynamic_map(), bnb4.nested_lut()
    u = F32(-0.0032382396)
    assert abs(u - code[108]) < abs(u - code[107])
    i = int(np.trunc(F32((float((u + F32(1)) * F32(0.5)) * 65535.0) + 0.5)))
    assert lut[i] == 107
    assert lut[0] == 0 and lut[65535] == 255 and np.all(np.diff(lut.astype(int)) >= 0)


def test_double_quant_reads_back_offset_plus_scaled_code():
    w = (np.random.default_rng(3).standard_normal((40, 64)) * np.linspace(0.1, 3, 40)[:, None]).astype(F32)
    r = bnb4.quantize(w, "nf4", 64, double_quant=True)
    plain = bnb4.quantize(w, "nf4", 64)
    assert r.absmax is None and r.qabsmax.shape == (40,) and r.absmax2.shape == (1,)
    back = r.block_absmax()
    assert_bitexact(back, (r.code2[r.qabsmax] * r.absmax2[0]).astype(F32) + F32(r.offset), name="absmax")
    assert np.max(np.abs(back - plain.absmax)) <= np.max(np.abs(np.diff(r.code2))) * r.absmax2[0]
    assert_bitexact(r.packed, plain.packed, name="codes do not depend on double quantization")


def test_torch_mean_model_sums_lanes_then_tail():
    x = np.array([1e8, 1.0, -1e8, 1.0, 0, 0, 0, 0, 3.0], F32)  # 8 lanes + a tail of one
    # torch: total = 3 (the tail) + 1e8 (lane 0: the 3 is lost) + 1 (lost) - 1e8 + 1 = 1, mean 1/9
    # (torch 2.13 prints 0.1111111119389534); an exact sum would give 5/9
    assert bnb4._torch_mean_f32(x) == F32(1) / F32(9)


# ---- properties ------------------------------------------------------------------------------
@st.composite
def problems(draw):
    kind = draw(st.sampled_from(bnb4.KINDS))
    kernel = draw(st.sampled_from(bnb4.KERNELS))
    blocksize = draw(st.sampled_from((32, 64, 128)))
    n = draw(st.integers(1, 300))
    dq = kernel == "cpu" and draw(st.booleans())
    scale = draw(st.sampled_from((1e-39, 1e-3, 1.0, 1e4)))
    dtype = draw(st.sampled_from((np.float16, np.float32)))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(n) * scale).astype(dtype)
    if n > 3 and draw(st.booleans()):
        w[: n // 2] = 0                                    # a zero run (often whole blocks)
    return w, kind, blocksize, dq, kernel


@settings(max_examples=examples(25), deadline=None)
@given(problems())
@example((np.zeros(1, np.float16), "nf4", 32, False, "cuda"))  # the padding nibble of a zero block: NaN, code 0
def test_quantize_and_dequantize_equal_their_plain_references(problem):
    w, kind, blocksize, dq, kernel = problem
    a = bnb4.quantize(w, kind, blocksize, dq, kernel)
    b = bnb4.quantize_reference(w, kind, blocksize, dq, kernel)
    for f in ("packed", "absmax", "qabsmax", "absmax2", "code2"):
        if getattr(a, f) is not None or getattr(b, f) is not None:
            assert_bitexact(getattr(a, f), getattr(b, f), name=f)
    assert a.offset == b.offset or (a.offset is None and b.offset is None)
    for dt in (np.float32, ml_dtypes.bfloat16):
        assert_bitexact(bnb4.dequantize(a, dt).view(np.uint8), bnb4.dequantize_reference(a, dt).view(np.uint8),
                        name="dequantize")


@settings(max_examples=examples(25))
@given(st.integers(1, 64), st.integers(0, 2**31 - 1))
def test_unpack_inverts_pack(half, seed):
    codes = np.random.default_rng(seed).integers(0, 16, 2 * half).astype(np.uint8)
    assert_bitexact(bnb4.unpack(bnb4.pack(codes)), codes, name="codes")


# ---- refusals ---------------------------------------------------------------------------------
def test_bad_input_is_refused_by_name():
    w = np.ones(64, F32)
    with pytest.raises(FormatRuleError, match="blocksize"):
        bnb4.quantize(w, "nf4", 48)
    with pytest.raises(FormatRuleError, match="kind"):
        bnb4.quantize(w, "int4")
    with pytest.raises(DtypeError, match="w: dtype"):
        bnb4.quantize(w.astype(np.float64))
    with pytest.raises(NonFiniteError, match="w"):
        bnb4.quantize(np.full(64, np.inf, F32))
    with pytest.raises(ShapeError, match="w"):
        bnb4.quantize(np.zeros(0, F32))
    with pytest.raises(FormatRuleError, match="double_quant"):
        bnb4.quantize(w, double_quant=True, kernel="cuda")
    with pytest.raises(ShapeError, match="packed"):
        bnb4.BnB4(np.zeros(3, np.uint8), np.ones(1, F32), (64,), "nf4", 64)
    with pytest.raises(ShapeError, match="absmax"):
        bnb4.BnB4(np.zeros(32, np.uint8), np.ones(2, F32), (64,), "nf4", 64)
    with pytest.raises(FormatRuleError, match="qabsmax"):
        bnb4.BnB4(np.zeros(32, np.uint8), None, (64,), "nf4", 64)
    with pytest.raises(ShapeError, match="codes"):
        bnb4.pack(np.zeros(3, np.uint8))
    with pytest.raises(FormatRuleError, match="4-bit"):
        bnb4.pack(np.array([16, 0], np.uint8))
    with pytest.raises(DtypeError, match="dtype"):
        bnb4.dequantize(bnb4.quantize(w), np.float64)
