"""Tests for refsim.formats.smem_layouts: the wgmma matrix descriptor, the swizzles, the canonical
operand layouts. Expected values are worked by hand from the module spec (bits and offsets written
out in the comments), never computed by the code under test."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import smem_layouts as L
from refsim.testing import examples


# ---- descriptor --------------------------------------------------------------------------------
def test_encode_places_each_field_at_its_bits():
    # start 0x400 >> 4 = 0x40 (bits 0-13), LBO 16 >> 4 = 1 (bit 16), SBO 1024 >> 4 = 0x40 (bits 32-45),
    # swizzle 128B = 1 (bit 62)
    assert L.encode_descriptor(0x400, 16, 1024, 0, "128B") == 0x4000_0040_0001_0040
    # every field full: 0x3FFF three times, base 7 at bits 49-51, 32B = 3 at bits 62-63
    assert L.encode_descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, 7, "32B") == 0xC00E_3FFF_3FFF_3FFF
    assert L.encode_descriptor(0, 0, 0, 0, "64B") == 2 << 62
    assert L.encode_descriptor(0, 0, 0) == 0


def test_decode_inverts_encode_on_hand_words():
    d = L.decode_descriptor(0x4000_0040_0001_0040)
    assert (d.start_address, d.leading_byte_offset, d.stride_byte_offset, d.base_offset, d.swizzle) == \
        (0x400, 16, 1024, 0, "128B")
    d = L.decode_descriptor(0xC00E_3FFF_3FFF_3FFF)
    assert (d.start_address, d.base_offset, d.swizzle) == (0x3FFF0, 7, "32B")
    assert int(d) == 0xC00E_3FFF_3FFF_3FFF


@given(st.integers(0, 0x3FFF), st.integers(0, 0x3FFF), st.integers(0, 0x3FFF), st.integers(0, 7),
       st.sampled_from(L.SWIZZLE_MODES))
@settings(max_examples=examples(60))
def test_decode_encode_round_trip(a, lbo, sbo, base, mode):
    word = L.encode_descriptor(a * 16, lbo * 16, sbo * 16, base, mode)
    assert 0 <= word < 2**64
    assert L.decode_descriptor(word) == L.MatrixDescriptor(a * 16, lbo * 16, sbo * 16, base, mode)


@pytest.mark.parametrize("args, rule", [
    ((8, 16, 16), "multiple of 16"),            # start address not 16-byte aligned
    ((1 << 18, 16, 16), "below 2\\*\\*18"),     # start address beyond 14 bits after >> 4
    ((0, 1 << 18, 16), "below 2\\*\\*18"),      # LBO too large
    ((0, 16, 24), "multiple of 16"),            # SBO not a multiple of 16
    ((0, 16, 16, 8), "\\[0, 7\\]"),             # base offset has 3 bits
    ((0, 16, 16, 0, "16B"), "must be one of"),  # no such swizzle
    ((-16, 16, 16), ">= 0"),
])
def test_encode_refuses_values_that_do_not_fit(args, rule):
    with pytest.raises(FormatRuleError, match=rule):
        L.encode_descriptor(*args)


@pytest.mark.parametrize("word", [1 << 14, 1 << 30, 1 << 46, 1 << 48, 1 << 52, 1 << 61, 1 << 64, -1])
def test_decode_refuses_reserved_bits_and_out_of_range_words(word):
    with pytest.raises(FormatRuleError):
        L.decode_descriptor(word)


# ---- swizzle -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, a, want", [
    ("128B", 0x080, 0x090),   # line 1, chunk 0 -> chunk 1
    ("128B", 0x3F0, 0x380),   # line 7, chunk 7 -> chunk 0
    ("128B", 0x2A5, 0x2A5 ^ (5 << 4)),  # bits 7-9 = 5 flip bits 4-6
    ("64B", 0x080, 0x090),
    ("64B", 0x180, 0x1B0),    # line 3 -> chunk 0 ^ 3
    ("64B", 0x200, 0x200),    # line 4: 4 mod 4 = 0
    ("64B", 0x0F0, 0x0E0),    # line 1, chunk 7 = 0b111: bits 4-5 (0b11) ^ bits 7-8 (0b01) -> chunk 6
    ("32B", 0x080, 0x090),
    ("32B", 0x090, 0x080),
    ("32B", 0x100, 0x100),    # line 2: 2 mod 2 = 0
    ("none", 0x3F0, 0x3F0),
])
def test_swizzle_hand_examples(mode, a, want):
    assert L.swizzle(a, mode) == want
    assert L.swizzle_reference(a, mode) == want


@pytest.mark.parametrize("mode", L.SWIZZLE_MODES)
def test_swizzle_equals_its_reference_and_is_an_involution_on_every_address_below_4096(mode):
    a = np.arange(4096)
    fast = L.swizzle(a, mode)
    assert fast.tolist() == [L.swizzle_reference(int(x), mode) for x in a]
    assert np.array_equal(L.swizzle(fast, mode), a)
    # each 1024-byte pattern maps onto itself, byte order inside a 16-byte chunk is kept
    assert np.array_equal(fast // 1024, a // 1024) and np.array_equal(fast % 16, a % 16)


def test_swizzle_refuses_addresses_outside_the_shared_window():
    with pytest.raises(FormatRuleError):
        L.swizzle(1 << 18, "128B")
    with pytest.raises(FormatRuleError):
        L.swizzle(np.array([-16]), "32B")
    with pytest.raises(FormatRuleError):
        L.swizzle(np.array([0.5]), "32B")


# ---- canonical layouts: which byte holds element (r, c) ----------------------------------------
def test_8x8_f16_core_matrix_is_eight_16_byte_rows():
    d = L.encode_descriptor(0, 128, 256)
    addr = L.matrix_addresses(d, 8, 8, np.float16, "K")
    r, c = np.mgrid[0:8, 0:8]
    assert np.array_equal(addr, 16 * r + 2 * c)


# (r, c) = (9, 10) and (5, 9) of a 64 x 16 f16 K-major tile (T = 8 halves per 16-byte chunk)
@pytest.mark.parametrize("mode, lbo, sbo, rc, want", [
    # none: (r%8)*16 + (r//8)*SBO + (c%8)*2 + (c//8)*LBO
    ("none", 128, 256, (9, 10), 16 + 256 + 4 + 128),
    ("none", 128, 256, (5, 9), 80 + 0 + 2 + 128),
    # 32B: (r%8)*32 + (r//8)*256 + 2c, then bit 4 ^= bit 7
    ("32B", 16, 256, (9, 10), 308),    # 308 = 0b1_0011_0100: bit 7 clear
    ("32B", 16, 256, (4, 0), 144),     # 128: bit 7 set flips bit 4
    ("32B", 16, 256, (5, 9), 162),     # 178 = 0b1011_0010 -> bit 4 cleared
    # 64B: (r%8)*64 + (r//8)*512 + 2c, then bits 4-5 ^= bits 7-8
    ("64B", 16, 512, (5, 9), 370),     # 338: bits 7-8 = 2, chunk 1 -> 3
    # 128B: (r%8)*128 + (r//8)*1024 + 2c, then bits 4-6 ^= bits 7-9
    ("128B", 16, 1024, (5, 9), 706),   # 658: line 5, chunk 1 -> 4
    ("128B", 16, 1024, (9, 10), 1156),  # 1172: line 9 % 8 = 1, chunk 1 -> 0
])
def test_64x16_f16_k_major_tile_in_each_swizzle_mode(mode, lbo, sbo, rc, want):
    addr = L.matrix_addresses(L.encode_descriptor(0, lbo, sbo, 0, mode), 64, 16, np.float16, "K")
    assert addr[rc] == want
    assert np.unique(addr).size == addr.size


@pytest.mark.parametrize("mode, lbo, sbo, rc, want", [
    # none: (mn%8)*2 + (mn//8)*SBO + (k%8)*16 + (k//8)*LBO
    ("none", 1024, 128, (9, 10), 2 + 128 + 32 + 1024),
    # 128B: (mn%8)*2 + (mn//8 % 8)*16 + (mn//64)*LBO + (k%8)*128 + (k//8)*SBO, then the XOR:
    # 2 + 16 + 256 + 1024 = 1298: line 10 % 8 = 2, chunk 1 -> 3
    ("128B", 1024, 1024, (9, 10), 1330),
    # 32B: (mn%8)*2 + (mn//8 % 2)*16 + (mn//16)*LBO + (k%8)*32 + (k//8)*SBO
    # = 2 + 0 + 2*256 + 64 + 1024 = 1602 = 0b110_0100_0010: bit 7 clear
    ("32B", 256, 1024, (33, 10), 1602),
])
def test_64x16_f16_mn_major_tile(mode, lbo, sbo, rc, want):
    addr = L.matrix_addresses(L.encode_descriptor(0, lbo, sbo, 0, mode), 64, 16, np.float16, "MN")
    assert addr[rc] == want


def test_a_k_step_inside_a_128b_row_reads_the_swizzled_columns():
    # CUTLASS advances the start address by 32 bytes per k-step of 16 halves inside a 128B row:
    # the XOR reads absolute address bits, so columns 16..31 of a 64-wide tile come back
    tile = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    d = L.encode_descriptor(0, 16, 1024, 0, "128B")
    smem = L.smem_from_matrix(tile, d, "K")
    step = L.encode_descriptor(32, 16, 1024, 0, "128B")
    assert np.array_equal(L.matrix_from_smem(smem, step, 64, 16, np.uint16, "K"), tile[:, 16:32])


def _packed(major, mode, rows, cols, e):
    """LBO, SBO of a densely packed canonical layout (core matrices / swizzle atoms back to back)."""
    t, w = 16 // e, {"none": 1, "32B": 2, "64B": 4, "128B": 8}[mode]
    if major == "K":
        return (128, 128 * (cols // t)) if mode == "none" else (16, 128 * w)
    if mode == "none":
        return 128 * (rows // t), 128
    return 128 * w, 128 * w * -(-rows // (t * w))


@st.composite
def operands(draw):
    major = draw(st.sampled_from(["K", "MN"]))
    mode = draw(st.sampled_from(L.SWIZZLE_MODES))
    dtype = draw(st.sampled_from([np.uint8, ml_dtypes.float8_e4m3fn, np.float16, ml_dtypes.bfloat16, np.float32]))
    e = np.dtype(dtype).itemsize
    t = 16 // e
    if major == "K":
        rows = 8 * draw(st.integers(1, 8))
        max_chunks = 8 if mode == "none" else {"32B": 2, "64B": 4, "128B": 8}[mode]
        cols = t * draw(st.integers(1, max_chunks))
    else:
        rows = t * draw(st.integers(1, 8))
        cols = 8 * draw(st.integers(1, 4))
    lbo, sbo = _packed(major, mode, rows, cols, e)
    start = 16 * draw(st.integers(0, 256))
    return major, mode, np.dtype(dtype), rows, cols, L.MatrixDescriptor(start, lbo, sbo, 0, mode)


@given(operands(), st.integers(0, 2**32 - 1))
@settings(max_examples=examples(40))
def test_matrix_from_smem_inverts_smem_from_matrix_and_equals_its_reference(op, seed):
    major, mode, dt, rows, cols, d = op
    bits = np.random.default_rng(seed).integers(0, 256, (rows, cols * dt.itemsize), dtype=np.uint8)
    m = bits.view(dt)  # (rows, cols) of every bit pattern
    smem = L.smem_from_matrix(m, d, major)
    back = L.matrix_from_smem(smem, d, rows, cols, dt, major)
    assert np.array_equal(back.view(np.uint8), m.view(np.uint8))
    # bytes outside the operand are untouched zeros; the reference reads the same bits from noise
    noise = np.random.default_rng(seed + 1).integers(0, 256, smem.size + 64, dtype=np.uint8)
    fast = L.matrix_from_smem(noise, d, rows, cols, dt, major)
    ref = L.matrix_from_smem_reference(noise, d, rows, cols, dt, major)
    assert np.array_equal(fast.view(np.uint8), ref.view(np.uint8))
    assert int(np.count_nonzero(smem)) <= m.nbytes


def test_operand_rules_are_named_errors():
    d = L.encode_descriptor(0, 16, 1024, 0, "128B")
    with pytest.raises(ShapeError, match="one 128-byte"):
        L.matrix_addresses(d, 64, 128, np.float16, "K")      # 256 bytes of K in one 128B row
    with pytest.raises(ShapeError, match="multiple of 8"):
        L.matrix_addresses(d, 12, 8, np.float16, "K")
    with pytest.raises(ShapeError, match="multiple of 8"):
        L.matrix_addresses(d, 8, 12, np.float16, "MN")
    with pytest.raises(FormatRuleError, match="base_offset"):
        L.matrix_addresses(L.encode_descriptor(0, 16, 1024, 1, "128B"), 8, 8, np.float16, "K")
    with pytest.raises(DtypeError):
        L.matrix_addresses(d, 8, 8, np.float64, "K")
    with pytest.raises(ShapeError, match="reads up to byte"):
        L.matrix_from_smem(np.zeros(100, np.uint8), d, 8, 8, np.float16, "K")
    with pytest.raises(FormatRuleError, match="two bytes"):
        L.smem_from_matrix(np.zeros((16, 8), np.float16), L.encode_descriptor(0, 0, 0), "K")  # SBO 0 overlaps
    with pytest.raises(FormatRuleError):
        L.matrix_from_smem(np.zeros(4096, np.uint8), 1.5, 8, 8, np.float16, "K")


def test_inputs_are_not_modified():
    m = np.arange(64, dtype=np.float16).reshape(8, 8)
    keep = m.copy()
    smem = L.smem_from_matrix(m, L.encode_descriptor(0, 128, 256), "K")
    smem_keep = smem.copy()
    L.matrix_from_smem(smem, L.encode_descriptor(0, 128, 256), 8, 8, np.float16, "K")
    assert np.array_equal(m, keep) and np.array_equal(smem, smem_keep)
