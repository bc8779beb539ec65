"""Shared builders of the refsim.io tests (imported by name: the tests folder has no packages)."""

from __future__ import annotations

import numpy as np

from refsim.formats import gptq as gptq_format
from refsim.io.gptq import GPTQLayer
from refsim.io.tensors import TensorFile, save_tensors

L0, L1 = "model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"

#: transformers 5.24 BertConfig: every field and its default
BERT_FIELDS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
               "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
               "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
               "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0, "use_cache": True,
               "classifier_dropout": None, "is_decoder": False, "add_cross_attention": False,
               "bos_token_id": None, "eos_token_id": None, "tie_word_embeddings": True}


def gptq_layer(name, rng, *, k=256, n=256, bits=4, gs=128, sym=False, act_order=False, fmt="gptq"):
    g = 1 if gs is None else k // gs
    q = rng.integers(0, 1 << bits, (k, n), dtype=np.uint8)
    scales = (rng.random((g, n)) * 0.01 + 0.001).astype(np.float16)
    zeros = np.full((g, n), 1 << (bits - 1)) if sym else rng.integers(1, 1 << bits, (g, n))
    g_idx = None
    if act_order:
        g_idx = rng.permutation(np.repeat(np.arange(g), k // g)).astype(np.int32)
    ck = gptq_format.pack(q, scales, zeros, bits, g_idx=g_idx, group_size=gs, checkpoint_format=fmt)
    return GPTQLayer(name, ck, gs, act_order, sym, (rng.standard_normal(n)).astype(np.float16))




def rewrite_tensors(path, edit):
    """Apply ``edit`` (a function changing a {name: array} dict in place) to ``path``/model.safetensors."""
    with TensorFile(path / "model.safetensors") as tf:
        t = {n: tf.read(n) for n in tf.names()}
    edit(t)
    save_tensors(path / "model.safetensors", t)
