"""compressed-tensors against checkpoints llm-compressor wrote (tests/io/data/README.md): the scheme inspect
reports, dequantized weights equal to the library's own bit for bit, conversions that keep every code and scale,
and the packing rules of compressed-tensors' ``pack_to_int32``."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from refsim.cli import main
from refsim.errors import CheckpointError, FormatRuleError
from refsim.formats import marlin as marlin_format
from refsim.io import open_checkpoint
from refsim.io.compressed_tensors import pack_weight, unpack_weight
from refsim.io.convert import convert
from refsim.io.uniform import codes_of

DATA = Path(__file__).parent / "data"
#: folder -> (bits, group_size as inspect reports it, symmetric, actorder)
REFERENCES = {
    "ct_w4a16_sym": (4, 128, True, None),
    "ct_w4a16_asym": (4, 128, False, None),
    "ct_w8a16_channel": (8, -1, True, None),
    "ct_w4a16_actorder": (4, 128, True, "weight"),
}
LAYERS = [f"model.layers.0.{n}" for n in ("mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "self_attn.k_proj",
                                          "self_attn.o_proj", "self_attn.q_proj", "self_attn.v_proj")]


@pytest.mark.parametrize("folder", sorted(REFERENCES))
def test_inspect_json_reports_the_scheme_llm_compressor_wrote(folder, capsys):
    bits, gs, sym, actorder = REFERENCES[folder]
    assert main(["inspect", str(DATA / folder), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["format"] == "compressed-tensors" and rep["n_layers"] == 7
    assert [r["name"] for r in rep["layers"]] == LAYERS
    for r in rep["layers"]:
        assert (r["bits"], r["group_size"], r["sym"], r["desc_act"]) == (bits, gs, sym, False)
        assert r["scheme"] == {"type": "int", "num_bits": bits, "strategy": "channel" if gs == -1 else "group",
                               "group_size": None if gs == -1 else gs, "symmetric": sym, "actorder": actorder,
                               "g_idx": False, "scale_dtype": "bfloat16"}
    assert rep["quantization_config"]["ignore"] == ["lm_head"]


@pytest.mark.parametrize("folder", sorted(REFERENCES))
def test_dequantized_weights_equal_the_librarys_bit_for_bit(folder):
    ref = load_file(str(DATA / f"{folder}.dequantized.safetensors"))
    ck = open_checkpoint(DATA / folder)
    for name in ck.layer_names():
        W = np.ascontiguousarray(ck.read_layer(name).dequantize().T)        # (N, K) as PyTorch holds it
        assert W.dtype == ml_dtypes.bfloat16
        bits16 = W.view(np.int16)
        if f"{name}.weight_bf16_bits" in ref:
            np.testing.assert_array_equal(bits16, ref[f"{name}.weight_bf16_bits"], err_msg=name)
        assert hashlib.sha256(bits16.tobytes()).digest() == ref[f"{name}.sha256"].tobytes(), name


def test_w4a16_symmetric_converts_to_marlin_and_back_to_the_same_tensors(tmp_path):
    src = DATA / "ct_w4a16_sym"
    convert(src, "marlin", tmp_path / "m")
    convert(tmp_path / "m", "compressed-tensors", tmp_path / "back")
    a, b = load_file(str(src / "model.safetensors")), load_file(str(tmp_path / "back" / "model.safetensors"))
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k].view(np.uint8), b[k].view(np.uint8), err_msg=k)
    # the Marlin words are marlin.pack of the same codes with the same (exactly fp16) scales
    ct = open_checkpoint(src).read_layer(LAYERS[0])
    ml = open_checkpoint(tmp_path / "m").read_layer(LAYERS[0])
    B, s = marlin_format.pack((ct.q.T.astype(np.int16) + 8).astype(np.uint8), ct.scale.T.astype(np.float16), 128)
    np.testing.assert_array_equal(ml.B, B)
    np.testing.assert_array_equal(ml.s, s)
    cfg = json.loads((tmp_path / "back" / "config.json").read_text())
    assert cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] is True
    assert (tmp_path / "back" / "tokenizer.json").read_bytes() == (src / "tokenizer.json").read_bytes()


@pytest.mark.parametrize("target", ["gptq-v2", "awq"])
def test_asymmetric_converts_to_gptq_and_awq_keeping_codes_zeros_and_scales(tmp_path, target):
    src = DATA / "ct_w4a16_asym"
    convert(src, target, tmp_path / "out")
    a, b = open_checkpoint(src), open_checkpoint(tmp_path / "out")
    for name in LAYERS:
        ua, ub = codes_of(a.read_layer(name)), codes_of(b.read_layer(name))
        np.testing.assert_array_equal(ua.q, ub.q)
        np.testing.assert_array_equal(ua.zeros, ub.zeros)
        np.testing.assert_array_equal(ua.scales.astype(np.float32), ub.scales.astype(np.float32))
    assert not (ua.zeros == 8).all()  # a real asymmetric checkpoint


def test_int8_channel_to_marlin_is_refused_with_the_reason(tmp_path):
    with pytest.raises(FormatRuleError, match="cannot repack to Marlin: bits=8"):
        convert(DATA / "ct_w8a16_channel", "marlin", tmp_path / "m")
    assert not (tmp_path / "m").exists() and not list(tmp_path.iterdir())


def test_act_order_gptq_written_as_compressed_tensors_carries_weight_g_idx(tmp_path):
    # GPTQModel-style act-order: a permuted g_idx; refsim writes compressed-tensors' weight_g_idx and reads it back
    import conftest_io as cio

    from refsim.io.gptq import write_gptq

    rng = np.random.default_rng(0)
    lay = cio.gptq_layer(cio.L0, rng, sym=True, act_order=True, fmt="gptq_v2")
    (tmp_path / "g").mkdir()
    write_gptq(tmp_path / "g", [lay])
    convert(tmp_path / "g", "compressed-tensors", tmp_path / "ct")
    ct = open_checkpoint(tmp_path / "ct").read_layer(cio.L0)
    np.testing.assert_array_equal(ct.g_idx, lay.ckpt.g_idx)
    u, v = codes_of(lay), codes_of(ct)
    np.testing.assert_array_equal(u.q, v.q)
    # the value rule: (q - z[g_idx[k]]) * s[g_idx[k]], one rounding to the scale dtype (fp16 here)
    q = u.q.astype(np.float64) - 8
    expect = (q * u.scales.astype(np.float64)[u.g_idx]).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(ct.dequantize(), expect)


def test_packing_matches_the_documented_worked_example_and_inverts_for_every_width():
    q = np.arange(-8, 0, dtype=np.int8)[None]                       # one row, K = 8
    assert int(pack_weight(q, 4).view(np.uint32)[0, 0]) == 0x76543210
    rng = np.random.default_rng(1)
    for bits in (2, 3, 4, 8):
        for k in (8, 32, 40, 96):                                   # K not a multiple of 32 is padded per row
            codes = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (3, k)).astype(np.int8)
            packed = pack_weight(codes, bits)
            assert packed.dtype == np.int32 and packed.shape == (3, -(-k * bits // 32))
            np.testing.assert_array_equal(unpack_weight(packed, bits, k), codes)
    # 3-bit: value 10 straddles words 0 and 1 (bits 30, 31 and bit 0 of the next word)
    codes = np.full((1, 32), -4, np.int8)
    codes[0, 10] = 3                                                # stored 7 = 0b111
    w = pack_weight(codes, 3).view(np.uint32)
    assert (int(w[0, 0]) >> 30) == 0b11 and int(w[0, 1]) & 1 == 1


def _copy(tmp_path, folder="ct_w4a16_sym") -> Path:
    dst = tmp_path / folder
    shutil.copytree(DATA / folder, dst)
    return dst


@pytest.mark.parametrize("value", [0.0, -0.01])
def test_non_positive_scales_are_refused_by_inspect_and_convert(tmp_path, value, capsys):
    dst = _copy(tmp_path)
    t = load_file(str(dst / "model.safetensors"))
    s = t[f"{LAYERS[5]}.weight_scale"].copy()
    s[3, 1] = value
    t[f"{LAYERS[5]}.weight_scale"] = s
    save_file(t, str(dst / "model.safetensors"), {"format": "pt"})
    assert main(["inspect", str(dst)]) == 2
    err = capsys.readouterr().err
    assert "scales must be finite and > 0" in err and LAYERS[5] in err
    with pytest.raises(CheckpointError, match="scales must be finite and > 0"):
        convert(dst, "marlin", tmp_path / "m")


def test_config_rules_are_named(tmp_path):
    dst = _copy(tmp_path)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"]["config_groups"]["group_0"]["format"] = "int-quantized"
    (dst / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="format must be one of .*got 'int-quantized'"):
        open_checkpoint(dst)
    cfg["quantization_config"]["config_groups"]["group_0"]["format"] = "pack-quantized"
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 5
    (dst / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="num_bits"):
        open_checkpoint(dst)
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 4
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = False
    (dst / "config.json").write_text(json.dumps(cfg))
    ck = open_checkpoint(dst)
    with pytest.raises(CheckpointError, match="weight_zero_point' must be present"):
        ck.read_layer(LAYERS[0])


# ---------------------------------------------------------------- CTLayer: every rule checked when built
def _ct_args(**changes):
    n, k = 4, 32
    args = dict(name="L", q=np.zeros((n, k), np.int8), scale=np.ones((n, 2), np.float16),
                zero=np.zeros((n, 2), np.int8), g_idx=None, bits=4, group_size=16, sym=True, actorder=None)
    args.update(changes)
    return args


def test_ct_layer_accepts_a_legal_record():
    from refsim.io.compressed_tensors import CTLayer

    lay = CTLayer(**_ct_args(g_idx=(np.arange(32) % 2).astype(np.int32), actorder="group"))
    assert lay.dequantize().shape == (32, 4)


@pytest.mark.parametrize("changes, err, match", [
    (dict(group_size=9), "ShapeError", r"group_size: must divide K=32; got 9"),
    (dict(group_size=0), "FormatRuleError", r"group_size: must be >= 1; got 0"),
    (dict(bits=2**40), "FormatRuleError", r"bits: bit-width must be one of \[2, 3, 4, 8\]; got 1099511627776"),
    (dict(bits=-1), "FormatRuleError", r"bits: bit-width must be one of .*got -1"),
    (dict(q=np.full((4, 32), 8, np.int8)), "FormatRuleError", r"q: signed 4-bit codes must lie in \[-8, 7\]; got 8"),
    (dict(q=np.full((4, 32), -9, np.int8)), "FormatRuleError", r"q: signed 4-bit codes .*got -9"),
    (dict(zero=np.full((4, 2), 1, np.int8)), "FormatRuleError", r"zero: must be all 0 for a symmetric scheme; got 1"),
    (dict(zero=np.full((4, 2), 100, np.int8), sym=False), "FormatRuleError", r"zero: signed 4-bit .*got 100"),
    (dict(scale=np.ones((4, 3), np.float16)), "ShapeError", r"scale: shape must be \(4, 2\); got \(4, 3\)"),
    (dict(zero=np.zeros((4, 1), np.int8)), "ShapeError", r"zero: shape must be \(4, 2\); got \(4, 1\)"),
    (dict(scale=np.full((4, 2), np.inf, np.float16)), "NonFiniteError", r"scale: must be finite"),
    (dict(g_idx=np.zeros(31, np.int32), actorder="group"), "ShapeError", r"g_idx: shape must be \(32,\); got \(31,\)"),
    (dict(g_idx=np.full(32, 2, np.int32), actorder="group"), "FormatRuleError", r"g_idx: entries must lie in \[0, 1\]"),
    (dict(g_idx=np.zeros(32, np.int32)), "FormatRuleError", r"g_idx: present exactly when actorder is 'group'"),
    (dict(actorder="group"), "FormatRuleError", r"g_idx: present exactly when actorder is 'group'"),
    (dict(actorder="bogus"), "FormatRuleError", r"actorder: must be one of \[None, 'weight', 'group'\]; got 'bogus'"),
    (dict(sym=np.ones(2, bool)), "FormatRuleError", r"sym: must be True or False"),
])
def test_ct_layer_refuses_a_broken_record_with_a_named_error(changes, err, match):
    import refsim.errors
    from refsim.io.compressed_tensors import CTLayer

    with pytest.raises(getattr(refsim.errors, err), match=match):
        CTLayer(**_ct_args(**changes))
