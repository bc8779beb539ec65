"""Model-level quality on held-out text: GPTQ beats round-to-nearest on an encoder (all-MiniLM-L6-v2) and on a
decoder (the bundled pydoc_llama), and AWQ beats round-to-nearest on the decoder. The held-out text never
enters calibration (refsim.data.corpus); the figures are perplexity (decoder) and the cosine similarity of
mean-pooled embeddings to the unquantized model's (encoder)."""

from __future__ import annotations

import json

import pytest

from refsim.data import minilm
from refsim.data.models import pydoc_llama_path
from refsim.io.quantize import QuantizeOptions, quantize_model
from refsim.io.readers import open_checkpoint


def _quality(model, tmp_path, method, calib="corpus:1024", heldout_tokens=1024, to="auto", **kw):
    out = tmp_path / f"{method}-{'-'.join(sorted(kw))}"
    s = quantize_model(model, out, QuantizeOptions(method, measure_memory=False, **kw), calib=calib,
                       heldout_tokens=heldout_tokens, to=to)
    assert json.loads((out / "quality.json").read_text())["model_quality"] == s["model_quality"]
    s["out"] = out
    return s


@pytest.fixture(scope="module")
def decoder_runs(tmp_path_factory):
    """3-bit, group 128, asymmetric: at 4 bits this small decoder loses under 0.4 % of its perplexity
    with any method (docs/io.md has those figures), at 3 bits round-to-nearest loses 2 %."""
    tmp = tmp_path_factory.mktemp("decoder")
    path = pydoc_llama_path()
    return {m: _quality(path, tmp, m, calib="corpus:1024", heldout_tokens=2048, bits=3,
                        to="compressed-tensors" if m == "awq" else "auto") for m in ("rtn", "gptq", "awq")}


@pytest.mark.slow
def test_gptq_beats_rtn_in_held_out_perplexity_on_the_decoder(decoder_runs):
    rtn, gptq = decoder_runs["rtn"]["model_quality"], decoder_runs["gptq"]["model_quality"]
    assert rtn["metric"] == gptq["metric"] == "perplexity"
    assert rtn["fp"] == gptq["fp"]                       # the same held-out tokens, the same unquantized model
    assert gptq["fp"] < gptq["quantized"] < rtn["quantized"]
    assert decoder_runs["gptq"]["sequential"] is True and decoder_runs["gptq"]["calib_tokens"] == 1024


@pytest.mark.slow
def test_awq_beats_rtn_in_held_out_perplexity_on_the_decoder(decoder_runs):
    rtn, awq = decoder_runs["rtn"]["model_quality"], decoder_runs["awq"]["model_quality"]
    assert awq["fp"] < awq["quantized"] < rtn["quantized"]


@pytest.mark.slow
def test_awq_scales_fold_exactly_and_into_the_norms_it_writes(decoder_runs, monkeypatch):
    # AutoAWQ divides input_layernorm / post_attention_layernorm by the scales it multiplies into q,k,v / gate,up
    with open_checkpoint(pydoc_llama_path()) as fp, open_checkpoint(decoder_runs["awq"]["out"]) as ck:
        for name in ("model.layers.0.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight"):
            a, b = fp.tensor(name), ck.tensor(name)
            assert a.dtype == b.dtype and (a != b).any(), name
        assert (fp.tensor("model.norm.weight") == ck.tensor("model.norm.weight")).all()  # nothing folds into it
    # folding is a reparametrisation: with the scales applied and nothing quantized, the model is the same
    from refsim.io import calibrate
    from refsim.io.model_folder import load_model

    import numpy as np

    monkeypatch.setattr(calibrate.awq_search, "search_clip",   # no clipping: the scales alone
                        lambda w, X, bits, group_size: np.full((w.shape[0], w.shape[1] // group_size), 6e4, np.float16))
    lm = load_model(pydoc_llama_path())
    ids = calibrate.calibration_ids(lm, "corpus", 256)
    W, changed, scales = calibrate.run_awq(lm, set(lm.arch.linear_names()), ids, 3, 128,
                                           lambda jobs: {n: W for n, W, X in jobs})
    per_layer, mq = calibrate.heldout_quality(lm, W, lm.arch.linear_names(), scales, "corpus", 512)
    assert "model.layers.0.input_layernorm.weight" in changed and "model.layers.1.self_attn.v_proj:out" in scales
    assert abs(mq["quantized"] / mq["fp"] - 1) < 1e-3             # fp16 rounding of the scaled weights only
    assert max(per_layer.values()) < 1e-3


@pytest.mark.slow
def test_gptq_beats_rtn_at_the_model_output_on_minilm(tmp_path):
    path = minilm.model_path()
    rtn = _quality(path, tmp_path, "rtn")["model_quality"]
    gptq = _quality(path, tmp_path, "gptq")["model_quality"]
    assert rtn["metric"] == "embedding_cosine"
    assert gptq["mean"] > rtn["mean"] and gptq["min"] > rtn["min"]
