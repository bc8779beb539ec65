"""refsim._validate: the shared validators, each with the rule and the value it names, the value it
hands back (Python scalars, the matching choice, native contiguous arrays) and the class it raises,
worked by hand. tests/test_validation_table.py checks that public functions route through them."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import _validate as V
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError


def test_require_int_and_require_ints_hand_back_python_ints():
    got = V.require_int("n", np.uint8(200))
    assert got == 200 and type(got) is int
    assert V.require_ints(m=np.int64(3), k=7) == (3, 7)
    with pytest.raises(FormatRuleError, match=r"^n: must be an integer; got True$"):
        V.require_int("n", True)
    with pytest.raises(FormatRuleError, match=r"^n: must be >= 1; got 0$"):
        V.require_int("n", 0, minimum=1)
    with pytest.raises(FormatRuleError, match=r"^k: must be >= 1; got -2$"):
        V.require_ints(m=1, k=-2)


def test_require_real_gives_a_float_and_refuses_non_finite_unless_allowed():
    assert V.require_real("x", np.float16(0.5)) == 0.5 and type(V.require_real("x", 3)) is float
    with pytest.raises(NonFiniteError, match=r"^x: must be finite; got nan$"):
        V.require_real("x", float("nan"))
    assert V.require_real("x", float("inf"), finite=False) == float("inf")
    with pytest.raises(FormatRuleError, match=r"^x: must be a real number; got np.True_$|^x: must be a real number; got True$"):
        V.require_real("x", np.bool_(True))


def test_require_choice_returns_the_choice_itself_and_lists_them_on_refusal():
    got = V.require_choice("mode", np.str_("rn"), ("rn", "rz"))
    assert got == "rn" and type(got) is str
    with pytest.raises(FormatRuleError, match=r"^mode: must be one of \['rn', 'rz'\]; got 'rm'$"):
        V.require_choice("mode", "rm", ("rn", "rz"))
    with pytest.raises(FormatRuleError, match=r"must be one of"):
        V.require_choice("mode", ["rn"], ("rn", "rz"))                   # unhashable: never a choice
    with pytest.raises(FormatRuleError, match=r"must be one of"):
        V.require_choice("flag", True, (1, 0))                           # a bool is not the int 1


def test_require_bits_and_require_codes_name_the_rule():
    assert V.require_bits(np.int8(4), (2, 3, 4, 8)) == 4
    with pytest.raises(FormatRuleError, match=r"^bits: bit-width must be one of \[2, 3, 4, 8\]; got 5$"):
        V.require_bits(5, (2, 3, 4, 8))
    q = np.array([0, 7, 3], np.int16)
    assert V.require_codes("q", q, 3) is q
    with pytest.raises(FormatRuleError, match=r"^q: 3-bit codes must lie in \[0, 7\]; got 8$"):
        V.require_codes("q", np.array([0, 8], np.uint8), 3)
    with pytest.raises(FormatRuleError, match=r"^q: 3-bit codes must lie in \[0, 7\]; got -1$"):
        V.require_codes("q", np.array([5, -1], np.int8), 3)


def test_group_size_rules():
    assert V.require_group_size(None, 96) is None and V.require_group_size(32, 96) == 32
    with pytest.raises(ShapeError, match=r"^group_size: must divide K=96; got 64$"):
        V.require_group_size(64, 96)
    with pytest.raises(FormatRuleError, match=r"^group_size: must be None or one of \[64, 128\]; got 32$"):
        V.require_group_size(32, 128, allowed=(64, 128))
    assert V.require_group_128(np.int32(128), "marlin") == 128
    with pytest.raises(FormatRuleError, match=r"^group_size: marlin supports only 128 or None \(per-channel\); got 64$"):
        V.require_group_128(64, "marlin")


def test_divisibility_and_resource_bounds():
    assert V.require_divisible("K", 256, 128) == 256
    with pytest.raises(ShapeError, match=r"^K: must be a positive multiple of 128; got 0$"):
        V.require_divisible("K", 0, 128)
    with pytest.raises(ShapeError, match=r"^K: tiles of 16; got 20$"):
        V.require_divisible("K", 20, 16, "tiles of 16")
    assert V.require_bounded("n", V.MAX_ELEMENTS) == 2**31 - 1
    with pytest.raises(FormatRuleError, match=r"^n: size must be <= 2147483647 for a reference implementation; "
                       r"got 2147483648$"):
        V.require_bounded("n", 2**31)


def test_require_words_checks_dtype_rank_and_shape_with_any_entries():
    w = np.zeros((4, 8), np.uint32)
    assert V.require_words("qweight", w, (None, 8)) is w
    with pytest.raises(ShapeError, match=r"^qweight: shape must be \(any, 16\); got \(4, 8\)$"):
        V.require_words("qweight", w, (None, 16))
    with pytest.raises(DtypeError, match="qweight"):
        V.require_words("qweight", w.astype(np.int64))


def test_require_finite_names_the_count_and_the_first_bad_index():
    x = np.array([[1.0, np.inf], [np.nan, 2.0]], np.float32)
    with pytest.raises(NonFiniteError, match=r"^x: must be finite \(no NaN/Inf\); got 2 non-finite value\(s\), "
                       r"first .*inf.* at index \(0, 1\)$"):
        V.require_finite("x", x)
    ints = np.array([1, 2])
    assert V.require_finite("x", ints) is ints


def test_native_contiguous_copies_only_when_it_must():
    a = np.arange(6, dtype=np.int32)
    assert V.native_contiguous(a) is a
    big = np.arange(6, dtype=">i4")[::2]
    got = V.native_contiguous(big)
    assert got.dtype.isnative and got.flags.c_contiguous and got.tolist() == [0, 2, 4]
    assert V.native_contiguous(a, np.float32).dtype == np.float32


def _unaligned(x: np.ndarray) -> np.ndarray:
    """``x``'s values in a C-contiguous array starting one byte past an aligned address."""
    raw = np.zeros(x.nbytes + 1, np.uint8)
    out = raw[1:].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def _read_only(x: np.ndarray) -> np.ndarray:
    out = np.asfortranarray(x)
    out.flags.writeable = False
    return out


@pytest.mark.parametrize("variant", [
    np.asfortranarray,
    lambda x: np.broadcast_to(x[:1], x.shape),              # zero stride on the rows
    lambda x: np.broadcast_to(x[0], (1, x.shape[1])),        # zero stride on a length-1 axis
    lambda x: x.astype(">f8"),
    _unaligned,
    _read_only,
    lambda x: x[:, 1:2],                                    # C-contiguous, stray row stride
    lambda x: np.flip(x),
    lambda x: x.view(np.matrix),
], ids=["fortran", "zero-stride", "zero-stride-length-1", "big-endian", "unaligned", "read-only fortran",
        "one-column slice", "negative strides", "subclass"])
def test_native_contiguous_hands_blas_a_canonical_copy_of_every_layout(variant):
    x = np.arange(12, dtype=np.float64).reshape(3, 4) * 0.1
    v = variant(x)
    before = v.copy()
    flags = (v.flags.writeable, v.strides, v.dtype.str)
    got = V.native_contiguous(v)
    assert type(got) is np.ndarray and got.dtype == np.dtype("=f8") and got.dtype.isnative
    assert got.flags.c_contiguous and got.flags.aligned
    assert got.strides == np.empty(got.shape, np.float64).strides      # C strides, no zero or stray ones
    assert got.tobytes() == np.ascontiguousarray(np.asarray(v, np.float64)).tobytes()  # same values, bit for bit
    assert (v.flags.writeable, v.strides, v.dtype.str) == flags and np.array_equal(v, before)  # untouched
    as32 = V.native_contiguous(v, np.float32)
    assert as32.dtype == np.float32 and as32.flags.c_contiguous and as32.flags.aligned


def test_native_contiguous_converts_dtype_and_keeps_empty_arrays():
    got = V.native_contiguous(np.asfortranarray(np.ones((2, 3), np.float16)), ">f4")
    assert got.dtype == np.dtype("=f4") and got.flags.c_contiguous and got.tolist() == [[1.0] * 3] * 2
    empty = np.zeros((0, 3))
    assert V.native_contiguous(empty) is empty
    assert V.c_strides((2, 3, 4), 8) == (96, 32, 8) and V.c_strides((5, 1), 4) == (4, 4)


def test_read_utf8_text_names_the_line_of_a_binary_byte(tmp_path):
    from refsim._validate import read_utf8_text
    from refsim.errors import FormatRuleError

    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbfa,b\r\n1,2\n")
    assert read_utf8_text(path) == "a,b\r\n1,2\n"                    # BOM dropped, tab/CR/LF kept
    path.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n3,\xc3\x28\n")           # an invalid 2-byte sequence on line 3
    with pytest.raises(FormatRuleError, match=r"t.csv:3: must be UTF-8 text; got byte 0xc3 \(offset 13 of the file\)"):
        read_utf8_text(path)
    path.write_bytes(b"a\n\n\x1b[0m\n")
    with pytest.raises(FormatRuleError, match=r"t.csv:3: must be text \(no control characters\); got byte 0x1b"):
        read_utf8_text(path)
