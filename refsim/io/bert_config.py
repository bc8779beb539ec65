"""config.json for BERT-style encoder output folders: the fields transformers' ``BertConfig`` reads.

A folder transformers loads needs ``config.json`` with ``model_type`` (AutoConfig picks the class by
it) and the architecture's sizes. all-MiniLM-L6-v2 comes as a bare safetensors file without a
config, so refsim writes one: every field of ``BertConfig`` (transformers 5.24,
``models/bert/configuration_bert.py``), each taken from the source model's own config.json when it
has the field, else derived here and stated in a note:

    field                       derived from (P = the block prefix, "" or "bert.")
    vocab_size, hidden_size     P embeddings.word_embeddings.weight   (V, H)
    max_position_embeddings     P embeddings.position_embeddings.weight   (positions, H)
    type_vocab_size             P embeddings.token_type_embeddings.weight (types, H)
    num_hidden_layers           1 + the largest i of P encoder.layer.<i>.*
    intermediate_size           P encoder.layer.0.intermediate.dense.bias (I,) (biases are never quantized)
    num_attention_heads,        refsim.models.bert.BertModel's rule (all-MiniLM-L6-v2's 12 heads and
    layer_norm_eps              1e-12 for a bare file of hidden size 384)
    the rest                    BertConfig's defaults (hidden_act "gelu", dropouts 0.1, ...)

GPTQ folders also get ``quantization_config["block_name_to_quantize"]`` = P + "encoder.layer": optimum's
``GPTQQuantizer.convert_model`` (which transformers' GPTQ loader calls) finds the blocks to replace by
that prefix, and without it matches only decoder patterns ("model.layers", "transformer.h", ...) and
fails with "Block pattern could not be match" (optimum ``gptq/utils.py``, ``BLOCK_PATTERNS``).
"""

from __future__ import annotations

import re

from refsim.errors import CheckpointError

# used by refsim.io.hf_folder.finish, which validates what it passes
__all__: list[str] = []

#: BertConfig's fields and defaults (transformers 5.24 ``BertConfig``); those derived from the tensors
#: are overwritten by :func:`complete_bert_config`
BERT_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                 "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
                 "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0, "use_cache": True,
                 "classifier_dropout": None, "is_decoder": False, "add_cross_attention": False,
                 "bos_token_id": None, "eos_token_id": None, "tie_word_embeddings": True}

_BLOCK = re.compile(r"^((?:[A-Za-z_][A-Za-z0-9_]*\.)*?)encoder\.layer\.(\d+)\.attention\.self\.query\.")


def encoder_prefix(names) -> str | None:
    """The module prefix of a BERT encoder's tensors ("" or e.g. "bert."), or None when ``names``
    (tensor names: any iterable of str) hold no ``<P>encoder.layer.<i>.attention.self.query.*``."""
    found = {m.group(1) for n in names if (m := _BLOCK.match(n))}
    if len(found) > 1:
        raise CheckpointError(f"tensor names: a BERT encoder must have one block prefix; got {sorted(found)}")
    return found.pop() if found else None


def block_name_to_quantize(names) -> str | None:
    """optimum/gptqmodel's ``block_name_to_quantize`` for an encoder ("encoder.layer", "bert.encoder.layer"),
    None for other models (decoders match optimum's own patterns)."""
    p = encoder_prefix(names)
    return None if p is None else p + "encoder.layer"


def complete_bert_config(cfg: dict, shapes: dict[str, tuple], where) -> tuple[dict, list[str]]:
    """``cfg`` (the source's config.json, possibly empty) with every BertConfig field, ``model_type``
    "bert" and ``architectures`` filled in, and the notes stating what was derived (empty when the
    source had everything). ``shapes``: tensor name -> shape of the folder's tensors. Returns
    ``(cfg, [])`` unchanged for non-BERT folders (another model_type, or no encoder tensors), and
    with a note instead of a config when the head count cannot be known."""
    from refsim.models.bert import BertModel

    p = encoder_prefix(shapes)
    if p is None or cfg.get("model_type", "bert") != "bert":
        return cfg, []

    def shape(name: str, rank: int) -> tuple:
        s = shapes.get(p + name)
        if s is None or len(s) != rank:
            raise CheckpointError(f"{where}: a BERT encoder needs tensor {p + name!r} of rank {rank} to write "
                                  f"config.json; got {s}")
        return s

    vocab, hidden = shape("embeddings.word_embeddings.weight", 2)
    derived = {"vocab_size": vocab, "hidden_size": hidden,
               "max_position_embeddings": shape("embeddings.position_embeddings.weight", 2)[0],
               "type_vocab_size": shape("embeddings.token_type_embeddings.weight", 2)[0],
               "intermediate_size": shape("encoder.layer.0.intermediate.dense.bias", 1)[0],
               "num_hidden_layers": 1 + max(int(m.group(1)) for n in shapes
                                            if (m := re.match(re.escape(p) + r"encoder\.layer\.(\d+)\.", n)))}
    try:
        arch = BertModel(cfg, {n[len(p):] for n in shapes if n.startswith(p)}, where, hidden)
    except CheckpointError:
        return cfg, [f"warning: config.json: no model_type written (transformers cannot load the folder): the number of "
                     f"attention heads of this hidden size {hidden} encoder is not in its tensors; add the "
                     "source's config.json"]
    derived.update(num_attention_heads=arch.n_heads, layer_norm_eps=arch.eps)
    filled = [k for k in ("model_type", "architectures", *BERT_DEFAULTS) if k not in cfg]
    out = {"model_type": "bert", "architectures": ["BertModel"], **BERT_DEFAULTS, **derived}
    out = {k: v for k, v in out.items() if k in filled}
    out.update(cfg)  # the source's own values first
    if not filled:
        return out, []
    from_tensors = [f"{k}={out[k]}" for k in derived if k in filled and k not in ("num_attention_heads", "layer_norm_eps")]
    notes = [f"note: config.json: the source has no {', '.join(filled[:3])}{', ...' if len(filled) > 3 else ''}; "
             f"written as BertConfig: {', '.join(from_tensors) or 'no size'} from the tensors"
             + (f", num_attention_heads={out['num_attention_heads']} and layer_norm_eps={out['layer_norm_eps']} "
                "as refsim's BERT forward takes them" if {"num_attention_heads", "layer_norm_eps"} & set(filled) else "")
             + ", the other fields at BertConfig's defaults"]
    return out, notes
