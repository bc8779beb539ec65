"""Readers and writers of refsim.io on small synthetic layers: bit-identical round trips for every
format, format detection, and the named errors for bad checkpoints (missing or inconsistent files,
unknown configs, wrong shapes/dtypes, mismatched layer sets)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.errors import CheckpointError, DtypeError, ShapeError
from refsim.formats import atom as atom_format
from refsim.formats import awq as awq_format
from refsim.formats import gptq as gptq_format
from refsim.formats import marlin as marlin_format
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.io import detect, open_checkpoint
from refsim.io.containers import (AnyPrecisionLayer, AtomLayerFile, MarlinLayer, Mixed2416Layer, write_anyprec,
                                  write_refsim)
from refsim.io.gptq import AWQLayer, GPTQLayer, write_awq, write_gptq
from refsim.io.tensors import TensorFile, save_tensors
from refsim.testing import assert_bitexact

from conftest_io import L0, L1, gptq_layer

def _same_gptq(a: GPTQLayer, b: GPTQLayer):
    for f in ("qweight", "qzeros", "scales", "g_idx"):
        assert_bitexact(getattr(b.ckpt, f), getattr(a.ckpt, f), name=f)
    assert_bitexact(b.bias, a.bias, name="bias")
    assert (b.bits, b.group_size, b.desc_act, b.sym, b.ckpt.checkpoint_format) == \
        (a.bits, a.group_size, a.desc_act, a.sym, a.ckpt.checkpoint_format)


@pytest.mark.parametrize("bits, gs, sym, act_order, fmt", [
    (4, 128, False, False, "gptq"), (4, 128, True, True, "gptq"), (3, 64, False, True, "gptq_v2"),
    (2, None, False, False, "gptq_v2"), (8, 128, True, False, "gptq"),
])
def test_gptq_write_read_round_trip_is_bit_identical(tmp_path, bits, gs, sym, act_order, fmt):
    rng = np.random.default_rng(bits)
    layers = [gptq_layer(n, rng, bits=bits, gs=gs, sym=sym, act_order=act_order, fmt=fmt) for n in (L0, L1)]
    write_gptq(tmp_path, layers, {"model.embed_tokens.weight": np.ones((4, 8), np.float16)})
    cfg = json.loads((tmp_path / "quantize_config.json").read_text())
    assert cfg["bits"] == bits and cfg["group_size"] == (-1 if gs is None else gs)
    assert cfg["desc_act"] is act_order and cfg["sym"] is sym and cfg["checkpoint_format"] == fmt
    assert detect(tmp_path) == "gptq"
    with open_checkpoint(tmp_path) as ck:
        assert ck.layer_names() == [L0, L1]
        for lay in layers:
            got = ck.read_layer(lay.name)
            _same_gptq(lay, got)
            assert_bitexact(got.dequantize(), gptq_format.dequantize(lay.ckpt), name="dequantized")


def test_gptq_config_may_live_in_config_json(tmp_path):
    lay = gptq_layer(L0, np.random.default_rng(0))
    write_gptq(tmp_path, [lay])
    cfg = json.loads((tmp_path / "quantize_config.json").read_text())
    (tmp_path / "quantize_config.json").unlink()
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": cfg}))
    assert detect(tmp_path) == "gptq"
    _same_gptq(lay, open_checkpoint(tmp_path).read_layer(L0))


def test_awq_write_read_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    k, n, gs = 256, 64, 128
    ck = awq_format.pack(rng.integers(0, 16, (k, n), dtype=np.uint8), rng.random((2, n)).astype(np.float16),
                         rng.integers(0, 16, (2, n)), gs)
    write_awq(tmp_path, [AWQLayer(L0, ck)])
    assert detect(tmp_path) == "awq"
    got = open_checkpoint(tmp_path).read_layer(L0)
    for f in ("qweight", "qzeros", "scales"):
        assert_bitexact(getattr(got.ckpt, f), getattr(ck, f), name=f)
    assert (got.k, got.n, got.group_size, got.bits) == (k, n, gs, 4)
    # AutoAWQ's older stand-alone config is read too
    (tmp_path / "config.json").unlink()
    (tmp_path / "quant_config.json").write_text(json.dumps({"w_bit": 4, "q_group_size": 128, "zero_point": True,
                                                            "version": "GEMM"}))
    assert_bitexact(open_checkpoint(tmp_path).read_layer(L0).ckpt.qweight, ck.qweight, name="qweight")


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


# ---------------------------------------------------------------------------------------------- bad input
@pytest.fixture
def gptq_dir(tmp_path):
    write_gptq(tmp_path, [gptq_layer(L0, np.random.default_rng(9))])
    return tmp_path


def _rewrite(path, edit):
    with TensorFile(path / "model.safetensors") as tf:
        t = {n: tf.read(n) for n in tf.names()}
    edit(t)
    save_tensors(path / "model.safetensors", t)


@pytest.mark.parametrize("edit, err, pattern", [
    (lambda t: t.pop(f"{L0}.scales"), CheckpointError, r"tensor '.*q_proj\.scales' must be present"),
    (lambda t: t.update({f"{L1}.scales": np.ones((2, 256), np.float16)}), CheckpointError, "mismatched layer sets"),
    (lambda t: t.update({f"{L0}.scales": t[f"{L0}.scales"].astype(np.float32)}), DtypeError,
     r"model\.safetensors: tensor '.*q_proj\.scales': dtype must be float16; got F32"),
    (lambda t: t.update({f"{L0}.qzeros": t[f"{L0}.qzeros"][:1]}), ShapeError, r"tensor '.*qzeros': shape must be \(2, 32\)"),
    (lambda t: t.update({f"{L0}.g_idx": np.full(256, 5, np.int32)}), CheckpointError, r"g_idx': entries must lie in \[0, 1\]"),
    (lambda t: t.update({f"{L0}.g_idx": np.arange(256, dtype=np.int32)[::-1] // 128}), CheckpointError,
     "must equal k // group_size when desc_act is false"),
    (lambda t: t.update({f"{L0}.scales": np.full((2, 256), np.inf, np.float16)}), CheckpointError, "scales must be finite"),
    (lambda t: t[f"{L0}.scales"].__setitem__((1, 7), 0), CheckpointError, r"scales must be finite and > 0; got 0\.0"),
    (lambda t: t[f"{L0}.scales"].__setitem__((0, 3), -0.5), CheckpointError, r"scales must be finite and > 0; got -0\.5"),
    (lambda t: t.update({f"{L0}.qweight": t[f"{L0}.qweight"][:, :20]}), CheckpointError, "multiples of 32"),
])
def test_bad_gptq_tensors_are_named(gptq_dir, edit, err, pattern):
    _rewrite(gptq_dir, edit)
    with pytest.raises(err, match=pattern):
        ck = open_checkpoint(gptq_dir)
        ck.read_layer(L0)


@pytest.mark.parametrize("cfg_edit, pattern", [
    (lambda c: c.update(bits=5), r"quantize_config\.json: field 'bits' must be one of \[2, 3, 4, 8\]; got 5"),
    (lambda c: c.update(group_size=0), "group_size' must be -1 .per-channel. or positive; got 0"),
    (lambda c: c.update(desc_act="yes"), "field 'desc_act' must be bool; got 'yes'"),
    (lambda c: c.update(checkpoint_format="marlin"), "field 'checkpoint_format' must be one of"),
    (lambda c: c.pop("bits"), "field 'bits' must be present"),
    (lambda c: c.update(sym=True), r"sym=true in quantize_config\.json needs every zero point = 8"),
])
def test_bad_gptq_configs_are_named(gptq_dir, cfg_edit, pattern):
    p = gptq_dir / "quantize_config.json"
    cfg = json.loads(p.read_text())
    cfg_edit(cfg)
    p.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=pattern):
        open_checkpoint(gptq_dir).read_layer(L0)


def test_unreadable_configs_and_missing_files_are_named(tmp_path, gptq_dir):
    (gptq_dir / "quantize_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"quantize_config\.json: must hold valid JSON"):
        open_checkpoint(gptq_dir)
    with pytest.raises(CheckpointError, match="no such path"):
        detect(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"must hold \*\.safetensors files"):
        detect(tmp_path / "empty")
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "bitsandbytes"}}))
    with pytest.raises(CheckpointError, match="quant_method must be 'gptq', 'awq' or 'compressed-tensors'.*got 'bitsandbytes'"):
        detect(tmp_path / "u")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "refsim_checkpoint.json").write_text(json.dumps({"format": "exl2"}))
    with pytest.raises(CheckpointError, match="field 'format' must be one of"):
        detect(tmp_path / "r")


def test_tensor_in_two_shards_and_truncated_shard_are_refused(tmp_path, gptq_dir):
    with TensorFile(gptq_dir / "model.safetensors") as tf:
        save_tensors(gptq_dir / "model-2.safetensors", {f"{L0}.scales": tf.read(f"{L0}.scales")})
    with pytest.raises(CheckpointError, match="must live in one file only"):
        open_checkpoint(gptq_dir)
    (gptq_dir / "model-2.safetensors").unlink()
    blob = (gptq_dir / "model.safetensors").read_bytes()
    (gptq_dir / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: must be a valid safetensors file"):
        open_checkpoint(gptq_dir)


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
    _rewrite(tmp_path, lambda t: t.update({f"{L0}.B": t[f"{L0}.B"][:, :256], f"{L0}.s": t[f"{L0}.s"][:, :128]}))
    cfg["layers"][L0]["n"] = 128
    p.write_text(json.dumps(cfg))
    with pytest.raises(ShapeError, match=r"model\.safetensors: tensors '.*\.B'/'.*\.s': N: must be a positive multiple of 256"):
        open_checkpoint(tmp_path).read_layer(L0)
