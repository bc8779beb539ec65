"""Host side of ``wgmma.cu``: one ``wgmma.mma_async`` per warpgroup on matrices staged in shared memory, and
its reference (spec block and layouts in the .cu file).

Spec
----
entries        :func:`entry` names the ``extern "C"`` entry of a (kind, N, flags) triple, :func:`entries` lists
               them all: every kind of :func:`refsim.arith.wgmma.modelled` at N in :data:`NS` (8 and 256), float
               kinds with imm-scale-a = imm-scale-b = +1 and -1 (``negate``), s8/u8 with and without
               ``.satfinite``, b1; :data:`RS_KIND` also with A from registers (``a_registers``).
operands       A (T, 64, K), B (T, K, N), C (T, 64, N) as :mod:`refsim.testing.wgmma_probes` draws them (raw
               bits uint16 f16/bf16, uint32 tf32, uint8 fp8; int8 s8, uint8 u8; 0/1 uint8 b1; C uint32 f32 bits,
               uint16 f16 bits or int32); T in 1..:data:`MAX_TILES`. :func:`operands` turns them into the
               kernel's arguments (32-byte K-major rows of A and of B^T, C as 32-bit words).
equals         :func:`wgmma_probe` (the kernel, through :func:`refsim.cuda.launch.run`: refsim.ptx at sm_90a or a
               GPU) equals :func:`wgmma_reference` (:func:`refsim.arith.wgmma.wgmma`) bit for bit: D (T, 64, N)
               raw bits (uint32 f32, uint16 f16) or int32 values.

    A, B, C ──operands (32-byte K-major rows)──► wgmma_probe (block per tile) ──► D (T, 64, N)
          └────────────wgmma_reference (refsim.arith.wgmma)──────────────────────► D (T, 64, N)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_bool, require_choice, require_dtype, require_instance
from refsim.arith import wgmma as arith
from refsim.cuda import build, launch
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["SOURCE", "ENTRY_POINTS", "PTX_ARCHS", "NS", "RS_KIND", "MAX_TILES", "entry", "entries", "operands",
           "wgmma_probe", "wgmma_reference"]

SOURCE = "wgmma"
ENTRY_POINTS = {"wgmma_probe": "refsim.cuda.wgmma.wgmma_reference"}
PTX_ARCHS = ("sm_90a",)          # wgmma: arch-specific sm_90a PTX only
#: the N of every kind's entries: the smallest and largest legal N
NS = (8, 256)
#: the kind whose entries also take A from registers
RS_KIND = "f32.f16.f16"
#: the most tiles (blocks) one call runs
MAX_TILES = 1024
_BLOCK = 128
_STORAGE = {"f16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "e4m3": np.uint8, "e5m2": np.uint8,
            "s8": np.int8, "u8": np.uint8, "b1": np.uint8}
_D_STORAGE = {"f32": np.uint32, "f16": np.uint16, "s32": np.int32}
_D_VALUES = {"f32": np.float32, "f16": np.float16, "s32": np.int32}


def _kind(kind) -> arith.WgmmaKind:
    if isinstance(kind, str):
        return arith.kind_of(kind)
    kind = require_instance("kind", kind, arith.WgmmaKind, "WgmmaKind (refsim.arith.wgmma.modelled, kind_of)")
    if kind not in arith.modelled():
        raise FormatRuleError(f"kind: must be one of refsim.arith.wgmma.modelled(); got {kind.types}")
    return kind


def _flags(kind: arith.WgmmaKind, n, satfinite, negate, a_registers) -> tuple[int, bool, bool, bool]:
    n = require_choice("n", n, NS)
    satfinite, negate, a_registers = (require_bool(x, v) for x, v in
                                      (("satfinite", satfinite), ("negate", negate), ("a_registers", a_registers)))
    if satfinite and kind.d != "s32" or satfinite and kind.a == "b1":
        raise FormatRuleError(f"satfinite: only s8/u8 wgmma takes .satfinite; got {kind.types}")
    if negate and kind.d == "s32":
        raise FormatRuleError(f"negate: integer wgmma has no imm-scale; got {kind.types}")
    if a_registers and kind.types != RS_KIND:
        raise FormatRuleError(f"a_registers: wgmma.cu takes A from registers for {RS_KIND} only; got {kind.types}")
    return n, satfinite, negate, a_registers


def entry(kind, n: int, *, satfinite: bool = False, negate: bool = False, a_registers: bool = False) -> str:
    """The ``extern "C"`` entry of wgmma.cu: ``probe_m64n<N>k<K>_<d>_<a>_<b>[_satfinite][_neg][_rs]``."""
    kind = _kind(kind)
    n, satfinite, negate, a_registers = _flags(kind, n, satfinite, negate, a_registers)
    return (f"probe_m64n{n}k{kind.k}_{kind.d}_{kind.a}_{kind.b}" + ("_satfinite" if satfinite else "")
            + ("_neg" if negate else "") + ("_rs" if a_registers else ""))


def entries() -> tuple[str, ...]:
    """Every entry of wgmma.cu (module spec), in the file's order."""
    out = []
    for kind in arith.modelled():
        for n in NS:
            if kind.d == "s32":
                out += [entry(kind, n, satfinite=s) for s in ((False, True) if kind.a != "b1" else (False,))]
            else:
                out += [entry(kind, n, negate=s) for s in (False, True)]
    out += [entry(RS_KIND, n, negate=s, a_registers=True) for n in NS for s in (False, True)]
    return tuple(out)


def _check(kind: arith.WgmmaKind, n: int, A, B, C) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A = require_dtype("A", A, _STORAGE[kind.a])
    B = require_dtype("B", B, _STORAGE[kind.b])
    C = require_dtype("C", C, _D_STORAGE[kind.d])
    for name, x, shape in (("A", A, (arith.M, kind.k)), ("B", B, (kind.k, n)), ("C", C, (arith.M, n))):
        if x.ndim != 3 or x.shape[1:] != shape:
            raise ShapeError(f"{name}: must be (tiles, {shape[0]}, {shape[1]}) for wgmma "
                             f"m64n{n}k{kind.k}.{kind.types}; got {x.shape}")
    tiles = A.shape[0]
    if not 1 <= tiles <= MAX_TILES or B.shape[0] != tiles or C.shape[0] != tiles:
        raise ShapeError(f"A, B, C: must hold the same number of tiles, 1 .. {MAX_TILES}; got "
                         f"{[A.shape[0], B.shape[0], C.shape[0]]}")
    if kind.a == "b1" and ((A > 1).any() or (B > 1).any()):
        raise FormatRuleError("A, B: b1 elements must be 0 or 1")
    return A, B, C


def operands(kind, n: int, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's (a uint8 (T, 64, 32), b uint8 (T, N, 32), c uint32 (T, 64, N * bits(d) / 32)) for A, B, C
    (module spec): 32-byte K-major rows of A and of B^T (b1: element k at bit k % 8 of byte k // 8), C as words.
    Inputs are not modified."""
    kind = _kind(kind)
    n = require_choice("n", n, NS)
    A, B, C = _check(kind, n, A, B, C)
    Bt = np.swapaxes(B, 1, 2)                                                     # (T, N, K)
    if kind.a == "b1":
        rows = [np.ascontiguousarray(np.packbits(x, axis=-1, bitorder="little")) for x in (A, Bt)]
    else:
        rows = [np.ascontiguousarray(x).view(np.uint8) for x in (A, Bt)]
    tiles = A.shape[0]
    return (rows[0].reshape(tiles, arith.M, 32), rows[1].reshape(tiles, n, 32),
            np.ascontiguousarray(C).view(np.uint32).reshape(tiles, arith.M, -1))


def wgmma_probe(kind, n: int, A: np.ndarray, B: np.ndarray, C: np.ndarray, *, scale_d: bool = True,
                negate: bool = False, satfinite: bool = False, a_registers: bool = False, backend: str = "ptx",
                options: dict | None = None) -> np.ndarray:
    """Run the wgmma.cu entry of (``kind``, ``n``, flags) on A, B, C (module spec), one block per tile: D
    (T, 64, N) raw bits (uint32 f32, uint16 f16) or int32. ``scale_d`` False: D = A·B (scale-d = 0);
    ``negate``: imm-scale-a = imm-scale-b = -1. backend "ptx" (refsim.ptx at sm_90a; ``options`` go to
    :meth:`refsim.ptx.Module.launch`) or "gpu" (the same PTX on the current device)."""
    kind = _kind(kind)
    name = entry(kind, n, satfinite=satfinite, negate=negate, a_registers=a_registers)
    scale_d = require_bool("scale_d", scale_d)
    a, b, c = operands(kind, n, A, B, C)
    out = np.zeros_like(c)
    ln = launch.Launch(name, a.shape[0], _BLOCK)
    launch.run(build.ptx(SOURCE, PTX_ARCHS[0]), [(ln, (a, b, c, out, np.int32(scale_d)))], backend=backend,
               arch=PTX_ARCHS[0], options=options)
    return out.view(_D_STORAGE[kind.d]).reshape(C.shape)


def wgmma_reference(kind, n: int, A: np.ndarray, B: np.ndarray, C: np.ndarray, *, scale_d: bool = True,
                    negate: bool = False, satfinite: bool = False, a_registers: bool = False) -> np.ndarray:
    """What :func:`refsim.arith.wgmma.wgmma` computes for A, B, C and the flags (the oracle of
    :func:`wgmma_probe`; where A is read from does not change the arithmetic): D (T, 64, N) raw bits or int32."""
    kind = _kind(kind)
    n, satfinite, negate, a_registers = _flags(kind, n, satfinite, negate, a_registers)
    scale_d = require_bool("scale_d", scale_d)
    A, B, C = _check(kind, n, A, B, C)
    s = -1 if negate else 1
    D = arith.wgmma(kind, A, B, np.ascontiguousarray(C).view(_D_VALUES[kind.d]), scale_d=scale_d, scale_a=s,
                    scale_b=s, satfinite=satfinite)
    return np.ascontiguousarray(D).view(_D_STORAGE[kind.d])
