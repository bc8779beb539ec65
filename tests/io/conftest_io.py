"""Shared builders of the refsim.io tests (imported by name: the tests folder has no packages)."""

from __future__ import annotations

from pathlib import Path

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


def write_tiny_llama(out: Path) -> Path:
    """The unquantized model behind tests/io/data/ct_w4a16_sym (llm-compressor's folder): its dequantized
    bf16 weights, its config without quantization_config, its tokenizer and generation files."""
    import json
    import shutil

    from refsim.io import open_checkpoint

    ref = Path(__file__).parent / "data" / "ct_w4a16_sym"
    out.mkdir()
    ck = open_checkpoint(ref)
    tensors = {n + ".weight": np.ascontiguousarray(ck.read_layer(n).dequantize().T) for n in ck.layer_names()}
    consumed = {f"{n}.{s}" for n in ck.layer_names() for s in ("weight_packed", "weight_scale", "weight_shape")}
    tensors.update({t: ck.tensor(t) for t in ck.tensor_names() if t not in consumed})
    save_tensors(out / "model.safetensors", tensors, {"format": "pt"})
    cfg = json.loads((ref / "config.json").read_text())
    del cfg["quantization_config"]
    (out / "config.json").write_text(json.dumps(cfg))
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(ref / f, out / f)
    return out


ENC_H, ENC_I, ENC_LAYERS, ENC_POS = 128, 256, 2, 160
ENC_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [c for c in "abcdefghijklmnopqrstuvwxyz0123456789.,:;()'\"-_=/*+"] \
    + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]


def write_tiny_bert(out: Path) -> Path:
    """A two-layer BERT encoder (hidden 128, intermediate 256, 2 heads, float32) with a character vocabulary
    and a config.json holding only num_attention_heads (refsim derives the rest from the tensors)."""
    import json

    out.mkdir()
    rng = np.random.default_rng(3)
    H, V = ENC_H, len(ENC_VOCAB)
    W = {"embeddings.word_embeddings.weight": rng.standard_normal((V, H)),
         "embeddings.position_embeddings.weight": rng.standard_normal((ENC_POS, H)) * 0.1,
         "embeddings.token_type_embeddings.weight": rng.standard_normal((2, H)) * 0.1,
         "embeddings.LayerNorm.weight": np.ones(H), "embeddings.LayerNorm.bias": np.zeros(H),
         "pooler.dense.weight": rng.standard_normal((H, H)) / np.sqrt(H), "pooler.dense.bias": np.zeros(H)}
    for i in range(ENC_LAYERS):
        p = f"encoder.layer.{i}"
        for n, (rows, cols) in {"attention.self.query": (H, H), "attention.self.key": (H, H),
                                "attention.self.value": (H, H), "attention.output.dense": (H, H),
                                "intermediate.dense": (ENC_I, H), "output.dense": (H, ENC_I)}.items():
            W[f"{p}.{n}.weight"] = rng.standard_normal((rows, cols)) / np.sqrt(cols)
            W[f"{p}.{n}.bias"] = rng.standard_normal(rows) * 0.01
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            W[f"{p}.{n}.weight"], W[f"{p}.{n}.bias"] = np.ones(H), np.zeros(H)
    save_tensors(out / "model.safetensors", {n: w.astype(np.float32) for n, w in W.items()})
    (out / "vocab.txt").write_text("\n".join(ENC_VOCAB) + "\n")
    (out / "config.json").write_text(json.dumps({"num_attention_heads": 2}))
    return out


#: kind -> (QuantizeOptions arguments, quantize_model's ``to``)
KINDS = {"rtn": ({"method": "rtn"}, "auto"), "gptq": ({"method": "gptq"}, "auto"), "awq": ({"method": "awq"}, "auto"),
         "ct-sym": ({"method": "gptq", "sym": True}, "compressed-tensors"),
         "ct-asym": ({"method": "rtn"}, "compressed-tensors")}
