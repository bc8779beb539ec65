"""How refsim/data/models/pydoc_llama was made (run once by hand; never by the tests or CI).

A two-layer Llama-architecture decoder trained from scratch on CPU on refsim's built-in calibration
text (refsim/data/corpus/calibration.txt), with a byte-level BPE tokenizer trained on the same text.
Needs torch (CPU), transformers and tokenizers; run from the repository root:

    python refsim/data/models/pydoc_llama/make_model.py [steps]

Writes config.json, generation_config.json, model.safetensors (bfloat16), tokenizer.json,
tokenizer_config.json and special_tokens_map.json into this folder, and prints the held-out
perplexity (refsim/data/corpus/heldout.txt) every 100 steps.
"""

import json
import math
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

HERE = Path(__file__).parent
CORPUS = HERE.parent.parent / "corpus"
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
SEQ, BATCH, VOCAB = 128, 16, 1024

torch.manual_seed(0)
torch.set_num_threads(1)  # a shared 2-core machine: one thread wastes no time in spin-waits

# --- tokenizer: byte-level BPE, 1024 entries, <s> = 0, </s> = 1, <unk> = 2 ----------------------
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>", "<unk>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train([str(CORPUS / "calibration.txt")], trainer)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
fast.save_pretrained(HERE)

train_ids = torch.tensor(tok.encode((CORPUS / "calibration.txt").read_text()).ids)
held_ids = torch.tensor(tok.encode((CORPUS / "heldout.txt").read_text()).ids)
print(f"tokens: calibration {train_ids.numel()}, held-out {held_ids.numel()}", flush=True)

cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=640, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=SEQ,
                  rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                  bos_token_id=0, eos_token_id=1)
model = LlamaForCausalLM(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, betas=(0.9, 0.95))
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(s, STEPS) / STEPS)))


def heldout_ppl() -> float:
    model.eval()
    n = held_ids.numel() // SEQ
    x = held_ids[: n * SEQ].view(n, SEQ)
    with torch.no_grad():
        loss = model(input_ids=x, labels=x).loss.item()
    model.train()
    return math.exp(loss)


t0 = time.time()
for step in range(STEPS):
    starts = torch.randint(0, train_ids.numel() - SEQ, (BATCH,))
    x = torch.stack([train_ids[s:s + SEQ] for s in starts])
    loss = model(input_ids=x, labels=x).loss
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if step % 50 == 49 or step == STEPS - 1:
        print(f"step {step + 1}: train loss {loss.item():.3f}, held-out ppl {heldout_ppl():.2f}, "
              f"{time.time() - t0:.0f} s", flush=True)

model.to(torch.bfloat16).save_pretrained(HERE, safe_serialization=True)
GenerationConfig(bos_token_id=0, eos_token_id=1, do_sample=False, max_new_tokens=64).save_pretrained(HERE)
print(json.dumps({"heldout_ppl_fp32": heldout_ppl()}), flush=True)
