"""Reference values for refsim.quant.awq: AutoAWQ's searches re-run in torch (run by hand; never in CI).

AutoAWQ itself (``autoawq``) is not installed: its last release pins an older torch. This script is a
faithful re-run of the functions of casper-hansen/AutoAWQ ``awq/quantize/quantizer.py`` at commit
88e4c76b20755db275574e6a03c83c84ba3bece5 -- ``pseudo_quantize_tensor`` (zero_point=True),
``_search_best_scale`` + ``_compute_best_scale`` (n_grid 20, duo scaling) + ``_compute_loss``,
``_compute_best_clip`` (n_grid 20, max_shrink 0.5, n_sample_token 512, oc_batch_size 256/64) --
restated line by line on torch tensors, with transformers' own fp16 ``LlamaAttention`` and
``LlamaMLP`` modules as ``module2inspect``, on layer 0 of the bundled decoder
(refsim/data/models/pydoc_llama) loaded in float16 as AutoAWQ loads models. Needs torch (CPU),
transformers, tokenizers, safetensors. From the repository root:

    python tests/quant/data/make_awq_reference.py

Writes tests/quant/data/awq_pydoc_llama_layer0.safetensors:
    ids                      int64 (4, 128)   <s> + 127 tokens, consecutive pieces of the calibration text
    block_input              float16 (4, 128, 256)  layer 0's input (the embeddings)
    <group>.input            float16 (512, K)  the group's recorded input (AutoAWQ's input_feat)
    <group>.ratio            float32 (1,)      the chosen grid ratio
    <group>.scales           float16 (K,)      the chosen scales
    <group>.losses           float32 (20,)     the loss of every grid point
    <layer>.clip_max         float16 (N, G)    the clip search's max values (after the scales are applied)
  groups: attn (input_layernorm -> q,k,v; module2inspect self_attn), o (v_proj -> o_proj),
          mlp (post_attention_layernorm -> gate,up; module2inspect mlp), down (up_proj -> down_proj)
"""

from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).parents[3]
MODEL = ROOT / "refsim" / "data" / "models" / "pydoc_llama"
GROUP, BITS, N_GRID = 128, 4, 20


def pseudo_quantize_tensor(w):
    shape = w.shape
    w = w.reshape(-1, GROUP)
    max_val = w.amax(dim=1, keepdim=True)
    min_val = w.amin(dim=1, keepdim=True)
    max_int, min_int = 2**BITS - 1, 0
    scales = (max_val - min_val).clamp(min=1e-5) / max_int
    zeros = (-torch.round(min_val / scales)).clamp_(min_int, max_int)
    w = (torch.clamp(torch.round(w / scales) + zeros, min_int, max_int) - zeros) * scales
    return w.reshape(shape)


def compute_loss(a, b):
    return (a.view(-1) - b.view(-1)).float().pow(2).sum().item() / a.numel()


@torch.no_grad()
def search_scale(layers, inp, forward):
    weight = torch.cat([m.weight for m in layers], dim=0)
    org_shape = weight.shape
    weight = weight.view(-1, GROUP)
    w_scale = weight.abs() / (weight.abs().amax(dim=1, keepdim=True) + 1e-6)
    w_mean = w_scale.view(org_shape).mean(0)
    inp_flat = inp.abs().view(-1, inp.shape[-1])
    x_mean = (inp_flat.to(torch.float32).sum(dim=0) / inp_flat.size(0)).to(inp.dtype)
    out_ref = forward()
    out_ref = out_ref.clip(torch.finfo(out_ref.dtype).min, torch.finfo(out_ref.dtype).max)
    orig = [m.weight.data.clone() for m in layers]
    best, best_ratio, best_err, losses = None, -1, float("inf"), []
    for r in range(N_GRID):
        ratio = r / N_GRID
        scales = (x_mean.pow(ratio) / (w_mean.pow(1 - ratio) + 1e-4)).clamp(min=1e-4)
        scales = scales / (scales.max() * scales.min()).sqrt()
        sv = scales.view(1, -1)
        scales[torch.isinf(scales)] = 1
        scales[torch.isnan(scales)] = 1
        for m in layers:
            m.weight.mul_(sv)
            m.weight.data = pseudo_quantize_tensor(m.weight.data) / sv
        out = forward()
        out = out.clip(torch.finfo(out.dtype).min, torch.finfo(out.dtype).max)
        loss = compute_loss(out_ref, out)
        losses.append(loss)
        if loss < best_err:
            best_err, best_ratio, best = loss, ratio, scales.clone()
        for m, w in zip(layers, orig):
            m.weight.data = w.clone()
    return best, best_ratio, losses


@torch.no_grad()
def search_clip(w, input_feat, n_grid=20, max_shrink=0.5, n_sample_token=512):
    org_w_shape = w.shape
    input_feat = input_feat.view(-1, input_feat.shape[-1])
    input_feat = input_feat.reshape(1, input_feat.shape[0], -1, GROUP)
    step_size = max(1, input_feat.shape[1] // n_sample_token)
    input_feat = input_feat[:, ::step_size]
    w = w.reshape(org_w_shape[0], 1, -1, GROUP)
    oc_batch_size = 256 if org_w_shape[0] % 256 == 0 else 64
    w_all, best_all = w, []
    for i_b in range(org_w_shape[0] // oc_batch_size):
        w = w_all[i_b * oc_batch_size:(i_b + 1) * oc_batch_size]
        org_max_val = w.abs().amax(dim=-1, keepdim=True)
        best_max_val = org_max_val.clone()
        min_errs = torch.ones_like(org_max_val) * 1e9
        org_out = (input_feat * w).sum(dim=-1)
        for i_s in range(int(max_shrink * n_grid)):
            max_val = org_max_val * (1 - i_s / n_grid)
            cur_w = torch.clamp(w, -max_val, max_val)
            q_w = pseudo_quantize_tensor(cur_w)
            cur_out = (input_feat * q_w).sum(dim=-1)
            err = (cur_out - org_out).pow(2).mean(dim=1).view(min_errs.shape)
            better = err < min_errs
            min_errs[better] = err[better]
            best_max_val[better] = max_val[better]
        best_all.append(best_max_val)
    return torch.cat(best_all, dim=0).squeeze(1)


def main():
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float16).eval()
    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    text = (ROOT / "refsim" / "data" / "corpus" / "calibration.txt").read_text(encoding="utf-8")
    ids = []
    for para in text.split("\n\n"):
        ids.extend(tok.encode(para + "\n\n", add_special_tokens=False).ids)
        if len(ids) >= 4 * 127:
            break
    ids = torch.tensor([[0] + ids[b * 127:(b + 1) * 127] for b in range(4)])
    layer = model.model.layers[0]
    x = model.model.embed_tokens(ids)                                          # (4, 128, 256) fp16
    pos = torch.arange(128)[None].expand(4, -1)
    pe = model.model.rotary_emb(x, pos)
    feats = {}
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: feats.__setitem__(n, i[0].detach()))
             for n, m in layer.named_modules() if isinstance(m, torch.nn.Linear)]
    layer(x, position_embeddings=pe, attention_mask=None)
    for h in hooks:
        h.remove()
    att, mlp = layer.self_attn, layer.mlp
    out = {"ids": ids.numpy(), "block_input": x.detach().numpy()}
    groups = {
        "attn": ([att.q_proj, att.k_proj, att.v_proj], feats["self_attn.q_proj"],
                 lambda: att(feats["self_attn.q_proj"], position_embeddings=pe, attention_mask=None)[0]),
        "o": ([att.o_proj], feats["self_attn.o_proj"], lambda: att.o_proj(feats["self_attn.o_proj"])),
        "mlp": ([mlp.gate_proj, mlp.up_proj], feats["mlp.gate_proj"], lambda: mlp(feats["mlp.gate_proj"])),
        "down": ([mlp.down_proj], feats["mlp.down_proj"], lambda: mlp.down_proj(feats["mlp.down_proj"])),
    }
    results = {}
    for g, (layers, inp, fwd) in groups.items():
        s, ratio, losses = search_scale(layers, inp, fwd)
        results[g] = s
        out[f"{g}.input"] = inp.reshape(-1, inp.shape[-1]).numpy()
        out[f"{g}.ratio"] = np.array([ratio], np.float32)
        out[f"{g}.scales"] = s.numpy()
        out[f"{g}.losses"] = np.array(losses, np.float32)
        print(g, "ratio", ratio, flush=True)
    # apply_scale (scale_ln_fcs / scale_fc_fc), then the inputs divided by the scales, as AutoAWQ
    prevs = {"attn": layer.input_layernorm, "o": att.v_proj, "mlp": layer.post_attention_layernorm,
             "down": mlp.up_proj}
    names = {"attn": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "o": ["self_attn.o_proj"],
             "mlp": ["mlp.gate_proj", "mlp.up_proj"], "down": ["mlp.down_proj"]}
    with torch.no_grad():
        for g, (layers, _, _) in groups.items():
            s = results[g]
            prev = prevs[g]
            if isinstance(prev, torch.nn.Linear):
                prev.weight[-s.size(0):].div_(s.view(-1, 1))
            else:
                prev.weight.div_(s)
            for m in layers:
                m.weight.mul_(s.view(1, -1))
            for n in names[g]:
                feats[n] = feats[n] / s.view(1, -1)
    for n, m in layer.named_modules():
        if isinstance(m, torch.nn.Linear) and not any(a in n for a in ["q_", "k_", "query", "key", "Wqkv"]):
            out[f"{n}.clip_max"] = search_clip(m.weight, feats[n]).numpy()
            print(n, "clipped", flush=True)
    save_file(out, str(Path(__file__).parent / "awq_pydoc_llama_layer0.safetensors"))


if __name__ == "__main__":
    main()
