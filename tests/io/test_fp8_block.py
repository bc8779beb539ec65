"""refsim.io.fp8_block and the float conversions of refsim.io.convert: a DeepSeek-style FP8 block folder (the e4m3
bytes and block scales llm-compressor 0.14.0.1 saved for FP8_BLOCK, tests/io/data/ct_float_llmcompressor.npz,
stored as ``weight`` + ``weight_scale_inv``) read, converted to compressed-tensors and back without changing a
byte, and every lossy float conversion refused with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refsim.cli import main
from refsim.errors import CheckpointError, FormatRuleError
from refsim.io import open_checkpoint
from refsim.io.convert import convert
from refsim.io.ct_float_write import PRESETS
from refsim.io.fp8_block import FP8BlockLayer
from refsim.io.quantize import QuantizeOptions, quantize_model
from refsim.io.readers import detect
from refsim.io.tensors import TensorFile, save_tensors

GOLDENS = np.load(Path(__file__).parent / "data" / "ct_float_llmcompressor.npz")
NAMES = [k[: -len(".w_bf16")] for k in GOLDENS.files if k.endswith(".w_bf16")]
DEEPSEEK_QC = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}


def _deepseek(path: Path, qc=None) -> Path:
    path.mkdir()
    t = {}
    for n in NAMES:
        t[f"{n}.weight"] = GOLDENS[f"FP8_BLOCK.{n}.weight"].view(ml_dtypes.float8_e4m3fn)
        t[f"{n}.weight_scale_inv"] = GOLDENS[f"FP8_BLOCK.{n}.weight_scale"]
    t["model.embed_tokens.weight"] = np.ones((8, 64), ml_dtypes.bfloat16)
    t["lm_head.weight"] = np.full((8, 64), 0.5, ml_dtypes.bfloat16)
    save_tensors(path / "model.safetensors", t)
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": qc or DEEPSEEK_QC}))
    return path


def _bytes(folder: Path) -> dict[str, bytes]:
    with TensorFile(folder / "model.safetensors") as tf:
        return {n: np.ascontiguousarray(tf.read(n)).tobytes() for n in tf.names()}


def test_the_reader_reads_the_layers_and_dequantizes_as_deepseeks_weight_dequant(tmp_path):
    src = _deepseek(tmp_path / "ds")
    assert detect(src) == "fp8"
    ck = open_checkpoint(src)
    assert set(ck.layer_names()) == set(NAMES)
    lay = ck.read_layer("model.layers.0.mlp.down_proj")
    assert isinstance(lay, FP8BlockLayer) and (lay.k, lay.n, lay.format) == (128, 64, "fp8")
    codes = GOLDENS["FP8_BLOCK.model.layers.0.mlp.down_proj.weight"]             # (64, 128): one row of 1 x 1 tiles
    s = GOLDENS["FP8_BLOCK.model.layers.0.mlp.down_proj.weight_scale"]            # (1, 1)
    want = (codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * s[0, 0]).astype(np.float32).T
    assert lay.dequantize().dtype == np.float32 and lay.dequantize().tobytes() == want.tobytes()
    ck.close()


def test_fp8_to_compressed_tensors_and_back_changes_no_byte(tmp_path, capsys):
    src = _deepseek(tmp_path / "ds")
    assert main(["convert", str(src), "--to", "compressed-tensors", str(tmp_path / "ct"), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == 7
    ct = tmp_path / "ct"
    qc = json.loads((ct / "config.json").read_text())["quantization_config"]
    gold = json.loads(str(GOLDENS["FP8_BLOCK.config"]))                          # llm-compressor's FP8_BLOCK folder
    assert qc["config_groups"] == gold["config_groups"] and qc["format"] == gold["format"]
    b = _bytes(ct)
    for n in NAMES:
        assert b[f"{n}.weight"] == GOLDENS[f"FP8_BLOCK.{n}.weight"].tobytes()
        assert b[f"{n}.weight_scale"] == GOLDENS[f"FP8_BLOCK.{n}.weight_scale"].tobytes()
    convert(ct, "fp8-block", tmp_path / "back")
    assert _bytes(tmp_path / "back") == _bytes(src)
    assert json.loads((tmp_path / "back" / "config.json").read_text())["quantization_config"] == DEEPSEEK_QC
    assert main(["inspect", str(tmp_path / "back"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["layers"]
    assert sorted(r["name"] for r in rows) == sorted(NAMES) and {r["scheme"]["strategy"] for r in rows} == {"block"}


def test_lossy_float_conversions_are_refused_with_the_reason(tmp_path):
    src = _deepseek(tmp_path / "ds")
    with pytest.raises(FormatRuleError, match="e4m3 codes; marlin holds integer codes"):
        convert(src, "marlin", tmp_path / "m")
    fp = tmp_path / "fp"
    fp.mkdir()
    save_tensors(fp / "model.safetensors", {f"{n}.weight": GOLDENS[f"{n}.w_bf16"].view(ml_dtypes.bfloat16)
                                            for n in NAMES})
    for preset, to, why in (("FP8_DYNAMIC", "fp8-block", "strategy 'channel'"),
                            ("NVFP4A16", "gptq-v2", "e2m1 codes with e4m3 scales per 16"),
                            ("MXFP4A16", "fp8-block", "E8M0 scales per 32")):
        out = tmp_path / preset
        quantize_model(fp, out, QuantizeOptions("rtn"), to=f"compressed-tensors:{preset}", ignore="")
        with pytest.raises(FormatRuleError, match=why):
            convert(out, to, tmp_path / f"{preset}-to")
    convert(tmp_path / "NVFP4A16", "compressed-tensors", tmp_path / "same")       # the one lossless target
    assert _bytes(tmp_path / "same") == _bytes(tmp_path / "NVFP4A16")
    gguf_file = Path(__file__).parent / "data" / "tiny.gguf"
    with pytest.raises(FormatRuleError, match="GGUF .* blocks keep their scales inside each block"):
        convert(gguf_file, "compressed-tensors", tmp_path / "g")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FP8_DYNAMIC", "MXFP4A16", "NVFP4A16", "ds", "fp", "same"]
    assert PRESETS["FP8_BLOCK"][0] == "fp8"


@pytest.mark.parametrize("key, value", [("weight_block_size", [64, 64]), ("activation_scheme", "static"),
                                        ("fmt", "e5m2")])
def test_other_fp8_configs_are_refused_by_name(tmp_path, key, value):
    src = _deepseek(tmp_path / "ds", {**DEEPSEEK_QC, key: value})
    with pytest.raises(CheckpointError, match=f"quantization_config.{key} must be"):
        open_checkpoint(src)
