"""refsim.io.ct_float through refsim.io: compressed-tensors ``float-quantized`` (FP8), ``nvfp4-pack-quantized``
and ``mxfp4-pack-quantized`` folders read, dequantized bit for bit and inspected.

FP8: the bytes llm-compressor 0.14.0.1 saved for its FP8 / FP8_DYNAMIC / FP8_BLOCK presets
(tests/quant/data/llmcompressor_fp8.npz) put in a folder as the library lays it out (``weight``
F8_E4M3, ``weight_scale``); expected values from ml_dtypes' e4m3 decode times the scale, expanded by
hand here. NVFP4 / MXFP4: hand-worked tensors, expected bfloat16 bit patterns written out."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refsim.cli import main
from refsim.errors import CheckpointError, DtypeError, FormatRuleError, ShapeError
from refsim.io import open_checkpoint
from refsim.io.ct_float import CTFP4Layer, CTFP8Layer
from refsim.io.tensors import save_tensors
from refsim.testing import assert_bitexact

FP8_NPZ = Path(__file__).parents[1] / "quant" / "data" / "llmcompressor_fp8.npz"
Q, D = "model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj"
STRATEGY = {"FP8": "tensor", "FP8_DYNAMIC": "channel", "FP8_BLOCK": "block"}
BF16 = ml_dtypes.bfloat16


def _weights(strategy, **extra):
    w = {"actorder": None, "block_structure": [128, 128] if strategy == "block" else None, "dynamic": False,
         "group_size": None, "num_bits": 8, "observer": "minmax", "observer_kwargs": {}, "scale_dtype": None,
         "strategy": strategy, "symmetric": True, "type": "float", "zp_dtype": None}
    w.update(extra)
    return w


def _config(fmt, weights, input_activations=None):
    return {"quantization_config": {
        "config_groups": {"group_0": {"format": fmt, "input_activations": input_activations,
                                      "output_activations": None, "targets": ["Linear"], "weights": weights}},
        "format": fmt, "global_compression_ratio": None, "ignore": ["lm_head"], "kv_cache_scheme": None,
        "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
        "transform_config": {}, "version": "0.19.0"}}


def _folder(path: Path, config: dict, tensors: dict) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    # an unquantized tensor beside the layers (llm-compressor keeps lm_head and norms in the model dtype)
    save_tensors(path / "model.safetensors", {**tensors, "lm_head.weight": np.ones((4, 4), np.float32)})
    return path


def _fp8_folder(tmp_path, preset, scale_dtype=np.float32) -> tuple[Path, dict]:
    ref = np.load(FP8_NPZ)
    tensors = {}
    for name in (Q, D):
        tensors[f"{name}.weight"] = ref[f"{preset}.{name}.weight"].view(ml_dtypes.float8_e4m3fn)
        tensors[f"{name}.weight_scale"] = ref[f"{preset}.{name}.weight_scale"].astype(scale_dtype)
    acts = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "dynamic": False}
    return _folder(tmp_path / f"{preset}-{np.dtype(scale_dtype).name}",
                   _config("float-quantized", _weights(STRATEGY[preset]), acts), tensors), ref


def _expected_fp8(codes, scale, strategy):
    """(N, K): ml_dtypes' e4m3 value times the scale of each element, float32, then the scale dtype."""
    vals = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    s = scale.astype(np.float32)
    n, k = codes.shape
    if strategy == "tensor":
        full = np.full((n, k), s.reshape(-1)[0], np.float32)
    elif strategy == "channel":
        full = np.repeat(s, k, axis=1)
    else:
        full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:n, :k]
    return (vals * full).astype(scale.dtype)


@pytest.mark.parametrize("scale_dtype", [np.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("preset", sorted(STRATEGY))
def test_llm_compressor_fp8_folders_dequantize_as_the_library(tmp_path, preset, scale_dtype):
    path, ref = _fp8_folder(tmp_path, preset, scale_dtype)
    ck = open_checkpoint(path)
    assert ck.format == "compressed-tensors" and ck.layer_names() == [D, Q]
    for name in (Q, D):
        lay = ck.read_layer(name)
        assert isinstance(lay, CTFP8Layer) and lay.strategy == STRATEGY[preset]
        assert_bitexact(lay.codes, ref[f"{preset}.{name}.weight"], name="codes")
        W = np.ascontiguousarray(lay.dequantize().T)                      # (N, K) as torch holds it
        assert W.dtype == np.dtype(scale_dtype) and W.shape == ref[f"{name}.w"].shape
        want = _expected_fp8(ref[f"{preset}.{name}.weight"], ref[f"{preset}.{name}.weight_scale"].astype(scale_dtype),
                             STRATEGY[preset])
        itype = np.uint32 if scale_dtype == np.float32 else np.uint16
        assert_bitexact(W.view(itype), want.view(itype), name=f"{preset} {name}")
        if scale_dtype == np.float32:        # the quantized weight is close to the float weight it came from
            assert np.abs(W - ref[f"{name}.w"]).max() <= np.abs(ref[f"{name}.w"]).max() / 8


def test_a_hand_worked_fp8_block_layer(tmp_path):
    # N = 2, K = 130: two 128-wide column tiles; codes 0x38 = 1.0, 0x40 = 2.0, 0xB8 = -1.0, 0x01 = 2^-9
    codes = np.zeros((2, 130), np.uint8)
    codes[0, 0], codes[1, 127], codes[0, 128], codes[1, 129] = 0x38, 0x40, 0xB8, 0x01
    scale = np.array([[0.5, 3.0]], np.float32)
    lay = CTFP8Layer("l", codes, scale, "block")
    W = lay.dequantize().T
    assert (W[0, 0], W[1, 127], W[0, 128], W[1, 129]) == (0.5, 1.0, -3.0, np.float32(3.0 * 2.0**-9))
    assert W.view(np.uint32)[0, 1] == 0 and np.count_nonzero(W) == 4


def _fp4_folder(tmp_path, kind, packed, scale, glob=None) -> Path:
    name = "model.layers.0.mlp.up_proj"
    if kind == "nvfp4":
        weights = _weights("tensor_group", num_bits=4, group_size=16, block_structure=None,
                           scale_dtype="torch.float8_e4m3fn", observer="static_minmax")
        tensors = {f"{name}.weight_packed": packed, f"{name}.weight_scale": scale.view(ml_dtypes.float8_e4m3fn),
                   f"{name}.weight_global_scale": glob}
        acts = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}
    else:
        weights = _weights("group", num_bits=4, group_size=32, block_structure=None, scale_dtype="torch.uint8")
        tensors = {f"{name}.weight_packed": packed, f"{name}.weight_scale": scale}
        acts = None
    return _folder(tmp_path / kind, _config(f"{kind}-pack-quantized", weights, acts), tensors)


def _bf16_bits(W) -> np.ndarray:
    return np.ascontiguousarray(W.T).view(np.uint16)


def test_a_hand_worked_nvfp4_layer_divides_by_the_global_scale(tmp_path):
    # N = 2, K = 32 (two blocks of 16 per row). Codes (e2m1): 0x7 = 6, 0xF = -6, 0x2 = 1.0, 0x1 = 0.5.
    codes = np.zeros((2, 32), np.uint8)
    codes[0, 0], codes[0, 1], codes[0, 16], codes[1, 0], codes[1, 31] = 0x7, 0xF, 0x2, 0x2, 0x1
    packed = (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)      # byte 0 of row 0 = 0xF7
    assert packed[0, 0] == 0xF7
    # block scales e4m3: 0x38 = 1.0, 0x40 = 2.0, 0x3C = 1.5, 0x30 = 0.5; global scale g = 3.0
    scale = np.array([[0x38, 0x40], [0x3C, 0x30]], np.uint8)
    path = _fp4_folder(tmp_path, "nvfp4", packed, scale, np.array([3.0], np.float32))
    ck = open_checkpoint(path)
    (name,) = ck.layer_names()
    lay = ck.read_layer(name)
    assert isinstance(lay, CTFP4Layer) and (lay.kind, lay.k, lay.n) == ("nvfp4", 32, 2)
    W = lay.dequantize()
    assert W.dtype == BF16 and W.shape == (32, 2)
    bits = _bf16_bits(W)
    # 6 * fp32(1/3) = 2.0000000596 -> fp32 2.0 -> bf16 0x4000; -6 * (1/3) -> 0xC000
    # 1.0 * fp32(2/3) = 0x3F2AAAAB -> bf16 0x3F2B (low half 0xAAAB rounds up)
    # row 1: 1.0 * (1.5 / 3) = 0.5 -> 0x3F00; 0.5 * fp32(0.5/3) = 0.5 * 0x3E2AAAAB -> 0x3DAAAAAB -> 0x3DAB
    want = np.zeros((2, 32), np.uint16)
    want[0, 0], want[0, 1], want[0, 16], want[1, 0], want[1, 31] = 0x4000, 0xC000, 0x3F2B, 0x3F00, 0x3DAB
    assert_bitexact(bits, want, name="nvfp4")


def test_a_hand_worked_mxfp4_layer_uses_e8m0_scales_with_255_as_infinity(tmp_path):
    # N = 1, K = 128: four blocks of 32 with E8M0 scales 127 (1), 128 (2), 0 (2^-127), 255 (+Inf)
    codes = np.zeros((1, 128), np.uint8)
    codes[0, 0], codes[0, 32], codes[0, 64], codes[0, 96], codes[0, 97] = 0x7, 0xB, 0x1, 0x2, 0xA
    packed = (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)
    scale = np.array([[127, 128, 0, 255]], np.uint8)
    lay = open_checkpoint(_fp4_folder(tmp_path, "mxfp4", packed, scale)).read_layer("model.layers.0.mlp.up_proj")
    assert (lay.kind, lay.global_scale, lay.group_size, lay.strategy) == ("mxfp4", None, 32, "group")
    bits = _bf16_bits(lay.dequantize())
    want = np.zeros((1, 128), np.uint16)
    # 6 -> 0x40C0; -1.5 * 2 = -3 -> 0xC040; 0.5 * 2^-127 = 2^-128 = bf16 subnormal 2^5 * 2^-133 -> 0x0020;
    # 1.0 * Inf -> 0x7F80; -1.0 * Inf -> 0xFF80; 0 * Inf -> NaN (checked below)
    want[0, 0], want[0, 32], want[0, 64], want[0, 96], want[0, 97] = 0x40C0, 0xC040, 0x0020, 0x7F80, 0xFF80
    nan = np.zeros((1, 128), bool)
    nan[0, 98:128] = True
    assert np.isnan(lay.dequantize().T.astype(np.float32)[nan]).all()
    assert_bitexact(np.where(nan, 0, bits).astype(np.uint16), want, name="mxfp4")


@pytest.mark.parametrize("preset", sorted(STRATEGY))
def test_inspect_json_names_each_fp8_layer_and_its_scheme(tmp_path, preset, capsys):
    path, _ = _fp8_folder(tmp_path, preset)
    assert main(["inspect", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["format"] == "compressed-tensors" and [r["name"] for r in rep["layers"]] == [D, Q]
    strategy = STRATEGY[preset]
    for r in rep["layers"]:
        assert (r["bits"], r["group_size"], r["sym"], r["zero_point"]) == \
            (8, 128 if strategy == "block" else -1, True, "none (symmetric float)")
        assert r["scheme"] == {"type": "float", "kind": "fp8", "num_bits": 8, "strategy": strategy,
                               "group_size": 128 if strategy == "block" else None, "symmetric": True,
                               "actorder": None, "g_idx": False, "scale_dtype": "float32",
                               "block_structure": [128, 128] if strategy == "block" else None}
        assert r["marlin"] == {"ok": False, "reason": "fp8 layer (float codes, not a uniform int layer)"}
    (d, q) = rep["layers"]
    assert (q["k"], q["n"], d["k"], d["n"]) == (128, 128, 192, 128)
    scale_bytes = {"tensor": 4, "channel": 128 * 4, "block": None}[strategy]
    if scale_bytes:
        assert q["bytes_on_disk"] == 128 * 128 + scale_bytes


def test_inspect_json_names_nvfp4_and_mxfp4_layers(tmp_path, capsys):
    packed = np.zeros((2, 16), np.uint8)
    nv = _fp4_folder(tmp_path, "nvfp4", packed, np.full((2, 2), 0x38, np.uint8), np.array([1.0], np.float32))
    mx = _fp4_folder(tmp_path, "mxfp4", packed, np.full((2, 1), 127, np.uint8))
    for path, kind, gs, strategy in ((nv, "nvfp4", 16, "tensor_group"), (mx, "mxfp4", 32, "group")):
        assert main(["inspect", str(path), "--json"]) == 0
        (r,) = json.loads(capsys.readouterr().out)["layers"]
        assert (r["name"], r["bits"], r["group_size"], r["k"], r["n"]) == ("model.layers.0.mlp.up_proj", 4, gs, 32, 2)
        assert r["scheme"]["kind"] == kind and r["scheme"]["strategy"] == strategy
        assert r["scheme"]["global_scale"] is (kind == "nvfp4")
        assert r["bytes_on_disk"] == 2 * 16 + 2 * 32 // gs + (4 if kind == "nvfp4" else 0)


# ------------------------------------------------------------------------------- refused, by name
@pytest.mark.parametrize("edit, match", [
    ({"strategy": "group", "group_size": 128}, r"strategy must be one of \['tensor', 'channel', 'block'\].*got 'group'"),
    ({"strategy": "token"}, r"strategy must be one of .*got 'token'"),
    ({"num_bits": 4}, r"num_bits must be 8 for format 'float-quantized' strategy 'tensor'; got 4"),
    ({"type": "int"}, r"type must be 'float' for format 'float-quantized'; got 'int'"),
    ({"strategy": "block", "block_structure": [64, 64]}, r"block_structure must be \[128, 128\].*got \[64, 64\]"),
    ({"strategy": "block"}, r"block_structure must be \[128, 128\].*got None"),
    ({"symmetric": False}, r"symmetric must be True"),
    ({"dynamic": True}, r"dynamic must be False"),
    ({"actorder": "group"}, r"actorder must be null, false, 'weight' or 'static' for a float format \(no g_idx\); got 'group'"),
    ({"shuffle": 1}, r"key 'shuffle' is not a QuantizationArgs field"),
])
def test_fp8_weight_args_refsim_cannot_honour_are_refused_by_name(tmp_path, edit, match):
    path, _ = _fp8_folder(tmp_path, "FP8")
    cfg = json.loads((path / "config.json").read_text())
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"].update(edit)
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=match):
        open_checkpoint(path)


def test_fp4_group_sizes_and_mixed_families_are_refused_by_name(tmp_path):
    packed = np.zeros((2, 16), np.uint8)
    path = _fp4_folder(tmp_path, "nvfp4", packed, np.full((2, 2), 0x38, np.uint8), np.array([1.0], np.float32))
    cfg = json.loads((path / "config.json").read_text())
    qc = cfg["quantization_config"]
    qc["config_groups"]["group_0"]["weights"]["group_size"] = 32
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"group_size must be 16 for format 'nvfp4-pack-quantized'.*got 32"):
        open_checkpoint(path)
    qc["config_groups"]["group_0"]["weights"]["group_size"] = 16
    qc["format"] = "mixed-precision"
    qc["config_groups"]["group_1"] = {"format": "pack-quantized", "targets": ["re:.*q_proj"],
                                      "weights": {"num_bits": 4, "type": "int", "strategy": "channel"}}
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config_groups must all be int .* or all float formats.*"
                                              r"group_0: nvfp4.*group_1: int"):
        open_checkpoint(path)
    qc["config_groups"]["group_1"]["format"] = "marlin-24"
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"format must be one of .*got 'marlin-24'"):
        open_checkpoint(path)


def test_broken_float_tensors_are_refused_naming_the_tensor(tmp_path):
    packed = np.zeros((2, 16), np.uint8)
    nv = _fp4_folder(tmp_path, "nvfp4", packed, np.full((2, 2), 0x38, np.uint8), np.array([0.0], np.float32))
    with pytest.raises(CheckpointError, match=r"layer 'model.layers.0.mlp.up_proj': global_scale: must be > 0; "
                                              r"got 0.0"):
        open_checkpoint(nv).read_layer("model.layers.0.mlp.up_proj")
    (nv / "model.safetensors").unlink()
    save_tensors(nv / "model.safetensors", {"model.layers.0.mlp.up_proj.weight_packed": packed,
                                            "model.layers.0.mlp.up_proj.weight_scale": np.full((2, 2), 0x38, np.uint8),
                                            "model.layers.0.mlp.up_proj.weight_global_scale": np.ones(1, np.float32)})
    with pytest.raises(DtypeError, match=r"weight_scale': dtype must be float8_e4m3fn; got U8"):
        open_checkpoint(nv).read_layer("model.layers.0.mlp.up_proj")
    mx = _fp4_folder(tmp_path, "mxfp4", packed, np.full((2, 1), 127, np.uint8))
    (mx / "model.safetensors").unlink()
    save_tensors(mx / "model.safetensors", {"model.layers.0.mlp.up_proj.weight_packed": packed,
                                            "model.layers.0.mlp.up_proj.weight_scale": np.full((2, 2), 127, np.uint8)})
    with pytest.raises(ShapeError, match=r"weight_scale': shape must be \(2, 1\); got \(2, 2\)"):
        open_checkpoint(mx).read_layer("model.layers.0.mlp.up_proj")
    path, _ = _fp8_folder(tmp_path, "FP8_DYNAMIC")
    t = {k: v for k, v in np.load(FP8_NPZ).items() if k.startswith("FP8_DYNAMIC.")}
    (path / "model.safetensors").unlink()
    save_tensors(path / "model.safetensors", {f"{Q}.weight": t[f"FP8_DYNAMIC.{Q}.weight"],
                                              f"{Q}.weight_scale": t[f"FP8_DYNAMIC.{Q}.weight_scale"]})
    with pytest.raises(DtypeError, match=r"q_proj.weight': dtype must be float8_e4m3fn; got U8"):
        open_checkpoint(path).read_layer(Q)


@pytest.mark.parametrize("make, err, match", [
    (lambda: CTFP8Layer("l", np.full((2, 4), 0x7F, np.uint8), np.ones((1,), np.float32), "tensor"),
     FormatRuleError, r"codes: must not hold the e4m3 NaN code"),
    (lambda: CTFP8Layer("l", np.zeros((2, 4), np.uint8), np.ones((2, 4), np.float32), "channel"),
     ShapeError, r"scale: shape must be \(2, 1\) for strategy 'channel'.*got \(2, 4\)"),
    (lambda: CTFP8Layer("l", np.zeros((2, 4), np.uint8), np.zeros((1,), np.float32), "tensor"),
     FormatRuleError, r"scale: must be > 0; got 0.0"),
    (lambda: CTFP4Layer("l", "mxfp4", np.zeros((1, 16), np.uint8), np.zeros((1, 1), np.uint8),
                        np.ones(1, np.float32)), FormatRuleError, r"global_scale: present exactly for nvfp4"),
    (lambda: CTFP4Layer("l", "nvfp4", np.zeros((1, 8), np.uint8), np.full((1, 1), 0xFF, np.uint8),
                        np.ones(1, np.float32)), FormatRuleError, r"scale: e4m3 block scales must not be NaN"),
    (lambda: CTFP4Layer("l", "nvfp4", np.zeros((1, 4), np.uint8), np.zeros((1, 1), np.uint8),
                        np.ones(1, np.float32)), ShapeError, r"K = 2 \* 4 must be a multiple of the nvfp4 block 16"),
])
def test_float_layer_records_refuse_broken_fields_by_name(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_conversion_of_a_float_checkpoint_is_refused_by_name(tmp_path, capsys):
    path, _ = _fp8_folder(tmp_path, "FP8_BLOCK")
    assert main(["convert", str(path), "--to", "gptq-v2", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "cannot convert a compressed-tensors layer to gptq-v2 without loss: fp8 layers hold e4m3 codes" in err
    assert not (tmp_path / "out").exists()
