"""GGUF tensors: every type's bytes dequantized bit for bit as the ``gguf`` package (gguf-py 0.19.0, which
reproduces ggml's dequantize_row_* / quantize_row_*_ref) does on the goldens it produced
(tests/formats/data/gguf_goldens.npz); quantize of the legacy types byte for byte; plain references equal
the fast paths; the row layout; bad input refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import gguf
from refsim.testing import assert_bitexact, examples

GOLDENS = np.load(Path(__file__).parent / "data" / "gguf_goldens.npz")
TYPES = sorted(gguf.BLOCK_TYPES)


def test_goldens_hold_every_type_and_record_the_library_version():
    assert {k.split(".")[0] for k in GOLDENS.files if k.endswith(".raw")} == set(TYPES)
    assert "gguf 0.19.0" in str(GOLDENS["versions"])


@pytest.mark.parametrize("qtype", TYPES)
def test_dequantize_equals_gguf_bit_for_bit(qtype):
    raw, y = GOLDENS[qtype + ".raw"], GOLDENS[qtype + ".y"]
    assert_bitexact(gguf.dequantize(raw, qtype, y.shape), y, name=f"{qtype} dequantize")
    assert_bitexact(gguf.dequantize_reference(raw, qtype, y.shape), y, name=f"{qtype} dequantize_reference")


@pytest.mark.parametrize("qtype", ["TQ1_0", "TQ2_0", "MXFP4"])
def test_dequantize_of_any_bytes_equals_gguf_for_the_quantized_newer_types(qtype):
    raw, y = GOLDENS[qtype + ".any.raw"], GOLDENS[qtype + ".any.y"]   # d inf/NaN/max, E8M0 0, 1, 254, 255
    assert_bitexact(gguf.dequantize(raw, qtype, y.shape), y, name=f"{qtype} dequantize (any bytes)")
    assert_bitexact(gguf.dequantize_reference(raw, qtype, y.shape), y, name=f"{qtype} dequantize_reference")


@pytest.mark.parametrize("qtype", gguf.QUANTIZABLE)
def test_quantize_equals_gguf_byte_for_byte(qtype):
    x = GOLDENS[qtype + ".x"] if qtype + ".x" in GOLDENS.files else GOLDENS["x"]
    raw = GOLDENS[qtype + ".raw"]
    assert_bitexact(gguf.quantize(x, qtype), raw, name=f"{qtype} quantize")
    assert_bitexact(gguf.quantize_reference(x, qtype), raw, name=f"{qtype} quantize_reference")


def test_rows_are_blocks_in_order_with_no_padding():
    x = np.arange(128, dtype=np.float32).reshape(2, 64) - 64
    raw = gguf.quantize(x, "Q8_0")
    assert raw.shape == (2, 68) and gguf.row_bytes("Q8_0", 64) == 68 and gguf.row_bytes("Q4_K", 512) == 288
    per_block = gguf.quantize(x.reshape(4, 32), "Q8_0")          # the same blocks, one per row
    assert_bitexact(raw.reshape(4, 34), per_block, name="row = blocks in order")
    assert_bitexact(gguf.dequantize(raw.reshape(-1), "Q8_0", (2, 64)), gguf.dequantize(raw, "Q8_0", (2, 64)),
                    name="raw of any shape")


@settings(max_examples=examples(20), deadline=None)
@given(st.sampled_from(TYPES), st.integers(1, 3), st.integers(1, 2), st.integers(0, 2**31 - 1))
def test_dequantize_of_any_bytes_equals_the_plain_reference(qtype, rows, blocks, seed):
    block, size = gguf.BLOCK_TYPES[qtype]
    raw = np.random.default_rng(seed).integers(0, 256, rows * blocks * size, dtype=np.uint8)
    shape = (rows, blocks * block)
    with np.errstate(all="ignore"):
        fast, ref = gguf.dequantize(raw, qtype, shape), gguf.dequantize_reference(raw, qtype, shape)
    assert_bitexact(fast, ref, name=qtype)


@settings(max_examples=examples(20), deadline=None)
@given(st.sampled_from(gguf.QUANTIZABLE), st.integers(1, 4), st.sampled_from([1e-6, 1e-2, 1.0, 1e3]),
       st.integers(0, 2**31 - 1))
def test_quantize_equals_the_plain_reference(qtype, rows, scale, seed):
    cols = max(64, gguf.BLOCK_TYPES[qtype][0])
    x = (np.random.default_rng(seed).standard_normal((rows, cols)) * scale).astype(np.float32)
    x[0, :32] = 0.0                                                # a zero block
    assert_bitexact(gguf.quantize(x, qtype), gguf.quantize_reference(x, qtype), name=qtype)


def test_bad_input_is_refused_by_name():
    raw = np.zeros(36, np.uint8)
    with pytest.raises(ShapeError, match="raw: Q4_0"):
        gguf.dequantize(raw[:35], "Q4_0", (1, 64))                 # wrong byte count for the shape
    with pytest.raises(FormatRuleError, match="qtype"):
        gguf.dequantize(raw, "Q4_9", (1, 64))                      # unknown type
    with pytest.raises(ShapeError, match="multiple of Q4_0's block of 32"):
        gguf.dequantize(raw, "Q4_0", (2, 36))                      # row not a multiple of the block
    with pytest.raises(ShapeError, match="block of 256"):
        gguf.row_bytes("Q4_K", 64)
    with pytest.raises(FormatRuleError, match="qtype"):
        gguf.quantize(np.zeros((1, 256), np.float32), "Q4_K")      # read-only type
    with pytest.raises(DtypeError, match="x: dtype"):
        gguf.quantize(np.zeros((1, 32), np.float16), "Q4_0")
    with pytest.raises(NonFiniteError, match="x"):
        gguf.quantize(np.full((1, 32), np.nan, np.float32), "Q8_0")
    with pytest.raises(DtypeError, match="raw: dtype"):
        gguf.dequantize(raw.astype(np.int8), "Q4_0", (1, 64))
