"""Write llama.cpp ``.gguf`` files: a float .gguf re-quantized to a legacy type, metadata kept (``llama-quantize``'s job).

Spec
----
    source     an existing ``.gguf`` file (v2/v3, little-endian) whose 2-D tensors are F32, F16 or BF16:
               what llama.cpp's ``convert_hf_to_gguf.py`` writes (``--outtype f32|f16|bf16``). A Hugging
               Face safetensors folder is refused: llama.cpp's tensor names, its Q/K row permutation
               and the tokenizer metadata come from that script, which refsim does not model. A source
               tensor that is already quantized (Q4_K, ...) is refused: quantizing it again rounds twice
               (``llama-quantize`` needs ``--allow-requantize`` for it)
    types      Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 BF16 (:data:`refsim.formats.gguf_legacy.QUANTIZABLE`: ggml's
               ``quantize_row_*_ref``, bit for bit with ``gguf.quants.quantize``); the k-quants, IQ and
               NVFP4 types are refused (their quantizers search scales, with an importance matrix for
               IQ; not modelled), TQ1_0/TQ2_0/MXFP4 too (refsim.formats.gguf quantizes their blocks;
               the file-level choices llama-quantize makes for them are not modelled)
    tensors    every 2-D float tensor selected by ``layers``/``ignore`` (regular expressions on the GGUF
               names) whose row length ne[0] is a multiple of the type's block: values widened
               exactly to float32, :func:`refsim.formats.gguf.quantize` row by row; every other tensor
               (norms, 1-D biases, rows of another length, unselected ones) is copied byte for byte with
               its type. Tensor order, names and shapes are the source's
    metadata   every key-value of the source, in order, with its value types (as gguf-py's
               ``gguf_new_metadata.py`` copies them), except ``general.file_type`` = ``LlamaFileType``
               ``MOSTLY_<type>`` and ``general.quantization_version`` = ``GGML_QUANT_VERSION`` (2), the
               two keys ``llama-quantize`` sets; ``general.alignment`` kept
    differs    ``llama-quantize`` gives ``output.weight`` (and, for some types, ``token_embd.weight``)
    from       a higher-precision type by default and falls back to another type for rows that are not
    llama.cpp  a multiple of the block; refsim quantizes every selected tensor to the one type asked
               for and copies the rest: select or ignore ``output.weight`` by name to choose
    output     one new ``.gguf`` file, written to a temporary sibling and renamed (all-or-nothing)

Source: ggml-org/llama.cpp ``tools/quantize`` and ``src/llama-quant.cpp`` (keys set), the ``gguf``
package 0.19.0 (``GGUFWriter``, ``scripts/gguf_new_metadata.py``).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np

from refsim._validate import require_callable, require_choice, require_instance, require_path
from refsim.errors import CheckpointError, FormatRuleError
from refsim.formats import gguf as gguf_format
from refsim.formats import gguf_legacy

__all__ = ["GGUF_TYPES", "GGUF_REFUSED", "parse_gguf_target", "quantize_gguf"]

#: the ggml types refsim writes (its bit-exact quantizers of ggml's legacy blocks)
GGUF_TYPES: tuple[str, ...] = gguf_legacy.QUANTIZABLE
#: ggml types refsim reads but does not write, with the reason
GGUF_REFUSED: dict[str, str] = {
    **{t: "the k-quant quantizers (quantize_row_q*_K) search each sub-block's scale and min; not modelled"
       for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")},
    **{t: "the IQ quantizers search the non-uniform grid's scales (with an importance matrix); not modelled"
       for t in ("IQ4_NL", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")},
    **{t: "refsim.formats.gguf.quantize makes its blocks, but writing it into a .gguf file is not modelled "
          "(llama-quantize keeps these types for chosen tensors: ternary models, MoE experts)"
       for t in ("TQ1_0", "TQ2_0", "MXFP4")},
    "NVFP4": "gguf-py and refsim have no NVFP4 quantizer (its UE4M3 scales are searched); not modelled",
}
_FLOAT_SOURCES = ("F32", "F16", "BF16")


def parse_gguf_target(to: str) -> str:
    """The ggml type of a ``gguf:<TYPE>`` target (case-insensitive), one of :data:`GGUF_TYPES`;
    :class:`FormatRuleError` naming the reason for a type refsim reads but does not write."""
    require_instance("to", to, str)
    if not to.lower().startswith("gguf:"):
        raise FormatRuleError(f"to: a GGUF target is 'gguf:<TYPE>'; got {to!r}")
    qtype = to[5:].upper()
    if qtype in GGUF_REFUSED:
        raise FormatRuleError(f"to: refsim does not write {qtype}: {GGUF_REFUSED[qtype]}; got {to!r} "
                              f"(writable: {', '.join(GGUF_TYPES)})")
    return require_choice("to (gguf type)", qtype, GGUF_TYPES)


def _float_rows(t) -> np.ndarray:
    """float32 (N, K) of a 2-D F32/F16/BF16 tensor of a GGUFReader (exact widening)."""
    k, n = (int(d) for d in t.shape)
    raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
    if t.tensor_type.name == "F32":
        return raw.view("<f4").astype(np.float32).reshape(n, k)
    return gguf_format.dequantize(raw, t.tensor_type.name, (n, k))


def _compile(what: str, text: str | None):
    if text is None or text == "":
        return None
    try:
        return re.compile(text)
    except re.error as err:
        raise FormatRuleError(f"{what}: must be a regular expression; got {text!r} ({err})") from None


def quantize_gguf(src, out, qtype: str, *, layers: str | None = None, ignore: str | None = None,
                  progress=None) -> dict:
    """Quantize the float ``.gguf`` file ``src`` into the new ``.gguf`` file ``out`` (module docstring).

    ``qtype``: one of :data:`GGUF_TYPES`; ``layers`` / ``ignore``: regular expressions on tensor names
    (``re.search``; None selects every 2-D float tensor / ignores none); ``progress(done, total,
    name)`` or None. Returns a summary: ``layers`` {name: {"k", "n", "from", "to", "max_abs_weight_error"}}
    for each quantized tensor, ``kept`` {name: its type} for the tensors copied unchanged, ``notes``."""
    src = require_path("src", src)
    out = require_path("out", out)
    qtype = require_choice("qtype", qtype, GGUF_TYPES)
    for what, v in (("layers", layers), ("ignore", ignore)):
        if v is not None:
            require_instance(what, v, str)
    require_callable("progress", progress, allow_none=True)
    if not src.is_file() or src.suffix != ".gguf":
        raise CheckpointError(f"{src}: a GGUF target needs a .gguf source (an F32/F16/BF16 file from llama.cpp's "
                              "convert_hf_to_gguf.py: its tensor names, Q/K permutation and tokenizer metadata "
                              "are not modelled by refsim); got "
                              f"{'a file named ' + src.name if src.is_file() else 'a folder' if src.is_dir() else 'no such file'}")
    if out.suffix != ".gguf":
        raise FormatRuleError(f"out: a GGUF output is a file named *.gguf; got {out.name!r}")
    if out.exists() or out.is_symlink():
        raise FormatRuleError(f"out: must not exist (nothing is overwritten); got {out}")
    parent = out.absolute().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise FormatRuleError(f"out: parent folder must exist and be writable; got {parent}")
    pat, ign = _compile("layers", layers), _compile("ignore", ignore)
    from refsim.io.gguf_file import _gguf_package, open_gguf_reader

    gguf = _gguf_package()
    reader = open_gguf_reader(src)                    # a valid, little-endian .gguf file
    if "general.architecture" not in reader.fields:
        raise CheckpointError(f"{src}: key 'general.architecture' must be present (llama.cpp picks the model "
                              "by it); got none")
    arch = reader.fields["general.architecture"].contents()
    block = gguf_format.BLOCK_TYPES[qtype][0]
    plan = []                                         # (tensor, quantize?)
    for t in reader.tensors:
        name, ttype = t.name, t.tensor_type.name
        two_d = len(t.shape) == 2
        if two_d and ttype not in _FLOAT_SOURCES and ttype not in ("F64", "I8", "I16", "I32", "I64"):
            raise FormatRuleError(f"{src}: tensor {name!r} is {ttype} already; quantize needs F32/F16/BF16 tensors "
                                  "(re-quantizing a quantized tensor rounds twice)")
        selected = two_d and ttype in _FLOAT_SOURCES and (pat is None or pat.search(name)) and \
            (ign is None or not ign.search(name))
        plan.append((t, bool(selected) and int(t.shape[0]) % block == 0))
    if not any(q for _, q in plan):
        raise FormatRuleError(f"layers: selects no 2-D F32/F16/BF16 tensor of {src} whose rows are a multiple of "
                              f"{qtype}'s block of {block}; got layers={layers!r}, ignore={ignore!r}")
    summary: dict = {"source": str(src), "to": f"gguf:{qtype}", "layers": {}, "kept": {}, "notes": []}
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        w = gguf.GGUFWriter(str(tmp), arch)
        w.data_alignment = int(reader.alignment)
        set_keys = {"general.file_type": (int(gguf.LlamaFileType[f"MOSTLY_{qtype}"]), gguf.GGUFValueType.UINT32),
                    "general.quantization_version": (int(gguf.GGML_QUANT_VERSION), gguf.GGUFValueType.UINT32)}
        for field in reader.fields.values():
            if field.name == "general.architecture" or field.name.startswith("GGUF."):
                continue                               # written by GGUFWriter itself
            if field.name in set_keys:
                w.add_key_value(field.name, *set_keys.pop(field.name))
                continue
            vtype = field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
        for key, (val, vtype) in set_keys.items():
            w.add_key_value(key, val, vtype)
        done, total = 0, sum(q for _, q in plan)
        for t, quantize in plan:
            if not quantize:
                ne = [int(d) for d in t.shape]                         # ggml order: ne[0] the row length
                blk, size = gguf.GGML_QUANT_SIZES[t.tensor_type]
                raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(*reversed(ne[1:]), ne[0] // blk * size)
                w.add_tensor(t.name, raw, raw_dtype=t.tensor_type)     # bytes: the writer derives ne
                summary["kept"][t.name] = t.tensor_type.name
                continue
            x = _float_rows(t)                                         # (N, K) float32
            if not np.isfinite(x).all():
                raise FormatRuleError(f"{src}: tensor {t.name!r}: values must be finite to quantize; got "
                                      f"{int((~np.isfinite(x)).sum())} non-finite")
            q = gguf_format.quantize(x, qtype)                         # (N, row_bytes)
            back = gguf_format.dequantize(q, qtype, x.shape)
            w.add_tensor(t.name, q, raw_dtype=gguf.GGMLQuantizationType[qtype])  # (N, row bytes) -> ne [K, N]
            summary["layers"][t.name] = {"k": x.shape[1], "n": x.shape[0], "from": t.tensor_type.name, "to": qtype,
                                         "max_abs_weight_error": float(np.abs(back - x).max())}
            done += 1
            if progress is not None:
                progress(done, total, t.name)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.chmod(tmp, 0o666 & ~_umask())
        if out.exists() or out.is_symlink():
            raise FormatRuleError(f"out: must not exist (nothing is overwritten); got {out} (appeared while writing)")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    skipped = [n for n, ty in summary["kept"].items() if ty in _FLOAT_SOURCES and n in _two_d(plan)]
    if skipped:
        summary["notes"].append(f"note: {len(skipped)} 2-D float tensor(s) kept unquantized (not selected, or rows "
                                f"not a multiple of {block}): {', '.join(skipped[:4])}")
    return summary


def _two_d(plan) -> set[str]:
    return {t.name for t, _ in plan if len(t.shape) == 2}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
