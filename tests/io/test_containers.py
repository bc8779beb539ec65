"""refsim.io.containers: refsim's own checkpoint containers (Marlin, Any-Precision, Atom, 2/4/16)
written and read back bit-identical, and a container whose layer list or shapes disagree with its
tensors refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.errors import CheckpointError, ShapeError
from refsim.formats import atom as atom_format
from refsim.formats import marlin as marlin_format
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.io import detect, open_checkpoint
from refsim.io.containers import (AnyPrecisionLayer, AtomLayerFile, MarlinLayer, Mixed2416Layer, write_anyprec,
                                  write_refsim)
from refsim.testing import assert_bitexact

from conftest_io import L0, L1, rewrite_tensors


def test_marlin_anyprec_atom_mixed_round_trips(tmp_path):
    rng = np.random.default_rng(4)
    # Marlin, act-order perm
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    B, s = marlin_format.pack(q, (rng.random((2, 256)) + 0.5).astype(np.float16), 128)
    ml = MarlinLayer(L0, B, s, rng.permutation(256).astype(np.int32))
    (tmp_path / "m").mkdir()
    write_refsim(tmp_path / "m", "marlin", [ml])
    got = open_checkpoint(tmp_path / "m").read_layer(L0)
    assert detect(tmp_path / "m") == "marlin" and got.desc_act and got.group_size == 128
    for f in ("B", "s", "perm"):
        assert_bitexact(getattr(got, f), getattr(ml, f), name=f)
    cfg = json.loads((tmp_path / "m" / "refsim_checkpoint.json").read_text())
    assert cfg["layers"][L0]["workspace_int32"] == 256 // 128 * 16
    # Any-Precision
    from refsim.formats import bitplane

    codes = rng.integers(0, 16, (64, 1024), dtype=np.uint8)  # (N, K)
    ap = AnyPrecisionLayer(L0, bitplane.pack(codes, 4), {b: rng.random((64, 1 << b)).astype(np.float16)
                                                         for b in (3, 4)}, 3)
    (tmp_path / "a").mkdir()
    write_anyprec(tmp_path / "a", [ap])
    got = open_checkpoint(tmp_path / "a").read_layer(L0)
    assert_bitexact(got.qweight, ap.qweight, name="qweight")
    assert_bitexact(got.luts[3], ap.luts[3], name="lut3")
    assert_bitexact(got.dequantize(3), ap.dequantize(3), name="3-bit model")
    # Atom
    w = rng.standard_normal((384, 16)).astype(np.float32)
    aw = atom_format.quantize_weights(w, group_size=128, keeper=128)
    at = AtomLayerFile(L0, aw, rng.permutation(384).astype(np.int64), 128)
    (tmp_path / "t").mkdir()
    write_refsim(tmp_path / "t", "atom", [at])
    got = open_checkpoint(tmp_path / "t").read_layer(L0)
    for f in ("q4", "scale4", "q8", "scale8"):
        assert_bitexact(getattr(got.weights, f), getattr(aw, f), name=f)
    assert_bitexact(got.dequantize(), at.dequantize(), name="atom dequantized")
    # 2/4/16
    W = rng.standard_normal((64, 32)).astype(np.float32)
    X = rng.standard_normal((128, 64)).astype(np.float32)
    packed = m2416.pack(q2416.quantize(W, X.T @ X, outlier_ratio=0.005))
    mx = Mixed2416Layer(L0, packed, 64)
    (tmp_path / "x").mkdir()
    write_refsim(tmp_path / "x", "mixed_2_4_16", [mx])
    got = open_checkpoint(tmp_path / "x").read_layer(L0)
    assert_bitexact(got.dequantize(), mx.dequantize(), name="2/4/16 dequantized")
    assert packed.val.size > 0  # the CSR part took the trip too


def test_refsim_container_layer_list_must_match_tensors(tmp_path):
    rng = np.random.default_rng(5)
    B, s = marlin_format.pack(rng.integers(0, 16, (128, 256), dtype=np.uint8), np.ones((1, 256), np.float16), None)
    write_refsim(tmp_path, "marlin", [MarlinLayer(L0, B, s)])
    p = tmp_path / "refsim_checkpoint.json"
    cfg = json.loads(p.read_text())
    cfg["layers"][L1] = cfg["layers"][L0]
    p.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="'layers' must list exactly the layers in the tensors"):
        open_checkpoint(tmp_path)
    del cfg["layers"][L1]
    cfg["layers"][L0]["n"] = 512
    p.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="says K=128, N=512; the tensors hold K=128, N=256"):
        open_checkpoint(tmp_path).read_layer(L0)
    # a B whose N breaks Marlin's rule is refused with the file and tensors named
    rewrite_tensors(tmp_path, lambda t: t.update({f"{L0}.B": t[f"{L0}.B"][:, :128], f"{L0}.s": t[f"{L0}.s"][:, :64]}))
    cfg["layers"][L0]["n"] = 64
    p.write_text(json.dumps(cfg))
    with pytest.raises(ShapeError, match=r"model\.safetensors: tensors '.*\.B'/'.*\.s': N: must be a positive multiple of 128"):
        open_checkpoint(tmp_path).read_layer(L0)


# ---------------------------------------------------------------- the layer records check what their consumers index with
def test_layer_records_refuse_row_orders_and_sizes_their_consumers_would_index_with():
    from refsim.errors import FormatRuleError

    rng = np.random.default_rng(5)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    B, s = marlin_format.pack(q, (rng.random((2, 256)) + 0.5).astype(np.float16), 128)
    with pytest.raises(FormatRuleError, match=r"perm: must be a permutation of 0..255"):
        MarlinLayer(L0, B, s, np.zeros(256, np.int32))
    with pytest.raises(ShapeError, match=r"perm: shape must be \(256,\); got \(255,\)"):
        MarlinLayer(L0, B, s, np.arange(255, dtype=np.int32))
    with pytest.raises(ShapeError, match=r"MarlinLayer 'model.*s: must have N=256 columns"):
        MarlinLayer(L0, B, s[:, :128])
    w = rng.standard_normal((384, 16)).astype(np.float32)
    aw = atom_format.quantize_weights(w, group_size=128, keeper=128)
    with pytest.raises(FormatRuleError, match=r"reorder: must be a permutation of 0..383"):
        AtomLayerFile(L0, aw, np.full(384, 383, np.int64), 128)
    with pytest.raises(ShapeError, match=r"group_size: the 256 INT4 rows must be the 2 groups of scale4 times"):
        AtomLayerFile(L0, aw, np.arange(384), 64)
    packed = m2416.pack(q2416.quantize(w[:64, :16], np.eye(64), outlier_ratio=0.0))
    with pytest.raises(ShapeError, match=r"k: must be 16 x the 4 groups of packed; got 80"):
        Mixed2416Layer(L0, packed, 80)
    from refsim.formats import bitplane

    qw = bitplane.pack(rng.integers(0, 16, (64, 1024), dtype=np.uint8), 4)
    luts = {b: rng.random((64, 1 << b)).astype(np.float16) for b in (3, 4)}
    with pytest.raises(FormatRuleError, match=r"luts: one table per bit-width 3..4 \(int keys\); got keys \[.3.\]"):
        AnyPrecisionLayer(L0, qw, {3: luts[3]}, 3)
    with pytest.raises(ShapeError, match=r"luts\[4\]: shape must be \(64, 16\)"):
        AnyPrecisionLayer(L0, qw, {3: luts[3], 4: luts[4][:, :8]}, 3)
    with pytest.raises(FormatRuleError, match=r"seed_bits: must lie in \[1, parent bits=4\]; got 5"):
        AnyPrecisionLayer(L0, qw, luts, 5)


def test_gptq_layer_group_size_must_match_its_scale_rows():
    import conftest_io as cio

    from refsim.io.gptq import GPTQLayer

    lay = cio.gptq_layer(L0, np.random.default_rng(0))           # K = 256, group 128: 2 scale rows
    with pytest.raises(ShapeError, match=r"2 scale rows must be ceil\(K/group_size\) = 4 for K=256; got group_size=64"):
        GPTQLayer(L0, lay.ckpt, 64, False, False)
    with pytest.raises(ShapeError, match=r"bias: shape must be \(256,\); got \(3,\)"):
        GPTQLayer(L0, lay.ckpt, 128, False, False, np.zeros(3, np.float16))
