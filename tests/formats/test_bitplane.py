"""Bitplane format: bit-identity with the official packer, inverses, prefixes, lookups, errors;
properties: pack/unpack/prefix hold for every legal (N, K, p) drawn, pack equals its plain loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import bitplane as bp
from refsim.testing import assert_bitexact, examples


# --- independent transliteration of the official packer -------------------------------------
# SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea,
# any_precision/quantization/pack.py: _process_layer_data -> _permute_bitmaps_int32.
# Re-expressed here as plain Python, step by step as the official code does it: packbits of each
# plane over the *flattened* (N*K) codes, reshape to (p, N, K/8), compute a destination index per
# byte (warp groups of 128 bytes, a shrunken tail warp, "^ 3" endianness change), gather with
# argsort(dest), reinterpret 4 bytes as a little-endian int32.
def _official_new_indices(byte_indices, threads_per_warp, offset=0):
    bytes_per_warp = threads_per_warp * 4
    out = []
    for b in byte_indices:
        warp_idx, within = divmod(b, bytes_per_warp)
        thread = b % threads_per_warp
        byte_in_thread = (within // threads_per_warp) ^ 3
        out.append(warp_idx * bytes_per_warp + thread * 4 + byte_in_thread + offset)
    return out


def _official_pack(codes: np.ndarray, p: int) -> np.ndarray:
    n, k = codes.shape
    flat = [int(v) for v in codes.reshape(-1)]
    bitarray = []
    mask = 1 << (p - 1)
    for _ in range(p):
        bits = [1 if v & mask else 0 for v in flat]
        plane_bytes = []
        for start in range(0, len(bits), 8):
            byte = 0
            for e, bit in enumerate(bits[start:start + 8]):
                byte |= bit << (7 - e)  # np.packbits: first element in the MSB
            plane_bytes.append(byte)
        bitarray.append(plane_bytes)
        mask >>= 1
    total_bytes = k // 8
    full = (total_bytes // 128) * 128
    new = _official_new_indices(range(full), 32)
    rem = total_bytes - full
    if rem:
        new += _official_new_indices(range(rem), rem // 4, offset=full)
    order = sorted(range(total_bytes), key=lambda i: new[i])  # argsort of a permutation
    out = np.zeros((p, n, k // 32), dtype=np.uint32)
    for j in range(p):
        for r in range(n):
            row = bitarray[j][r * total_bytes:(r + 1) * total_bytes]
            permuted = [row[i] for i in order]
            for w in range(k // 32):
                b0, b1, b2, b3 = permuted[4 * w:4 * w + 4]
                out[j, r, w] = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)  # little-endian view
    return out.view(np.int32)


@pytest.mark.parametrize("k", [32, 96, 1024, 1056, 1312, 2048, 2080])
@pytest.mark.parametrize("p", [3, 8])
def test_pack_is_bit_identical_to_official_packer(k, p):
    rng = np.random.default_rng(k * 10 + p)
    codes = rng.integers(0, 1 << p, size=(3, k), dtype=np.uint8)
    assert_bitexact(bp.pack(codes, p), _official_pack(codes, p), name=f"pack K={k} p={p}")


def test_pack_reproduces_the_worked_example_of_the_spec():
    # p = 4, K = 1024, row 0 word 0, derived by hand from the packer's bit order (module spec block)
    codes = np.zeros((1, 1024), dtype=np.uint8)
    codes[0, 0:8] = [3, 14, 4, 14, 6, 0, 13, 9]
    codes[0, 256:264] = [8, 1, 1, 6, 13, 15, 8, 6]
    codes[0, 512:520] = [10, 7, 13, 1, 12, 8, 2, 5]
    codes[0, 768:776] = [10, 5, 9, 9, 3, 6, 7, 12]
    words = bp.pack(codes, 4)[:, 0, 0].view(np.uint32)
    expected = np.array([0x538EACB1, 0x7A1D6947, 0xD815C28E, 0x836C717A], dtype=np.uint32)
    assert_bitexact(words, expected, name="worked example")


def test_tail_chunk_bytes_are_8_eff_weights_apart():
    # K = 1312: tail of 288 weights, eff = 9 lanes, byte stride 72 (spec §2)
    idx = bp.word_bit_to_weight(1312)
    lane0_tail = idx[32]
    firsts = [int(lane0_tail[31 - 8 * q]) for q in range(4)]
    assert firsts == [1024, 1096, 1168, 1240]
    # full chunk: 256 apart
    assert [int(idx[0][31 - 8 * q]) for q in range(4)] == [0, 256, 512, 768]


@pytest.mark.parametrize("k", [32, 288, 1024, 1312, 3104])
def test_layout_generators_agree_and_cover_every_weight_once(k):
    idx = bp.word_bit_to_weight(k)
    assert sorted(idx.reshape(-1).tolist()) == list(range(k))
    dest = bp.byte_permutation(k)
    assert sorted(dest.tolist()) == list(range(k // 8))
    # byte dest[b8] holds weights 8*b8..8*b8+7; its bit 7-e holds weight 8*b8+e
    for b8 in range(k // 8):
        w, byte_in_word = divmod(int(dest[b8]), 4)
        for e in range(8):
            assert idx[w, 8 * byte_in_word + 7 - e] == 8 * b8 + e


@pytest.mark.parametrize("k", [32, 1024, 1312, 3104])
def test_byte_permutation_generator_is_what_pack_applies(k):
    rng = np.random.default_rng(k)
    codes = rng.integers(0, 8, size=(2, k), dtype=np.uint8)
    msb = np.packbits((codes >> 2) & 1, axis=1)  # plane 0, packbits order
    expected = np.empty_like(msb)
    expected[:, bp.byte_permutation(k)] = msb
    assert_bitexact(bp.pack(codes, 3)[0].view(np.uint8), expected, name="plane 0 bytes")


@pytest.mark.parametrize("k", [32, 1024, 1312])
@pytest.mark.parametrize("p", bp.SUPPORTED_BITS)
def test_pack_and_unpack_match_their_plain_loop_references(k, p):
    rng = np.random.default_rng(p + k)
    codes = rng.integers(0, 1 << p, size=(2, k), dtype=np.uint8)
    q = bp.pack(codes, p)
    assert_bitexact(q, bp.pack_reference(codes, p), name="pack vs reference")
    for b in range(3, p + 1):
        assert_bitexact(bp.unpack(q, b), bp.unpack_reference(q, b), name=f"unpack b={b}")


def test_unpack_inverts_pack_for_every_code_and_every_prefix():
    # every 8-bit code appears at every position class of a chunk (tail included)
    k = 1312
    codes = ((np.arange(4 * k).reshape(4, k) * 37) % 256).astype(np.uint8)
    q = bp.pack(codes, 8)
    for b in range(3, 9):
        assert_bitexact(bp.unpack(q, b), codes >> (8 - b), name=f"prefix b={b}")
        assert_bitexact(bp.unpack(q[:b], b), codes >> (8 - b), name=f"truncated planes b={b}")
        assert_bitexact(bp.prefix_codes(codes, 8, b), codes >> (8 - b), name="prefix_codes")


def test_dequantize_is_a_per_row_table_lookup_and_matches_reference():
    rng = np.random.default_rng(1)
    n, k, p = 3, 1056, 6
    codes = rng.integers(0, 1 << p, size=(n, k), dtype=np.uint8)
    q = bp.pack(codes, p)
    for b in (3, 5, 6):
        lut = rng.standard_normal((n, 1 << b)).astype(np.float16)
        expected = np.stack([lut[r][codes[r] >> (p - b)] for r in range(n)])
        assert_bitexact(bp.dequantize(q, lut, b), expected, name=f"dequantize b={b}")
        assert_bitexact(bp.dequantize_reference(q, lut, b), expected, name="reference")


def test_inputs_are_not_modified():
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 16, size=(2, 1024), dtype=np.uint8)
    before = codes.copy()
    q = bp.pack(codes, 4)
    q_before = q.copy()
    lut = np.arange(32, dtype=np.float16).reshape(2, 16)
    bp.unpack(q)
    bp.dequantize(q, lut, 4)
    assert_bitexact(codes, before)
    assert_bitexact(q, q_before)


@pytest.mark.parametrize(
    "codes, bits, err, text",
    [
        (np.zeros((2, 64), np.uint8), 2, FormatRuleError, "bit-width"),
        (np.zeros((2, 64), np.uint8), 9, FormatRuleError, "bit-width"),
        (np.zeros((2, 48), np.uint8), 4, ShapeError, "multiple of 32"),
        (np.full((2, 64), 16, np.uint8), 4, FormatRuleError, "got 16"),
        (np.zeros((2, 64), np.int32), 4, DtypeError, "uint8"),
        (np.zeros((64,), np.uint8), 4, ShapeError, "2-D"),
    ],
)
def test_pack_rejects_bad_input_naming_the_rule(codes, bits, err, text):
    with pytest.raises(err, match=text):
        bp.pack(codes, bits)


def test_unpack_and_dequantize_reject_bad_input():
    q = bp.pack(np.zeros((2, 64), np.uint8), 4)
    with pytest.raises(FormatRuleError, match="must not exceed"):
        bp.unpack(q, 5)
    with pytest.raises(DtypeError, match="int32"):
        bp.unpack(q.view(np.uint32))
    with pytest.raises(ShapeError, match=r"\(2, 16\)"):
        bp.dequantize(q, np.zeros((2, 8), np.float16), 4)
    with pytest.raises(DtypeError, match="float16"):
        bp.dequantize(q, np.zeros((2, 16), np.float32), 4)
    bad = np.zeros((2, 16), np.float16)
    bad[1, 3] = np.inf
    with pytest.raises(NonFiniteError):
        bp.dequantize(q, bad, 4)


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def bitplane_problems(draw):
    """Legal problems only: K a multiple of 32 (tails included), p in the kernel's 3..8."""
    p = draw(st.sampled_from(bp.SUPPORTED_BITS))
    n = draw(st.integers(1, 4))
    k = 32 * draw(st.integers(1, 70))  # up to 2240: one or two chunks, any tail size
    seed = draw(st.integers(0, 2**32 - 1))
    codes = np.random.default_rng(seed).integers(0, 1 << p, size=(n, k), dtype=np.uint8)
    return codes, p


@settings(max_examples=examples(40))
@given(bitplane_problems())
@example((np.full((1, 32), 255, np.uint8), 8))  # smallest K, all ones: sign bit of the int32
@example((np.arange(1056, dtype=np.uint8).reshape(1, 1056) % 8, 3))  # one full chunk + tail of 32
def test_unpack_inverts_pack_and_every_prefix_reads_top_planes(problem):
    codes, p = problem
    q = bp.pack(codes, p)
    assert q.shape == (p, codes.shape[0], codes.shape[1] // 32)
    assert_bitexact(bp.unpack(q), codes, name="unpack(pack)")
    for b in range(3, p + 1):
        assert_bitexact(bp.unpack(q[:b]), codes >> (p - b), name=f"prefix {b}")


@settings(max_examples=examples(15))
@given(bitplane_problems())
def test_pack_matches_plain_loop_reference(problem):
    codes, p = problem
    codes = codes[:1, :1088] if codes.shape[1] > 1088 else codes[:1]
    assert_bitexact(bp.pack(codes, p), bp.pack_reference(codes, p), name="pack")
