"""Load the float checkpoints refsim writes with the libraries' own readers (run by hand; not collected by pytest).

CI checks the fields these loaders read without installing them (tests/io/test_hf_folder.py,
``test_every_float_preset_folder_holds_what_its_loader_reads``, and tests/io/test_gguf_write.py). This
script is the check behind those fields. It builds the tiny decoder of tests/io/conftest_io.py and:

1. for each compressed-tensors preset refsim writes (FP8_DYNAMIC, FP8_BLOCK, NVFP4A16, MXFP4A16):
   ``refsim quantize --to compressed-tensors:<PRESET>``, then transformers' ``AutoModelForCausalLM``
   with ``CompressedTensorsConfig(run_compressed=False)`` (compressed-tensors decompresses the weights at
   load time; ``device_map="cpu"``): one forward, the cosine of its
   logits to the unquantized model's, and each linear's decompressed weight compared with refsim's
   ``dequantize()`` cast to the model's dtype (``equal`` when every bit agrees; for FP8 with refsim's
   float32 scales first rounded to the model's dtype, as the loader does and the write-time note says);
2. the FP8_BLOCK folder converted with ``refsim convert --to fp8-block`` (DeepSeek-style), loaded through
   transformers' ``FineGrainedFP8Config(dequantize=True)`` (the fp8 kernels need a GPU; dequantize runs on
   the CPU), same checks;
3. a float .gguf of the decoder's linears (the gguf package's ``GGUFWriter``) quantized with
   ``refsim quantize --to gguf:<TYPE>`` for each legacy type, read back by the gguf package's
   ``GGUFReader`` and dequantized by ``gguf.quants.dequantize``, compared bit for bit with refsim's
   reader (llama.cpp itself is not run: the tiny file has no tokenizer metadata).

    pip install torch transformers compressed-tensors gguf
    PYTHONPATH=. python tests/io/load_float_checkpoints.py

Exit status 0 when every folder loads and every comparison that should be exact is, 1 otherwise.
"""

from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from conftest_io import write_tiny_llama  # noqa: E402

LIBRARIES = ("torch", "transformers", "compressed-tensors", "gguf")


def versions() -> str:
    out = []
    for lib in LIBRARIES:
        try:
            out.append(f"{lib} {importlib.metadata.version(lib)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{lib} absent")
    return ", ".join(out)


def _load(folder: Path, **kw):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), device_map="cpu", **kw)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=torch.arange(2, 34).reshape(1, 32)).logits.float().flatten()
    return model, logits


def _weights_equal(model, folder: Path) -> str:
    """'equal' when every linear refsim wrote decompresses to refsim's dequantize() bit for bit."""
    import torch

    from refsim.io import open_checkpoint

    ck = open_checkpoint(folder)
    modules = dict(model.named_modules())
    bad = []
    for name in ck.layer_names():
        theirs = modules[name].weight.detach()
        # refsim's value (float32 for fp8, bfloat16 for fp4; exact in float32) in the model's dtype: the
        # loaders decompress in float32 and cast once to it
        lay = ck.read_layer(name)
        if lay.kind == "fp8" and lay.format == "compressed-tensors":
            # the loader casts weight_scale to the model dtype first (refsim.io.ct_float_write.FP8_SCALE_NOTE)
            s = torch.from_numpy(lay.scale.astype(np.float32)).to(theirs.dtype).float().numpy()
            lay = type(lay)(lay.name, lay.codes, s, lay.strategy)
        ours = torch.from_numpy(np.ascontiguousarray(lay.dequantize().astype(np.float32).T)).to(theirs.dtype)
        if not torch.equal(theirs, ours):
            bad.append(f"{name} ({int((theirs != ours).sum())} differ)")
    ck.close()
    return "equal" if not bad else "DIFFER: " + "; ".join(bad[:3])


def _float_gguf(fp: Path, path: Path) -> None:
    import gguf

    from refsim.io import open_checkpoint

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("refsim tiny decoder")
    ck = open_checkpoint(fp)
    for name in ck.layer_names():
        if "layers." in name:
            w.add_tensor(name + ".weight", np.ascontiguousarray(ck.read_layer(name).W.astype(np.float32).T))
    ck.close()
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    import torch

    from refsim.io import open_checkpoint
    from refsim.io.convert import convert
    from refsim.io.ct_float_write import PRESETS
    from refsim.io.gguf_write import GGUF_TYPES
    from refsim.io.quantize import QuantizeOptions, quantize_model

    print(f"libraries: {versions()}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fp = write_tiny_llama(tmp / "fp-llama")
        _, ref = _load(fp)
        for preset in (*PRESETS, "fp8-block"):
            out = tmp / preset
            try:
                if preset == "fp8-block":
                    convert(tmp / "FP8_BLOCK", "fp8-block", out)
                    from transformers import FineGrainedFP8Config
                    model, y = _load(out, quantization_config=FineGrainedFP8Config(dequantize=True))
                else:
                    quantize_model(fp, out, QuantizeOptions("rtn", measure_memory=False),
                                   to=f"compressed-tensors:{preset}")
                    from transformers import CompressedTensorsConfig
                    model, y = _load(out, quantization_config=CompressedTensorsConfig(run_compressed=False))
                cos = float(torch.nn.functional.cosine_similarity(y, ref, dim=0))
                same = _weights_equal(model, out)
                print(f"{preset:12} loaded; logits cosine to the unquantized model {cos:.5f}; weights {same}")
                failed += not same == "equal"
            except Exception as err:  # the loader's own exception types
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                print(f"{preset:12} FAILED: {type(err).__name__}: {first[:200]}")
                failed += 1
        import gguf

        src = tmp / "tiny-f32.gguf"
        _float_gguf(fp, src)
        for qtype in GGUF_TYPES:
            out = tmp / f"tiny-{qtype}.gguf"
            quantize_model(src, out, QuantizeOptions("rtn"), to=f"gguf:{qtype}")
            reader = gguf.GGUFReader(str(out))
            ck = open_checkpoint(out)
            bad = [t.name for t in reader.tensors if t.tensor_type.name == qtype and not np.array_equal(
                gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).view(np.uint32),
                np.ascontiguousarray(ck.read_layer(t.name).dequantize().T).view(np.uint32))]
            n = sum(t.tensor_type.name == qtype for t in reader.tensors)
            print(f"gguf:{qtype:6} read by gguf.GGUFReader: {n} {qtype} tensors, "
                  f"{'dequantized equal to gguf.quants.dequantize' if not bad else 'DIFFER: ' + ', '.join(bad[:3])}")
            failed += bool(bad) or n == 0
            ck.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
