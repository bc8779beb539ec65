"""refsim.models.bert: the encoder forward on tiny random weights against the layers written out here.

The reference is transformers' post-LN ``BertModel`` plus sentence-transformers mean pooling, written
plainly in float64 one head and one position at a time (LayerNorm with the biased variance, softmax
attention without a mask, the erf GELU). The module computes in float32, so the comparison is to float32
rounding: fewer than 64 roundings of relative size at most 2**-24 stand between the weights and each
output, hence the normwise bound ``64 * 2**-24``; a wrong scale, norm, residual or GELU is off by far more.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest_models import forward

from refsim.errors import CheckpointError
from refsim.models.bert import BertModel, gelu, layer_norm
from refsim.testing import assert_bitexact

TOL = 64 * 2.0**-24
H, HEADS, FF, V, P, LAYERS, EPS = 8, 2, 16, 13, 6, 2, 1e-12
CONFIG = {"num_attention_heads": HEADS, "layer_norm_eps": EPS}
LINEARS = {"attention.self.query": (H, H), "attention.self.key": (H, H), "attention.self.value": (H, H),
           "attention.output.dense": (H, H), "intermediate.dense": (FF, H), "output.dense": (H, FF)}


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = {"embeddings.word_embeddings.weight": rng.standard_normal((V, H)),
         "embeddings.position_embeddings.weight": rng.standard_normal((P, H)),
         "embeddings.token_type_embeddings.weight": rng.standard_normal((2, H))}
    norms = ["embeddings.LayerNorm"]
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        for n, shape in LINEARS.items():
            W[f"{p}.{n}.weight"] = rng.standard_normal(shape) / math.sqrt(shape[1])
            W[f"{p}.{n}.bias"] = 0.1 * rng.standard_normal(shape[0])
        norms += [f"{p}.attention.output.LayerNorm", f"{p}.output.LayerNorm"]
    for n in norms:
        W[n + ".weight"] = 1 + 0.1 * rng.standard_normal(H)
        W[n + ".bias"] = 0.1 * rng.standard_normal(H)
    return {n: w.astype(np.float32) for n, w in W.items()}


def _ln(x, W, name):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    return (x - mean) / math.sqrt(var + EPS) * W[name + ".weight"] + W[name + ".bias"]


def _lin(x, W, name):
    return W[name + ".weight"] @ x + W[name + ".bias"]


def _reference(ids, W):
    """Mean-pooled embeddings (B, H) float64, one sequence, head and position at a time."""
    W = {n: w.astype(np.float64) for n, w in W.items()}
    d = H // HEADS
    out = []
    for seq in ids:
        L = len(seq)
        x = [_ln(W["embeddings.word_embeddings.weight"][t] + W["embeddings.position_embeddings.weight"][pos]
                 + W["embeddings.token_type_embeddings.weight"][0], W, "embeddings.LayerNorm")
             for pos, t in enumerate(seq)]
        for i in range(LAYERS):
            p = f"encoder.layer.{i}"
            q, k, v = ([_lin(xt, W, f"{p}.attention.self.{n}") for xt in x] for n in ("query", "key", "value"))
            ctx = [np.zeros(H) for _ in range(L)]
            for hd in range(HEADS):
                sl = slice(hd * d, (hd + 1) * d)
                for t in range(L):
                    e = [math.exp(q[t][sl] @ k[u][sl] / math.sqrt(d)) for u in range(L)]
                    for u in range(L):
                        ctx[t][sl] += e[u] / sum(e) * v[u][sl]
            x = [_ln(_lin(c, W, f"{p}.attention.output.dense") + xt, W, f"{p}.attention.output.LayerNorm")
                 for c, xt in zip(ctx, x)]
            h = [_lin(xt, W, f"{p}.intermediate.dense") for xt in x]
            h = [np.array([a * 0.5 * (1 + math.erf(a / math.sqrt(2))) for a in ht]) for ht in h]
            x = [_ln(_lin(ht, W, f"{p}.output.dense") + xt, W, f"{p}.output.LayerNorm") for ht, xt in zip(h, x)]
        out.append(sum(x) / L)
    return np.asarray(out)


IDS = np.array([[2, 5, 11, 0, 7, 3], [12, 1, 1, 4, 9, 6]])


def test_forward_matches_the_layers_written_out_to_float32_rounding():
    W = _weights()
    model = BertModel(CONFIG, set(W))
    emb = forward(model, IDS, W)
    assert emb.dtype == np.float32 and emb.shape == (2, H)
    ref = _reference(IDS, W)
    assert np.linalg.norm(emb - ref) <= TOL * np.linalg.norm(ref)


def test_block_steps_yield_each_groups_names_and_its_input_in_order():
    W = _weights(1)
    model = BertModel(CONFIG, set(W))
    groups = []
    forward(model, IDS[:, :4], W, groups)
    p = "encoder.layer.0"
    assert [names for names, _ in groups[:4]] == [
        [f"{p}.attention.self.query", f"{p}.attention.self.key", f"{p}.attention.self.value"],
        [f"{p}.attention.output.dense"], [f"{p}.intermediate.dense"], [f"{p}.output.dense"]]
    assert [X.shape for _, X in groups[4:]] == [(2, 4, H), (2, 4, H), (2, 4, H), (2, 4, FF)]
    assert model.linear_names() == [n for names, _ in groups for n in names]
    # group 0's input is the embedding LayerNorm, worked here from the definition
    W64 = {n: w.astype(np.float64) for n, w in W.items()}
    ref = np.array([[_ln(W64["embeddings.word_embeddings.weight"][t] + W64["embeddings.position_embeddings.weight"][j]
                         + W64["embeddings.token_type_embeddings.weight"][0], W64, "embeddings.LayerNorm")
                     for j, t in enumerate(seq)] for seq in IDS[:, :4]])
    assert np.linalg.norm(groups[0][1] - ref) <= TOL * np.linalg.norm(ref)


def test_layer_norm_and_gelu_on_values_worked_by_hand():
    # x = [1, 3]: mean 2, biased variance 1, so (x - 2) / sqrt(1 + 0) = [-1, 1]; then * [2, 3] + [0.5, 0]
    got = layer_norm(np.array([[1.0, 3.0]], np.float32), np.array([2, 3], np.float32), np.array([0.5, 0], np.float32), 0.0)
    assert_bitexact(got, np.array([[-1.5, 3.0]], np.float32))
    # gelu(0) = 0; gelu(x) - gelu(-x) = x in the erf form (erf is odd), up to one float32 rounding of
    # each gelu value (at most 3 here: 2**-24 * 3 each)
    x = np.array([0.0, 0.5, 1.0, 2.0, 3.0], np.float32)
    assert gelu(x)[0] == 0 and gelu(x).dtype == np.float32
    assert np.abs((gelu(x) - gelu(-x)) - x).max() <= 2 * 2.0**-24 * 3
    # gelu(1) = 0.5 * (1 + erf(1/sqrt 2)) = 0.8413447460685429..., the normal CDF at 1
    assert abs(float(gelu(np.float32([1.0]))[0]) - 0.8413447460685429) <= 2.0**-23


def test_head_is_the_mean_over_positions():
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    # sequence 0: rows [0 1 2], [3 4 5], [6 7 8], [9 10 11] -> [4.5, 5.5, 6.5]
    assert_bitexact(BertModel(CONFIG, set(_weights())).head(x, {}), np.array([[4.5, 5.5, 6.5], [16.5, 17.5, 18.5]],
                                                                            np.float32))


def test_awq_folds_only_value_into_the_attention_output():
    model = BertModel(CONFIG, set(_weights()))
    assert model.awq_scalings(1, {}) == [{"prev": "encoder.layer.1.attention.self.value", "kind": "linear",
                                          "layers": ["encoder.layer.1.attention.output.dense"], "inspect": None}]
    W = _weights()
    # inspect is the one linear: on a row of ones, each output is its weight row's sum plus its bias
    want = W["encoder.layer.0.output.dense.weight"].astype(np.float64).sum(1) + W["encoder.layer.0.output.dense.bias"]
    got = model.inspect(0, None, np.ones((1, FF), np.float32), W, "encoder.layer.0.output.dense")
    assert np.linalg.norm(got[0] - want) <= TOL * np.linalg.norm(want)


def test_heads_and_epsilon_default_to_minilm_only_at_its_hidden_size():
    names = set(_weights())
    model = BertModel({}, names, "m", hidden=384)
    assert (model.n_heads, model.eps, model.n_layers) == (12, 1e-12, LAYERS)
    with pytest.raises(CheckpointError, match="needs its config.json .num_attention_heads.; got hidden size 8"):
        BertModel({}, names, "m", hidden=H)


def test_a_checkpoint_without_encoder_layers_is_refused():
    names = {n for n in _weights() if not n.startswith("encoder.layer.")}
    with pytest.raises(CheckpointError, match="must hold encoder.layer.<i> tensors; got none"):
        BertModel(CONFIG, names, "m")


# ---------------------------------------------------------------- boundary rules
@pytest.mark.parametrize("bad", [-1, V, 256])
def test_token_ids_outside_the_vocabulary_are_refused_with_the_value(bad):
    from refsim.errors import FormatRuleError

    W = _weights()
    model = BertModel(CONFIG, set(W))
    with pytest.raises(FormatRuleError, match=rf"ids: token ids must lie in \[0, {V - 1}\].*got {bad}"):
        model.embed(np.array([[0, bad]]), W)


def test_a_sequence_longer_than_the_position_table_is_refused():
    from refsim.errors import ShapeError

    W = _weights()
    with pytest.raises(ShapeError, match=rf"ids: sequence length must be at most the {P} positions.*got {P + 1}"):
        BertModel(CONFIG, set(W)).embed(np.zeros((1, P + 1), np.int64), W)


def test_missing_weights_and_biases_are_named():
    W = _weights()
    model = BertModel(CONFIG, set(W))
    del W["encoder.layer.1.intermediate.dense.bias"]
    with pytest.raises(CheckpointError, match=r"needs tensor 'encoder.layer.1.intermediate.dense.bias'"):
        forward(model, np.array([[1, 2]]), W)
    del W["embeddings.LayerNorm.weight"]
    with pytest.raises(CheckpointError, match=r"needs tensor 'embeddings.LayerNorm.weight'"):
        model.embed(np.array([[1, 2]]), W)


def test_a_heads_count_that_is_not_a_positive_integer_is_refused():
    with pytest.raises(CheckpointError, match="num_attention_heads must be a positive integer; got 0"):
        BertModel({"num_attention_heads": 0}, set(_weights()))
