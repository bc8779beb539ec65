"""``refsim quantize``, ``refsim inspect`` and ``refsim convert`` end to end on all-MiniLM-L6-v2: the pinned
``inspect --json`` keys, the pinned Marlin output, and refusals as one line on stderr with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.cli import main
from refsim.data import minilm
from refsim.formats import gptq as gptq_format
from refsim.formats import marlin as marlin_format
from refsim.io.tensors import TensorFile
from refsim.testing import assert_bitexact

INTER = "encoder.layer.1.intermediate.dense"


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """A GPTQ (symmetric, act-order) checkpoint of two real MiniLM layers, made by the CLI."""
    out = tmp_path_factory.mktemp("cli") / "gptq"
    rc = main(["quantize", str(minilm.model_path()), "--method", "gptq", "--sym", "--act-order", "--layers",
               r"encoder\.layer\.1\.(intermediate\.dense|attention\.self\.query)$", "--executor", "serial",
               "--out", str(out), "--quiet"])
    assert rc == 0
    return out


@pytest.mark.slow
def test_quantize_writes_per_layer_and_model_quality(quantized):
    quality = json.loads((quantized / "quality.json").read_text())
    assert [r["name"] for r in quality["layers"]] == ["encoder.layer.1.attention.self.query", INTER]
    assert quality["options"]["sym"] and quality["options"]["act_order"]
    assert quality["model_quality"]["metric"] == "embedding_cosine"
    assert 0.99 < quality["model_quality"]["min"] <= 1.0


def test_inspect_json_carries_the_pinned_keys(quantized, capsys):
    assert main(["inspect", str(quantized), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["format"] == "gptq" and rep["n_layers"] == 2
    for lay in rep["layers"]:
        assert lay["format"] == "gptq"
        assert type(lay["bits"]) is int and lay["bits"] == 4
        assert type(lay["group_size"]) is int and lay["group_size"] == 128
        assert lay["desc_act"] is True and lay["sym"] is True
        assert lay["bytes_fp16"] == 2 * lay["k"] * lay["n"] and 0 < lay["bytes_on_disk"] < lay["bytes_fp16"]
    by = {r["name"]: r for r in rep["layers"]}
    assert by[INTER]["marlin"] == {"ok": True, "reason": None}
    assert "N=384 is not a multiple of 256" in by["encoder.layer.1.attention.self.query"]["marlin"]["reason"]
    assert main(["inspect", str(quantized)]) == 0
    text = capsys.readouterr().out
    assert "Marlin cannot run 1 of 2 layers" in text and "gptq, 2 layers" in text


def test_convert_refusal_is_one_line_exit_2_and_leaves_out_empty(quantized, tmp_path, capsys):
    out = tmp_path / "marlin"
    assert main(["convert", str(quantized), "--to", "marlin", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("refsim convert: error: encoder.layer.1.attention.self.query: cannot repack to Marlin")
    assert not out.exists()


@pytest.mark.slow
def test_convert_marlin_of_the_marlin_capable_layer_matches_pack(quantized, tmp_path, capsys):
    out = tmp_path / "marlin"
    # the same checkpoint restricted to the Marlin-capable layer: quantize it alone, then convert
    src = tmp_path / "g"
    assert main(["quantize", str(minilm.model_path()), "--method", "gptq", "--sym", "--act-order", "--layers",
                 rf"^{INTER}$", "--executor", "serial", "--out", str(src), "--quiet"]) == 0
    assert main(["convert", str(src), "--to", "marlin", str(out), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["layers"] == 1
    with TensorFile(src / "model.safetensors") as g, TensorFile(out / "model.safetensors") as m:
        ck = gptq_format.GPTQCheckpoint(g.read(f"{INTER}.qweight"), g.read(f"{INTER}.qzeros"),
                                        g.read(f"{INTER}.scales"), g.read(f"{INTER}.g_idx"), 4, "gptq_v2")
        q, scales, _, g_idx = gptq_format.unpack(ck)
        B, s = marlin_format.pack(q[np.argsort(g_idx, kind="stable")], scales, 128)
        assert_bitexact(m.read(f"{INTER}.B"), B, name="B")
        assert_bitexact(m.read(f"{INTER}.s"), s, name="s")
    cfg = json.loads((out / "refsim_checkpoint.json").read_text())
    assert cfg["layers"][INTER] == {"k": 384, "n": 1536, "group_size": 128, "desc_act": True,
                                    "workspace_int32": 1536 // 128 * 16}


@pytest.mark.slow
def test_requantize_reports_the_added_error_on_stderr(tmp_path, capsys):
    src = tmp_path / "asym"
    assert main(["quantize", str(minilm.model_path()), "--method", "rtn", "--layers", rf"^{INTER}$",
                 "--executor", "serial", "--out", str(src), "--quiet"]) == 0
    assert main(["convert", str(src), "--to", "marlin", str(tmp_path / "m"), "--quiet"]) == 2
    assert "asymmetric zero points" in capsys.readouterr().err
    assert main(["convert", str(src), "--to", "marlin", str(tmp_path / "m"), "--requantize", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"{INTER}: re-quantized (asymmetric zero points" in err and "added error max |dW| = " in err


@pytest.mark.parametrize("argv, message", [
    (["inspect", "/no/such/checkpoint"], "refsim inspect: error: /no/such/checkpoint: checkpoint must be a directory"),
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
