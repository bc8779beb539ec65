"""``refsim convert`` on MiniLM GPTQ checkpoints made by ``refsim quantize``: the Marlin output equal to
refsim.formats.marlin.pack of the unpacked GPTQ codes, --requantize for asymmetric sources, and a refusal
as one line on stderr with exit 2 that leaves OUT absent."""

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


def test_convert_refusal_is_one_line_exit_2_and_leaves_out_empty(quantized, tmp_path, capsys):
    out = tmp_path / "marlin"
    assert main(["convert", str(quantized), "--to", "marlin", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("refsim convert: error: encoder.layer.1.attention.self.query: cannot repack to Marlin")
    assert not out.exists()


def test_convert_to_compressed_tensors_warns_only_for_asymmetric_sources(quantized, tmp_path, capsys):
    assert main(["convert", str(quantized), "--to", "compressed-tensors", str(tmp_path / "sym"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""   # symmetric source; its config.json is already complete
    src = tmp_path / "asym"
    assert main(["quantize", str(minilm.model_path()), "--method", "rtn", "--layers", rf"^{INTER}$", "--executor",
                 "serial", "--out", str(src), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["convert", str(src), "--to", "compressed-tensors", str(tmp_path / "ct"), "--quiet"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: asymmetric compressed-tensors: transformers 5.24.0")


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
