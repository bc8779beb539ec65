"""Results do not depend on memory layout or integer width.

The same values are fed as a C-order array, a Fortran-order array, a negative-stride view, a
read-only array and a big-endian array, and the integer parameters as Python ints and as NumPy
scalars of several widths; every variant must give identical bits (or the same named error).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refsim.arith import fp
from refsim.arith import tensor_core as tc
from refsim.formats import atom, awq, gptq, marlin, stripes, uniform
from refsim.formats import anyprec_plan
from refsim.quant import squeezellm


def layouts(x: np.ndarray) -> dict[str, np.ndarray]:
    """``x``'s values in five memory layouts (none shares memory with ``x``)."""
    ro = x.copy()
    ro.flags.writeable = False
    flipped = np.flip(x).copy()  # np.flip of it again: same values, negative strides on every axis
    variants = {
        "C": np.ascontiguousarray(x),
        "Fortran": np.asfortranarray(x),
        "negative strides": np.flip(flipped),
        "read-only": ro,
        "big-endian": x.astype(x.dtype.newbyteorder(">")) if x.dtype.itemsize > 1 else x.copy(),
    }
    for name, v in variants.items():
        assert np.array_equal(v, x), name
    return variants


def bits_of(result) -> bytes:
    """Every array in ``result`` (an array, tuple or dataclass of arrays) as one byte string."""
    if isinstance(result, np.ndarray):
        return result.dtype.str.encode() + str(result.shape).encode() + np.ascontiguousarray(result).tobytes()
    if isinstance(result, (tuple, list)):
        return b"|".join(bits_of(r) for r in result)
    if hasattr(result, "__dataclass_fields__"):
        return b"|".join(bits_of(getattr(result, f)) for f in result.__dataclass_fields__)
    return repr(result).encode()


def same_bits_in_every_layout(fn, x: np.ndarray, *rest):
    results = {name: bits_of(fn(v, *rest)) for name, v in layouts(x).items()}
    reference = results["C"]
    differ = [name for name, r in results.items() if r != reference]
    assert not differ, f"{getattr(fn, '__name__', fn)}: layouts {differ} differ from C order"


floats = st.integers(0, 2**32 - 1).map(lambda s: np.random.default_rng(s))


@settings(max_examples=15)
@given(floats, st.integers(1, 6), st.integers(1, 4))
def test_float_reductions_and_quantizers(rng, t, n8):
    k, n = 64, 8 * n8
    x = rng.standard_normal((16 * t, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    same_bits_in_every_layout(atom.hessian_statistic, x)
    same_bits_in_every_layout(lambda a: uniform.quantize(a, 4, granularity="group", group_size=32), w)
    same_bits_in_every_layout(lambda a: uniform.quantize(a, 3, scheme="gptq_sym"), w)
    same_bits_in_every_layout(lambda a: squeezellm.sort_rows(a, np.ones_like(w)), w)


@settings(max_examples=15)
@given(floats, st.integers(1, 4))
def test_packers(rng, n8):
    k, n = 64, 32 * n8
    q4 = rng.integers(0, 16, (k, n), dtype=np.uint8)
    q32 = q4.astype(np.int32)
    for q in (q4, q32):
        same_bits_in_every_layout(lambda a: gptq.pack_qweight(a, 4), q)
        same_bits_in_every_layout(awq.pack_columns, q)
    same_bits_in_every_layout(lambda a: gptq.pack_qweight(a, 3), q4 % 8)
    same_bits_in_every_layout(lambda a: gptq.unpack_qweight(a, 4, k), gptq.pack_qweight(q4, 4))
    qm = rng.integers(0, 16, (128, 256), dtype=np.uint8)
    s = (rng.random((1, 256)) + 0.5).astype(np.float16)
    same_bits_in_every_layout(lambda a: marlin.pack(a, s, None), qm)
    same_bits_in_every_layout(lambda a: marlin.pack(qm, a, None), s)


@settings(max_examples=15)
@given(floats)
def test_exact_fp_and_tensor_core(rng):
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)
    c = rng.standard_normal((4, 8)).astype(np.float32)
    same_bits_in_every_layout(lambda v: fp.f32_fma(v, b, c, fused=True), a)
    same_bits_in_every_layout(lambda v: fp.f32_add(a, v), b)
    L = tc.model("sm_80").block
    ah = rng.standard_normal((6, L)).astype(np.float16)
    bh = rng.standard_normal((6, L)).astype(np.float16)
    ch = rng.standard_normal(6).astype(np.float32)
    same_bits_in_every_layout(lambda v: tc.fdpa("sm_80", v, bh, ch, np.float32), ah)


INT_TYPES = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)


@pytest.mark.parametrize("int_type", INT_TYPES, ids=lambda t: t.__name__)
# (Python int is the reference each width is compared with)
def test_numpy_integer_scalars_give_the_python_int_result(int_type):
    # small values every width can hold; the results must not depend on the scalar's width
    # (np.uint8(16) * 16 wraps to 0 if a function keeps the narrow scalar)
    want = stripes.stripes(16, 256, 256, 8, None)
    wide = int_type if np.iinfo(int_type).max >= 256 else int
    assert stripes.stripes(int_type(16), wide(256), wide(256), int_type(8), None) == want
    assert anyprec_plan.lut_shared_bytes(int_type(3), int_type(1)) == anyprec_plan.lut_shared_bytes(3, 1)
    from refsim.formats import anyprec_memory
    shape = anyprec_memory.DecoderShape("x", int_type(64), int_type(100), int_type(2), int_type(100))
    big = anyprec_memory.DecoderShape("x", int_type(64), int_type(100), int_type(2), int_type(100))
    assert anyprec_memory.quantized_weight_count(big) == anyprec_memory.quantized_weight_count(
        anyprec_memory.DecoderShape("x", 64, 100, 2, 100)) > 0
    assert all(type(getattr(shape, f)) is int for f in ("hidden", "intermediate", "layers", "vocab"))
    assert shape == anyprec_memory.DecoderShape("x", 64, 100, 2, 100)


def test_big_endian_values_are_accepted_as_their_native_dtype():
    w = np.random.default_rng(0).standard_normal((64, 32)).astype(">f4")
    assert bits_of(uniform.quantize(w, 4)) == bits_of(uniform.quantize(w.astype("<f4"), 4))


def blas_argument_variants(x: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(variant, the C-order array with the same values) for the layouts that steer BLAS to another
    kernel or to NumPy's own loop: Fortran order, zero-stride rows (np.broadcast_to), big-endian."""
    rows = np.broadcast_to(x[:1], x.shape)
    return {"Fortran": (np.asfortranarray(x), x),
            "zero-stride": (rows, np.ascontiguousarray(rows)),
            "big-endian": (x.astype(x.dtype.newbyteorder(">")), x)}


def same_float_bits_per_argument(fn, args: list[np.ndarray]):
    """Each argument in turn replaced by each variant: ``fn``'s float has the bits of the C-order call."""
    for i, x in enumerate(args):
        for name, (variant, twin) in blas_argument_variants(x).items():
            got = np.float64(fn(*args[:i], variant, *args[i + 1:])).tobytes()
            want = np.float64(fn(*args[:i], twin, *args[i + 1:])).tobytes()
            assert got == want, f"{fn.__name__}: argument {i} {name}: {got.hex()} != C-order {want.hex()}"


def test_blas_metrics_give_the_c_order_bits_for_fortran_zero_stride_and_big_endian_arguments():
    """The two hostile-fuzz findings (an AVX-512 EPYC rounded ``X @ W`` differently when W was
    Fortran-ordered or a zero-stride view). On a CPU whose BLAS kernels agree these passed before the
    fix too; tests/test_blas_operands.py is the check that sees the dependence on every machine."""
    from refsim.io.quantize import relative_output_error
    from refsim.quant import atom as quant_atom
    from refsim.quant.gptq import layer_output_error

    rng = np.random.default_rng(7)
    X = rng.standard_normal((48, 64)).astype(np.float32)
    W = rng.standard_normal((64, 24)).astype(np.float32)
    W_hat = W + np.float32(0.01) * rng.standard_normal(W.shape).astype(np.float32)
    same_float_bits_per_argument(relative_output_error, [X, W, W_hat])
    same_float_bits_per_argument(layer_output_error, [X, W, W_hat])
    layer = quant_atom.quantize_layer(W, X, quant_atom.AtomConfig(keeper=16, group_size=16))

    def atom_error(W, X):
        return quant_atom.layer_output_error(layer, W, X)

    same_float_bits_per_argument(atom_error, [W, X])
