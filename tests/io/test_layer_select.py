"""refsim.io.layer_select: the layers a quantize run takes (--layers / --ignore) and the ``ignore`` list the
loaders read for the rest."""

from pathlib import Path

import pytest

from refsim.errors import FormatRuleError
from refsim.io.layer_select import emitted_ignore, select_layers

NAMES = ["model.embed_tokens", "model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj", "lm_head"]


def test_the_default_ignores_embeddings_and_lm_head_and_patterns_search():
    assert select_layers(NAMES, None, None, Path("m")) == NAMES[1:3]
    assert select_layers(NAMES, "q_proj", None, Path("m")) == [NAMES[1]]
    assert select_layers(NAMES, None, "", Path("m")) == NAMES                  # "" ignores nothing
    assert select_layers(NAMES, None, "mlp", Path("m")) == NAMES[:2] + NAMES[3:]


def test_the_ignore_list_names_the_unquantized_linears_and_lm_head_of_a_decoder():
    assert emitted_ignore(NAMES, {NAMES[1]}, "decoder") == [NAMES[2], "lm_head"]
    assert emitted_ignore(NAMES[:3], set(NAMES[1:3]), "decoder") == ["lm_head"]      # tied: listed anyway
    assert emitted_ignore(NAMES[:3], set(NAMES[1:3]), None) == []


def test_refusals_name_the_rule():
    with pytest.raises(FormatRuleError, match="selects no layer of m"):
        select_layers(NAMES, "v_proj", None, Path("m"))
    with pytest.raises(FormatRuleError, match="layers: must be a regular expression"):
        select_layers(NAMES, "(", None, Path("m"))
    with pytest.raises(FormatRuleError, match=r"all_names\[1\]: must be a str"):
        select_layers(["a", 1], None, None, Path("m"))
    with pytest.raises(FormatRuleError, match="family"):
        emitted_ignore(NAMES, set(), "vision")
