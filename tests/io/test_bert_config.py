"""refsim.io.bert_config: the BertConfig written for encoder folders, from tensor shapes, and GPTQ's block name.

Expected configs are written out by hand from transformers 5.24's ``BertConfig`` (field names and defaults)
and the shapes of the tensors given; the quantized folders built end to end are checked in test_hf_folder.py.
"""

from __future__ import annotations

import pytest

from refsim.errors import CheckpointError
from refsim.io.bert_config import block_name_to_quantize, complete_bert_config, encoder_prefix

from conftest_io import BERT_FIELDS



def _shapes(p: str = "", hidden: int = 384, layers: int = 2, inter: int = 1536) -> dict:
    s = {f"{p}embeddings.word_embeddings.weight": (100, hidden), f"{p}embeddings.position_embeddings.weight": (64, hidden),
         f"{p}embeddings.token_type_embeddings.weight": (2, hidden)}
    for i in range(layers):
        s[f"{p}encoder.layer.{i}.attention.self.query.qweight"] = (hidden // 8, hidden)   # a quantized layer
        s[f"{p}encoder.layer.{i}.attention.self.query.bias"] = (hidden,)
        s[f"{p}encoder.layer.{i}.intermediate.dense.bias"] = (inter,)
    return s


def test_a_bare_minilm_sized_encoder_gets_every_bertconfig_field_with_sizes_from_its_tensors():
    cfg, notes = complete_bert_config({}, _shapes(), "out")
    assert cfg == {**BERT_FIELDS, "model_type": "bert", "architectures": ["BertModel"], "vocab_size": 100,
                   "hidden_size": 384, "num_hidden_layers": 2, "intermediate_size": 1536,
                   "max_position_embeddings": 64, "num_attention_heads": 12, "layer_norm_eps": 1e-12}
    assert list(cfg)[:2] == ["model_type", "architectures"]
    (note,) = notes
    assert note.startswith("note: config.json: the source has no model_type") and "vocab_size=100" in note \
        and "num_hidden_layers=2" in note and "num_attention_heads=12" in note


def test_the_sources_own_fields_win_and_a_complete_config_gives_no_note():
    own = {"num_attention_heads": 6, "hidden_act": "gelu_new", "vocab_size": 7, "custom": 1}
    cfg, notes = complete_bert_config(own, _shapes(hidden=384), "out")
    assert cfg["num_attention_heads"] == 6 and cfg["hidden_act"] == "gelu_new" and cfg["vocab_size"] == 7
    assert cfg["custom"] == 1 and cfg["hidden_size"] == 384 and notes
    full, again = complete_bert_config(cfg, _shapes(hidden=384), "out")
    assert full == cfg and again == []


def test_an_encoder_whose_head_count_is_unknown_keeps_its_config_and_says_why():
    cfg, notes = complete_bert_config({}, _shapes(hidden=256, inter=512), "out")
    assert cfg == {}
    (note,) = notes
    assert note.startswith("warning: config.json: no model_type written") and "hidden size 256" in note


def test_other_models_are_left_alone():
    assert complete_bert_config({"model_type": "roberta"}, _shapes(), "o") == ({"model_type": "roberta"}, [])
    llama = {"model.layers.0.self_attn.q_proj.weight": (8, 8)}
    assert complete_bert_config({"model_type": "llama"}, llama, "o") == ({"model_type": "llama"}, [])
    assert block_name_to_quantize(llama) is None


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_the_block_name_is_the_prefix_of_the_encoder_blocks_in_the_tensor_names(prefix):
    shapes = _shapes(prefix)
    assert encoder_prefix(shapes) == prefix
    assert block_name_to_quantize(shapes) == prefix + "encoder.layer"
    cfg, _ = complete_bert_config({"num_attention_heads": 4}, shapes, "o")
    assert cfg["num_hidden_layers"] == 2 and cfg["vocab_size"] == 100


def test_two_block_prefixes_or_a_missing_embedding_are_refused_naming_them():
    with pytest.raises(CheckpointError, match=r"one block prefix; got \['', 'bert.'\]"):
        encoder_prefix({**_shapes(""), **_shapes("bert.")})
    shapes = _shapes()
    del shapes["embeddings.token_type_embeddings.weight"]
    with pytest.raises(CheckpointError, match="embeddings.token_type_embeddings.weight' of rank 2"):
        complete_bert_config({}, shapes, "out")
