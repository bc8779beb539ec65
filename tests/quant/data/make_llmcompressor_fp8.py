"""Write llmcompressor_fp8.npz: the FP8 weights llm-compressor writes for its FP8, FP8_DYNAMIC and FP8_BLOCK
presets, for tests/quant/test_fp8.py (run once by hand, in a separate environment; never in CI).

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 llmcompressor==0.14.0.1
    VENV/bin/python tests/quant/data/make_llmcompressor_fp8.py

1. A random one-layer Llama in float32 (hidden 128, intermediate 192, 4 heads, vocabulary 1024 with
   the bundled decoder's tokenizer, seed 0; built locally, no hub download). Its linear weights are
   normal(0, 0.05) times exp(normal): heavy tails. q_proj is scaled by 1e-5 (a tile whose amax / 448
   lies below float32 eps), down_proj's columns 128..191 are zero (a zero, partial 128x128 tile)
   and down_proj[0, :8] is -0.0.
2. ``oneshot(QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head"]))`` for each
   preset (FP8 calibrates its static input scales on 4 x 64 random tokens; the weights need none),
   then ``save_pretrained(save_compressed=True)``.
3. For q_proj and down_proj: the float32 weight before quantization (``<layer>.w``, torch (N, K)
   orientation; the same for every preset), the saved ``weight`` as raw e4m3 bytes (``.weight``) and ``weight_scale``
   (``.weight_scale``). ``versions`` holds the package versions as JSON.
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
from datasets import Dataset
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

HERE = Path(__file__).parent
TOKENIZER = HERE.parents[2] / "refsim" / "data" / "models" / "pydoc_llama"
LAYERS = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj")
PRESETS = ("FP8", "FP8_DYNAMIC", "FP8_BLOCK")


def base_model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=128, intermediate_size=192, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=1)
    m = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.05)
                p.mul_(torch.exp(torch.randn_like(p)))
        m.model.layers[0].self_attn.q_proj.weight.mul_(1e-5)
        m.model.layers[0].mlp.down_proj.weight[:, 128:] = 0.0
        m.model.layers[0].mlp.down_proj.weight[0, :8] = -0.0
    return m.to(torch.float32)


def calibration() -> Dataset:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 1024, (4, 64), generator=g)
    return Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist()})


def main() -> None:
    out = {}
    for preset in PRESETS:
        base = Path(tempfile.mkdtemp()) / "tiny-llama"
        base_model().save_pretrained(base)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / f, base / f)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        before = {n: m.weight.detach().clone() for n, m in model.named_modules() if n in LAYERS}
        kw = dict(dataset=calibration(), num_calibration_samples=4, max_seq_length=64) if preset == "FP8" else {}
        oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head"]), **kw)
        saved = Path(tempfile.mkdtemp()) / "saved"
        model.save_pretrained(saved, save_compressed=True)
        tensors = load_file(str(saved / "model.safetensors"))
        for name in LAYERS:
            w = out.setdefault(f"{name}.w", before[name].numpy())          # the same weights for every preset
            assert np.array_equal(w.view(np.uint32), before[name].numpy().view(np.uint32))
            out[f"{preset}.{name}.weight"] = tensors[f"{name}.weight"].view(torch.uint8).numpy()
            out[f"{preset}.{name}.weight_scale"] = tensors[f"{name}.weight_scale"].numpy()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "llmcompressor": llmcompressor.__version__, "compressed_tensors": compressed_tensors.__version__}
    out["versions"] = np.array(json.dumps(versions, sort_keys=True))
    target = HERE / "llmcompressor_fp8.npz"
    np.savez_compressed(target, **out)
    print(target.name, target.stat().st_size, "bytes", versions)


if __name__ == "__main__":
    main()
