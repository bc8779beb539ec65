"""Make the llm-compressor reference checkpoints in tests/io/data/ (run once by hand; never in CI).

Needs a separate environment with torch (CPU), transformers, llmcompressor and compressed-tensors
(versions in README.md beside this file). From the repository root:

    python tests/io/data/make_compressed_tensors.py

1. A random one-layer Llama (hidden 256, intermediate 512, 4 heads, vocabulary 1024 with the bundled
   decoder's tokenizer, tied embeddings, bfloat16; seed 0) is built locally (no hub download).
2. llm-compressor quantizes it four ways and saves each with ``save_compressed=True``:
       ct_w4a16_sym      QuantizationModifier, preset W4A16 (int4 symmetric, group 128)
       ct_w4a16_asym     QuantizationModifier, preset W4A16_ASYM (int4 asymmetric, group 128)
       ct_w8a16_channel  QuantizationModifier, int8 symmetric per-channel (a config group)
       ct_w4a16_actorder GPTQModifier, W4A16 with actorder="weight" on 16 x 128 random tokens
   ``lm_head`` is ignored (left unquantized), as llm-compressor's examples do.
3. The library dequantizes each saved folder (transformers' compressed-tensors loader with
   ``run_compressed=False``, i.e. compressed-tensors' own decompression) and the result is stored
   beside it as ``<name>.dequantized.safetensors``: every linear weight's SHA-256 (of its raw bytes, as
   uint8 tensors ``<layer>.sha256``) and the full dequantized weights of two layers.
"""

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from datasets import Dataset
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from transformers.utils.quantization_config import CompressedTensorsConfig

HERE = Path(__file__).parent
TOKENIZER = HERE.parents[2] / "refsim" / "data" / "models" / "pydoc_llama"
FULL = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj")


def base_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=1, torch_dtype="bfloat16")
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # wider than the default init so groups have distinct scales
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.05)
    return model.to(torch.bfloat16)


def calibration():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 1024, (16, 128), generator=g)
    return Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist()})


def recipes():
    int8_channel = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(
        num_bits=8, type="int", symmetric=True, strategy="channel"))
    return {
        "ct_w4a16_sym": (QuantizationModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"]), False),
        "ct_w4a16_asym": (QuantizationModifier(targets="Linear", scheme="W4A16_ASYM", ignore=["lm_head"]), False),
        "ct_w8a16_channel": (QuantizationModifier(config_groups={"group_0": int8_channel}, ignore=["lm_head"]), False),
        "ct_w4a16_actorder": (GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"], actorder="weight",
                                           block_size=128, dampening_frac=0.01), True),
    }


def main(only=None):
    for name, (recipe, needs_data) in recipes().items():
        if only and name not in only:
            continue
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        base = Path(tempfile.mkdtemp()) / "tiny-llama"
        base_model().save_pretrained(base)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / f, base / f)
        model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.bfloat16)
        kw = dict(dataset=calibration(), num_calibration_samples=16, max_seq_length=128) if needs_data else {}
        oneshot(model=model, recipe=recipe, **kw)
        model.save_pretrained(out, save_compressed=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / f, out / f)
        dense = AutoModelForCausalLM.from_pretrained(
            out, quantization_config=CompressedTensorsConfig(run_compressed=False), torch_dtype=torch.bfloat16)
        tensors = {}
        for mod_name, mod in dense.named_modules():
            if isinstance(mod, torch.nn.Linear) and mod_name != "lm_head":
                w = mod.weight.detach().contiguous()
                raw = w.view(torch.int16).numpy().tobytes()
                tensors[f"{mod_name}.sha256"] = np.frombuffer(hashlib.sha256(raw).digest(), np.uint8).copy()
                if mod_name in FULL:
                    tensors[f"{mod_name}.weight_bf16_bits"] = w.view(torch.int16).numpy().copy()
        save_file(tensors, str(HERE / f"{name}.dequantized.safetensors"))
        print(name, "->", out, sorted(p.name for p in out.iterdir()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
