"""Report section: FP8, MXFP4/6/8, NVFP4, NF4/FP4 and GGUF, bit for bit against the libraries that define them.

Each check runs refsim's format on inputs the defining library quantized or dequantized and compares the
bits with what the library wrote: slices of the format tests' goldens, shipped in
``refsim/data/format_goldens/format_goldens.npz`` (README there); the detail names the library and the
version the golden came from.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import ml_dtypes
import numpy as np

from refsim.formats import bnb4, fp8, gguf, mx
from refsim.report import Check
from refsim.testing import assert_bitexact

TITLE = "Formats of today's quantized models (library goldens)"
ORDER = 15

_DATA = Path(__file__).resolve().parents[2] / "data" / "format_goldens" / "format_goldens.npz"


@lru_cache(maxsize=1)
def _goldens() -> dict[str, np.ndarray]:
    with np.load(_DATA) as g:
        return {k: g[k] for k in g.files}


def _version(source: str, *libs: str) -> str:
    """``lib version`` of each of ``libs`` from the golden source's ``versions`` (JSON or "lib version; ...")."""
    text = str(_goldens()[f"versions/{source}"])
    if text.startswith("{"):
        found = json.loads(text)
    else:
        found = dict(part.strip().split(" ", 1) for part in text.split(";") if " " in part.strip())
    return ", ".join(f"{lib.replace('_', '-')} {found[lib]}" for lib in libs)


def _fp8() -> str:
    g = _goldens()
    x = g["fp8_mx/cast_x"]
    for kind in ("e4m3", "e5m2"):
        assert_bitexact(fp8.cast(x, kind), g[f"fp8_mx/cast_{kind}"], name=f"cast {kind}")
    assert_bitexact(fp8.cast(x, "e4m3", saturate=True), g["fp8_mx/torch_clamp_to_e4m3"], name="saturating e4m3")
    for scheme, x_key in (("channel", "fp8_x"), ("block128", "fp8_x@tile")):    # (200, 16); the (72, 8) edge tile
        q = fp8.quantize(g[f"fp8_mx/{x_key}"], scheme)
        assert_bitexact(q.codes, g[f"fp8_mx/fp8_{scheme}_codes"], name=f"{scheme} codes")
        assert_bitexact(q.scales, g[f"fp8_mx/fp8_{scheme}_scales"], name=f"{scheme} scales")
    return (f"casts of {x.size} values (every code, midpoints, specials): {_version('fp8_mx', 'ml_dtypes', 'torch')}; "
            f"channel and 128x128-block scaling: {_version('fp8_mx', 'compressed_tensors')}")


def _mx() -> str:
    g = _goldens()
    x = g["fp8_mx/mx_x"]
    for kind in ("mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2"):
        q = mx.quantize(x, kind)
        assert_bitexact(q.scales, g[f"fp8_mx/mx_{kind}_scales"], name=f"{kind} scales")
        assert_bitexact(q.codes, g[f"fp8_mx/mx_{kind}_codes"], name=f"{kind} codes")
        if f"fp8_mx/mx_{kind}_deq" in g:
            assert_bitexact(q.dequantize(), g[f"fp8_mx/mx_{kind}_deq"], name=f"{kind} dequantized")
    return f"5 kinds on {x.shape[0]}x{x.shape[1]} (zero, subnormal, NaN, Inf, tie blocks): {_version('fp8_mx', 'torchao')}"


def _nvfp4() -> str:
    g = _goldens()
    x = g["fp8_mx/mx_x"]
    for label, t in (("", None), ("_pts", float(g["fp8_mx/nvfp4_per_tensor_scale"][0]))):
        q = mx.quantize(x, "nvfp4", per_tensor_scale=t)
        for part in ("scales", "codes"):
            assert_bitexact(getattr(q, part), g[f"fp8_mx/nvfp4{label}_{part}"], name=f"nvfp4{label} {part}")
        assert_bitexact(q.dequantize(), g[f"fp8_mx/nvfp4{label}_deq"], name=f"nvfp4{label} dequantized")
    return f"with and without a per-tensor scale: {_version('fp8_mx', 'torchao')}"


def _bnb4() -> str:
    g = _goldens()
    cases = sorted({k.split("/")[1].split(".")[0] for k in g if k.startswith("bnb4/")})
    for c in cases:
        blocksize, kind, dq = (int(v) for v in g[f"bnb4/{c}.meta"])
        x = g[f"bnb4/{c}.x"]
        r = bnb4.quantize(x, bnb4.KINDS[kind], blocksize, bool(dq))
        assert_bitexact(r.packed, g[f"bnb4/{c}.packed"], name=f"{c} packed")
        if dq:
            assert_bitexact(r.qabsmax, g[f"bnb4/{c}.qabsmax"], name=f"{c} qabsmax")
            assert_bitexact(r.absmax2, g[f"bnb4/{c}.absmax2"], name=f"{c} absmax2")
        else:
            assert_bitexact(r.absmax, g[f"bnb4/{c}.absmax"], name=f"{c} absmax")
        for tag, dt, view in (("f32", np.float32, np.uint32), ("f16", np.float16, np.uint16),
                              ("bf16", ml_dtypes.bfloat16, np.uint16)):
            out = bnb4.dequantize(r, dt).view(view)
            assert_bitexact(out, g[f"bnb4/{c}.{tag}"].view(view), name=f"{c} dequantize {tag}")
    return f"quantize_4bit and dequantize_4bit ({', '.join(cases)}): {_version('bnb4', 'bitsandbytes', 'torch')}"


def _gguf() -> str:
    g = _goldens()
    for qtype in ("Q4_0", "Q8_0"):
        assert_bitexact(gguf.quantize(g["gguf/x"], qtype), g[f"gguf/{qtype}.raw"], name=f"{qtype} quantize")
    for qtype in ("Q4_0", "Q8_0", "Q4_K", "Q6_K"):
        y = g[f"gguf/{qtype}.y"]
        assert_bitexact(gguf.dequantize(g[f"gguf/{qtype}.raw"], qtype, y.shape), y, name=f"{qtype} dequantize")
    return f"Q4_0/Q8_0 quantize and Q4_0/Q8_0/Q4_K/Q6_K dequantize: {_version('gguf', 'gguf')}"


def checks() -> list[Check]:
    return [
        Check("FP8 e4m3/e5m2 casts and scaling", _fp8),
        Check("MXFP4, MXFP6, MXFP8", _mx),
        Check("NVFP4", _nvfp4),
        Check("NF4/FP4 (bitsandbytes)", _bnb4),
        Check("GGUF block types", _gguf),
    ]
