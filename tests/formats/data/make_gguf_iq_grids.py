"""Make refsim/data/gguf_iq_grids/gguf_iq_grids.npz: ggml's IQ lattice tables, as the ``gguf`` package holds them.

Run by hand, in an environment that has the gguf package (never a dependency of refsim)::

    pip install gguf==0.19.0 numpy
    python tests/formats/data/make_gguf_iq_grids.py

gguf/quants.py keeps each ggml grid (``iq2xxs_grid``, ``iq2xs_grid``, ``iq2s_grid``, ``iq3xxs_grid``,
``iq3s_grid``, ``iq1s_grid`` of ggml-common.h) as hexadecimal text of 2- or 3-bit indices into a small
``grid_map``; the package's own ``init_grid`` decodes it. This script calls ``init_grid`` and stores the
decoded tables as the bytes ggml's C arrays hold (one byte per grid element):

    iq2xxs  uint8 (256, 8)    values 0x08 0x19 0x2b          (IQ2_XXS)
    iq2xs   uint8 (512, 8)    values 0x08 0x19 0x2b          (IQ2_XS)
    iq2s    uint8 (1024, 8)   values 0x08 0x19 0x2b          (IQ2_S)
    iq3xxs  uint8 (256, 4)    values 0x04 0x0c ... 0x3e      (IQ3_XXS)
    iq3s    uint8 (512, 4)    values 0x01 0x03 ... 0x0f      (IQ3_S)
    iq1s    int8  (2048, 8)   values -1 0 1                  (IQ1_S and IQ1_M)
    ksigns  uint8 (128,)      ``ksigns_iq2xs`` (checked by refsim against its generator)

plus ``versions``. The tests check them through the goldens of make_gguf_goldens.py (every IQ type's
dequantization by the package, bit for bit).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np
from gguf import quants

OUT = Path(__file__).resolve().parents[3] / "refsim" / "data" / "gguf_iq_grids" / "gguf_iq_grids.npz"
CLASSES = {"iq2xxs": (quants.IQ2_XXS, np.uint8), "iq2xs": (quants.IQ2_XS, np.uint8), "iq2s": (quants.IQ2_S, np.uint8),
           "iq3xxs": (quants.IQ3_XXS, np.uint8), "iq3s": (quants.IQ3_S, np.uint8), "iq1s": (quants.IQ1_S, np.int8)}


def main() -> None:
    out: dict = {}
    for name, (cls, dtype) in CLASSES.items():
        cls.init_grid()
        g = np.asarray(cls.grid, np.float32).reshape(cls.grid_shape)
        assert np.all(g == np.round(g)), name
        out[name] = g.astype(dtype)
    out["ksigns"] = np.frombuffer(quants.IQ2_XXS.ksigns, np.uint8).copy()
    out["versions"] = np.array(f"gguf {metadata.version('gguf')} (gguf/quants.py grid_hex, grid_map, init_grid); "
                               f"numpy {np.__version__}")
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(out)} arrays)")


if __name__ == "__main__":
    main()
