"""What a checkpoint holds, layer by layer: the facts ``refsim inspect`` prints.

Per layer (pinned keys for scripts: ``format``, ``bits``, ``group_size``, ``desc_act``, ``sym``,
with the integer/boolean conventions of quantize_config.json: ``group_size`` -1 = per-channel)::

    name, format, bits, group_size, desc_act, sym, k, n,
    scheme              gguf: {type: "gguf", qtype}; fp8 (DeepSeek-style blocks): as compressed-tensors fp8 block;
                        compressed-tensors: int {type, num_bits, strategy, group_size, symmetric,
                        actorder, g_idx, scale_dtype}; float adds kind (fp8, nvfp4, mxfp4), fp8's
                        block_structure, fp4's global_scale (present or not); group_size -1 for fp8
                        tensor/channel, 128 for fp8 block, 16 nvfp4, 32 mxfp4; bitsandbytes {type:
                        "bitsandbytes", quant_type (nf4, fp4), blocksize, double_quant, dtype,
                        quant_storage} (group_size = blocksize, blocks over the flattened (N, K) weight)
    zero_point          "v1 (stored zero - 1)", "v2 (stored zero)", "awq (stored zero)",
                        "none (symmetric, fixed 8)", "lut (non-uniform)", ...
    v1_zero_overflows   v1 zero fields holding all ones (a zero of 0 wrapped); 0 otherwise
    bytes_on_disk       the layer's tensor bytes;  bytes_fp16 = 2 K N
    marlin              {"ok": bool, "reason": str | null}  can Marlin's kernel run it as is
    qigen               {"ok": bool, "reason": str | null}  can QIGen's layout hold it

Each layer is read (and validated) on its own, then dropped: memory stays at one layer.
"""

from __future__ import annotations

import os

from refsim._validate import require_callable, require_instance, require_path
from refsim.errors import FormatRuleError
from refsim.io.readers import open_checkpoint
from refsim.io.convert import marlin_refusal
from refsim.io.gptq import GPTQLayer

__all__ = ["inspect_checkpoint", "format_table"]

_ZERO_CONVENTION = {"awq": "awq (stored zero)", "compressed-tensors": "signed (stored zero + 2**(b-1); none if sym)", "marlin": "none (symmetric, fixed 8)", "anyprec": "lut (non-uniform)",
                    "atom": "none (symmetric, signed codes)", "mixed_2_4_16": "per group (2-bit/4-bit)",
                    "fp": "n/a (unquantized)", "fp8": "none (symmetric float)", "gguf": "gguf (in each block, as the type lays it out)",
                    "bitsandbytes": "none (absmax-scaled code table)"}


def _qigen_refusal(layer) -> str | None:
    if layer.format not in ("gptq", "qigen"):
        return f"format {layer.format} is not a GPTQ layer"
    reasons = []
    if layer.bits not in (2, 3, 4):
        reasons.append(f"bits={layer.bits} (QIGen generates 2/3/4-bit kernels)")
    if layer.desc_act:
        reasons.append("act-order (QIGen reads groups as consecutive rows)")
    return "; ".join(reasons) or None


def _float_scheme(lay) -> dict:
    """The ``scheme`` entry of a compressed-tensors float layer (fp8, nvfp4, mxfp4)."""
    out = {"type": "float", "kind": lay.kind, "num_bits": int(lay.bits), "strategy": lay.strategy,
           "group_size": lay.group_size, "symmetric": True, "actorder": None, "g_idx": False}
    if lay.kind == "fp8":
        out.update(block_structure=[128, 128] if lay.strategy == "block" else None, scale_dtype=str(lay.scale.dtype))
    else:
        out.update(scale_dtype="float8_e4m3fn" if lay.kind == "nvfp4" else "e8m0 (uint8)",
                   global_scale=lay.global_scale is not None)
    return out


def inspect_checkpoint(path: str | os.PathLike, progress=None) -> dict:
    """The summary of the checkpoint at ``path`` (see the module docstring); ``progress(done,
    total, name)`` is called after each layer (or None)."""
    require_path("path", path)
    require_callable("progress", progress, allow_none=True)
    ck = open_checkpoint(path)
    layers = []
    names = ck.layer_names()
    for i, name in enumerate(names):
        lay = ck.read_layer(name)
        if isinstance(lay, GPTQLayer):
            zp = "v1 (stored zero - 1)" if lay.ckpt.checkpoint_format == "gptq" else "v2 (stored zero)"
            overflow = lay.v1_overflow_fields()
        elif lay.format == "qigen":
            zp = "v1 (stored zero - 1)" if lay.checkpoint_format == "gptq" else "v2 (stored zero)"
            overflow = 0
        else:
            zp, overflow = _ZERO_CONVENTION[lay.format], 0
        kind = lay.format if lay.format in ("gguf", "bitsandbytes") else getattr(lay, "kind", "int")
        if kind not in ("int", "gguf", "bitsandbytes"):
            zp = "none (symmetric float)"
        on_disk = ck.nbytes(name)
        why_marlin = None if lay.format == "marlin" else (
            marlin_refusal(lay) if kind == "int" else f"{lay.qtype} layer (ggml blocks, not a uniform int layer)"
            if kind == "gguf" else f"bitsandbytes {lay.kind} layer (code-table codes, not a uniform int layer)"
            if kind == "bitsandbytes" else f"{kind} layer (float codes, not a uniform int layer)")
        why_qigen = _qigen_refusal(lay)
        layers.append({
            "name": name, "format": lay.format, "bits": int(lay.bits),
            "group_size": -1 if lay.group_size is None else int(lay.group_size),
            "desc_act": bool(lay.desc_act), "sym": bool(lay.sym), "k": int(lay.k), "n": int(lay.n),
            "zero_point": zp, "v1_zero_overflows": int(overflow),
            "bytes_on_disk": int(on_disk), "bytes_fp16": 2 * int(lay.k) * int(lay.n),
            "marlin": {"ok": why_marlin is None, "reason": why_marlin},
            "qigen": {"ok": why_qigen is None, "reason": why_qigen},
        })
        if kind == "gguf":
            layers[-1]["scheme"] = {"type": "gguf", "qtype": lay.qtype}
        elif kind == "bitsandbytes":
            layers[-1]["scheme"] = {"type": "bitsandbytes", "quant_type": lay.kind, "blocksize": int(lay.blocksize),
                                    "double_quant": bool(lay.double_quant), "dtype": lay.dtype,
                                    "quant_storage": lay.storage}
        elif kind != "int":
            layers[-1]["scheme"] = _float_scheme(lay)
        elif lay.format == "compressed-tensors":
            layers[-1]["scheme"] = {"type": "int", "num_bits": int(lay.bits), "strategy": lay.strategy,
                                    "group_size": lay.group_size, "symmetric": bool(lay.sym),
                                    "actorder": lay.actorder, "g_idx": lay.g_idx is not None,
                                    "scale_dtype": str(lay.scale.dtype)}
        del lay
        if progress is not None:
            progress(i + 1, len(names), name)
    fmt = ck.format
    extra = {"quantization_config": ck.config} if fmt in ("compressed-tensors", "bitsandbytes") else {}
    ck.close()
    disk = sum(r["bytes_on_disk"] for r in layers)
    fp16 = sum(r["bytes_fp16"] for r in layers)
    return {"path": str(path), "format": fmt, "n_layers": len(layers), "layers": layers,
            "bytes_on_disk": disk, "bytes_fp16": fp16, "ratio_to_fp16": disk / fp16 if fp16 else None,
            "marlin_incompatible": [r["name"] for r in layers if not r["marlin"]["ok"]],
            "v1_zero_overflows": sum(r["v1_zero_overflows"] for r in layers), **extra}


_SUMMARY_KEYS = ("path", "format", "n_layers", "bytes_on_disk", "bytes_fp16", "ratio_to_fp16", "layers",
                 "v1_zero_overflows")
_LAYER_KEYS = ("name", "format", "bits", "group_size", "desc_act", "sym", "k", "n", "zero_point", "marlin")


def format_table(summary: dict) -> str:
    """Human-readable report of :func:`inspect_checkpoint`'s summary (the dict it returns)."""
    require_instance("summary", summary, dict)
    missing = [k for k in _SUMMARY_KEYS if k not in summary]
    if missing or not isinstance(summary["layers"], list) or any(
            not isinstance(r, dict) or any(k not in r for k in _LAYER_KEYS) for r in summary["layers"]):
        raise FormatRuleError(f"summary: must be what inspect_checkpoint returns (keys {list(_SUMMARY_KEYS)}, "
                              f"layers with {list(_LAYER_KEYS)}); got missing keys {missing or 'in layers'}")
    lines = [f"{summary['path']}: {summary['format']}, {summary['n_layers']} layers, "
             f"{summary['bytes_on_disk'] / 2**20:.2f} MiB of layer tensors vs {summary['bytes_fp16'] / 2**20:.2f} MiB "
             f"in FP16 ({100 * (summary['ratio_to_fp16'] or 0):.1f}%)"]
    hdr = f"{'layer':<48} {'fmt':<12} {'bits':>4} {'group':>11} {'act':>3} {'sym':>3} {'K':>6} {'N':>6}  zero point"
    lines += [hdr, "-" * len(hdr)]
    for r in summary["layers"]:
        g = "per-channel" if r["group_size"] == -1 else str(r["group_size"])
        lines.append(f"{r['name'][-48:]:<48} {r['format']:<12} {r['bits']:>4} {g:>11} {'y' if r['desc_act'] else 'n':>3} "
                     f"{'y' if r['sym'] else 'n':>3} {r['k']:>6} {r['n']:>6}  {r['zero_point']}")
    if summary["v1_zero_overflows"]:
        lines.append(f"v1 zero-point overflows: {summary['v1_zero_overflows']} fields (a zero of 0 stored as -1; "
                     "AutoGPTQ reads them as 2**bits)")
    bad = [r for r in summary["layers"] if not r["marlin"]["ok"]]
    if bad:
        lines.append(f"Marlin cannot run {len(bad)} of {len(summary['layers'])} layers as is:")
        for r in bad[:10]:
            lines.append(f"  {r['name']}: {r['marlin']['reason']}")
        if len(bad) > 10:
            lines.append(f"  ... and {len(bad) - 10} more (--json lists all)")
    else:
        lines.append("Marlin can run every layer as is.")
    return "\n".join(lines)
