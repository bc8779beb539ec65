"""refsim.io.hf_folder: output folders the serving tools load, compared with a folder llm-compressor wrote
(tests/io/data), sharded with transformers' index, config.json and side files carried over; and, end to
end through quantize_model, output paths checked before any work (refsim.io.output's unit tests are in
test_output.py)."""

from __future__ import annotations

import json
import os
import shutil
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

REF = Path(__file__).parent / "data" / "ct_w4a16_sym"
#: what transformers (config, tokenizer, GenerationConfig, weights) and vLLM read from a folder
LOADER_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}


@pytest.fixture(scope="module")
def fp_llama(tmp_path_factory) -> Path:
    """The unquantized model behind the reference: its dequantized bf16 weights, its config without
    quantization_config, its tokenizer and generation files."""
    out = tmp_path_factory.mktemp("fp") / "tiny-llama"
    out.mkdir()
    ck = open_checkpoint(REF)
    tensors = {n + ".weight": np.ascontiguousarray(ck.read_layer(n).dequantize().T) for n in ck.layer_names()}
    consumed = {f"{n}.{s}" for n in ck.layer_names() for s in ("weight_packed", "weight_scale", "weight_shape")}
    tensors.update({t: ck.tensor(t) for t in ck.tensor_names() if t not in consumed})
    save_tensors(out / "model.safetensors", tensors, {"format": "pt"})
    cfg = json.loads((REF / "config.json").read_text())
    del cfg["quantization_config"]
    (out / "config.json").write_text(json.dumps(cfg))
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(REF / f, out / f)
    return out


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
