"""refsim.io.tensors: round trips through the safetensors package, BF16, and a fuzz of the reader
(truncated files, random bytes, adversarial headers): only named errors, never a hang or another
exception."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest

from refsim.errors import CheckpointError, DtypeError, RefsimError, ShapeError
from refsim.io.tensors import TensorFile, save_tensors
from refsim.testing import assert_bitexact


def _tensors():
    rng = np.random.default_rng(0)
    return {
        "a.qweight": rng.integers(-2**31, 2**31, (8, 32), dtype=np.int64).astype(np.int32),
        "a.scales": rng.standard_normal((2, 32)).astype(np.float16),
        "b.weight": rng.standard_normal((3, 5)).astype(np.float32),
        "b.bf": rng.standard_normal((4, 4)).astype(ml_dtypes.bfloat16),
        "c.codes": rng.integers(0, 256, (7,), dtype=np.uint8),
    }


def test_round_trip_is_bit_exact_for_every_dtype_including_bf16(tmp_path):
    t = _tensors()
    save_tensors(tmp_path / "m.safetensors", t, {"k": "v"})
    with TensorFile(tmp_path / "m.safetensors") as tf:
        assert tf.names() == sorted(t)
        assert tf.metadata() == {"k": "v"}
        for name, arr in t.items():
            got = tf.read(name)
            assert got.dtype == arr.dtype and got.shape == arr.shape
            if arr.dtype == ml_dtypes.bfloat16:  # compare the raw 16-bit patterns
                got, arr = got.view(np.uint16), arr.view(np.uint16)
            assert_bitexact(got, arr, name=name)
        assert tf.dtype_name("b.bf") == "BF16"
        assert tf.nbytes("a.qweight") == 8 * 32 * 4


def test_read_checks_dtype_and_shape_naming_file_and_tensor(tmp_path):
    save_tensors(tmp_path / "m.safetensors", _tensors())
    with TensorFile(tmp_path / "m.safetensors") as tf:
        with pytest.raises(DtypeError, match=r"m\.safetensors: tensor 'a\.scales': dtype must be int32; got F16"):
            tf.read("a.scales", dtype=np.int32)
        with pytest.raises(ShapeError, match=r"m\.safetensors: tensor 'a\.qweight': shape must be \(\*, 16\); got \(8, 32\)"):
            tf.read("a.qweight", shape=(None, 16))
        with pytest.raises(CheckpointError, match=r"tensor 'nope': must be present"):
            tf.read("nope")


def _valid_blob() -> bytes:
    header = {"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "y": {"dtype": "I32", "shape": [4], "data_offsets": [24, 40]}}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + bytes(range(40))


def _read_all(path):
    """Open and read every tensor; return None or the exception type name."""
    try:
        with TensorFile(path) as tf:
            for n in tf.names():
                tf.read(n)
    except RefsimError:
        return "RefsimError"
    return None


def test_truncated_files_give_named_errors_at_every_length(tmp_path):
    blob = _valid_blob()
    p = tmp_path / "t.safetensors"
    outcomes = set()
    for cut in range(len(blob)):
        p.write_bytes(blob[:cut])
        outcomes.add(_read_all(p))  # any non-RefsimError exception fails the test here
    assert outcomes == {"RefsimError"}  # every truncation is detected
    p.write_bytes(blob)
    assert _read_all(p) is None


def _header_file(path, header, data=b"", n=None):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h) if n is None else n) + h + data)


@pytest.mark.parametrize("header, data, n", [
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}}, b"\0" * 8, None),      # beyond the file
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, b"\0" * 8, None),      # negative offset
    ({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None),       # shape vs bytes
    ({"x": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None),        # unknown dtype
    ({"x": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 8]}}, b"\0" * 8, None),  # overflow
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, None),     # overlapping
    ({"x": {"dtype": "F32"}}, b"", None),                                                  # missing fields
    (b"[" * 5000 + b"]" * 5000, b"", None),                                                # deep nesting
    (b"\xff\xfe{}", b"", None),                                                            # not UTF-8
    ({}, b"", 2**63),                                                                      # absurd length
    ({"__metadata__": {"a": 1}}, b"", None),                                               # non-str metadata
])
def test_adversarial_headers_give_named_errors(tmp_path, header, data, n):
    p = tmp_path / "adv.safetensors"
    _header_file(p, header, data, n)
    assert _read_all(p) == "RefsimError"


def test_random_bytes_never_escape_as_foreign_exceptions(tmp_path):
    rng = np.random.default_rng(1)
    p = tmp_path / "r.safetensors"
    blob = _valid_blob()
    for i in range(200):
        if i % 2:  # random garbage
            data = rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8).tobytes()
        else:  # a valid file with a few bytes flipped (header or data)
            b = bytearray(blob)
            for pos in rng.integers(0, len(b), 3):
                b[pos] = int(rng.integers(0, 256))
            data = bytes(b)
        p.write_bytes(data)
        _read_all(p)  # returns None or "RefsimError"; anything else propagates and fails


def test_f8_e4m3_tensors_come_back_with_their_bytes_although_safetensors_numpy_cannot_return_them(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import save_file
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)        # every e4m3 byte, NaN codes included
    save_file({"w": codes.view(ml_dtypes.float8_e4m3fn), "s": np.ones(2, np.float32)}, str(tmp_path / "f.safetensors"))
    with safe_open(str(tmp_path / "f.safetensors"), framework="numpy") as f:   # the loader's own gap
        with pytest.raises(AttributeError, match="float8_e4m3fn"):
            f.get_tensor("w")
    with TensorFile(tmp_path / "f.safetensors") as tf:
        assert tf.dtype_name("w") == "F8_E4M3" and tf.nbytes("w") == 256
        got = tf.read("w", dtype=ml_dtypes.float8_e4m3fn, shape=(16, 16))
        assert got.dtype == ml_dtypes.float8_e4m3fn
        assert_bitexact(got.view(np.uint8), codes, name="w")
        assert_bitexact(tf.read("s"), np.ones(2, np.float32), name="s")
        with pytest.raises(DtypeError, match="'w': dtype must be uint8; got F8_E4M3"):
            tf.read("w", dtype=np.uint8)
