"""refsim.io.model_folder: tiny model folders written here and read back, and text cut into sequences.

A decoder folder (config.json with a llama model_type, a float16 safetensors file, a tokenizers JSON) and
an encoder folder (BERT tensor names, vocab.txt) load as their architecture with every float tensor as a
read-only float32 holding the stored values, and their tokenizer's ids; folders refsim has no forward for,
a decoder without a tokenizer and bad specials are refused naming the rule; ``sequences`` frames and cuts
token ids as worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from refsim.errors import CheckpointError, FormatRuleError
from refsim.io.model_folder import LoadedModel, load_model, model_family, sequences
from refsim.io.tensors import save_tensors
from refsim.models.bert import BertModel
from refsim.models.llama import LlamaModel

H = 8
WORDS = ["<s>", "the", "cat", "sat", "on", "mat", "[UNK]"]


def _decoder(folder: Path, *, tokenizer: str | None = "good") -> dict:
    rng = np.random.default_rng(0)
    p = "model.layers.0"
    W = {"model.embed_tokens.weight": rng.standard_normal((len(WORDS), H)), "model.norm.weight": np.ones(H),
         f"{p}.input_layernorm.weight": np.ones(H), f"{p}.post_attention_layernorm.weight": np.ones(H)}
    for n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
              "mlp.up_proj", "mlp.down_proj"):
        W[f"{p}.{n}.weight"] = rng.standard_normal((H, H))
    W = {n: w.astype(np.float16) for n, w in W.items()}
    folder.mkdir()
    save_tensors(folder / "model.safetensors", W)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": H, "num_hidden_layers": 1,
                                                    "num_attention_heads": 2, "bos_token_id": 0}))
    if tokenizer == "good":
        from tokenizers import Tokenizer, models, pre_tokenizers

        tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.save(str(folder / "tokenizer.json"))
    elif tokenizer is not None:
        (folder / "tokenizer.json").write_text(tokenizer)
    return W


def _encoder(folder: Path, config: dict | None) -> dict:
    rng = np.random.default_rng(1)
    W = {"embeddings.word_embeddings.weight": rng.standard_normal((len(WORDS) + 2, H)).astype(np.float32)}
    for n in ("attention.self.query", "attention.self.key", "attention.self.value"):
        W[f"encoder.layer.0.{n}.weight"] = rng.standard_normal((H, H)).astype(np.float32)
    folder.mkdir()
    save_tensors(folder / "model.safetensors", W)
    (folder / "vocab.txt").write_text("\n".join(["[CLS]", "[SEP]"] + WORDS[1:]) + "\n")
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return W


def test_a_decoder_folder_loads_as_llama_with_its_tensors_as_float32_and_its_tokenizer(tmp_path):
    W = _decoder(tmp_path / "dec")
    lm = load_model(tmp_path / "dec")
    assert isinstance(lm.arch, LlamaModel) and lm.family == "decoder" and lm.arch.n_layers == 1
    assert lm.folder == tmp_path / "dec" and lm.specials == (0, None)
    for n, w in W.items():
        got = lm.weights[n]
        assert got.dtype == np.float32 and not got.flags.writeable
        assert np.array_equal(got, w.astype(np.float32))
    assert lm.encode("the cat sat on the mat") == [1, 2, 3, 4, 1, 5]
    assert load_model(tmp_path / "dec") is lm                       # kept while the files are unchanged


def test_an_encoder_folder_loads_as_bert_with_its_wordpiece_ids(tmp_path):
    _encoder(tmp_path / "enc", {"num_attention_heads": 2})
    lm = load_model(tmp_path / "enc")
    assert isinstance(lm.arch, BertModel) and lm.family == "encoder" and lm.arch.n_heads == 2
    assert lm.specials == (0, 1)                                    # [CLS], [SEP] in vocab.txt order
    assert lm.encode("The cat, sat!") == [2, 3, 7, 4, 7]            # ',' and '!' are not in vocab.txt: [UNK]


def test_model_family_reads_the_config_and_the_tensor_names(tmp_path):
    _decoder(tmp_path / "dec")
    assert model_family(tmp_path / "dec", {"model.embed_tokens.weight"}) == "decoder"
    assert model_family(tmp_path / "dec", {"lm_head.weight"}) is None       # llama config, no embedding
    _encoder(tmp_path / "enc", None)
    assert model_family(tmp_path / "enc", ["encoder.layer.0.attention.self.query.weight"]) == "encoder"
    _encoder(tmp_path / "roberta", {"model_type": "roberta"})
    assert model_family(tmp_path / "roberta", ["encoder.layer.0.attention.self.query.weight"]) is None
    with pytest.raises(FormatRuleError, match="names: must be a list, set or dict of tensor names .str.; got str"):
        model_family(tmp_path / "dec", "model.embed_tokens.weight")


def test_folders_without_a_forward_or_a_tokenizer_are_refused_naming_what_is_missing(tmp_path):
    _encoder(tmp_path / "roberta", {"model_type": "roberta"})
    with pytest.raises(CheckpointError, match="needs a Llama-style decoder .* or a BERT-style encoder; got neither"):
        load_model(tmp_path / "roberta")
    _decoder(tmp_path / "none", tokenizer=None)
    with pytest.raises(CheckpointError, match="a decoder needs its tokenizer.json for text calibration; got none"):
        load_model(tmp_path / "none")
    _decoder(tmp_path / "bad", tokenizer="{not json")
    with pytest.raises(CheckpointError, match="tokenizer.json: must be a tokenizers JSON file"):
        load_model(tmp_path / "bad")
    _encoder(tmp_path / "noheads", None)                            # hidden 8, no config: not MiniLM
    with pytest.raises(CheckpointError, match="needs its config.json"):
        load_model(tmp_path / "noheads")


def _model(family: str, specials) -> LoadedModel:
    """A LoadedModel whose tokenizer gives the ids of a text's characters 'a'.. as 10, 11, ..."""
    arch = BertModel({"num_attention_heads": 1}, {"encoder.layer.0.x"}) if family == "encoder" else \
        LlamaModel({"hidden_size": 1, "num_hidden_layers": 0, "num_attention_heads": 1}, {"model.embed_tokens.weight"})
    return LoadedModel(arch, {}, lambda text: [10 + ord(c) - ord("a") for c in text if c.isalpha()], specials, Path("."))


def test_sequences_frame_consecutive_pieces_as_each_family_expects():
    text = "abcdefgh\n\nijklmnop"
    # encoder: [CLS]=1 ... [SEP]=2 around seq_len - 2 = 3 tokens; 5 tokens asked -> B = ceil(5/5) = 1
    assert sequences(_model("encoder", (1, 2)), text, 5, seq_len=5).tolist() == [[1, 10, 11, 12, 2]]
    # 6 tokens -> B = 2: the second piece continues where the first stopped
    assert sequences(_model("encoder", (1, 2)), text, 6, seq_len=5).tolist() == [[1, 10, 11, 12, 2], [1, 13, 14, 15, 2]]
    # decoder: BOS first, no end token even when one is given; pieces of 3 across the paragraph break
    got = sequences(_model("decoder", (0, 9)), text, 12, seq_len=4)
    assert got.dtype == np.int64 and got.tolist() == [[0, 10, 11, 12], [0, 13, 14, 15], [0, 16, 17, 18]]
    assert sequences(_model("decoder", (None, None)), text, 8, seq_len=4).tolist() == [[10, 11, 12, 13],
                                                                                      [14, 15, 16, 17]]


def test_sequences_refuse_more_tokens_than_the_text_holds():
    # 16 letters in pieces of 3 (seq_len 4 less BOS): 5 whole sequences, 20 tokens
    with pytest.raises(FormatRuleError, match="n_tokens: the text holds 20 tokens in sequences of 4; got a request for 24"):
        sequences(_model("decoder", (0, None)), "abcdefgh\n\nijklmnop", 24, seq_len=4)
    with pytest.raises(FormatRuleError, match="seq_len"):
        sequences(_model("decoder", (0, None)), "abcd", 1, seq_len=3)


@pytest.mark.parametrize("specials", [(1,), (-1, None), (True, None), (1.0, 2), (2**31, None)])
def test_loaded_model_refuses_specials_that_are_not_two_token_ids(specials):
    with pytest.raises(FormatRuleError, match=r"specials: must be two token ids \(ints in \[0, 2\*\*31\)\) or None"):
        _model("encoder", specials)
