"""Make the bitsandbytes 4-bit reference checkpoints in tests/io/data/ (run once by hand; never in CI).

Needs a separate environment with torch (CPU), transformers, accelerate and bitsandbytes (versions in
README.md beside this file). From the repository root:

    pip install torch==2.13.0 transformers==5.24.0 accelerate==1.15.0 bitsandbytes==0.50.2
    python tests/io/data/make_bnb4_checkpoints.py

1. A random one-layer Llama (hidden 40, intermediate 420, 4 heads, 2 key/value heads, vocabulary 64,
   tied embeddings; seed 0) is built locally (no hub download) and saved in the model dtype. Its
   shapes give full and partial blocks of 64 (k_proj: 800 values = 12.5 blocks; the MLP: 16800 values
   = 262.5 blocks, so 263 absmax values = two nested blocks of 256 under double quantization).
2. transformers loads it with ``BitsAndBytesConfig(load_in_4bit=True, ...)`` on the CPU (bitsandbytes
   quantizes every Linear but lm_head, which is tied to the embeddings here) and ``save_pretrained``
   writes the folder (QuantState.as_dict(packed=True) per layer), four ways:
       bnb_nf4_dq_bf16   nf4, double quantization, bfloat16 model
       bnb_nf4_fp16      nf4, float16 model
       bnb_fp4_dq_fp16   fp4, double quantization, float16 model
       bnb_fp4_bf16      fp4, bfloat16 model
3. transformers loads each saved folder back and bitsandbytes dequantizes every Linear4bit
   (``bitsandbytes.functional.dequantize_4bit(weight, quant_state)``, in the model dtype): stored as
   ``<name>.dequantized.safetensors``: ``<layer>.sha256`` uint8 (32,), the SHA-256 of the
   dequantized weight's raw bytes (PyTorch (N, K) orientation, C order), and for q_proj and k_proj
   the full weight as int16 bit patterns ``<layer>.bits`` (N, K).
"""

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import accelerate
import bitsandbytes as bnb
import numpy as np
import safetensors
import torch
import transformers
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

HERE = Path(__file__).parent
FULL = ("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj")
#: folder -> (quant type, double quantization, model dtype)
CASES = {
    "bnb_nf4_dq_bf16": ("nf4", True, torch.bfloat16),
    "bnb_nf4_fp16": ("nf4", False, torch.float16),
    "bnb_fp4_dq_fp16": ("fp4", True, torch.float16),
    "bnb_fp4_bf16": ("fp4", False, torch.bfloat16),
}


def base_model(dtype):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=40, intermediate_size=420, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=1)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # wider than the default init, with one outlier per weight
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.05)
                p.view(-1)[7] = 1.5
    return model.to(dtype)


def versions() -> str:
    return (f"bitsandbytes {bnb.__version__}; torch {torch.__version__}; transformers {transformers.__version__}; "
            f"accelerate {accelerate.__version__}; safetensors {safetensors.__version__}; numpy {np.__version__}; "
            "quantize_4bit: default (torch) kernel on CPU; dequantize_4bit: CPU kernel")


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    for name, (kind, dq, dtype) in CASES.items():
        base = tmp / f"{name}-base"
        base_model(dtype).save_pretrained(base)
        qc = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=kind, bnb_4bit_use_double_quant=dq,
                                bnb_4bit_compute_dtype=dtype)
        q = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, device_map="cpu", quantization_config=qc)
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        q.save_pretrained(out)
        back = AutoModelForCausalLM.from_pretrained(out, device_map="cpu")
        expected = {}
        for mod_name, mod in back.named_modules():
            if isinstance(mod, bnb.nn.Linear4bit):
                w = bnb.functional.dequantize_4bit(mod.weight.data, mod.weight.quant_state).contiguous()
                assert w.dtype == dtype, (mod_name, w.dtype)
                bits = w.view(torch.int16).numpy()
                expected[f"{mod_name}.sha256"] = np.frombuffer(hashlib.sha256(bits.tobytes()).digest(), np.uint8).copy()
                if mod_name in FULL:
                    expected[f"{mod_name}.bits"] = bits.copy()
        save_file(expected, HERE / f"{name}.dequantized.safetensors",
                  metadata={"versions": versions(), "dtype": str(dtype).removeprefix("torch.")})
        cfg = json.loads((out / "config.json").read_text())
        print(f"wrote {out.name}: {len(expected)} expected arrays; quantization_config {cfg['quantization_config']}")
    shutil.rmtree(tmp)
    print(versions())


if __name__ == "__main__":
    main()
