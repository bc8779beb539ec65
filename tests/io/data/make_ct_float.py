"""Write ct_float_llmcompressor.npz: what llm-compressor saves for its weight-only-writable float presets, for
tests/io/test_ct_float_write.py (run once by hand, in a separate environment; never in CI).

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 llmcompressor==0.14.0.1 compressed-tensors==0.19.0
    VENV/bin/python tests/io/data/make_ct_float.py

1. A random one-layer Llama (hidden 64, intermediate 128, 4 heads, vocabulary 1024 with the bundled
   decoder's tokenizer, seed 0; built locally, no hub download) in float32 whose linear weights are
   bfloat16 values (normal(0, 0.05) times exp(normal), rounded to bfloat16 and widened: stored here as
   bf16 bits, exactly the float32 weights). o_proj is scaled by 1e-6 (block scales near the bottom of
   e4m3), down_proj's columns 96..127 are zero (zero fp4 blocks, a zero partial fp8 tile) and
   down_proj[0, :8] is -0.0.
2. ``oneshot(model, recipe=QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head"]))``
   for each preset in PRESETS (no calibration data: weight-only or dynamic activations), then
   ``save_pretrained(save_compressed=True)``.
3. Saved: ``<layer>.w_bf16`` (uint16 bits, torch (N, K)) for the seven linear layers; for each preset
   every tensor of those layers as saved (float8 tensors as raw uint8 bytes, ``<preset>.<tensor>``)
   and ``<preset>.config`` = config.json's ``quantization_config`` as JSON; ``versions`` as JSON.
   A preset the installed llm-compressor does not know is recorded in ``missing``.
"""

import json
import shutil
import tempfile
from pathlib import Path

import compressed_tensors
import llmcompressor
import numpy as np
import torch
import transformers
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

HERE = Path(__file__).parent
TOKENIZER = HERE.parents[2] / "refsim" / "data" / "models" / "pydoc_llama"
PRESETS = ("FP8_DYNAMIC", "FP8_BLOCK", "NVFP4A16", "MXFP4A16")
LINEAR = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
LAYERS = tuple(f"model.layers.0.{n}" for n in LINEAR)


def base_model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=1)
    m = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.05)
                p.mul_(torch.exp(torch.randn_like(p)))
        m.model.layers[0].self_attn.o_proj.weight.mul_(1e-6)
        m.model.layers[0].mlp.down_proj.weight[:, 96:] = 0.0
        m.model.layers[0].mlp.down_proj.weight[0, :8] = -0.0
        for p in m.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return m.to(torch.float32)


def main() -> None:
    out, missing = {}, []
    for preset in PRESETS:
        base = Path(tempfile.mkdtemp()) / "tiny-llama"
        base_model().save_pretrained(base)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / f, base / f)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        before = {n: m.weight.detach().clone() for n, m in model.named_modules() if n in LAYERS}
        try:
            oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head"]))
        except Exception as err:                                   # a preset this version does not have
            missing.append(f"{preset}: {type(err).__name__}: {err}")
            continue
        saved = Path(tempfile.mkdtemp()) / "saved"
        model.save_pretrained(saved, save_compressed=True)
        tensors = load_file(str(saved / "model.safetensors"))
        for name in LAYERS:
            bits = before[name].to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            w = out.setdefault(f"{name}.w_bf16", bits)            # the same weights for every preset
            assert np.array_equal(w, bits)
        for t, v in tensors.items():
            if t.rsplit(".", 1)[0] in LAYERS:
                out[f"{preset}.{t}"] = v.view(torch.uint8).numpy() if v.dtype.itemsize == 1 and v.is_floating_point() \
                    else v.numpy()
        cfg = json.loads((saved / "config.json").read_text())["quantization_config"]
        out[f"{preset}.config"] = np.array(json.dumps(cfg, sort_keys=True))
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "llmcompressor": llmcompressor.__version__, "compressed_tensors": compressed_tensors.__version__}
    out["versions"] = np.array(json.dumps(versions, sort_keys=True))
    out["missing"] = np.array(json.dumps(missing))
    target = HERE / "ct_float_llmcompressor.npz"
    np.savez_compressed(target, **out)
    print(target.name, target.stat().st_size, "bytes", versions, missing)


if __name__ == "__main__":
    main()
