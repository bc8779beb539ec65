"""GGUF lattice types worked by hand: the grids as data (ggml-common.h's first entries, value sets, distinct
rows, the package's ksigns against the generator), an IQ2_XXS group, IQ2_XS's 9-bit index and 7-bit sign
index, IQ3_S's ninth index bit and explicit signs, IQ1_S's delta and IQ1_M's d spread over four scale
words; refusals. (The gguf package's goldens of every IQ type are checked through refsim.formats.gguf in
test_gguf.py; they are what ties the grids to ggml.)"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import gguf_iquants as I

F32 = np.float32


def f16(v: float) -> bytes:
    return np.float16(v).tobytes()


def word(row: np.ndarray) -> int:
    return int.from_bytes(row.astype(np.uint8).tobytes(), "little")


def test_grids_match_ggml_common_h_entries_and_value_sets():
    # first entries as ggml-common.h writes them (uint64 / uint32 little-endian)
    assert [word(r) for r in I.grid("IQ2_XXS")[:2]] == [0x0808080808080808, 0x080808080808082B]
    assert [word(r) for r in I.grid("IQ2_XS")[:2]] == [0x0808080808080808, 0x080808080808082B]
    assert [word(r) for r in I.grid("IQ3_XXS")[:2]] == [0x04040404, 0x04040414]
    assert word(I.grid("IQ3_S")[0]) == 0x01010101
    assert [word(r) for r in I.grid("IQ1_S")[:2]] == [0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFF01]
    sets = {"IQ2_XXS": {8, 25, 43}, "IQ2_XS": {8, 25, 43}, "IQ2_S": {8, 25, 43},
            "IQ3_XXS": {4, 12, 20, 28, 36, 44, 52, 62}, "IQ3_S": set(range(1, 16, 2)), "IQ1_S": {-1, 0, 1}}
    rows = {"IQ2_XXS": 256, "IQ2_XS": 512, "IQ2_S": 1024, "IQ3_XXS": 256, "IQ3_S": 512, "IQ1_S": 2048}
    for t, values in sets.items():
        g = I.grid(t)
        assert g.shape[0] == rows[t] and set(np.unique(g).tolist()) == values, t
        assert len(np.unique(g, axis=0)) == rows[t], t                  # distinct lattice points
        assert not g.flags.writeable
    assert I.grid("IQ1_M") is I.grid("IQ1_S")


def test_ksigns_generator_equals_the_gguf_package_table():
    with resources.as_file(resources.files("refsim.data").joinpath("gguf_iq_grids", "gguf_iq_grids.npz")) as p:
        stored = np.load(p)["ksigns"]
    assert I.ksigns().tolist() == stored.tolist()
    assert I.ksigns()[:8].tolist() == [0x00, 0x81, 0x82, 0x03, 0x84, 0x05, 0x06, 0x87]   # ggml-common.h


def test_one_iq2_xxs_group_worked_by_hand():
    aux0 = bytes([1, 0, 0, 0])                                  # group 0 -> grid row 1 (0x2b, then 0x08s)
    aux1 = (3 << 28 | 1).to_bytes(4, "little")                  # s = 3, group 0's sign index 1 -> ksigns 0x81
    b = np.frombuffer(f16(1.0) + aux0 + aux1 + bytes(56), np.uint8).reshape(1, 66)
    y = I.dequantize_blocks(b, "IQ2_XXS")[0]
    db = 3.5 * 0.25
    assert y[:8].tolist() == [-db * 43] + [db * 8] * 6 + [-db * 8]
    assert y[8] == db * 8


def test_iq2_xs_index_and_sign_fields():
    q = 5 | (3 << 9)                                            # grid row 5, sign index 3 (ksigns 0x03)
    b = np.frombuffer(f16(2.0) + q.to_bytes(2, "little") + bytes(62) + bytes([0x21]) + bytes(7), np.uint8)
    y = I.dequantize_blocks(b.reshape(1, 74), "IQ2_XS")[0]
    g = I.grid("IQ2_XS")[5].astype(F32)
    db = F32(2.0 * 1.5 * 0.25)                                  # low nibble 1 for values 0..15
    assert y[:8].tolist() == (db * g * np.array([-1, -1, 1, 1, 1, 1, 1, 1], F32)).tolist()
    assert y[16] == F32(2.0 * 2.5 * 0.25) * I.grid("IQ2_XS")[0, 0]   # high nibble 2 for values 16..31


def test_iq3_s_ninth_index_bit_and_explicit_signs():
    qs = bytes([7]) + bytes(63)
    qh = bytes([1]) + bytes(7)                                  # quad 0 reads row 256 + 7
    signs = bytes([0b0101]) + bytes(31)
    scales = bytes([2]) + bytes(3)                              # values 0..31: 1 + 2*2 = 5
    b = np.frombuffer(f16(0.5) + qs + qh + signs + scales, np.uint8).reshape(1, 110)
    y = I.dequantize_blocks(b, "IQ3_S")[0]
    g = I.grid("IQ3_S")[263].astype(F32)
    assert y[:4].tolist() == (F32(2.5) * g * np.array([-1, 1, -1, 1], F32)).tolist()


def test_iq1_s_delta_and_iq1_m_scattered_d():
    qh = (0x8000 | 2 << 12 | 1).to_bytes(2, "little")          # delta -1/8, s = 2 (dl = 5d), group 0 row 256 + 3
    b = np.frombuffer(f16(1.0) + bytes([3]) + bytes(31) + qh + bytes(14), np.uint8).reshape(1, 50)
    y = I.dequantize_blocks(b, "IQ1_S")[0]
    assert y[:8].tolist() == (F32(5) * (I.grid("IQ1_S")[259].astype(F32) - F32(0.125))).tolist()
    d = np.frombuffer(f16(0.25), "<u2")[0]                      # 0x3400: nibbles 0x4, 0x3, 0, 0 from the top
    words = [((int(d) >> 4 * k) & 15) << 12 for k in range(4)]  # word k's top nibble = d's nibble k
    words[0] |= 1                                               # values 0..15: s = 1 -> dl = 3d
    m = np.frombuffer(bytes(32) + bytes([0x08]) + bytes(15) + b"".join(w.to_bytes(2, "little") for w in words),
                      np.uint8).reshape(1, 56)
    y = I.dequantize_blocks(m, "IQ1_M")[0]
    assert y[:8].tolist() == (F32(0.75) * (I.grid("IQ1_M")[0].astype(F32) - F32(0.125))).tolist()
    assert y[8:16].tolist() == (F32(0.75) * (I.grid("IQ1_M")[0].astype(F32) + F32(0.125))).tolist()


def test_refusals_name_the_rule():
    with pytest.raises(ShapeError, match="blocks"):
        I.dequantize_blocks(np.zeros((1, 65), np.uint8), "IQ2_XXS")
    with pytest.raises(DtypeError, match="blocks"):
        I.dequantize_blocks(np.zeros((1, 50), np.float32), "IQ1_S")
    with pytest.raises(FormatRuleError, match="qtype"):
        I.grid("IQ4_NL")
