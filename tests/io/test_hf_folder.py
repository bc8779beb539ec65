"""refsim.io.hf_folder: output folders the serving tools load, compared with a folder llm-compressor wrote
(tests/io/data), sharded with transformers' index, config.json and side files carried over; and, end to
end through quantize_model, output paths checked before any work (refsim.io.output's unit tests are in
test_output.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

import refsim.io.quantize as quantize_mod
from refsim.errors import FormatRuleError
from refsim.io import open_checkpoint
from refsim.io.hf_folder import SIDE_FILES, finish, save_model_tensors
from refsim.io.quantize import QuantizeOptions, quantize_model
from refsim.io.tensors import save_tensors

from conftest_io import (BERT_FIELDS, ENC_H, ENC_I, ENC_LAYERS, ENC_POS, ENC_VOCAB, KINDS, write_tiny_bert,
                         write_tiny_llama)

REF = Path(__file__).parent / "data" / "ct_w4a16_sym"
#: what transformers (config, tokenizer, GenerationConfig, weights) and vLLM read from a folder
LOADER_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}


@pytest.fixture(scope="module")
def fp_llama(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("fp") / "tiny-llama")


def _header(path: Path) -> dict:
    with safe_open(str(path), framework="numpy") as f:
        return {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}


def test_quantize_to_compressed_tensors_writes_what_llm_compressor_writes(fp_llama, tmp_path):
    out = tmp_path / "ct"
    quantize_model(fp_llama, out, QuantizeOptions("gptq", sym=True, measure_memory=False), calib="corpus:512",
                   to="compressed-tensors")
    assert LOADER_FILES <= {p.name for p in out.iterdir()}
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (out / f).read_bytes() == (REF / f).read_bytes()
    ref_cfg, cfg = (json.loads((d / "config.json").read_text()) for d in (REF, out))
    assert {k: v for k, v in cfg.items() if k != "quantization_config"} == \
        {k: v for k, v in ref_cfg.items() if k != "quantization_config"}
    rq, q = ref_cfg["quantization_config"], cfg["quantization_config"]
    assert sorted(q) == sorted(rq)
    for key in ("quant_method", "format", "quantization_status", "ignore", "kv_cache_scheme", "sparsity_config"):
        assert q[key] == rq[key], key
    (rg,), (g,) = rq["config_groups"].values(), q["config_groups"].values()
    for key in ("format", "targets", "input_activations", "output_activations"):
        assert g[key] == rg[key], key
    for key in ("num_bits", "type", "symmetric", "strategy", "group_size", "dynamic", "actorder"):
        assert g["weights"][key] == rg["weights"][key], key
    ref_h, h = _header(REF / "model.safetensors"), _header(out / "model.safetensors")
    assert sorted(h) == sorted(ref_h)
    for name, (dtype, shape) in ref_h.items():
        # refsim keeps the fp16 scales its quantizer chose; llm-compressor stores the model dtype
        assert shape == h[name][1] and (dtype == h[name][0] or name.endswith("weight_scale")), name
    assert open_checkpoint(out).format == "compressed-tensors"


@pytest.mark.slow
def test_gptq_and_awq_folders_carry_the_configs_their_loaders_read(fp_llama, tmp_path):
    quantize_model(fp_llama, tmp_path / "g", QuantizeOptions("rtn", measure_memory=False))
    cfg = json.loads((tmp_path / "g" / "config.json").read_text())
    qc = cfg["quantization_config"]
    assert qc == json.loads((tmp_path / "g" / "quantize_config.json").read_text())
    assert {k: qc[k] for k in ("quant_method", "bits", "group_size", "desc_act", "sym", "lm_head")} == \
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": False, "lm_head": False}
    assert cfg["model_type"] == "llama" and (tmp_path / "g" / "tokenizer.json").is_file()
    quantize_model(fp_llama, tmp_path / "a", QuantizeOptions("awq", measure_memory=False), calib="corpus:256")
    qa = json.loads((tmp_path / "a" / "config.json").read_text())["quantization_config"]
    assert qa == {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
                  "modules_to_not_convert": ["lm_head"]}
    names = set(open_checkpoint(tmp_path / "a").tensor_names())
    assert "model.embed_tokens.weight" in names and not any(n.startswith("lm_head.q") for n in names)


def test_large_checkpoints_are_sharded_with_an_index(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {f"t{i}": rng.standard_normal((64, 64)).astype(np.float32) for i in range(5)}  # 16 KiB each
    files = save_model_tensors(tmp_path, tensors, max_shard_bytes=40_000)
    assert files[-1] == "model.safetensors.index.json" and len(files) == 4
    index = json.loads((tmp_path / files[-1]).read_text())
    assert index["metadata"]["total_size"] == 5 * 64 * 64 * 4
    assert sorted(index["weight_map"]) == sorted(tensors)
    for name, fname in index["weight_map"].items():
        with safe_open(str(tmp_path / fname), framework="numpy") as f:
            np.testing.assert_array_equal(f.get_tensor(name), tensors[name])


def test_tensors_under_the_shard_size_go_to_one_file(tmp_path):
    t = {"b": np.arange(6, dtype=np.float16).reshape(2, 3), "a": np.ones(4, np.int32)}
    assert save_model_tensors(tmp_path, t, max_shard_bytes=28) == ["model.safetensors"]   # 12 + 16 bytes
    assert _header(tmp_path / "model.safetensors") == {"a": ("I32", (4,)), "b": ("F16", (2, 3))}
    # one byte less and the two tensors need two shards, in name order
    (tmp_path / "2").mkdir()
    files = save_model_tensors(tmp_path / "2", t, max_shard_bytes=27)
    assert files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                     "model.safetensors.index.json"]
    assert json.loads((tmp_path / "2" / files[2]).read_text())["weight_map"] == {"a": files[0], "b": files[1]}


def test_finish_replaces_the_quantization_config_and_copies_the_side_files(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8,
                                                 "quantization_config": {"quant_method": "old"}}))
    (src / "tokenizer.json").write_text("{}")
    (src / "notes.txt").write_text("not a side file")
    (out / "config.json").write_text(json.dumps({"hidden_size": 16}))      # the writer's own keys win
    finish(out, src / "model.safetensors", {"quant_method": "gptq", "bits": 4})
    cfg = json.loads((out / "config.json").read_text())
    assert cfg == {"model_type": "llama", "hidden_size": 16, "quantization_config": {"quant_method": "gptq", "bits": 4}}
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "tokenizer.json"]
    assert "tokenizer.json" in SIDE_FILES and "notes.txt" not in SIDE_FILES


@pytest.fixture
def no_job(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("the job ran before the output path was checked")

    monkeypatch.setattr(quantize_mod, "quantize_layer_job", fail)


@pytest.mark.parametrize("kind", ["link-to-empty-folder", "dangling-link", "file"])
def test_bad_output_paths_are_refused_before_any_work(fp_llama, tmp_path, no_job, kind):
    out = tmp_path / "out"
    if kind == "link-to-empty-folder":
        (tmp_path / "empty").mkdir()
        out.symlink_to(tmp_path / "empty")
    elif kind == "dangling-link":
        out.symlink_to(tmp_path / "nowhere")
    else:
        out.write_text("x")
    with pytest.raises(FormatRuleError, match="out: must be a new or empty folder"):
        quantize_model(fp_llama, out, QuantizeOptions("rtn"))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == (["empty", "out"] if kind == "link-to-empty-folder" else ["out"])  # no hidden .out.*.tmp
    if kind == "link-to-empty-folder":
        assert list((tmp_path / "empty").iterdir()) == []


def test_existing_empty_out_is_kept_and_files_get_normal_permissions(fp_llama, tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    os.chmod(out, 0o755)
    inode = out.stat().st_ino
    old = os.umask(0o022)
    try:
        quantize_model(fp_llama, out, QuantizeOptions("rtn", measure_memory=False), layers=r"q_proj$")
    finally:
        os.umask(old)
    assert out.stat().st_ino == inode and stat.S_IMODE(out.stat().st_mode) == 0o755
    for f in out.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f.name
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no hidden .out.*.tmp left


def test_a_failed_job_leaves_no_temporary_folder(fp_llama, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("worker died")

    monkeypatch.setattr(quantize_mod, "quantize_layer_job", boom)
    with pytest.raises(RuntimeError, match="worker died"):
        quantize_model(fp_llama, tmp_path / "out", QuantizeOptions("rtn"))
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------------
# Every output folder kind, decoder and encoder, holds what the libraries' loaders read. The fields are
# written out by hand from the loaders' source (the versions named); tests/io/load_with_transformers.py
# loads the same folders with the libraries themselves where they are installed.
#
#   GPTQ   transformers 5.24 GPTQConfig.post_init (utils/quantization_config.py): bits in {2,3,4,8},
#          group_size -1 or > 0, 0 < damp_percent < 1; optimum 2.x GPTQQuantizer.convert_model replaces the
#          Linear modules under block_name_to_quantize (default: decoder patterns such as "model.layers";
#          an encoder needs its own); gptqmodel's TorchQuantLinear buffers per layer: qweight int32
#          (K*bits/32, N), qzeros int32 (G, N*bits/32), scales float16 (G, N), g_idx int32 (K,)
#   AWQ    AwqConfig (quant_method "awq", bits 4, group_size, zero_point, version "gemm",
#          modules_to_not_convert matched as substrings of module names); WQLinear_GEMM: qweight int32
#          (K, N/8), qzeros int32 (G, N/8), scales float16 (G, N)
#   CT     compressed-tensors 0.20.1 PackedQuantizationCompressor: weight_packed int32 (N, K*bits/32),
#          weight_scale float (N, G), weight_shape int (2,) = [N, K], weight_zero_point int32
#          (N*bits/32, G) only when not symmetric; every Linear not in "ignore" is a target
#   config transformers' AutoConfig needs model_type; BertConfig's fields (conftest_io.BERT_FIELDS)
# ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fp_bert(tmp_path_factory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("fp") / "tiny-bert")


def _linears(fp: Path) -> dict[str, tuple]:
    """Linear module name -> (N, K) of the FP model (2-D weights that are not embeddings)."""
    h = _header(fp / "model.safetensors")
    return {n[:-len(".weight")]: s for n, (_, s) in h.items()
            if n.endswith(".weight") and len(s) == 2 and "embeddings" not in n and "embed_tokens" not in n}


def _check_gptq(qc, h, linears, block):
    assert qc["quant_method"] == "gptq" and qc["bits"] == 4 and qc["group_size"] == 128
    assert isinstance(qc["desc_act"], bool) and isinstance(qc["sym"], bool) and 0 < qc["damp_percent"] < 1
    if block is not None:
        assert qc["block_name_to_quantize"] == block
    under = qc.get("block_name_to_quantize", "model.layers")   # optimum's pattern for a Llama decoder
    for m, (n, k) in linears.items():
        if m.startswith(under + "."):
            assert h[f"{m}.qweight"] == ("I32", (k * 4 // 32, n)), m
            assert h[f"{m}.qzeros"] == ("I32", (k // 128, n * 4 // 32)), m
            assert h[f"{m}.scales"] == ("F16", (k // 128, n)), m
            assert h[f"{m}.g_idx"] == ("I32", (k,)), m
            assert f"{m}.weight" not in h
        else:
            assert f"{m}.weight" in h and f"{m}.qweight" not in h, m   # left a plain Linear by the loader


def _check_awq(qc, h, linears):
    assert {k: qc[k] for k in ("quant_method", "bits", "group_size", "zero_point", "version")} == \
        {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    skip = qc["modules_to_not_convert"] or []
    for m, (n, k) in linears.items():
        if any(s in m for s in skip):
            assert f"{m}.weight" in h and f"{m}.qweight" not in h, m
        else:
            assert h[f"{m}.qweight"] == ("I32", (k, n // 8)), m
            assert h[f"{m}.qzeros"] == ("I32", (k // 128, n // 8)), m
            assert h[f"{m}.scales"] == ("F16", (k // 128, n)), m


def _check_ct(qc, h, linears, sym):
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "pack-quantized"
    (g,) = qc["config_groups"].values()
    assert g["targets"] == ["Linear"] and g["weights"]["symmetric"] is sym and g["weights"]["num_bits"] == 4
    for m, (n, k) in linears.items():
        if m in qc["ignore"]:
            assert f"{m}.weight" in h and f"{m}.weight_packed" not in h, m
            continue
        assert h[f"{m}.weight_packed"] == ("I32", (n, k * 4 // 32)), m
        assert h[f"{m}.weight_scale"][0] in ("F16", "BF16", "F32") and h[f"{m}.weight_scale"][1] == (n, k // 128), m
        assert h[f"{m}.weight_shape"][0] in ("I32", "I64") and h[f"{m}.weight_shape"][1] == (2,), m
        with safe_open(str(h["__file__"]), framework="numpy") as f:
            assert f.get_tensor(f"{m}.weight_shape").tolist() == [n, k], m
        if sym:
            assert f"{m}.weight_zero_point" not in h, m
        else:
            assert h[f"{m}.weight_zero_point"] == ("I32", (n * 4 // 32, k // 128)), m


@pytest.mark.parametrize("family", ["decoder", "encoder"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_output_folder_kind_holds_what_its_loader_reads(fp_llama, fp_bert, tmp_path, family, kind):
    fp = fp_llama if family == "decoder" else fp_bert
    opts, to = KINDS[kind]
    out = tmp_path / "out"
    summary = quantize_model(fp, out, QuantizeOptions(**opts, measure_memory=False), calib="corpus:256",
                             heldout_tokens=256, to=to)
    cfg = json.loads((out / "config.json").read_text())
    qc = cfg["quantization_config"]
    h = _header(out / "model.safetensors")
    h["__file__"] = out / "model.safetensors"
    linears = _linears(fp)
    if family == "encoder":
        assert cfg["model_type"] == "bert" and cfg["architectures"] == ["BertModel"]
        assert set(BERT_FIELDS) <= set(cfg)
        assert {k: cfg[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                    "intermediate_size", "max_position_embeddings", "type_vocab_size")} == \
            {"vocab_size": len(ENC_VOCAB), "hidden_size": ENC_H, "num_hidden_layers": ENC_LAYERS,
             "num_attention_heads": 2, "intermediate_size": ENC_I, "max_position_embeddings": ENC_POS,
             "type_vocab_size": 2}
        assert (out / "vocab.txt").read_bytes() == (fp / "vocab.txt").read_bytes()
        assert any(n.startswith("note: config.json: the source has no model_type") for n in summary["notes"])
    else:
        assert {k: v for k, v in cfg.items() if k != "quantization_config"} == \
            json.loads((fp / "config.json").read_text())
        assert (out / "tokenizer.json").is_file()
    if kind in ("rtn", "gptq"):
        _check_gptq(qc, h, linears, "encoder.layer" if family == "encoder" else None)
        assert json.loads((out / "quantize_config.json").read_text()) == qc
    elif kind == "awq":
        _check_awq(qc, h, linears)
    else:
        _check_ct(qc, h, linears, kind == "ct-sym")
    warned = [n for n in summary["notes"] if n.startswith("warning: asymmetric compressed-tensors")]
    assert len(warned) == (kind == "ct-asym")
    if warned:
        assert "transformers 5.24.0 + compressed-tensors 0.20.1" in warned[0]


#: compressed-tensors float preset -> (tensor suffix: (safetensors dtype, shape as a function of (N, K))), as
#: compressed-tensors 0.19's decompressors read them (tests/io/load_float_checkpoints.py loads such folders)
FLOAT_LAYOUTS = {
    "FP8_DYNAMIC": {"weight": ("F8_E4M3", lambda n, k: (n, k)), "weight_scale": ("F32", lambda n, k: (n, 1))},
    "FP8_BLOCK": {"weight": ("F8_E4M3", lambda n, k: (n, k)),
                  "weight_scale": ("F32", lambda n, k: (-(-n // 128), -(-k // 128)))},
    "NVFP4A16": {"weight_packed": ("U8", lambda n, k: (n, k // 2)), "weight_scale": ("F8_E4M3", lambda n, k: (n, k // 16)),
                 "weight_global_scale": ("F32", lambda n, k: (1,))},
    "MXFP4A16": {"weight_packed": ("U8", lambda n, k: (n, k // 2)), "weight_scale": ("U8", lambda n, k: (n, k // 32))},
}


@pytest.mark.parametrize("preset", list(FLOAT_LAYOUTS))
def test_every_float_preset_folder_holds_what_its_loader_reads(fp_llama, tmp_path, preset):
    out = tmp_path / preset
    summary = quantize_model(fp_llama, out, QuantizeOptions("rtn", measure_memory=False),
                             to=f"compressed-tensors:{preset}")
    cfg = json.loads((out / "config.json").read_text())
    assert {k: v for k, v in cfg.items() if k != "quantization_config"} == \
        json.loads((fp_llama / "config.json").read_text())
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (out / f).read_bytes() == (fp_llama / f).read_bytes()
    qc = cfg["quantization_config"]
    fmt = {"FP8_DYNAMIC": "float-quantized", "FP8_BLOCK": "float-quantized", "NVFP4A16": "nvfp4-pack-quantized",
           "MXFP4A16": "mxfp4-pack-quantized"}[preset]
    assert (qc["quant_method"], qc["format"], qc["quantization_status"], qc["ignore"]) == \
        ("compressed-tensors", fmt, "compressed", ["lm_head"])
    (g,) = qc["config_groups"].values()
    assert g["targets"] == ["Linear"] and g["format"] == fmt and g["weights"]["type"] == "float"
    h = _header(out / "model.safetensors")
    for m, (n, k) in _linears(fp_llama).items():
        if m == "lm_head":
            assert f"{m}.weight" in h
            continue
        layout = FLOAT_LAYOUTS[preset]
        assert {t for t in h if t.rsplit(".", 1)[0] == m} == {f"{m}.{s}" for s in layout}, m
        for suffix, (dtype, shape) in layout.items():
            assert h[f"{m}.{suffix}"] == (dtype, shape(n, k)), (m, suffix)
    # the tiny decoder is bfloat16: the FP8 presets say that the loader rounds their float32 scales to it
    assert any(n.startswith("note: FP8 weight_scale is float32") and "bfloat16" in n
               for n in summary["notes"]) == preset.startswith("FP8")
