"""``refsim quantize`` end to end: on all-MiniLM-L6-v2 (per-layer and model quality in quality.json) and on
the bundled decoder to compressed-tensors (held-out perplexity), refusals one line on stderr with exit 2."""

from __future__ import annotations

import json

import pytest

from refsim.cli import main
from refsim.data import minilm


INTER = "encoder.layer.1.intermediate.dense"


@pytest.mark.slow
def test_quantize_writes_per_layer_and_model_quality(quantized):
    quality = json.loads((quantized / "quality.json").read_text())
    assert [r["name"] for r in quality["layers"]] == ["encoder.layer.1.attention.self.query", INTER]
    assert quality["options"]["sym"] and quality["options"]["act_order"]
    assert quality["model_quality"]["metric"] == "embedding_cosine"
    assert 0.99 < quality["model_quality"]["min"] <= 1.0


@pytest.mark.parametrize("argv, message", [
    (["quantize", "/no/such.safetensors", "--method", "rtn", "--out", "{out}", "--executor", "serial"],
     "refsim quantize: error: /no/such.safetensors: checkpoint must be"),
    (["quantize", "x", "--method", "rtn", "--out", "{out}", "--executor", "cuda"],
     "refsim quantize: error: executor: must be 'serial'"),
])
def test_bad_paths_and_options_are_one_line_errors(argv, message, capsys, tmp_path):
    # OUT is a fresh path of this test's own: the refusal must not depend on what else is on the disk
    assert main([a.format(out=tmp_path / "out") for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(message)


def test_group_size_has_one_spelling_for_per_channel(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["quantize", "x", "--method", "rtn", "--out", "o", "--group-size", "channel"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == ("refsim quantize: error: argument --group-size: must be "
                                                                "a positive integer or 'none' (per-channel); got 'channel'")


@pytest.mark.slow
def test_quantize_a_decoder_to_compressed_tensors_prints_held_out_perplexity(tmp_path, capsys):
    from refsim.data.models import pydoc_llama_path

    out = tmp_path / "ct"
    assert main(["quantize", str(pydoc_llama_path()), "--method", "gptq", "--sym", "--to", "compressed-tensors",
                 "--calib", "corpus:512", "--layers", r"layers\.0\.", "--executor", "serial", "--out", str(out),
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "model: perplexity on 2048 held-out tokens" in text and "(unquantized " in text
    assert main(["inspect", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["format"] == "compressed-tensors" and rep["n_layers"] == 7
    assert {lay["scheme"]["strategy"] for lay in rep["layers"]} == {"group"}
    # the layers left alone are named where vLLM looks for them
    assert "model.layers.1.mlp.down_proj" in rep["quantization_config"]["ignore"]
    assert "lm_head" in rep["quantization_config"]["ignore"]
    assert capsys.readouterr().err == ""   # symmetric: no known loader failure, a config of its own


def test_quantize_states_the_derived_encoder_config_and_the_asymmetric_ct_load_failure(tmp_path, capsys):
    # all-MiniLM-L6-v2 is a bare safetensors file: config.json is derived, and asymmetric CT does not load
    out = tmp_path / "ct"
    assert main(["quantize", str(minilm.model_path()), "--method", "rtn", "--to", "compressed-tensors", "--layers",
                 r"^encoder\.layer\.0\.attention\.self\.query$", "--executor", "serial", "--out", str(out),
                 "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith("note: config.json: the source has no model_type") and "num_hidden_layers=6" in err[0]
    assert err[1].startswith("warning: asymmetric compressed-tensors: transformers 5.24.0 + compressed-tensors "
                             "0.20.1: loading fails")
    assert json.loads((out / "config.json").read_text())["model_type"] == "bert"


@pytest.mark.parametrize("extra, message", [
    (["--calib", "corpus:0"], "calib: token count in 'corpus:0' must be a positive integer"),
    (["--calib", "/no/such.txt"], "/no/such.txt: text file must be readable UTF-8"),
    (["--calib", "corpus:999999"], "n_tokens: the text holds"),
    (["--ignore", "("], "ignore: must be a regular expression"),
    (["--method", "awq", "--bits", "3"], "bits: AWQ GEMM checkpoints are 4-bit; got 3 (use --to compressed-tensors)"),
])
def test_bad_calibration_requests_are_one_line_errors(tmp_path, capsys, extra, message):
    from refsim.data.models import pydoc_llama_path

    argv = ["quantize", str(pydoc_llama_path()), "--executor", "serial", "--out", str(tmp_path / "o"), "--quiet"]
    argv += extra if "--method" in extra else ["--method", "gptq", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "o").exists()
