"""refsim.models.llama: the decoder forward on tiny random weights against the layers written out here.

The reference below is transformers' ``LlamaForCausalLM`` written plainly in float64, one head and one
position at a time (RMSNorm, RoPE with rotate_half, causal softmax attention with grouped-query key/value
heads, SiLU-gated MLP, tied or separate head). The module computes in float32 (its docstring says so), so
the comparison is to float32 rounding: every output is at the end of fewer than 64 roundings of relative
size at most 2**-24 each (two layers of a dozen steps, sums of at most 16 terms), hence the normwise
bound ``64 * 2**-24``. A wrong scale, norm, rotation, mask or head mapping is off by far more.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest_models import forward

from refsim.errors import CheckpointError
from refsim.models.llama import LlamaModel
from refsim.testing import assert_bitexact

TOL = 64 * 2.0**-24
H, HEADS, KV, FF, V, LAYERS = 8, 2, 1, 12, 11, 2      # head_dim 4; both query heads share one kv head
PROJ = {"q_proj": (HEADS * 4, H), "k_proj": (KV * 4, H), "v_proj": (KV * 4, H), "o_proj": (H, HEADS * 4),
        "gate_proj": (FF, H), "up_proj": (FF, H), "down_proj": (H, FF)}
CONFIG = {"hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
          "num_key_value_heads": KV, "rms_norm_eps": 1e-5, "rope_theta": 100.0}


def _weights(seed: int = 0, lm_head: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = {"model.embed_tokens.weight": rng.standard_normal((V, H)), "model.norm.weight": 1 + 0.1 * rng.standard_normal(H)}
    if lm_head:
        W["lm_head.weight"] = rng.standard_normal((V, H))
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        for n, shape in PROJ.items():
            part = "self_attn" if n.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else "mlp"
            W[f"{p}.{part}.{n}.weight"] = rng.standard_normal(shape) / math.sqrt(shape[1])
        W[f"{p}.input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(H)
        W[f"{p}.post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(H)
    return {n: w.astype(np.float32) for n, w in W.items()}


def _rmsnorm(x, w, eps):
    return x / math.sqrt(sum(v * v for v in x) / len(x) + eps) * w


def _rope(v, pos, theta):
    """rotate_half RoPE of one head vector v (d,) at position pos: pair (j, j + d/2) turns by pos * theta^(-2j/d)."""
    d = len(v)
    out = np.empty(d)
    for j in range(d // 2):
        a = pos * theta ** (-2 * j / d)
        out[j] = v[j] * math.cos(a) - v[j + d // 2] * math.sin(a)
        out[j + d // 2] = v[j + d // 2] * math.cos(a) + v[j] * math.sin(a)
    return out


def _reference(ids, W, cfg=CONFIG):
    """Logits (B, L, V) float64, one sequence, head and position at a time."""
    W = {n: w.astype(np.float64) for n, w in W.items()}
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    nh, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], H // cfg["num_attention_heads"]
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    out = []
    for seq in ids:
        L = len(seq)
        x = [W["model.embed_tokens.weight"][t] for t in seq]
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}"
            h = [_rmsnorm(xt, W[f"{p}.input_layernorm.weight"], eps) for xt in x]
            q = [W[f"{p}.self_attn.q_proj.weight"] @ ht for ht in h]
            k = [W[f"{p}.self_attn.k_proj.weight"] @ ht for ht in h]
            v = [W[f"{p}.self_attn.v_proj.weight"] @ ht for ht in h]
            ctx = [np.zeros(nh * d) for _ in range(L)]
            for hd in range(nh):
                g = hd // (nh // nkv)                     # the kv head this query head reads
                for t in range(L):
                    qt = _rope(q[t][hd * d:(hd + 1) * d], t, theta)
                    s = [qt @ _rope(k[u][g * d:(g + 1) * d], u, theta) / math.sqrt(d) for u in range(t + 1)]
                    e = [math.exp(si - max(s)) for si in s]
                    for u in range(t + 1):
                        ctx[t][hd * d:(hd + 1) * d] += e[u] / sum(e) * v[u][g * d:(g + 1) * d]
            x = [xt + W[f"{p}.self_attn.o_proj.weight"] @ c for xt, c in zip(x, ctx)]
            h2 = [_rmsnorm(xt, W[f"{p}.post_attention_layernorm.weight"], eps) for xt in x]
            gate = [W[f"{p}.mlp.gate_proj.weight"] @ ht for ht in h2]
            up = [W[f"{p}.mlp.up_proj.weight"] @ ht for ht in h2]
            x = [xt + W[f"{p}.mlp.down_proj.weight"] @ (gt / (1 + np.exp(-gt)) * ut) for xt, gt, ut in zip(x, gate, up)]
        out.append([head @ _rmsnorm(xt, W["model.norm.weight"], eps) for xt in x])
    return np.asarray(out)


IDS = np.array([[1, 4, 9, 2, 0], [10, 3, 3, 7, 5]])


@pytest.mark.parametrize("lm_head", [True, False], ids=["separate_head", "tied_head"])
def test_forward_matches_the_layers_written_out_to_float32_rounding(lm_head):
    W = _weights(lm_head=lm_head)
    model = LlamaModel(CONFIG, set(W))
    logits = forward(model, IDS, W)
    assert logits.dtype == np.float32 and logits.shape == (2, 5, V)
    ref = _reference(IDS, W)
    assert np.linalg.norm(logits - ref) <= TOL * np.linalg.norm(ref)


def test_the_causal_mask_keeps_earlier_positions_independent_of_later_tokens():
    W = _weights(1)
    model = LlamaModel(CONFIG, set(W))
    a = forward(model, np.array([[1, 2, 3, 4]]), W)
    b = forward(model, np.array([[1, 2, 3, 9]]), W)
    assert_bitexact(a[:, :3], b[:, :3])
    assert not np.array_equal(a[:, 3], b[:, 3])


def test_block_steps_yield_each_groups_names_and_its_input_in_order():
    W = _weights(2)
    model = LlamaModel(CONFIG, set(W))
    groups = []
    forward(model, IDS, W, groups)
    p = "model.layers.1"
    assert [names for names, _ in groups[4:]] == [
        [f"{p}.self_attn.q_proj", f"{p}.self_attn.k_proj", f"{p}.self_attn.v_proj"], [f"{p}.self_attn.o_proj"],
        [f"{p}.mlp.gate_proj", f"{p}.mlp.up_proj"], [f"{p}.mlp.down_proj"]]
    assert [X.shape for _, X in groups[:4]] == [(2, 5, H), (2, 5, HEADS * 4), (2, 5, H), (2, 5, FF)]
    # group 0's input is the RMS-normed embedding, worked here from the definition
    x = W["model.embed_tokens.weight"][IDS].astype(np.float64)
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * W["model.layers.0.input_layernorm.weight"]
    assert np.linalg.norm(groups[0][1] - h) <= TOL * np.linalg.norm(h)
    assert model.linear_names()[:3] == [f"model.layers.0.self_attn.{n}" for n in ("q_proj", "k_proj", "v_proj")]
    assert len(model.linear_names()) == 7 * LAYERS


def test_a_block_with_zero_output_projections_passes_its_input_through_unchanged():
    W = _weights(3)
    for i in range(LAYERS):
        W[f"model.layers.{i}.self_attn.o_proj.weight"][:] = 0
        W[f"model.layers.{i}.mlp.down_proj.weight"][:] = 0
    model = LlamaModel(CONFIG, set(W))
    x = model.embed(IDS, W)
    steps = model.block_steps(0, x, W)
    with pytest.raises(StopIteration) as stop:
        while True:
            next(steps)
    assert_bitexact(stop.value.value, x)


def test_attention_and_mlp_are_the_blocks_two_residual_branches():
    W = _weights(4)
    model = LlamaModel(CONFIG, set(W))
    h = np.random.default_rng(5).standard_normal((1, 3, H)).astype(np.float32)
    W64 = {n: w.astype(np.float64) for n, w in W.items()}
    g = h @ W64["model.layers.0.mlp.gate_proj.weight"].T
    mlp = (g / (1 + np.exp(-g)) * (h @ W64["model.layers.0.mlp.up_proj.weight"].T)) @ W64["model.layers.0.mlp.down_proj.weight"].T
    assert np.linalg.norm(model.mlp(0, h, W) - mlp) <= TOL * np.linalg.norm(mlp)
    assert_bitexact(model.inspect(0, "mlp", h, W, "model.layers.0.mlp.gate_proj"), model.mlp(0, h, W))
    assert_bitexact(model.inspect(0, "attention", h, W, "model.layers.0.self_attn.q_proj"), model.attention(0, h, W))
    # one query position: softmax over one key is 1, so attention is o_proj(v_proj(h)) with v repeated per head
    h1 = h[:, :1]
    v = h1[0, 0].astype(np.float64) @ W64["model.layers.0.self_attn.v_proj.weight"].T
    att = np.tile(v, HEADS) @ W64["model.layers.0.self_attn.o_proj.weight"].T
    assert np.linalg.norm(model.attention(0, h1, W)[0, 0] - att) <= TOL * np.linalg.norm(att)


def test_awq_scalings_fold_into_the_norms_and_the_previous_linears():
    W = _weights()
    p = "model.layers.0"
    got = LlamaModel(CONFIG, set(W)).awq_scalings(0, W)
    # v_proj (4, 8) and o_proj (8, 8) differ in shape (grouped-query): no v -> o fold, as AutoAWQ
    assert [(s["prev"], s["kind"], s["inspect"]) for s in got] == [
        (f"{p}.input_layernorm", "norm", "attention"), (f"{p}.post_attention_layernorm", "norm", "mlp"),
        (f"{p}.mlp.up_proj", "linear", None)]
    mha = {**CONFIG, "num_key_value_heads": HEADS}
    W = {**W, f"{p}.self_attn.k_proj.weight": np.zeros((8, 8), np.float32),
         f"{p}.self_attn.v_proj.weight": np.zeros((8, 8), np.float32)}
    got = LlamaModel(mha, set(W)).awq_scalings(0, W)
    assert got[1] == {"prev": f"{p}.self_attn.v_proj", "kind": "linear", "layers": [f"{p}.self_attn.o_proj"],
                      "inspect": None}


@pytest.mark.parametrize("change, rule", [
    ({"hidden_size": None}, "must give hidden_size, num_hidden_layers and num_attention_heads as integers"),
    ({"num_attention_heads": "two"}, "must give hidden_size, num_hidden_layers and num_attention_heads as integers"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "only the default RoPE is modelled"),
    ({"rope_parameters": {"rope_type": "yarn"}}, "only the default RoPE is modelled"),
    ({"num_hidden_layers": 3}, "must hold every projection of 3 layers"),
])
def test_configs_it_cannot_model_are_refused_naming_the_rule(change, rule):
    W = _weights()
    cfg = {k: v for k, v in {**CONFIG, **change}.items() if v is not None}
    with pytest.raises(CheckpointError, match=rule):
        LlamaModel(cfg, set(W), "m")


def test_a_checkpoint_without_its_embedding_is_refused():
    names = set(_weights()) - {"model.embed_tokens.weight"}
    with pytest.raises(CheckpointError, match="model.embed_tokens"):
        LlamaModel(CONFIG, names, "m")


# ---------------------------------------------------------------- boundary rules
@pytest.mark.parametrize("bad", [-1, V, 256])
def test_token_ids_outside_the_vocabulary_are_refused_with_the_value(bad):
    from refsim.errors import FormatRuleError

    W = _weights()
    model = LlamaModel(CONFIG, set(W), "m")
    ids = np.array([[1, bad, 2]])
    with pytest.raises(FormatRuleError, match=rf"ids: token ids must lie in \[0, {V - 1}\].*got {bad}"):
        model.embed(ids, W)


def test_token_ids_must_be_a_2d_integer_array():
    from refsim.errors import DtypeError, ShapeError

    W = _weights()
    model = LlamaModel(CONFIG, set(W), "m")
    with pytest.raises(DtypeError, match="ids: dtype must be an integer type"):
        model.embed(np.array([[1.0, 2.0]]), W)
    with pytest.raises(ShapeError, match="ids: must be 2-D"):
        model.embed(np.array([1, 2]), W)


def test_a_weight_missing_from_the_dict_is_named():
    W = _weights()
    model = LlamaModel(CONFIG, set(W), "m")
    x = model.embed(np.array([[1, 2]]), W)
    del W["model.layers.0.mlp.up_proj.weight"]
    with pytest.raises(CheckpointError, match=r"needs tensor 'model.layers.0.mlp.up_proj.weight'"):
        forward(model, np.array([[1, 2]]), W)
    del W["model.norm.weight"]
    with pytest.raises(CheckpointError, match=r"needs tensor 'model.norm.weight'"):
        model.head(x, W)


def test_weights_of_the_wrong_shape_are_refused_naming_the_tensor():
    from refsim.errors import ShapeError

    W = _weights()
    model = LlamaModel(CONFIG, set(W), "m")
    W["model.layers.0.self_attn.k_proj.weight"] = np.zeros((4, H + 1), np.float32)
    with pytest.raises(ShapeError, match=r"k_proj.weight: must be \(N, K=8\) for its input; got shape \(4, 9\)"):
        forward(model, np.array([[1, 2]]), W)
    W = _weights()
    W["model.layers.0.self_attn.q_proj.weight"] = np.zeros((6, H), np.float32)
    with pytest.raises(ShapeError, match=r"q_proj.weight: must have 2 heads x head_dim 4 = 8 rows; got 6"):
        forward(model, np.array([[1, 2]]), W)
    W = _weights()
    W["model.layers.1.input_layernorm.weight"] = np.ones(H - 1, np.float32)
    with pytest.raises(ShapeError, match=r"input_layernorm.weight: shape must be \(8,\); got \(7,\)"):
        forward(model, np.array([[1, 2]]), W)
    with pytest.raises(ShapeError, match=r"x: must be \(B, L, 8\); got shape \(1, 2, 3\)"):
        next(model.block_steps(0, np.zeros((1, 2, 3), np.float32), _weights()))


@pytest.mark.parametrize("change, rule", [
    ({"num_attention_heads": 0}, "must be positive"),
    ({"num_key_value_heads": 3}, "a multiple of the kv heads"),
    ({"head_dim": 3}, "head_dim must be a positive even number"),
])
def test_config_sizes_that_would_divide_by_zero_or_misreshape_are_refused(change, rule):
    W = _weights()
    with pytest.raises(CheckpointError, match=rule):
        LlamaModel({**CONFIG, **change}, set(W), "m")
