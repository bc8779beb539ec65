"""Write gptq_float_llmcompressor.npz: llm-compressor's GPTQ with float grids, for tests/quant/test_gptq.py and
tests/io/test_ct_float_write.py (run once by hand, in a separate environment; never in CI).

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 llmcompressor==0.14.0.1 compressed-tensors==0.19.0
    VENV/bin/python tests/quant/data/make_gptq_float.py

1. The one-layer float32 Llama of tests/io/data/make_ct_float.py (hidden 64, intermediate 128: every K <= 128,
   so each layer is one GPTQ block of 128 columns). float32 so that llm-compressor's arithmetic is float32 end
   to end (a bf16 model rounds scales and updates in bf16, not modelled).
2. ``oneshot(model, dataset, recipe=GPTQModifier(targets="Linear", scheme=preset, ignore=["lm_head"],
   actorder=A, block_size=B))`` for every (preset, A, B) in CASES, with 4 calibration samples of 16 random
   token ids (seed 1), on the CPU (the eager ``gptq_block_update``; no Triton), then
   ``save_pretrained(save_compressed=True)``.
3. Saved: ``<layer>.w_bf16`` the original weights (uint16 bf16 bits, exactly the float32 weights);
   ``<layer>.H`` the Hessian ``quantize_weight`` received (float32 (K, K), sum / nsamples; the same in every
   case, asserted, as are the layer inputs: act-order cases got it permuted by the stable descending order of
   its diagonal); ``<layer>.U`` and ``<layer>.U_actorder`` the factor ``factorize_hessian`` returned (float32
   (K, K) upper; torch's MKL Cholesky chain) without and with act-order (the same for every preset). Per case
   ``<preset>.<actorder>[.b<B>].``: ``<layer>.q`` the fake-quantized float32 weight ``quantize_weight`` returned
   (torch (N, K)), every saved tensor of the layer (float8 as raw bytes) and ``config`` (config.json's
   ``quantization_config``); ``versions``; ``missing`` (cases the installed llm-compressor refused).
"""

import importlib.util
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
from llmcompressor.modifiers.gptq import base as gptq_base
from llmcompressor.modifiers.gptq import gptq_quantize
from llmcompressor.modifiers.gptq import GPTQModifier
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("make_ct_float", HERE.parents[1] / "io" / "data" / "make_ct_float.py")
make_ct_float = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_ct_float)
LAYERS, TOKENIZER, base_model = make_ct_float.LAYERS, make_ct_float.TOKENIZER, make_ct_float.base_model

#: (preset, actorder, GPTQ block size): block 32 splits every layer into 2-4 blocks (the lazy block updates)
CASES = (("FP8_DYNAMIC", None, 128), ("FP8_BLOCK", None, 128), ("NVFP4A16", None, 128), ("MXFP4A16", None, 128),
         ("NVFP4A16", "weight", 128), ("NVFP4A16", "static", 128), ("FP8_DYNAMIC", "weight", 128),
         ("FP8_DYNAMIC", None, 32), ("NVFP4A16", "weight", 32))


def calibration() -> Dataset:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, 1024, (4, 16), generator=g)
    return Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist()})


def run_case(preset, actorder, block_size, out):
    base = Path(tempfile.mkdtemp()) / "tiny-llama"
    base_model().save_pretrained(base)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, base / f)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    names = {id(m): n for n, m in model.named_modules() if n in LAYERS}
    before = {n: m.weight.detach().clone() for n, m in model.named_modules() if n in LAYERS}
    xs, hs, us, qs = {}, {}, {}, {}
    orig_acc, orig_qw, orig_fact = gptq_base.accumulate_hessian, gptq_base.quantize_weight, \
        gptq_quantize.factorize_hessian
    current = []

    def acc(inp, module, hessian, num_samples):
        xs.setdefault(names[id(module)], []).append(inp.detach().to(torch.float32).clone())
        return orig_acc(inp, module, hessian, num_samples)

    def fact(weights, hessians, percdamp, used):
        hs[current[-1]] = hessians[0].detach().clone()
        r = orig_fact(weights, hessians, percdamp, used)
        us[current[-1]] = r[0].detach().clone()
        return r

    def qw(weights, hessians, scale, zero_point, global_scale, quant_args, *a, **k):
        r = orig_qw(weights, hessians, scale, zero_point, global_scale, quant_args, *a, **k)
        qs[current[-1]] = r[0][0].detach().clone()
        return r

    orig_list = gptq_base.GPTQModifier.compress_module_list

    def compress_module_list(self, module_list):
        for m in module_list:           # one module per call: the recordings know whose they are
            current.append(names[id(m)])
            orig_list(self, [m])

    gptq_base.accumulate_hessian, gptq_base.quantize_weight = acc, qw
    gptq_quantize.factorize_hessian = fact
    gptq_base.GPTQModifier.compress_module_list = compress_module_list
    try:
        oneshot(model=model, dataset=calibration(), num_calibration_samples=4, max_seq_length=16,
                recipe=GPTQModifier(targets="Linear", scheme=preset, ignore=["lm_head"], actorder=actorder,
                                    block_size=block_size, batched_quantization=None))
    finally:
        gptq_base.accumulate_hessian, gptq_base.quantize_weight = orig_acc, orig_qw
        gptq_quantize.factorize_hessian = orig_fact
        gptq_base.GPTQModifier.compress_module_list = orig_list
    case = f"{preset}.{actorder}" + ("" if block_size == 128 else f".b{block_size}")
    saved = Path(tempfile.mkdtemp()) / "saved"
    model.save_pretrained(saved, save_compressed=True)
    tensors = load_file(str(saved / "model.safetensors"))
    for name in LAYERS:
        bits = before[name].to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        w = out.setdefault(f"{name}.w_bf16", bits)
        assert np.array_equal(w, bits)
        x = torch.cat([t if t.dim() == 3 else t[None] for t in xs[name]]).numpy()
        H, U = hs[name].numpy(), us[name].numpy()
        if actorder is None:                                      # the calibration pass is the same in every case
            assert np.array_equal(out.setdefault(f"{name}.x", x), x)
            assert np.array_equal(out.setdefault(f"{name}.H", H), H)
            assert np.array_equal(out.setdefault(f"{name}.U", U), U)
        else:                                                     # H as permuted for the factorisation
            H0 = out[f"{name}.H"]
            perm = np.argsort(-np.diag(H0), kind="stable")
            assert np.array_equal(H0[np.ix_(perm, perm)], H)
            assert np.array_equal(out.setdefault(f"{name}.U_actorder", U), U)
        out[f"{case}.{name}.q"] = qs[name].numpy()
    for t, v in tensors.items():
        if t.rsplit(".", 1)[0] in LAYERS:
            out[f"{case}.{t}"] = v.view(torch.uint8).numpy() if v.dtype.itemsize == 1 and v.is_floating_point() \
                else v.numpy()
    cfg = json.loads((saved / "config.json").read_text())["quantization_config"]
    out[f"{case}.config"] = np.array(json.dumps(cfg, sort_keys=True))


def main() -> None:
    out, missing = {}, []
    for preset, actorder, block_size in CASES:
        try:
            run_case(preset, actorder, block_size, out)
        except Exception as err:                                    # a case this version refuses
            missing.append(f"{preset}.{actorder}.b{block_size}: {type(err).__name__}: {err}")
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "llmcompressor": llmcompressor.__version__, "compressed_tensors": compressed_tensors.__version__}
    for k in [k for k in out if k.endswith(".x")]:               # checked equal across cases; not needed by the tests
        del out[k]
    out["versions"] = np.array(json.dumps(versions, sort_keys=True))
    out["missing"] = np.array(json.dumps(missing))
    target = HERE / "gptq_float_llmcompressor.npz"
    np.savez_compressed(target, **out)
    print(target.name, target.stat().st_size, "bytes", versions, missing)


if __name__ == "__main__":
    main()
