"""Host side of ``atom.cu``: Atom's W4A4 group GEMM with the INT8 keeper block, equal to
:func:`refsim.emulator.atom_kernel.atom_group_gemm` bit for bit (spec block in the .cu file).

    AtomActivations a (q4 (M, Kb), scale4 (M, G), q8 (M, keeper), scale8 (M,))
    AtomWeights     w (q4 (Kb, N), scale4 (G, N), q8 (keeper, N), scale8 (N,))
        └─► pack_int4(a.q4), pack_int4(w.q4.T), w.q8.T ─► grid (ceil(N/32), ceil(M/16)), block 128 ─► D (M, N) fp16
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_bool
from refsim.cuda import build, launch
from refsim.cuda.launch import Launch
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import atom, atom_gemm

__all__ = ["SOURCE", "ENTRY_POINTS", "atom_group_gemm"]

SOURCE = "atom"
ENTRY_POINTS = {"atom_group_gemm": "refsim.emulator.atom_kernel.atom_group_gemm"}


def atom_group_gemm(a: atom.AtomActivations, w: atom.AtomWeights, *, fused: bool = True, backend: str = "ptx",
                    arch: str = "sm_80", options: dict | None = None) -> np.ndarray:
    """Run ``atom.cu``: float16 (M, N), what :func:`refsim.emulator.atom_kernel.atom_group_gemm` returns
    for the same arguments (any weight scales: the kernel's half2 pair selection is what both compute).

    a: :class:`refsim.formats.atom.AtomActivations`; w: :class:`refsim.formats.atom.AtomWeights`
    (int8 codes, float16 scales, groups of 128, keeper % 32 == 0, N even, K - keeper >= 384: the
    official kernel's rule, :func:`refsim.formats.atom_gemm.require_official_body`). ``fused`` must stay True:
    the kernel's epilogue is one ``fma.rn.f32``. backend "ptx" or "gpu"; ``options`` go to
    :meth:`refsim.ptx.Module.launch`. Inputs are not modified."""
    if not require_bool("fused", fused):
        raise FormatRuleError(f"fused: atom.cu's epilogue is one fma.rn.f32, so only fused=True has a kernel; got {fused!r}")
    m, n, g, group = atom.check_gemm(a, w, pairs=False)
    atom_gemm.require_official_body(a.q4.shape[1])      # the emulator's domain (atom.cu itself guards it)
    keeper = a.q8.shape[1]
    if group != 128:
        raise ShapeError(f"group size: atom.cu runs groups of 128 (two m16n8k64 per group); got {group}")
    if keeper % 32:
        raise ShapeError(f"keeper: must be a multiple of 32 (m16n8k32 slabs); got {keeper}")
    out = np.zeros((m, n), np.float16)
    placeholder = np.zeros(4, np.int8)  # keeper == 0: never read
    args = (atom.pack_int4(np.ascontiguousarray(a.q4)), atom.pack_int4(np.ascontiguousarray(w.q4.T)),
            np.ascontiguousarray(a.q8) if keeper else placeholder,
            np.ascontiguousarray(w.q8.T) if keeper else placeholder,
            np.ascontiguousarray(a.scale4), np.ascontiguousarray(w.scale4), np.ascontiguousarray(a.scale8),
            np.ascontiguousarray(w.scale8), out, np.int32(m), np.int32(n), np.int32(g), np.int32(keeper))
    grid = (-(-n // 32), -(-m // 16))
    launch.run(build.ptx(SOURCE), [(Launch("atom_group_gemm", grid, 128), args)], backend=backend, arch=arch,
               options=options)
    return out
