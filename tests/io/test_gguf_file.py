"""refsim.io.gguf_file: a .gguf file read through refsim.io (the gguf package parses it, refsim.formats.gguf
dequantizes), compared bit for bit with the gguf package's own dequantization saved beside the file
(tests/io/data/tiny.gguf and tiny_gguf_dequantized.npz, written by tests/io/data/make_gguf.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from refsim.cli import main
from refsim.errors import CheckpointError, RefsimError, ShapeError, ToolchainError
from refsim.io import open_checkpoint
from refsim.io.gguf_file import GGUFCheckpoint, GGUFLayer, gguf_bits
from refsim.io.readers import detect
from refsim.testing import assert_bitexact

DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny.gguf"
# name -> (ggml type, K, N): what make_gguf.py wrote
LAYERS = {"blk.0.attn_k.weight": ("Q4_K", 256, 2), "blk.0.attn_q.weight": ("Q4_0", 64, 4),
          "blk.0.attn_v.weight": ("F16", 32, 2), "blk.0.ffn_down.weight": ("Q8_0", 64, 2),
          "blk.0.ffn_up.weight": ("Q6_K", 256, 1)}


def test_every_layer_dequantizes_as_the_gguf_package_does():
    ref = np.load(DATA / "tiny_gguf_dequantized.npz")
    assert detect(TINY) == "gguf"
    ck = open_checkpoint(TINY)
    assert isinstance(ck, GGUFCheckpoint) and ck.format == "gguf"
    assert ck.layer_names() == sorted(LAYERS)                    # the F32 norm is not a layer
    assert ck.has("blk.0.attn_norm.weight") and ck.config == {"general.architecture": "llama"}
    for name, (qtype, k, n) in LAYERS.items():
        lay = ck.read_layer(name)
        assert (lay.qtype, lay.k, lay.n) == (qtype, k, n)
        W = lay.dequantize()
        assert W.dtype == np.float32 and W.shape == (k, n)
        assert_bitexact(np.ascontiguousarray(W.T).view(np.uint32), ref[name].view(np.uint32), name=name)
    assert ck.nbytes("blk.0.attn_q.weight") == 4 * 2 * 18       # 4 rows of two Q4_0 blocks of 18 bytes
    with pytest.raises(CheckpointError, match="layer 'blk.0.attn_norm.weight' must be one of"):
        ck.read_layer("blk.0.attn_norm.weight")


def test_inspect_json_names_each_gguf_layer_with_its_type(capsys):
    assert main(["inspect", str(TINY), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["format"] == "gguf" and [r["name"] for r in rep["layers"]] == sorted(LAYERS)
    want = {"Q4_K": (4, 256), "Q4_0": (4, 32), "F16": (16, 1), "Q8_0": (8, 32), "Q6_K": (6, 256)}
    for r in rep["layers"]:
        qtype, k, n = LAYERS[r["name"]]
        assert (r["bits"], r["group_size"], r["k"], r["n"]) == (*want[qtype], k, n)
        assert r["scheme"] == {"type": "gguf", "qtype": qtype}
        assert r["marlin"] == {"ok": False, "reason": f"{qtype} layer (ggml blocks, not a uniform int layer)"}
    assert {r["name"]: r["bytes_on_disk"] for r in rep["layers"]}["blk.0.ffn_up.weight"] == 210   # one Q6_K block


MORE = {"blk.0.attn_q.weight": ("TQ1_0", 256, 2, 1), "blk.0.attn_k.weight": ("TQ2_0", 256, 1, 2),
        "blk.0.attn_v.weight": ("MXFP4", 64, 2, 4), "blk.0.attn_output.weight": ("NVFP4", 128, 1, 4),
        "blk.0.ffn_up.weight": ("IQ2_XS", 256, 1, 2), "blk.0.ffn_gate.weight": ("IQ3_S", 256, 1, 3),
        "blk.0.ffn_down.weight": ("IQ1_M", 256, 1, 1)}


def test_the_newer_types_read_and_inspect_as_the_gguf_package_does(capsys):
    path, ref = DATA / "more_types.gguf", np.load(DATA / "more_types_gguf_dequantized.npz")
    ck = open_checkpoint(path)
    for name, (qtype, k, n, _) in MORE.items():
        lay = ck.read_layer(name)
        assert (lay.qtype, lay.k, lay.n) == (qtype, k, n)
        W = lay.dequantize()
        assert_bitexact(np.ascontiguousarray(W.T).view(np.uint32), ref[name].view(np.uint32), name=name)
    assert main(["inspect", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    for r in rep["layers"]:
        qtype, k, n, bits = MORE[r["name"]]
        assert r["scheme"] == {"type": "gguf", "qtype": qtype} and (r["bits"], r["k"], r["n"]) == (bits, k, n)
    assert sorted(r["name"] for r in rep["layers"]) == sorted(MORE)


def test_without_the_gguf_package_the_reader_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)                # import gguf -> ImportError
    with pytest.raises(ToolchainError, match=r"^reading or writing \.gguf files needs the gguf package "
                                             r"\(pip install refsim\[gguf\]\); got ImportError: "):
        open_checkpoint(TINY)


def test_broken_gguf_files_are_refused_by_name(tmp_path):
    raw = TINY.read_bytes()
    for cut in (0, 3, 24, 100, len(raw) // 2, len(raw) - 1):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(raw[:cut])
        with pytest.raises(RefsimError):
            open_checkpoint(bad).read_layer("blk.0.ffn_up.weight")
    other = tmp_path / "model.bin"
    other.write_bytes(raw)
    with pytest.raises(CheckpointError, match="must be an existing .gguf file; got a file named model.bin"):
        GGUFCheckpoint(other)


def test_gguf_bits_and_layer_records_follow_the_type_table():
    assert [gguf_bits(t) for t in ("Q2_K", "Q3_K", "Q4_0", "Q5_1", "Q6_K", "Q8_0", "IQ4_NL", "IQ4_XS", "F16",
                                   "BF16")] == [2, 3, 4, 5, 6, 8, 4, 4, 16, 16]
    ok = GGUFLayer("w", "Q8_0", np.zeros((3, 34), np.uint8), 32)
    assert (ok.n, ok.k, ok.group_size) == (3, 32, 32)
    assert_bitexact(ok.dequantize(), np.zeros((32, 3), np.float32), name="zeros")
    with pytest.raises(ShapeError, match=r"raw: rows of 34 bytes for Q8_0 K=32; got shape \(3, 36\)"):
        GGUFLayer("w", "Q8_0", np.zeros((3, 36), np.uint8), 32)
    with pytest.raises(ShapeError, match="a row's length must be a positive multiple of Q4_K's block of 256"):
        GGUFLayer("w", "Q4_K", np.zeros((1, 144), np.uint8), 128)
