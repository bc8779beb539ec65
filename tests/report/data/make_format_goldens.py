"""Make refsim/data/format_goldens/format_goldens.npz: the slices of the library goldens that ``refsim report``'s
"Formats of today's quantized models" section checks (run by hand after a golden changes; never in CI).

The report ships inside the package and cannot read tests/, so it reads these slices, copied unchanged
from the goldens the format tests read (tests/formats/data/*.npz, each made by the defining library with
the script beside it). tests/report/sections/test_formats.py rebuilds them with :func:`build` and
compares every array bit for bit, so the copy cannot drift. From the repository root::

    python tests/report/data/make_format_goldens.py

Each key is ``<source>/<key of the source file>`` (the slice in :data:`SLICES`; ``<key>@<name>`` a second
slice of the same array), plus ``versions/<source>``, the source file's ``versions`` string.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {"fp8_mx": ROOT / "tests/formats/data/fp8_mx_goldens.npz",
           "bnb4": ROOT / "tests/formats/data/bnb4_goldens.npz",
           "gguf": ROOT / "tests/formats/data/gguf_goldens.npz"}
OUT = ROOT / "refsim/data/format_goldens/format_goldens.npz"

_ALL = slice(None)
_MX = ("mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2")
_BNB = ("nf4_b64_f32", "fp4_dq_mixed", "fp4_partial")
#: source -> {key: the slice kept (an index expression)}; channel and block slices keep whole scale groups:
#: channel scales are per column over all 200 rows, and the block128 edge tile (rows 128:200, columns
#: 128:136) is one 128 x 128 block of its own
SLICES: dict[str, dict[str, object]] = {
    "fp8_mx": {
        "cast_x": _ALL, "cast_e4m3": _ALL, "cast_e5m2": _ALL, "torch_clamp_to_e4m3": _ALL,
        "fp8_x": np.s_[:, :16], "fp8_x@tile": np.s_[128:, 128:], "fp8_channel_codes": np.s_[:, :16], "fp8_channel_scales": np.s_[:, :16],
        "fp8_block128_codes": np.s_[128:, 128:], "fp8_block128_scales": np.s_[1:, 1:],
        "mx_x": _ALL, "nvfp4_per_tensor_scale": _ALL,
        **{f"mx_{k}_{p}": _ALL for k in _MX for p in ("scales", "codes")},
        **{f"mx_{k}_deq": _ALL for k in ("mxfp4", "mxfp8_e4m3")},
        **{f"nvfp4{t}_{p}": _ALL for t in ("", "_pts") for p in ("scales", "codes", "deq")},
    },
    "bnb4": {f"{c}.{p}": _ALL for c in _BNB
             for p in ("x", "packed", "meta", "f32", "f16", "bf16", "absmax", "qabsmax", "absmax2", "code2", "offset")},
    "gguf": {"x": np.s_[:16], "Q4_0.raw": np.s_[:16], "Q8_0.raw": np.s_[:16], "Q4_0.y": np.s_[:16],
             "Q8_0.y": np.s_[:16], "Q4_K.raw": np.s_[:8], "Q4_K.y": np.s_[:8], "Q6_K.raw": np.s_[:8],
             "Q6_K.y": np.s_[:8]},
}


def build() -> dict[str, np.ndarray]:
    """The arrays of format_goldens.npz, sliced from the source goldens (keys absent from a source, such as a
    plain case's ``qabsmax``, are skipped)."""
    out = {}
    for src, keys in SLICES.items():
        g = np.load(SOURCES[src])
        for key, sl in keys.items():
            if key.split("@")[0] in g.files:
                a = g[key.split("@")[0]]
                out[f"{src}/{key}"] = np.ascontiguousarray(a if a.ndim == 0 else a[sl])
        out[f"versions/{src}"] = np.array(str(g["versions"]))
    return out


def main() -> None:
    arrays = build()
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(arrays)} arrays)")


if __name__ == "__main__":
    main()
