"""Check refsim's bitsandbytes 4-bit writer against transformers + bitsandbytes (run by hand; not collected by pytest).

CI checks the fields the loader reads without installing it (tests/io/test_bnb_4bit.py,
``test_the_written_folder_holds_what_transformers_reads``). This script is the check behind them: for each
case of tests/io/data/make_bnb4_checkpoints.py it saves the same random Llama unquantized, quantizes it
twice -- transformers' ``BitsAndBytesConfig(load_in_4bit=True, ...)`` + ``save_pretrained``, and
``refsim quantize --method rtn --to bnb-<kind> [--double-quant]`` -- compares every quantized tensor of
the two folders byte for byte (the JSON blobs parsed), loads refsim's folder with transformers, runs one
forward and compares each layer's ``dequantize_4bit`` with transformers' own folder's::

    pip install torch transformers accelerate bitsandbytes
    PYTHONPATH=. python tests/io/load_bnb_with_transformers.py

Prints one line per case and the versions; exit status 0 when every case matches.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import bitsandbytes as bnb
import torch
import transformers
from safetensors import safe_open
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

sys.path.insert(0, str(Path(__file__).parent / "data"))
from make_bnb4_checkpoints import CASES, base_model  # noqa: E402


def _tensors(folder: Path) -> dict:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def main() -> int:
    ok = True
    tmp = Path(tempfile.mkdtemp())
    for name, (kind, dq, dtype) in CASES.items():
        base = tmp / f"{name}-base"
        base_model(dtype).save_pretrained(base)
        qc = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=kind, bnb_4bit_use_double_quant=dq,
                                bnb_4bit_compute_dtype=dtype)
        AutoModelForCausalLM.from_pretrained(base, dtype=dtype, device_map="cpu",
                                             quantization_config=qc).save_pretrained(tmp / f"{name}-hf")
        cmd = [sys.executable, "-m", "refsim", "quantize", str(base), "--method", "rtn", "--to", f"bnb-{kind}",
               "--out", str(tmp / f"{name}-refsim"), "--executor", "serial", "--quiet", "--calib", "none"] + (["--double-quant"] if dq else [])
        subprocess.run(cmd, check=True, capture_output=True)
        hf, rs = _tensors(tmp / f"{name}-hf"), _tensors(tmp / f"{name}-refsim")
        diff = sorted(k for k in hf if k not in rs or (json.loads(bytes(hf[k].numpy())) != json.loads(bytes(rs[k].numpy()))
                      if "quant_state" in k else not torch.equal(hf[k].view(torch.uint8), rs[k].view(torch.uint8))))
        diff += sorted(set(rs) - set(hf))
        mods = {}
        for tag in ("hf", "refsim"):
            m = AutoModelForCausalLM.from_pretrained(tmp / f"{name}-{tag}", device_map="cpu")
            m(input_ids=torch.arange(2, 18).reshape(1, 16))
            mods[tag] = {n: bnb.functional.dequantize_4bit(x.weight.data, x.weight.quant_state)
                         for n, x in m.named_modules() if isinstance(x, bnb.nn.Linear4bit)}
        same = mods["hf"].keys() == mods["refsim"].keys() and all(
            torch.equal(mods["hf"][n].view(torch.int16), mods["refsim"][n].view(torch.int16)) for n in mods["hf"])
        ok &= not diff and same
        print(f"{name}: {len(mods['refsim'])} Linear4bit loaded from refsim's folder; tensors differing from "
              f"transformers' save: {diff or 'none'}; dequantize_4bit equal: {same}")
    print(f"bitsandbytes {bnb.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
