"""Host side of ``mma.cu``: one ``mma.sync`` per warp on given registers, and the inputs that probe it.

Spec
----
forms          an instruction form is a :class:`refsim.arith.tensor_core_types.MmaKind` of
               :func:`refsim.arith.tensor_core_types.modelled` (shape, A/B/C/D types, the archs with a model, the
               archs where the model is confirmed) and, for integer inputs, ``satfinite``. :func:`forms` lists
               every (kind, satfinite) pair, each with an ``extern "C"`` entry in mma.cu (:func:`entry`),
               compiled into the committed PTX of :func:`ptx_arch` (fp8 needs sm_89); :func:`kind_of` finds a
               kind by its instruction text.
registers      a probe runs on raw per-lane registers: ``a`` uint32 (T, 32, NA), ``b`` (T, 32, NB), ``c``
               (T, 32, NC) -> ``d`` (T, 32, ND), one tile per warp (:func:`registers` gives NA..ND);
               :func:`pack` / :func:`unpack` convert between registers and matrices (A (T, 16, K), B (T, K, 8),
               C/D (T, 16, 8)) with the fragment layouts refsim.ptx uses
               (:func:`refsim.ptx.semantics.warp.mma_fragments`). Matrices hold raw bits for float types
               (uint16 f16/bf16, uint32 f32/tf32, uint8 e4m3/e5m2) and values for integers.
equals         :func:`mma_probe` (the kernel) equals :func:`mma_reference` (refsim.arith on the unpacked
               matrices: :func:`~refsim.arith.tensor_core.mma_m16n8k16` / ``mma_m16n8k8`` for f16,
               :func:`refsim.arith.tensor_core_types.mma` for bf16/tf32/fp8,
               :func:`~refsim.arith.integer_mma.mma_int` for integers) bit for bit at every arch of ``kind.archs``.
categories     :func:`probe_inputs` draws tiles of one category: for float inputs ``random``,
               ``magnitudes`` (exponents across the format's range), ``cancel`` (products +p and -p in one
               dot product, plus a small t), ``subnormal``, ``nearmax``, ``bigC`` (C far above the
               products), ``cancelC`` (C = -(the products' sum)), ``zeros`` (half of the inputs +-0); tf32
               also ``lowbits`` (random values whose f32 registers have their 13 low bits set at random:
               what the tensor core reads of them); for integers ``random``, ``extremes`` (min/max/0/+-1) and ``bigC`` (C near +-2**31: wraps, or
               saturates with .satfinite).

    A, B, C ──pack (fragment layouts)──► registers ──mma_probe (a warp per tile)──► d registers
                                              └────mma_reference (arith models)────► d registers
"""

from __future__ import annotations

import functools

import numpy as np

from refsim.arith import fragments, integer_mma, tensor_core, tensor_core_types
from refsim.arith.tensor_core_types import MmaKind
from refsim.cuda import build, launch
from refsim._validate import (require_bool, require_bounded, require_choice, require_dtype, require_instance,
                              require_int)
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["SOURCE", "ENTRY_POINTS", "PTX_ARCHS", "forms", "kind_of", "instruction", "entry", "ptx_arch",
           "registers", "forms_table", "layouts", "pack", "unpack", "mma_probe", "mma_reference", "NoModel",
           "FLOAT_CATEGORIES", "INT_CATEGORIES", "categories", "probe_inputs", "draw_operands"]

SOURCE = "mma"
ENTRY_POINTS = {"mma_probe": "refsim.cuda.mma.mma_reference"}
#: the PTX targets committed for this file: fp8 mma needs sm_89
PTX_ARCHS: tuple[str, ...] = ("sm_80", "sm_89")

_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "s32": 32, "s8": 8, "u8": 8, "e4m3": 8, "e5m2": 8,
         "s4": 4, "u4": 4}
_INTS = ("s8", "u8", "s4", "u4")
_FP8 = ("e4m3", "e5m2")
_BLOCK = 128          # threads per block: 4 warps, 4 tiles


class NoModel(FormatRuleError):
    """refsim has no model of this mma form at this arch."""


@functools.lru_cache(maxsize=None)
def forms() -> tuple[tuple[MmaKind, bool], ...]:
    """Every (kind, satfinite) mma.cu has an entry for: each kind of :func:`refsim.arith.tensor_core_types.modelled`,
    integer kinds also with ``.satfinite`` (clamp to the int32 range instead of wrapping)."""
    return tuple((k, sat) for k in tensor_core_types.modelled() for sat in ((False, True) if k.a in _INTS else (False,)))


@functools.lru_cache(maxsize=None)
def _by_key() -> dict[tuple, MmaKind]:
    return {_key(k): k for k in tensor_core_types.modelled()}


def _key(kind: MmaKind) -> tuple[str, str, str, str, str]:
    return (kind.shape, kind.a, kind.b, kind.c, kind.d)


def kind_of(ptx: str) -> MmaKind:
    """The modelled kind whose instruction text (``MmaKind.ptx``, no ``.satfinite``) is ``ptx``, e.g.
    ``kind_of("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")``."""
    found = {k.ptx: k for k in tensor_core_types.modelled()}.get(ptx) if isinstance(ptx, str) else None
    if found is None:
        raise NoModel(f"ptx: must be the text of an mma form refsim models (refsim.arith.tensor_core_types.modelled()); "
                      f"got {ptx!r}")
    return found


def _modelled(kind, satfinite) -> MmaKind:
    """The modelled kind equal to ``kind`` in shape and types (its archs as tensor_core lists them)."""
    if not isinstance(kind, MmaKind):
        raise FormatRuleError(f"kind: must be a refsim.arith.tensor_core_types.MmaKind (see kind_of, forms); "
                              f"got {type(kind).__name__}")
    satfinite = require_bool("satfinite", satfinite)
    if satfinite and kind.a not in _INTS:
        raise FormatRuleError(f"satfinite: only integer mma takes .satfinite; got {kind.ptx}")
    found = _by_key().get(_key(kind))
    if found is None:
        raise FormatRuleError(f"kind: mma.cu has no entry for {kind.ptx}: it has one per form refsim models "
                              f"(refsim.arith.tensor_core_types.modelled())")
    return found


def instruction(kind: MmaKind, satfinite: bool = False) -> str:
    """The instruction text, e.g. ``mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32``."""
    kind = _modelled(kind, satfinite)
    return kind.ptx.replace(".row.col.", ".row.col.satfinite.") if satfinite else kind.ptx


def entry(kind: MmaKind, satfinite: bool = False) -> str:
    """The ``extern "C"`` entry of mma.cu: ``probe_<shape>_<d>_<a>_<b>_<c>[_satfinite]``."""
    kind = _modelled(kind, satfinite)
    return f"probe_{kind.shape}_{kind.d}_{kind.a}_{kind.b}_{kind.c}" + ("_satfinite" if satfinite else "")


def ptx_arch(kind: MmaKind) -> str:
    """The committed PTX target that has the kind's entry (fp8 needs sm_89)."""
    kind = _modelled(kind, False)
    return "sm_89" if kind.a in _FP8 or kind.b in _FP8 else "sm_80"


def _k(kind: MmaKind) -> int:
    return int(kind.shape.split("k")[1])


def registers(kind: MmaKind) -> tuple[int, int, int, int]:
    """(NA, NB, NC, ND): 32-bit registers per lane of A (16 x K), B (K x 8), C and D (16 x 8)."""
    kind = _modelled(kind, False)
    K = _k(kind)
    return (16 * K * _BITS[kind.a] // 1024, K * 8 * _BITS[kind.b] // 1024, 128 * _BITS[kind.c] // 1024,
            128 * _BITS[kind.d] // 1024)


def forms_table() -> str:
    """A Markdown table of :func:`forms`, one row per kind: instruction, archs with a model, archs where it is
    confirmed (measured hardware outputs equal it, or exact integer arithmetic), PTX target of the entries,
    whether a ``.satfinite`` entry exists too."""
    rows = ["| form | modelled at | confirmed at | PTX | also `.satfinite` |", "|---|---|---|---|---|"]
    sat = {_key(k) for k, s in forms() if s}
    for kind, s in forms():
        if not s:
            rows.append(f"| `{kind.ptx}` | {', '.join(kind.archs)} | {', '.join(kind.verified) or '(none)'} | "
                        f"{ptx_arch(kind)} | {'yes' if _key(kind) in sat else 'no'} |")
    return "\n".join(rows) + "\n"


# ----------------------------------------------------------------------------------------------
# registers <-> matrices


def layouts(kind: MmaKind):
    """(A, B, C/D) :class:`refsim.arith.fragments.FragmentLayout` of ``kind`` as refsim.ptx executes it."""
    return _layouts(_modelled(kind, False))


@functools.lru_cache(maxsize=None)
def _layouts(kind: MmaKind):
    from refsim.ptx.semantics.warp import mma_fragments

    la, lb, lc = mma_fragments(kind.shape, kind.a)
    assert la.shape == (16, _k(kind)) and lb.shape == (_k(kind), 8), (kind, la.shape, lb.shape)
    return la, lb, lc


def _pack1(layout, m: np.ndarray, bits: int) -> np.ndarray:
    frags = layout.gather(m)                                              # (T, 32, E)
    if bits == 32:
        return np.ascontiguousarray(frags).view(np.uint32) if frags.dtype.itemsize == 4 else frags.astype(np.uint32)
    return fragments.pack_registers(frags.astype(np.uint16) if bits == 16 else frags, bits)


def _unpack1(layout, regs: np.ndarray, bits: int, dtype) -> np.ndarray:
    regs = np.asarray(regs, np.uint32)
    if bits == 32:
        return layout.scatter(regs).view(dtype)
    return layout.scatter(fragments.unpack_registers(regs, bits, signed=np.dtype(dtype).kind == "i")).astype(dtype)


def _storage(t: str):
    """NumPy dtype of a matrix of type ``t``: raw bits for floats, values for integers."""
    return {"f16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "f32": np.uint32, "s32": np.int32,
            "e4m3": np.uint8, "e5m2": np.uint8, "s8": np.int8, "u8": np.uint8, "s4": np.int8, "u4": np.uint8}[t]


def pack(kind: MmaKind, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matrices A (T, 16, K), B (T, K, 8), C (T, 16, 8) (module spec: bits or values) -> registers
    uint32 (T, 32, NA), (T, 32, NB), (T, 32, NC)."""
    la, lb, lc = layouts(kind)
    return (_pack1(la, A, _BITS[kind.a]), _pack1(lb, B, _BITS[kind.b]), _pack1(lc, C, _BITS[kind.c]))


def unpack(kind: MmaKind, regs: np.ndarray, operand: str = "d") -> np.ndarray:
    """Registers (T, 32, n) of operand ``"a"``, ``"b"``, ``"c"`` or ``"d"`` -> its matrix (module spec)."""
    la, lb, lc = layouts(kind)
    layout, t = {"a": (la, kind.a), "b": (lb, kind.b), "c": (lc, kind.c), "d": (lc, kind.d)}[
        require_choice("operand", operand, ("a", "b", "c", "d"))]
    regs = require_dtype("regs", regs, np.uint32)
    n = layout.elements_per_lane * _BITS[t] // 32
    if regs.ndim != 3 or regs.shape[1:] != (32, n):
        raise ShapeError(f"regs: must be uint32 (tiles, 32, {n}) registers of operand {operand}; got {regs.shape}")
    return _unpack1(layout, regs, _BITS[t], _storage(t))


def _check_regs(kind: MmaKind, satfinite: bool, a, b, c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _modelled(kind, satfinite)
    na, nb, nc, _ = registers(kind)
    out = []
    for name, x, n in (("a", a, na), ("b", b, nb), ("c", c, nc)):
        x = np.asarray(x)
        if x.dtype != np.uint32 or x.ndim != 3 or x.shape[1:] != (32, n):
            raise ShapeError(f"{name}: must be uint32 (tiles, 32, {n}) registers for {kind.ptx}; got {x.dtype} "
                             f"{x.shape}")
        out.append(np.ascontiguousarray(x))
    if not out[0].shape[0] == out[1].shape[0] == out[2].shape[0] >= 1:
        raise ShapeError(f"a, b, c: must hold the same number (>= 1) of tiles; got {[x.shape[0] for x in out]}")
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# the kernel and its reference


def mma_probe(kind: MmaKind, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, satfinite: bool = False,
              backend: str = "ptx", arch: str = "sm_80", options: dict | None = None) -> np.ndarray:
    """Run the mma.cu entry of ``kind`` (with ``.satfinite`` for integer kinds when asked): d uint32
    (T, 32, ND) from registers a, b, c (module spec), one tile per warp. backend "ptx" (refsim.ptx under
    ``arch``'s tensor-core model) or "gpu"."""
    a, b, c = _check_regs(kind, satfinite, a, b, c)
    tiles = a.shape[0]
    d = np.zeros((tiles, 32, registers(kind)[3]), np.uint32)
    ln = launch.Launch(entry(kind, satfinite), -(-tiles * 32 // _BLOCK), _BLOCK)
    launch.run(build.ptx(SOURCE, ptx_arch(kind)), [(ln, (a, b, c, d, np.int32(tiles)))], backend=backend,
               arch=arch, options=options)
    return d


def _arith(kind: MmaKind, satfinite: bool, arch: str, A, B, C) -> np.ndarray:
    """D (T, 16, 8) in storage form (module spec) from refsim.arith."""
    if kind.a in _INTS:
        return integer_mma.mma_int(A.astype(np.int64), B.astype(np.int64), C, atype=kind.a, btype=kind.b,
                                   satfinite=satfinite)
    if kind.a == "f16":
        out = np.float32 if kind.d == "f32" else np.float16
        f16 = lambda x: np.ascontiguousarray(x).view(np.float16)      # noqa: E731
        mma = tensor_core.mma_m16n8k16 if _k(kind) == 16 else tensor_core.mma_m16n8k8
        D = mma(arch, f16(A), f16(B), np.ascontiguousarray(C).view(out), out)
    else:
        D = tensor_core_types.mma(arch, kind.shape, kind.a, kind.b, A, B, np.ascontiguousarray(C).view(np.float32))
    return np.ascontiguousarray(D).view(_storage(kind.d))


def mma_reference(kind: MmaKind, arch: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, *,
                  satfinite: bool = False) -> np.ndarray:
    """What refsim's tensor-core model of ``arch`` computes for the registers a, b, c: d uint32 (T, 32, ND),
    the oracle of :func:`mma_probe`. NoModel where refsim does not model ``kind`` at ``arch``."""
    a, b, c = _check_regs(kind, satfinite, a, b, c)
    archs = _modelled(kind, satfinite).archs
    if arch not in archs:
        raise NoModel(f"arch: refsim models {kind.ptx} at {list(archs)}; got {arch!r}")
    D = _arith(kind, satfinite, arch, unpack(kind, a, "a"), unpack(kind, b, "b"), unpack(kind, c, "c"))
    return _pack1(layouts(kind)[2], D, _BITS[kind.d])


# ----------------------------------------------------------------------------------------------
# adversarial inputs

#: the most tiles :func:`probe_inputs` draws in one call (16 x K x 8 values each)
MAX_TILES = 1 << 16
#: the most operand elements :func:`draw_operands` draws in one call
MAX_OPERAND_ELEMENTS = 1 << 26
FLOAT_CATEGORIES = ("random", "magnitudes", "cancel", "subnormal", "nearmax", "bigC", "cancelC", "zeros")
INT_CATEGORIES = ("random", "extremes", "bigC")


def categories(kind: MmaKind) -> tuple[str, ...]:
    """The input categories of ``kind`` (integer or float inputs; tf32 adds ``lowbits``)."""
    kind = _modelled(kind, False)
    if kind.a in _INTS:
        return INT_CATEGORIES
    return FLOAT_CATEGORIES + (("lowbits",) if kind.a == "tf32" else ())


@functools.lru_cache(maxsize=None)
def _format(t: str):
    """(NumPy dtype rounding to t, max finite, smallest normal, smallest subnormal) of a float type."""
    import ml_dtypes

    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "tf32": np.float32,
          "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[t]
    fi = ml_dtypes.finfo(dt) if t != "tf32" else None
    if t == "tf32":                            # 10 fraction bits, f32's exponent range
        return dt, float((2 - 2.0**-10) * 2.0**127), 2.0**-126, 2.0**-136
    return dt, float(fi.max), float(fi.tiny), float(fi.smallest_subnormal)


def _to_bits(t: str, x: np.ndarray) -> np.ndarray:
    """float64 values -> raw bits of type t (round to nearest even; tf32: f32 with 13 low bits cleared)."""
    dt, vmax, _, _ = _format(t)
    x = np.clip(x, -vmax, vmax)
    v = x.astype(dt)
    bits = v.view(_storage(t) if t != "tf32" else np.uint32)
    if t == "tf32":
        bits = bits & np.uint32(0xFFFFE000)
    return np.ascontiguousarray(bits, dtype=_storage(t))


def _from_bits(t: str, bits: np.ndarray) -> np.ndarray:
    dt = _format(t)[0]
    return np.ascontiguousarray(bits).view(dt).astype(np.float64)


def _values(t: str, category: str, shape, rng) -> np.ndarray:
    dt, vmax, tiny, sub = _format(t)
    sign = rng.choice([-1.0, 1.0], size=shape)
    if category == "magnitudes":
        lo, hi = np.log2(tiny), np.log2(vmax) - 1
        return sign * 2.0 ** rng.uniform(lo, hi, shape)
    if category == "subnormal":
        return sign * rng.integers(1, max(2, int(tiny / sub)), shape) * sub
    if category == "nearmax":
        return sign * vmax * rng.uniform(0.5, 1.0, shape)
    if category == "zeros":
        v = rng.standard_normal(shape)
        return np.where(rng.random(shape) < 0.5, sign * 0.0, v)
    return rng.standard_normal(shape)


def probe_inputs(kind: MmaKind, category: str, tiles: int, rng: np.random.Generator):
    """(A, B, C) matrices (module spec: bits or values) of ``tiles`` tiles of ``category``."""
    _modelled(kind, False)
    if category not in categories(kind):
        raise FormatRuleError(f"category: must be one of {list(categories(kind))} for {kind.ptx}; got {category!r}")
    return draw_operands(kind.a, kind.b, kind.c, (16, _k(kind), 8), category, tiles, rng)


def draw_operands(atype: str, btype: str, ctype: str, mkn: tuple[int, int, int], category: str, tiles: int,
                  rng: np.random.Generator):
    """(A (tiles, M, K), B (tiles, K, N), C (tiles, M, N)) of ``category`` for any tensor-core instruction
    with these operand types (``mma.sync``: :func:`probe_inputs`; ``wgmma``: M = 64): raw bits for float
    types, values for integers (module spec). Integer categories for s8/u8/s4/u4 inputs, float ones else."""
    tiles = require_int("tiles", tiles, minimum=1)
    if tiles > MAX_TILES:
        raise FormatRuleError(f"tiles: at most {MAX_TILES} tiles of probe inputs; got {tiles}")
    require_instance("rng", rng, np.random.Generator, "numpy.random.Generator")
    for name, t in (("atype", atype), ("btype", btype), ("ctype", ctype)):
        require_choice(name, t, tuple(_BITS))
    if not isinstance(mkn, tuple) or len(mkn) != 3:
        raise ShapeError(f"mkn: must be the tuple (M, K, N); got {mkn!r:.60}")
    M, K, N = (require_int(x, v, minimum=1) for x, v in zip("MKN", mkn))
    for x, v in zip("MKN", (M, K, N)):
        require_bounded(x, v, 256, what="a tensor-core instruction dimension")
    require_bounded("tiles x (M K + K N + M N)", tiles * (M * K + K * N + M * N), MAX_OPERAND_ELEMENTS,
                    what="operand element count")
    require_choice("category", category, INT_CATEGORIES if atype in _INTS else FLOAT_CATEGORIES + ("lowbits",))
    sa, sb, sc = (tiles, M, K), (tiles, K, N), (tiles, M, N)
    if atype in _INTS:
        def draw(t, shape):
            lo, hi = integer_mma.INT_RANGES[t]
            if category == "extremes":
                return rng.choice(np.array(sorted({lo, hi, 0, 1, max(lo, -1)}), np.int64), size=shape)
            return rng.integers(lo, hi + 1, shape)
        A, B = draw(atype, sa).astype(_storage(atype)), draw(btype, sb).astype(_storage(btype))
        if category == "bigC":
            C = rng.choice([-1, 1], sc) * (2**31 - rng.integers(1, 2**16, sc))
        else:
            C = rng.integers(-2**20, 2**20, sc)
        return A, B, C.astype(np.int32)
    ab = "cancel" if category == "cancel" else ("random" if category in ("bigC", "cancelC", "lowbits") else category)
    a = _values(atype, ab, sa, rng)
    b = _values(btype, ab, sb, rng)
    if category == "cancel":                   # A[i, k + K/2] = -A[i, k], B[k + K/2] = B[k]; one small t
        h = K // 2
        a[:, :, h:] = -a[:, :, :h]
        b[:, h:, :] = b[:, :h, :]
        a[:, :, 0] *= 2.0**-12
    A, B = _to_bits(atype, a), _to_bits(btype, b)
    if category == "lowbits":                  # tf32 in f32 registers: bits 0..12 are not part of the value
        A = A | rng.integers(0, 2**13, sa, dtype=np.uint32)
        B = B | rng.integers(0, 2**13, sb, dtype=np.uint32)
    if category == "bigC":
        c = np.sign(rng.standard_normal(sc)) * _format(ctype)[1] * rng.uniform(2.0**-8, 2.0**-2, sc)
    elif category == "cancelC":                # C = -(sum of the exact products), rounded to C's type
        c = -np.matmul(_from_bits(atype, A), _from_bits(btype, B))
    elif category == "zeros":
        c = np.where(rng.random(sc) < 0.5, rng.choice([-0.0, 0.0], sc), rng.standard_normal(sc))
    elif category in ("subnormal",):
        c = np.zeros(sc)
    else:
        c = rng.standard_normal(sc)
    return A, B, _to_bits(ctype, c)
