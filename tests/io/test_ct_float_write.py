"""refsim.io.ct_float_write: ``refsim quantize --to compressed-tensors:<PRESET>`` writes the folder llm-compressor
0.14.0.1 saved for FP8_DYNAMIC, FP8_BLOCK, NVFP4A16 and MXFP4A16 (tests/io/data/ct_float_llmcompressor.npz,
made by make_ct_float.py beside it): the same tensor bytes for every linear and the same quantization_config;
refsim's reader reads the folder back bit for bit and ``inspect --json`` names every layer."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refsim.cli import main
from refsim.errors import FormatRuleError
from refsim.io import open_checkpoint
from refsim.io.compressed_tensors import ct_quantization_config
from refsim.io.ct_float import CTFP4Layer, CTFP8Layer
from refsim.io.ct_float_write import PRESETS, parse_ct_target, quantize_float_layers
from refsim.io.quantize import QuantizeOptions, quantize_model
from refsim.io.tensors import TensorFile, save_tensors

GOLDENS = np.load(Path(__file__).parent / "data" / "ct_float_llmcompressor.npz")
NAMES = [k[: -len(".w_bf16")] for k in GOLDENS.files if k.endswith(".w_bf16")]


@pytest.fixture(scope="module")
def fp_model(tmp_path_factory):
    """The golden's float32 weights as an FP folder (torch (N, K) layout), with an embedding and a norm."""
    src = tmp_path_factory.mktemp("fp") / "tiny"
    src.mkdir()
    t = {f"{n}.weight": GOLDENS[f"{n}.w_bf16"].view(ml_dtypes.bfloat16).astype(np.float32) for n in NAMES}
    t["model.embed_tokens.weight"] = np.ones((1024, 64), np.float32)
    t["model.layers.0.input_layernorm.weight"] = np.full(64, 0.5, np.float32)
    save_tensors(src / "model.safetensors", t)
    (src / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                 "tie_word_embeddings": True}))
    return src


@pytest.fixture(scope="module")
def written(fp_model, tmp_path_factory):
    """preset -> the folder refsim wrote."""
    root = tmp_path_factory.mktemp("ct")
    return {p: _write(fp_model, root / p, p) for p in PRESETS}


def _write(src, out, preset):
    quantize_model(src, out, QuantizeOptions("rtn", measure_memory=False), to=f"compressed-tensors:{preset}")
    return out


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_folder_holds_llm_compressors_tensors_and_config(written, fp_model, preset):
    out = written[preset]
    assert json.loads((out / "config.json").read_text())["quantization_config"] == \
        json.loads(str(GOLDENS[f"{preset}.config"]))
    golden = {k[len(preset) + 1:]: GOLDENS[k] for k in GOLDENS.files if k.startswith(preset + ".model.")}
    assert len(golden) >= 14
    with TensorFile(out / "model.safetensors") as tf, TensorFile(fp_model / "model.safetensors") as src:
        layer_tensors = {t for t in tf.names() if t.rsplit(".", 1)[0] in NAMES}
        assert layer_tensors == set(golden)
        for t, ref in golden.items():
            got = np.ascontiguousarray(tf.read(t))
            assert got.shape == ref.shape and got.tobytes() == np.ascontiguousarray(ref).tobytes(), t
        for t in ("model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"):
            assert tf.read(t).tobytes() == src.read(t).tobytes()          # copied unchanged


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_reader_reads_back_what_the_writer_wrote(written, fp_model, preset):
    kind = PRESETS[preset][0]
    ck = open_checkpoint(written[preset])
    assert set(ck.layer_names()) == set(NAMES)
    weights = {n: np.ascontiguousarray(GOLDENS[f"{n}.w_bf16"].view(ml_dtypes.bfloat16).astype(np.float32).T)
               for n in NAMES}
    for lay in quantize_float_layers(weights, preset):
        back = ck.read_layer(lay.name)
        assert type(back) is type(lay) and back.kind == kind
        for t, v in lay.tensors().items():
            assert back.tensors()[t].tobytes() == v.tobytes() and back.tensors()[t].dtype == v.dtype, t
        assert back.dequantize().tobytes() == lay.dequantize().tobytes()
    ck.close()


def test_inspect_json_names_every_layer_written(written, capsys):
    for preset, out in written.items():
        assert main(["inspect", str(out), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert sorted(r["name"] for r in summary["layers"]) == sorted(NAMES), preset
        assert {r["scheme"]["kind"] for r in summary["layers"]} == {PRESETS[preset][0]}


def test_the_cli_writes_a_preset_and_refuses_the_calibrated_ones(fp_model, tmp_path, capsys):
    assert main(["quantize", str(fp_model), "--to", "compressed-tensors:fp8_block", "--out", str(tmp_path / "b"),
                 "--quiet", "--executor", "serial"]) == 0
    assert "compressed-tensors:fp8_block" in capsys.readouterr().out
    for preset, why in (("FP8", "static per-tensor input_scale"), ("NVFP4", "input_global_scale")):
        assert main(["quantize", str(fp_model), "--to", f"compressed-tensors:{preset}", "--out",
                     str(tmp_path / preset), "--quiet", "--executor", "serial"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and why in err[0] and not (tmp_path / preset).exists()


def test_refusals_name_the_rule(fp_model, tmp_path):
    with pytest.raises(FormatRuleError, match="must be one of"):
        parse_ct_target("compressed-tensors:W4A16")
    with pytest.raises(FormatRuleError, match="'compressed-tensors:<PRESET>'"):
        parse_ct_target("marlin:FP8")
    with pytest.raises(FormatRuleError, match="method: .* use 'rtn' or gptq; got 'awq'"):
        quantize_model(fp_model, tmp_path / "g", QuantizeOptions("awq"), to="compressed-tensors:FP8_DYNAMIC")
    with pytest.raises(FormatRuleError, match="calib: GPTQ needs calibration"):
        quantize_model(fp_model, tmp_path / "n", QuantizeOptions("gptq"), calib="none",
                       to="compressed-tensors:FP8_DYNAMIC")
    with pytest.raises(FormatRuleError, match="act_order: only GPTQ"):
        quantize_model(fp_model, tmp_path / "a", QuantizeOptions("rtn", act_order=True),
                       to="compressed-tensors:FP8_DYNAMIC")
    with pytest.raises(FormatRuleError, match="without calibration"):
        quantize_model(fp_model, tmp_path / "c", QuantizeOptions("rtn"), calib="corpus:64",
                       to="compressed-tensors:FP8_DYNAMIC")
    with pytest.raises(FormatRuleError, match=r"fused layers \[.*q_proj', .*k_proj', .*v_proj'\] share .* got "
                                              r"\['model.layers.0.self_attn.q_proj'\]"):
        quantize_model(fp_model, tmp_path / "f", QuantizeOptions("rtn"), layers="q_proj",
                       to="compressed-tensors:NVFP4A16")
    assert not any(tmp_path.iterdir())
    # a model without v_proj has no q/k/v group: q_proj and k_proj keep their own global scales
    W = {n: np.ascontiguousarray(GOLDENS[f"{n}.w_bf16"].view(ml_dtypes.bfloat16).astype(np.float32).T)
         for n in NAMES if not n.endswith("v_proj")}
    q, k = quantize_float_layers({n: W[n] for n in NAMES[:2]}, "NVFP4A16", list(W))
    assert q.global_scale[0] != k.global_scale[0]
    fp8 = CTFP8Layer("a", np.zeros((2, 2), np.uint8), np.ones((2, 1), np.float32), "channel")
    fp4 = CTFP4Layer("b", "mxfp4", np.zeros((1, 16), np.uint8), np.zeros((1, 1), np.uint8), None)
    qc = ct_quantization_config([fp8, fp4], [])
    assert qc["format"] == "mixed-precision" and [g["format"] for g in qc["config_groups"].values()] == \
        ["float-quantized", "mxfp4-pack-quantized"]


GPTQ_GOLDENS = np.load(Path(__file__).parents[1] / "quant" / "data" / "gptq_float_llmcompressor.npz")


@pytest.mark.parametrize("preset,act_order", [("NVFP4A16", False), ("FP8_DYNAMIC", True)])
def test_gptq_writes_the_presets_folder_with_llm_compressors_gptq_config(fp_model, tmp_path, preset, act_order):
    # per-layer calibration inputs: each layer's tensors are gptq_quantize_float's on H = hessian(X) (the NVFP4
    # fused groups sharing their global scale), the config is what llm-compressor's GPTQModifier saved
    from refsim.quant import ct_fp4
    from refsim.quant.gptq import hessian
    from refsim.quant.gptq_float import gptq_quantize_float

    rng = np.random.default_rng(0)
    W = {n: np.ascontiguousarray(GOLDENS[f"{n}.w_bf16"].view(ml_dtypes.bfloat16).astype(np.float32).T) for n in NAMES}
    X = {n: rng.standard_normal((48, W[n].shape[0])).astype(np.float32) for n in NAMES}
    save_tensors(tmp_path / "x.safetensors", X)
    out = tmp_path / "out"
    quantize_model(fp_model, out, QuantizeOptions("gptq", act_order=act_order, measure_memory=False),
                   calib=str(tmp_path / "x.safetensors"), to=f"compressed-tensors:{preset}")
    case = f"{preset}.{'weight' if act_order else 'None'}"
    assert json.loads((out / "config.json").read_text())["quantization_config"] == \
        json.loads(str(GPTQ_GOLDENS[f"{case}.config"]))
    assert json.loads((out / "quality.json").read_text())["method"] == "gptq"
    saved = TensorFile(out / "model.safetensors")
    for n in NAMES:
        gscale = None
        if preset == "NVFP4A16":
            group = next((g for g in ct_fp4.fused_groups(NAMES) if n in g), [n])
            gscale = ct_fp4.global_scale(max(float(np.abs(W[m]).max()) for m in group))
        r = gptq_quantize_float(W[n], hessian(X[n]), preset, gscale=gscale, act_order=act_order)
        for t, v in r.tensors().items():
            got = saved.read(f"{n}.{t}")
            assert got.dtype.itemsize == v.dtype.itemsize and np.array_equal(got.view(v.dtype), v), (n, t)
    assert open_checkpoint(out).read_layer(NAMES[0]).kind == ("fp8" if preset.startswith("FP8") else "nvfp4")


def test_the_cli_runs_gptq_on_a_preset_with_text_calibration_through_the_sequential_forward(tmp_path, capsys):
    # the bundled 2-block decoder, 256 corpus tokens: the folder has the RTN folder's tensors (names, dtypes,
    # shapes) and config, but GPTQ's error feedback moved a good share of the codes
    model = Path(__file__).parents[2] / "refsim" / "data" / "models" / "pydoc_llama"
    for method in ("rtn", "gptq"):
        extra = ["--calib", "corpus:256"] if method == "gptq" else []
        assert main(["quantize", str(model), "--method", method, "--to", "compressed-tensors:MXFP4A16", *extra,
                     "--out", str(tmp_path / method), "--quiet", "--executor", "serial"]) == 0
    assert json.loads((tmp_path / "gptq" / "quality.json").read_text())["method"] == "gptq"
    cfg = [json.loads((tmp_path / m / "config.json").read_text())["quantization_config"] for m in ("rtn", "gptq")]
    assert cfg[0] == cfg[1]
    rtn, gptq = TensorFile(tmp_path / "rtn" / "model.safetensors"), TensorFile(tmp_path / "gptq" / "model.safetensors")
    assert sorted(rtn.names()) == sorted(gptq.names())
    packed = [n for n in rtn.names() if n.endswith("weight_packed")]
    assert len(packed) == 14
    moved = np.mean([np.mean(rtn.read(n) != gptq.read(n)) for n in packed])
    assert moved > 0.2
    assert main(["quantize", str(model), "--method", "gptq", "--to", "gguf:Q4_0", "--out", str(tmp_path / "g"),
                 "--quiet"]) == 2
    assert "use 'rtn'; got 'gptq'" in capsys.readouterr().err
