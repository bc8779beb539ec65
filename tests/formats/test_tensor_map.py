"""Tests for refsim.formats.tensor_map: the driver's cuTensorMapEncodeTiled rules, the 128-byte
image (fields worked by hand from fmha_v2's cudaTmaDescTiled layout), and the box a tile load reads."""

import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import tensor_map as T
from refsim.testing import examples


def test_encode_writes_the_fmha_v2_fields_at_their_bytes():
    img = T.encode_tiled("float16", 0x7F00_0000_1000, (64, 100), (128,), (64, 32), (1, 1),
                         swizzle="128B", l2_promotion="128B", oob_fill="nan")
    assert len(img) == 128 and img[64:] == bytes(64)
    assert struct.unpack_from("<Q", img, 0)[0] == 0x7F00_0000_1000
    # common1: version 1 (bit 1) | rank-1 = 1 (bit 4) | F16 = 6 (bits 7-10) | 128B = 3 (bits 13-14)
    #          | NaN fill (bit 15) | L2 128B = 2 (bits 17-18)
    assert struct.unpack_from("<I", img, 8)[0] == 2 + 16 + (6 << 7) + (3 << 13) + (1 << 15) + (2 << 17)
    assert struct.unpack_from("<4I", img, 12) == (128 >> 4, 0, 0, 0)   # stride_lower
    assert struct.unpack_from("<I", img, 28)[0] == 0                    # stride_upper
    assert struct.unpack_from("<5I", img, 32) == (63, 99, 0, 0, 0)      # size - 1
    assert struct.unpack_from("<I", img, 52)[0] == 63 << 24             # box0 - 1, element strides 1
    assert struct.unpack_from("<I", img, 56)[0] == 31                   # box1 - 1


def test_format_codes_follow_fmha_not_the_driver_enum():
    # driver FLOAT64 = 8, BFLOAT16 = 9, FLOAT32_FTZ = 10; fmha F64_RN = 9, BF16_RN = 10, F32_FTZ_RN = 8
    def fmt(dt, box0):
        img = T.encode_tiled(dt, 0, (box0,), (), (box0,), (1,))
        c1 = struct.unpack_from("<I", img, 8)[0]
        return (c1 >> 7) & 0xF, (c1 >> 16) & 1
    assert fmt("float64", 2) == (9, 0)
    assert fmt("bfloat16", 8) == (10, 0)
    assert fmt("float32_ftz", 4) == (8, 0)
    assert fmt("tfloat32", 4) == (7, 1)
    assert fmt("tfloat32_ftz", 4) == (8, 1)


def test_a_stride_near_2_40_splits_into_lower_and_upper_words():
    s = (1 << 40) - 16  # >> 4 = 2**36 - 1: lower word all ones, upper nibble 0xF
    img = T.encode_tiled("uint8", 0, (16, 2, 2), (s, 16), (16, 1, 1), (1, 1, 1))
    assert struct.unpack_from("<4I", img, 12) == (0xFFFFFFFF, 1, 0, 0)
    assert struct.unpack_from("<I", img, 28)[0] == 0xF
    assert T.decode_tiled(img).global_strides == (s, 16)
    # element strides 3 bits each: (1, 1, 1) -> 0; box (16, 1, 1): box0 - 1 = 15 at bits 24-31
    assert struct.unpack_from("<I", img, 52)[0] == 15 << 24


_GOOD = dict(data_type="float16", global_address=0x1000, global_dims=(64, 100), global_strides=(128,),
             box_dims=(64, 32), element_strides=(1, 1))


@pytest.mark.parametrize("change, rule", [
    (dict(global_dims=()), "tensorRank"),
    (dict(global_dims=(8,) * 6, global_strides=(16,) * 5, box_dims=(8,) * 6, element_strides=(1,) * 6), "tensorRank"),
    (dict(interleave="16B"), ">= 3"),
    (dict(global_address=0x1008), "16-byte aligned"),
    (dict(global_dims=(64, 0)), "global_dims\\[1\\]"),
    (dict(global_dims=(64, (1 << 32) + 1)), "global_dims\\[1\\]"),
    (dict(global_strides=(136,)), "multiple of 16"),
    (dict(global_strides=(1 << 40,)), "global_strides\\[0\\]"),
    (dict(box_dims=(64, 257)), "box_dims\\[1\\]"),
    (dict(box_dims=(0, 32)), "box_dims\\[0\\]"),
    (dict(box_dims=(4, 32)), "multiple of 16 bytes"),          # 4 halves = 8 bytes
    (dict(element_strides=(1, 9)), "element_strides\\[1\\]"),
    (dict(element_strides=(0, 1)), "element_strides\\[0\\]"),
    (dict(swizzle="64B"), "<= 64 bytes"),                       # 64 halves = 128 bytes
    (dict(data_type="int32", oob_fill="nan", box_dims=(4, 32)), "floating-point"),
    (dict(data_type="16U4_ALIGN8B"), "must be one of"),
    (dict(swizzle="128B_ATOM_32B"), "must be one of"),
    (dict(global_strides=(128, 256)), "one per dimension"),
])
def test_driver_rules_are_named_errors(change, rule):
    with pytest.raises((FormatRuleError, ShapeError), match=rule):
        T.encode_tiled(**{**_GOOD, **change})


def test_interleave_32b_rules():
    base = dict(data_type="uint8", global_address=0x20, global_dims=(32, 4, 4), global_strides=(32, 128),
                box_dims=(32, 2, 2), element_strides=(1, 1, 1), interleave="32B", swizzle="32B")
    T.encode_tiled(**base)
    with pytest.raises(FormatRuleError, match="32-byte aligned"):
        T.encode_tiled(**{**base, "global_address": 0x30})
    with pytest.raises(FormatRuleError, match="multiple of 32"):
        T.encode_tiled(**{**base, "global_strides": (48, 128)})
    with pytest.raises(FormatRuleError, match="requires swizzle 32B"):
        T.encode_tiled(**{**base, "swizzle": "none"})


@pytest.mark.parametrize("patch", [
    lambda b: b[:64],                                   # wrong length
    lambda b: b[:8] + bytes([b[8] | 1]) + b[9:],        # im2col type bit
    lambda b: b[:8] + bytes([(b[8] & ~0xE) | 4]) + b[9:],  # version 2
    lambda b: b[:100] + b"\x01" + b[101:],              # reserved byte
    lambda b: b[:36] + b"\x05" + b[37:],                # size[1] of a rank-1 map
])
def test_decode_refuses_images_outside_the_layout(patch):
    img = T.encode_tiled("float32", 0x40, (100,), (), (32,), (1,))
    with pytest.raises((FormatRuleError, ShapeError)):
        T.decode_tiled(patch(img))


@st.composite
def maps(draw):
    dt = draw(st.sampled_from(sorted(T.DATA_TYPES)))
    e = T.DATA_TYPES[dt][1]
    rank = draw(st.integers(1, 5))
    dims = tuple(draw(st.integers(1, 1 << 32)) for _ in range(rank))
    strides = tuple(16 * draw(st.integers(0, (1 << 36) - 1)) for _ in range(rank - 1))
    box0 = (16 // e) * draw(st.integers(1, 256 * e // 16))
    swz = draw(st.sampled_from([s for s in T.SWIZZLES if s == "none" or box0 * e <= int(s[:-1])]))
    box = (box0,) + tuple(draw(st.integers(1, 256)) for _ in range(rank - 1))
    es = tuple(draw(st.integers(1, 8)) for _ in range(rank))
    oob = draw(st.sampled_from(T.OOB_FILLS if T.DATA_TYPES[dt][4] else ("zero",)))
    return T.TensorMap(dt, 16 * draw(st.integers(0, (1 << 60) - 1)), dims, strides, box, es, "none", swz,
                       draw(st.sampled_from(T.L2_PROMOTIONS)), oob)


@given(maps())
@settings(max_examples=examples(60))
def test_decode_inverts_encode(m):
    img = T.encode_tiled(m.data_type, m.global_address, m.global_dims, m.global_strides, m.box_dims,
                         m.element_strides, m.interleave, m.swizzle, m.l2_promotion, m.oob_fill)
    assert len(img) == 128
    assert T.decode_tiled(img) == m


# ---- tile_box ----------------------------------------------------------------------------------
def test_2d_box_partly_out_of_bounds_on_two_sides():
    g = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)  # dims (8, 6), row stride 32 bytes
    m = T.TensorMap("float32", 0, (8, 6), (32,), (4, 4), (1, 1))
    box = T.tile_box(g, m, (6, -2))  # rows -2..1, cols 6..9
    want = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [6, 7, 0, 0], [14, 15, 0, 0]], np.float32)
    assert box.dtype == np.float32 and np.array_equal(box.view(np.uint32), want.view(np.uint32))
    nan = T.tile_box(g, T.TensorMap("float32", 0, (8, 6), (32,), (4, 4), (1, 1), oob_fill="nan"), (6, -2))
    assert np.isnan(nan).tolist() == (want == 0).tolist() and nan[2, 1] == 7


def test_2d_box_honours_row_padding():
    g = np.arange(3 * 12, dtype=np.int32).reshape(3, 12)  # 8 used columns, row stride 48 bytes
    m = T.TensorMap("int32", 0, (8, 3), (48,), (8, 2), (1, 1))
    assert T.tile_box(g, m, (0, 1)).tolist() == [list(range(12, 20)), list(range(24, 32))]
    # the padding columns 8..11 are out of bounds, not read
    assert T.tile_box(g, T.TensorMap("int32", 0, (8, 3), (48,), (4, 1), (1, 1)), (6, 0)).tolist() == [[6, 7, 0, 0]]


def test_3d_box_partly_out_of_bounds():
    g = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)  # dims (4, 3, 2), strides (16, 48)
    m = T.TensorMap("int32", 0, (4, 3, 2), (16, 48), (4, 2, 2), (1, 1, 1))
    box = T.tile_box(g, m, (0, 2, -1))  # z -1..0, y 2..3, x 0..3
    assert box.shape == (2, 2, 4)
    assert box.tolist() == [[[0] * 4, [0] * 4], [[8, 9, 10, 11], [0] * 4]]


def test_element_strides_skip_rows_and_ignore_dim_0():
    g = np.arange(8 * 8, dtype=np.uint16).reshape(8, 8)
    m = T.TensorMap("uint16", 0, (8, 8), (16,), (8, 4), (2, 2))  # dim 0's stride 2 is ignored
    box = T.tile_box(g, m, (0, 1))  # rows 1, 3
    assert box.tolist() == [list(range(8, 16)), list(range(24, 32))]


def test_bfloat16_box_keeps_bits_and_nan_fills():
    g = np.array([[1.5, -2.0, 3.0, 0.25, 8.0, 9.0, 10.0, 11.0]], dtype=ml_dtypes.bfloat16)
    m = T.TensorMap("bfloat16", 0, (8, 1), (16,), (8, 2), (1, 1), oob_fill="nan")
    box = T.tile_box(g, m, (0, 0))
    assert box.dtype == ml_dtypes.bfloat16
    assert np.array_equal(box[0].view(np.uint16), g[0].view(np.uint16))
    assert np.isnan(box[1].astype(np.float32)).all()


@given(st.integers(0, 2**32 - 1), st.integers(-12, 12), st.integers(-12, 12), st.integers(1, 4))
@settings(max_examples=examples(40))
def test_tile_box_equals_a_plain_loop_over_drawn_corners(seed, x0, y0, ystep):
    g = np.random.default_rng(seed).integers(0, 2**16, (10, 16), dtype=np.uint16)  # dims (16, 10)
    m = T.TensorMap("uint16", 0, (16, 10), (32,), (8, 8), (1, ystep))
    box = T.tile_box(g, m, (x0, y0))
    n_y = -(-8 // ystep)
    assert box.shape == (n_y, 8)
    for j in range(n_y):
        for i in range(8):
            y, x = y0 + j * ystep, x0 + i
            assert box[j, i] == (g[y, x] if 0 <= y < 10 and 0 <= x < 16 else 0)


def test_tile_box_of_many_corners_equals_one_box_each():
    # corners in bounds, past each edge and mixed; 1-byte and 4-byte elements, an element stride of 2
    rng = np.random.default_rng(3)
    g8 = rng.integers(0, 256, (10, 32), dtype=np.uint8)
    g32 = rng.integers(0, 2**32, (10, 16), dtype=np.uint32)
    corners = np.array([[0, 0], [16, 2], [-4, 0], [24, 8], [3, -5], [0, 9]], np.int32)
    for g, m in ((g8, T.TensorMap("uint8", 0, (32, 10), (32,), (16, 4), (1, 1))),
                 (g32, T.TensorMap("uint32", 0, (16, 10), (64,), (8, 4), (1, 2)))):
        boxes = T.tile_box(g, m, corners)
        assert boxes.shape == (len(corners),) + T.tile_box(g, m, (0, 0)).shape
        for c, box in zip(corners, boxes):
            assert np.array_equal(box, T.tile_box(g, m, tuple(int(x) for x in c)))
    with pytest.raises(ShapeError, match="integer"):
        T.tile_box(g8, m, np.zeros((2, 3), np.int32))


def test_tile_box_rules():
    m = T.TensorMap("float32", 0, (8, 6), (32,), (4, 4), (1, 1))
    with pytest.raises(ShapeError, match="reach byte"):
        T.tile_box(np.zeros((5, 8), np.float32), m, (0, 0))
    with pytest.raises(ShapeError):
        T.tile_box(np.zeros((6, 8), np.float32), m, (0,))
    with pytest.raises(FormatRuleError):
        T.tile_box(np.zeros((6, 8), np.float32), m, (0, 1 << 31))
    with pytest.raises(FormatRuleError, match="not modelled"):
        T.tile_box(np.zeros((6, 8), np.float32), T.TensorMap("tfloat32", 0, (8, 6), (32,), (4, 4), (1, 1)), (0, 0))
    with pytest.raises(FormatRuleError):
        T.tile_box(np.zeros((6, 8), np.float32), "map", (0, 0))


def test_tile_box_refuses_object_arrays():
    m = T.TensorMap("float32", 0, (8, 6), (32,), (4, 4), (1, 1))
    with pytest.raises(DtypeError):
        T.tile_box(np.zeros((6, 8), object), m, (0, 0))
