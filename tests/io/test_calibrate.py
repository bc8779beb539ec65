"""refsim.io.calibrate: the --calib grammar, sequential calibration's order and inputs, and held-out quality,
on a one-block decoder built here (hidden 8) with values worked by hand.

Sequential calibration hands each group of selected layers to the quantizer with the group's input in the
model whose earlier layers are already quantized: with v_proj "quantized" to zeros, o_proj's input (the
attention context) is exactly zero. Held-out quality: unchanged weights give zero per-layer error and the
same model figures; a zero final norm makes every logit 0, so the perplexity is exactly the vocabulary size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.io.calibrate import (DEFAULT_CALIB_TOKENS, heldout_quality, parse_calib, run_sequential)
from refsim.io.model_folder import LoadedModel
from refsim.models.llama import LlamaModel
from refsim.testing import assert_bitexact

H, V = 8, 7
P = "model.layers.0"
Q, K_, V_, O = (f"{P}.self_attn.{n}" for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
GATE, UP, DOWN = (f"{P}.mlp.{n}" for n in ("gate_proj", "up_proj", "down_proj"))


def _decoder() -> LoadedModel:
    rng = np.random.default_rng(0)
    W = {"model.embed_tokens.weight": rng.standard_normal((V, H)), "model.norm.weight": np.ones(H),
         f"{P}.input_layernorm.weight": np.ones(H), f"{P}.post_attention_layernorm.weight": np.ones(H)}
    for n in (Q, K_, V_, O, GATE, UP, DOWN):
        W[n + ".weight"] = rng.standard_normal((H, H)) / np.sqrt(H)
    W = {n: w.astype(np.float32) for n, w in W.items()}
    for w in W.values():
        w.setflags(write=False)
    arch = LlamaModel({"hidden_size": H, "num_hidden_layers": 1, "num_attention_heads": 2}, set(W))
    # one id per letter of the text, 'a' -> 1, 'b' -> 2, ... cycling through 1..6
    return LoadedModel(arch, W, lambda text: [1 + (ord(c) - 97) % (V - 1) for c in text.lower() if c.isalpha()
                                              and c.isascii()], (0, None), Path("."))


@pytest.mark.parametrize("spec, parsed", [
    ("none", ("none", None, 0)),
    ("auto", ("text", "corpus", DEFAULT_CALIB_TOKENS)),
    ("corpus", ("text", "corpus", DEFAULT_CALIB_TOKENS)),
    ("corpus:512", ("text", "corpus", 512)),
    ("notes.txt", ("text", "notes.txt", DEFAULT_CALIB_TOKENS)),
    ("notes.txt:64", ("text", "notes.txt", 64)),
    ("C:/data/notes.txt", ("text", "C:/data/notes.txt", DEFAULT_CALIB_TOKENS)),   # a colon not followed by digits
    ("inputs.safetensors", ("inputs", "inputs.safetensors", 0)),
])
def test_parse_calib_reads_each_form_of_the_grammar(spec, parsed):
    assert parse_calib(spec) == parsed


@pytest.mark.parametrize("spec, rule", [
    ("", "calib: must be 'auto', 'none', 'corpus.:T.', a text file.:T. or a safetensors file"),
    (None, "calib: must be"),
    ("corpus:0", "calib: token count in 'corpus:0' must be a positive integer; got '0'"),
])
def test_parse_calib_refuses_what_it_cannot_read(spec, rule):
    with pytest.raises(FormatRuleError, match=rule):
        parse_calib(spec)


def test_sequential_calibration_quantizes_group_by_group_on_the_already_quantized_model():
    lm = _decoder()
    ids = np.array([[0, 1, 2, 3], [0, 4, 5, 6]])
    jobs_seen, progress = [], []

    def quantize_group(jobs):
        jobs_seen.append([(n, W.shape, X.shape) for n, W, X in jobs])
        if jobs[0][0] == O:
            assert_bitexact(jobs[0][2], np.zeros((8, H), np.float32), "o_proj input")
        return {n: np.zeros_like(W) for n, W, _ in jobs}

    W = run_sequential(lm, {V_, O, DOWN}, ids, quantize_group, lambda *a: progress.append(a))
    # one job list per group holding a selected layer, W as (K, N), X as (B*L, K)
    assert jobs_seen == [[(V_, (H, H), (8, H))], [(O, (H, H), (8, H))], [(DOWN, (H, H), (8, H))]]
    assert progress == [(1, 3, V_), (2, 3, O), (3, 3, DOWN)]
    for n in (V_, O, DOWN):
        assert_bitexact(W[n + ".weight"], np.zeros((H, H), np.float32), n)
    for n in (Q, K_, GATE, UP):
        assert W[n + ".weight"] is lm.weights[n + ".weight"]
    assert lm.weights[V_ + ".weight"].any()                              # the model's own weights are untouched


def test_heldout_quality_of_unchanged_weights_is_zero_error_and_equal_figures():
    lm = _decoder()
    per_layer, model = heldout_quality(lm, dict(lm.weights), [Q, DOWN], {}, tokens=128)
    assert per_layer == {Q: 0.0, DOWN: 0.0}
    assert model["metric"] == "perplexity" and model["heldout_tokens"] == 128
    assert model["fp"] == model["quantized"]


def test_perplexity_of_all_zero_logits_is_the_vocabulary_size():
    lm = _decoder()
    W = {**lm.weights, "model.norm.weight": np.zeros(H, np.float32)}   # rmsnorm(x) * 0: every logit is 0
    _, model = heldout_quality(lm, W, [], {}, tokens=128)
    # uniform over V = 7 tokens: cross-entropy log 7 per position, perplexity exp(log 7) = 7
    assert abs(model["quantized"] - V) <= 8 * V * 2.0**-52
    assert model["fp"] != model["quantized"]


def test_heldout_error_divides_out_the_awq_scales_folded_into_a_layer():
    lm = _decoder()
    s = np.full(H, 2.0, np.float16)
    W = dict(lm.weights)
    # AWQ multiplied q_proj's columns by s and divided its input by s: the product is unchanged
    W[Q + ".weight"] = lm.weights[Q + ".weight"] * 2
    per_layer, _ = heldout_quality(lm, W, [Q], {Q: s}, tokens=128)
    assert per_layer[Q] == 0.0
    # without the scale the layer's output is twice the reference: relative error |2y - y| / |y| = 1 (the
    # doubling and the difference are exact in float64)
    per_layer, _ = heldout_quality(lm, W, [Q], {}, tokens=128)
    assert per_layer[Q] == 1.0
