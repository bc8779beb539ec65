"""Tests of refsim.data.calibration: tokenizer on hand-written cases, the forward pass checked
independently (LayerNorm statistics, a plain-loop attention head, semantic similarity of
sentence embeddings), shapes, determinism and read-only caching."""

from __future__ import annotations

import math

import numpy as np
import pytest

from refsim.data import calibration as cal
from refsim.data import minilm
from refsim.errors import FormatRuleError
from refsim.testing import assert_bitexact


# ---------------------------------------------------------------- tokenizer, hand-written cases
@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World!", ["hello", ",", "world", "!"]),
        ("  tabs\tand\nnewlines  ", ["tabs", "and", "newlines"]),
        ("naïve café", ["naive", "cafe"]),                        # accents stripped after NFD
        ("a$b^c`d", ["a", "$", "b", "^", "c", "`", "d"]),         # ASCII symbols split like punctuation
        ("x\x00y\u200bz", ["xyz"]),                               # NUL and format chars dropped
        ("don't", ["don", "'", "t"]),
        ("", []),
    ],
)
def test_basic_tokenize_hand_written_cases(text, expected):
    assert cal.basic_tokenize(text) == expected


def test_wordpiece_greedy_longest_match_first():
    vocab = {"un": 0, "una": 1, "##ff": 2, "##ffa": 3, "##ble": 4, "##able": 5, "a": 6}
    # "una" is longer than "un", so it wins even though "un"+"##affable" pieces may exist
    assert cal.wordpiece("unaffable", vocab) == ["una", "##ffa", "##ble"]
    assert cal.wordpiece("a", vocab) == ["a"]
    # a position with no match turns the whole word into [UNK]
    assert cal.wordpiece("unax", vocab) == ["[UNK]"]
    assert cal.wordpiece("a" * 101, vocab) == ["[UNK]"]


def test_tokenize_against_known_bert_uncased_ids():
    # ids of the public bert-base-uncased vocabulary (shared by all-MiniLM-L6-v2)
    vocab = minilm.vocab()
    assert vocab[1996] == "the" and vocab[101] == "[CLS]" and vocab[102] == "[SEP]"
    ids = cal.tokenize("The tokenization works.")
    assert [vocab[i] for i in ids] == ["the", "token", "##ization", "works", "."]


def test_basic_tokenize_rejects_non_str():
    with pytest.raises(FormatRuleError, match="text: must be a str"):
        cal.basic_tokenize(b"bytes")


# ---------------------------------------------------------------- forward pass, independent checks
@pytest.fixture(scope="module")
def inputs():
    return cal.layer_inputs(256, seed=0)


def test_layer_inputs_shapes_and_names(inputs):
    names = minilm.linear_weight_names()
    assert sorted(inputs) == sorted(names) and len(names) == 36
    w = minilm.weights()
    for name, x in inputs.items():
        n, k = w[name].shape
        assert x.shape == (256, k) and x.dtype == np.float32
        assert np.isfinite(x).all()


def test_layer_norm_outputs_have_unit_statistics(inputs):
    # query input of layer l>0 is LN(output of layer l-1); undo gamma/beta and check mean 0, var 1
    w = minilm.weights()
    for layer in range(1, 6):
        x = inputs[f"encoder.layer.{layer}.attention.self.query.weight"].astype(np.float64)
        g = w[f"encoder.layer.{layer - 1}.output.LayerNorm.weight"].astype(np.float64)
        b = w[f"encoder.layer.{layer - 1}.output.LayerNorm.bias"].astype(np.float64)
        z = (x - b) / g
        assert np.abs(z.mean(axis=1)).max() < 1e-4
        assert np.abs(z.var(axis=1) - 1).max() < 1e-3


def test_attention_context_matches_plain_loop_head():
    # recompute one head of layer 0 for a short sequence with explicit loops in float64
    ids = [101] + cal.tokenize("Assert statements insert debugging assertions.") + [102]
    _, rec = cal.forward(ids)
    w = minilm.weights()
    x = rec["encoder.layer.0.attention.self.query.weight"].astype(np.float64)
    L, head = len(ids), 5
    cols = slice(32 * head, 32 * head + 32)

    def proj(p):
        W = w[f"encoder.layer.0.attention.self.{p}.weight"].astype(np.float64)[cols]
        bvec = w[f"encoder.layer.0.attention.self.{p}.bias"].astype(np.float64)[cols]
        return [[sum(x[t, k] * W[d, k] for k in range(384)) + bvec[d] for d in range(32)] for t in range(L)]

    q, k, v = proj("query"), proj("key"), proj("value")
    ctx = rec["encoder.layer.0.attention.output.dense.weight"][:, cols]
    for t in range(L):
        s = [sum(q[t][d] * k[u][d] for d in range(32)) / math.sqrt(32) for u in range(L)]
        m = max(s)
        e = [math.exp(si - m) for si in s]
        z = sum(e)
        for d in range(32):
            expected = sum(e[u] / z * v[u][d] for u in range(L))
            assert abs(ctx[t, d] - expected) < 1e-4 * (1 + abs(expected))


def test_sentence_embeddings_rank_paraphrase_above_unrelated():
    # all-MiniLM-L6-v2 is a sentence-similarity model: mean-pooled outputs of a paraphrase pair
    # must be closer than an unrelated sentence. A wrong transpose or head split breaks this.
    def emb(s):
        h, _ = cal.forward([101] + cal.tokenize(s) + [102])
        e = h.mean(axis=0)
        return e / np.linalg.norm(e)

    a = emb("A cat is sleeping on the mat.")
    b = emb("A kitten naps on a rug.")
    c = emb("The central bank raised interest rates again.")
    assert a @ b > 0.5 > a @ c


def test_layer_inputs_deterministic_and_read_only(inputs):
    again = cal.layer_inputs(256, seed=0)
    for name in inputs:
        assert_bitexact(again[name], inputs[name], name=name)
        with pytest.raises(ValueError):
            again[name][0, 0] = 1.0
    other = cal.layer_inputs(256, seed=1)
    name = "encoder.layer.0.attention.self.query.weight"
    assert not np.array_equal(other[name], inputs[name])


def test_layer_inputs_prefix_consistency():
    # whole 128-position sequences do not depend on how many follow; a short last sequence
    # holds [CLS] + its first tokens + [SEP]
    one = cal.layer_inputs(128, seed=0)["encoder.layer.2.output.dense.weight"]
    two = cal.layer_inputs(256, seed=0)["encoder.layer.2.output.dense.weight"]
    assert one.shape == (128, 1536)
    assert_bitexact(two[:128], one, name="first sequence")
    seqs = cal._sequences(130, 0)
    assert [len(s) for s in seqs] == [128, 2] and seqs[1] == [101, 102]


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, 20000])
def test_layer_inputs_rejects_bad_n_tokens(bad):
    with pytest.raises(FormatRuleError, match="n_tokens"):
        cal.layer_inputs(bad)
