"""Load every refsim output folder kind with the libraries' own readers (run by hand; not collected by pytest).

CI checks the fields these loaders read without installing them (tests/io/test_hf_folder.py,
``test_every_output_folder_kind_holds_what_its_loader_reads``). This script is the check behind those
fields: it builds the same tiny decoder and encoder (tests/io/conftest_io.py), quantizes each into every
folder kind (rtn, gptq, awq, compressed-tensors symmetric and asymmetric), loads each folder with
transformers (``AutoModelForCausalLM`` / ``AutoModel``, ``device_map="cpu"``), runs one forward and prints
one line per folder: loaded or the loader's error, the cosine between the output of the quantized
model and of the unquantized source loaded the same way, and the library versions::

    pip install torch transformers compressed-tensors optimum gptqmodel   # GPTQ/AWQ need gptqmodel
    PYTHONPATH=. python tests/io/load_with_transformers.py

Exit status 0 when every folder loads except those refsim warns about at write time
(``refsim.io.hf_folder.KNOWN_LOAD_FAILURES``), 1 otherwise.
"""

from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from conftest_io import KINDS, write_tiny_bert, write_tiny_llama  # noqa: E402

LIBRARIES = ("torch", "transformers", "compressed-tensors", "optimum", "gptqmodel", "tokenizers")


def versions() -> str:
    out = []
    for lib in LIBRARIES:
        try:
            out.append(f"{lib} {importlib.metadata.version(lib)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{lib} absent")
    return ", ".join(out)


def _output(folder: Path, family: str):
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    cls = AutoModelForCausalLM if family == "decoder" else AutoModel
    model = cls.from_pretrained(str(folder), device_map="cpu")
    model.eval()
    ids = torch.arange(2, 34).reshape(1, 32)
    with torch.no_grad():
        out = model(input_ids=ids)
    return (out.logits if family == "decoder" else out.last_hidden_state).float().flatten()


def _loadable_source(fp: Path, family: str, tmp: Path) -> Path:
    """The unquantized source as transformers reads it: the tiny encoder's config.json holds only
    num_attention_heads (as refsim's own readers accept), so a copy gets the complete config refsim
    writes beside its outputs (refsim.io.bert_config); the decoder's is complete already."""
    if family != "encoder":
        return fp
    import json
    import shutil

    from safetensors.numpy import load_file

    from refsim.io.bert_config import complete_bert_config

    out = tmp / "fp-bert-complete"
    shutil.copytree(fp, out)
    cfg = json.loads((out / "config.json").read_text())
    shapes = {k: v.shape for k, v in load_file(str(out / "model.safetensors")).items()}
    (out / "config.json").write_text(json.dumps(complete_bert_config(cfg, shapes, out)[0]))
    return out


def main() -> int:
    from refsim.io.quantize import QuantizeOptions, quantize_model

    print(f"libraries: {versions()}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sources = {"decoder": write_tiny_llama(tmp / "fp-llama"), "encoder": write_tiny_bert(tmp / "fp-bert")}
        for family, fp in sources.items():
            try:
                ref = _output(_loadable_source(fp, family, tmp), family)
            except Exception as err:  # the loader's own exception types
                print(f"{family:8} fp        could not load the unquantized source: {type(err).__name__}: {err}")
                failed += 1
                continue
            for kind, (opts, to) in KINDS.items():
                out = tmp / f"{family}-{kind}"
                summary = quantize_model(fp, out, QuantizeOptions(**opts, measure_memory=False),
                                         calib="corpus:256", heldout_tokens=256, to=to)
                warned = any(n.startswith("warning:") for n in summary["notes"])
                try:
                    y = _output(out, family)
                    import torch

                    cos = float(torch.nn.functional.cosine_similarity(y, ref, dim=0))
                    print(f"{family:8} {kind:8}  loaded; output cosine to the unquantized model {cos:.5f}")
                except Exception as err:  # the loader's own exception types
                    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                    print(f"{family:8} {kind:8}  FAILED{' (warned at write time)' if warned else ''}: "
                          f"{type(err).__name__}: {first[:200]}")
                    failed += not warned
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
