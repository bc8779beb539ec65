"""``refsim inspect`` on a GPTQ checkpoint of two MiniLM layers made by ``refsim quantize``: the pinned
``--json`` keys, the text summary, and a missing path as one line on stderr with exit 2."""

from __future__ import annotations

import json

from refsim.cli import main


INTER = "encoder.layer.1.intermediate.dense"


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


def test_a_missing_checkpoint_is_a_one_line_error(capsys):
    assert main(["inspect", "/no/such/checkpoint"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("refsim inspect: error: /no/such/checkpoint: checkpoint must be a directory")
