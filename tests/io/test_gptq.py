"""refsim.io.gptq: GPTQ and AWQ checkpoints written and read back bit-identical, their configs
detected, and the named errors for bad ones (missing or inconsistent files, unknown configs, wrong
shapes/dtypes, mismatched layer sets). refsim's own containers are in test_containers.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.errors import CheckpointError, DtypeError, FormatRuleError, ShapeError
from refsim.formats import awq as awq_format
from refsim.formats import gptq as gptq_format
from refsim.io import detect, open_checkpoint
from refsim.io.gptq import AWQLayer, GPTQLayer, write_awq, write_gptq
from refsim.testing import assert_bitexact

from conftest_io import L0, L1, gptq_layer, rewrite_tensors

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


# ---------------------------------------------------------------------------------------------- bad input
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
    rewrite_tensors(gptq_dir, edit)
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


def _awq(name, rng, k, gs, n=64):
    g = k // gs
    return AWQLayer(name, awq_format.pack(rng.integers(0, 16, (k, n), dtype=np.uint8),
                                          rng.random((g, n)).astype(np.float16) + np.float16(0.01),
                                          rng.integers(0, 16, (g, n), dtype=np.uint8), gs))


def test_awq_layers_of_one_group_spanning_k_fit_the_models_group_size(tmp_path):
    rng = np.random.default_rng(5)
    # BERT hidden 128 with group 128: the attention layers are one group each, the FFN output (K=256) two
    write_awq(tmp_path, [_awq(L0, rng, 128, 128), _awq(L1, rng, 256, 128)])
    assert json.loads((tmp_path / "config.json").read_text())["quantization_config"]["group_size"] == 128
    (tmp_path / "b").mkdir()
    write_awq(tmp_path / "b", [_awq(L0, rng, 128, 128), _awq(L1, rng, 256, 256)])   # every layer one group
    assert json.loads((tmp_path / "b" / "config.json").read_text())["quantization_config"]["group_size"] == -1
    (tmp_path / "c").mkdir()
    with pytest.raises(FormatRuleError, match=r"one group size; got \[-1, 64\]"):
        write_awq(tmp_path / "c", [_awq(L0, rng, 128, 128), _awq(L1, rng, 256, 64)])
