"""refsim.gpu_model.shapes: each built-in model's linears from its published config, worked by hand
(Llama-2-7B: hidden 4096, intermediate 11008, 32 heads and 32 KV heads; Llama-3-8B: 8 KV heads of 128,
so k_proj/v_proj are 1024 x 4096), the distinct shapes a sweep visits, and unknown names refused."""

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.shapes import ModelShapes, get_model, model_names, unique_layer_shapes


def test_the_built_in_models_are_listed_sorted():
    assert model_names() == ["llama-2-13b", "llama-2-7b", "llama-3-8b", "mistral-7b"]


def test_llama_2_7b_has_the_published_shapes():
    m = get_model("llama-2-7b")
    assert isinstance(m, ModelShapes) and m.layers == 32
    assert m.per_block() == [("q_proj", 4096, 4096, 1), ("k_proj", 4096, 4096, 1), ("v_proj", 4096, 4096, 1),
                             ("o_proj", 4096, 4096, 1), ("gate_proj", 11008, 4096, 1), ("up_proj", 11008, 4096, 1),
                             ("down_proj", 4096, 11008, 1)]
    assert unique_layer_shapes("llama-2-7b") == [(4096, 4096), (11008, 4096), (4096, 11008)]


def test_grouped_query_attention_narrows_k_and_v():
    m = get_model("llama-3-8b")
    by = {name: (n, k) for name, n, k, _ in m.linears}
    assert by["k_proj"] == by["v_proj"] == (1024, 4096)        # 8 KV heads x 128
    assert by["gate_proj"] == (14336, 4096) and by["down_proj"] == (4096, 14336)
    assert unique_layer_shapes("llama-3-8b") == [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336)]
    assert get_model("llama-2-13b").layers == 40 and get_model("llama-2-13b").linears[0][1:3] == (5120, 5120)


def test_an_unknown_model_is_refused_with_the_names():
    with pytest.raises(FormatRuleError, match=r"model: must be one of \['llama-2-13b', .*got 'gpt-2'"):
        get_model("gpt-2")
    with pytest.raises(FormatRuleError, match="model: must be one of"):
        unique_layer_shapes("gpt-2")


def test_shape_layers_names_the_linears_of_each_distinct_shape():
    from refsim.gpu_model.shapes import shape_layers, unique_layer_shapes

    # llama-3-8b: 8 KV heads of 128 -> k_proj/v_proj are (1024, 4096), apart from q_proj/o_proj
    assert shape_layers("llama-3-8b") == {(4096, 4096): "q_proj/o_proj", (1024, 4096): "k_proj/v_proj",
                                          (14336, 4096): "gate_proj/up_proj", (4096, 14336): "down_proj"}
    assert list(shape_layers("llama-3-8b")) == unique_layer_shapes("llama-3-8b")
