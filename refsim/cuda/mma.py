"""Host side of ``mma.cu``: one ``mma.sync`` per warp on given registers, and the inputs that probe it.

Spec
----
kinds          :class:`MmaKind` names one instruction form: shape (``m16n8k16``), D/A/B/C types, ``.satfinite``.
               :data:`KINDS` are the forms ``mma.cu`` has an entry for; :func:`modelled` the forms
               refsim's tensor-core models cover, and at which arch models, read from
               :mod:`refsim.arith.tensor_core` (its ``MODELLED`` list where it has one).
registers      a probe runs on raw per-lane registers: ``a`` uint32 (T, 32, NA), ``b`` (T, 32, NB), ``c``
               (T, 32, NC) -> ``d`` (T, 32, ND), one tile per warp; :func:`pack` / :func:`unpack` convert
               between registers and matrices (A (T, 16, K), B (T, K, 8), C/D (T, 16, 8)) with the fragment
               layouts refsim.ptx uses (:func:`refsim.ptx.semantics.warp.mma_fragments`). Matrices hold raw
               bits for float types (uint16 f16/bf16, uint32 f32/tf32, uint8 fp8) and values for integers.
equals         :func:`mma_probe` (the kernel) equals :func:`mma_reference` (refsim.arith.tensor_core on the
               unpacked matrices: chained fdpa blocks for f16, :func:`~refsim.arith.tensor_core.mma_int`
               for integers) bit for bit at every arch model the form is modelled under.
categories     :func:`probe_inputs` draws tiles of one category: for float inputs ``random``,
               ``magnitudes`` (exponents across the format's range), ``cancel`` (products +p and -p in one
               dot product, plus a small t), ``subnormal``, ``nearmax``, ``bigC`` (C far above the
               products), ``cancelC`` (C = -(the products' sum)), ``zeros`` (half of the inputs +-0); for
               integers ``random``, ``extremes`` (min/max/0/+-1) and ``bigC`` (C near +-2**31: wraps, or
               saturates with .satfinite).

    A, B, C ──pack (fragment layouts)──► registers ──mma_probe (a warp per tile)──► d registers
                                              └────mma_reference (arith models)────► d registers
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from refsim.arith import fragments, tensor_core
from refsim.cuda import build, launch
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["SOURCE", "ENTRY_POINTS", "PTX_ARCHS", "MmaKind", "KINDS", "modelled", "layouts", "pack", "unpack",
           "mma_probe", "mma_reference", "NoModel", "FLOAT_CATEGORIES", "INT_CATEGORIES", "categories",
           "probe_inputs"]

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
    """refsim has no model of this mma form at this arch (or no fragment layout / arith route for it)."""


@dataclass(frozen=True)
class MmaKind:
    """One ``mma.sync.aligned.<shape>.row.col{.satfinite}.<dtype>.<atype>.<btype>.<ctype>`` form."""

    shape: str
    dtype: str
    atype: str
    btype: str
    ctype: str
    satfinite: bool = False

    @property
    def k(self) -> int:
        return int(self.shape.split("k")[1])

    @property
    def instruction(self) -> str:
        sat = ".satfinite" if self.satfinite else ""
        return f"mma.sync.aligned.{self.shape}.row.col{sat}.{self.dtype}.{self.atype}.{self.btype}.{self.ctype}"

    @property
    def entry(self) -> str:
        """The ``extern "C"`` entry of mma.cu."""
        return f"probe_{self.shape}_{self.dtype}_{self.atype}_{self.btype}_{self.ctype}" + (
            "_satfinite" if self.satfinite else "")

    @property
    def ptx_arch(self) -> str:
        """The committed PTX target that has this entry (fp8 needs sm_89)."""
        return "sm_89" if self.atype in _FP8 or self.btype in _FP8 else "sm_80"

    @property
    def registers(self) -> tuple[int, int, int, int]:
        """(NA, NB, NC, ND): 32-bit registers per lane of A (16 x K), B (K x 8), C and D (16 x 8)."""
        return (16 * self.k * _BITS[self.atype] // 1024, self.k * 8 * _BITS[self.btype] // 1024,
                128 * _BITS[self.ctype] // 1024, 128 * _BITS[self.dtype] // 1024)

    def __str__(self) -> str:
        return self.instruction


def _kinds(shapes, types, accs, sat=(False,)):
    return tuple(MmaKind(s, d, a, b, c, f) for s in shapes for a, b in types for d, c in accs for f in sat)


_I8 = (("s8", "s8"), ("u8", "u8"), ("s8", "u8"), ("u8", "s8"))
_I4 = (("s4", "s4"), ("u4", "u4"), ("s4", "u4"), ("u4", "s4"))
#: every form mma.cu has an entry for (tests/cuda keep this equal to the committed PTX)
KINDS: tuple[MmaKind, ...] = (
    _kinds(("m16n8k16", "m16n8k8"), (("f16", "f16"),), (("f32", "f32"), ("f16", "f16")))
    + _kinds(("m16n8k16", "m16n8k8"), (("bf16", "bf16"),), (("f32", "f32"),))
    + _kinds(("m16n8k8", "m16n8k4"), (("tf32", "tf32"),), (("f32", "f32"),))
    + _kinds(("m16n8k16", "m16n8k32"), _I8, (("s32", "s32"),), (False, True))
    + _kinds(("m16n8k32", "m16n8k64"), _I4, (("s32", "s32"),), (False, True))
    + _kinds(("m16n8k32",), (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")),
             (("f32", "f32"),))
)

#: integer mma shapes per element width (PTX ISA "Warp-level matrix shapes")
_INT_SHAPES = {8: ("m16n8k16", "m16n8k32"), 4: ("m16n8k32", "m16n8k64")}


def _field(entry, *names, default=None):
    for n in names:
        if isinstance(entry, dict) and n in entry:
            return entry[n]
        if hasattr(entry, n):
            return getattr(entry, n)
    return default


def _from_listing(entry) -> list[tuple[MmaKind, tuple[str, ...]]]:
    """Kinds of one entry of ``tensor_core.MODELLED``: an object/dict with shape, atype/btype (or ab),
    accumulate type (ctype/dtype/acc), archs and optional satfinite; or a tuple (shape, a/b type(s),
    accumulate type, archs)."""
    if isinstance(entry, tuple) and not hasattr(entry, "_fields"):
        shape, ab, acc, archs = entry[:4]
        atype, btype = (ab, ab) if isinstance(ab, str) else tuple(ab)
        dtype = ctype = acc
        sat = False
    else:
        shape = _field(entry, "shape")
        ab = _field(entry, "ab", "types")
        atype = _field(entry, "atype", "a", default=ab if isinstance(ab, str) else (ab or (None,))[0])
        btype = _field(entry, "btype", "b", default=atype if isinstance(ab, str) or ab is None else ab[1])
        ctype = _field(entry, "ctype", "acc", "accumulate", "dtype")
        dtype = _field(entry, "dtype", "acc", "accumulate", "ctype")
        archs = _field(entry, "archs", default=())
        sat = bool(_field(entry, "satfinite", default=False))
    return [(MmaKind(shape, dtype, atype, btype, ctype, sat), tuple(archs))]


def _listing_now() -> list[tuple[MmaKind, tuple[str, ...]]]:
    """What refsim.arith.tensor_core models when it carries no ``MODELLED`` list: f16 inputs at every
    arch model with an m16n8k16 datapath (k8 where the hardware block is 8 products), exact integers."""
    archs = tuple(a for a in tensor_core.ARCHS if a != "sm_70")       # sm_70 has no m16n8 shapes
    block8 = tuple(a for a in archs if tensor_core.model(a).block == 8)
    out = []
    for d in ("f32", "f16"):
        out += [(MmaKind("m16n8k16", d, "f16", "f16", d), archs), (MmaKind("m16n8k8", d, "f16", "f16", d), block8)]
    ints = tuple(tensor_core._INT_RANGES)
    for a in ints:
        for b in ints:
            if _BITS[a] == _BITS[b]:
                for shape in _INT_SHAPES[_BITS[a]]:
                    for sat in (False, True):
                        out.append((MmaKind(shape, "s32", a, b, "s32", sat), archs))
    return out


def modelled() -> dict[MmaKind, tuple[str, ...]]:
    """Every mma form refsim models, with the arch models it is modelled under, from
    :mod:`refsim.arith.tensor_core`: its ``MODELLED`` list when present, else its f16 models and
    integer ranges. The one place ``refsim validate`` learns which forms to probe."""
    listed = getattr(tensor_core, "MODELLED", None)
    pairs = [p for e in listed for p in _from_listing(e)] if listed is not None else _listing_now()
    out: dict[MmaKind, tuple[str, ...]] = {}
    for kind, archs in pairs:
        out[kind] = tuple(dict.fromkeys(out.get(kind, ()) + tuple(archs)))
    return out


# ----------------------------------------------------------------------------------------------
# registers <-> matrices


@functools.lru_cache(maxsize=None)
def layouts(kind: MmaKind):
    """(A, B, C/D) :class:`refsim.arith.fragments.FragmentLayout` of ``kind`` as refsim.ptx executes it;
    NoModel when refsim.ptx has no layout for its shape and types."""
    from refsim.ptx.semantics.warp import mma_fragments

    try:
        la, lb, lc = mma_fragments(kind.shape, kind.atype)
    except (KeyError, ValueError) as err:
        raise NoModel(f"kind: refsim has no fragment layout for {kind}; got {err!r}") from None
    if la.shape != (16, kind.k) or lb.shape != (kind.k, 8):
        raise NoModel(f"kind: refsim's fragment layout for {kind} has A {la.shape}, B {lb.shape}")
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
    return (_pack1(la, A, _BITS[kind.atype]), _pack1(lb, B, _BITS[kind.btype]), _pack1(lc, C, _BITS[kind.ctype]))


def unpack(kind: MmaKind, regs: np.ndarray, operand: str = "d") -> np.ndarray:
    """Registers (T, 32, n) of operand ``"a"``, ``"b"``, ``"c"`` or ``"d"`` -> its matrix (module spec)."""
    la, lb, lc = layouts(kind)
    layout, t = {"a": (la, kind.atype), "b": (lb, kind.btype), "c": (lc, kind.ctype), "d": (lc, kind.dtype)}[operand]
    return _unpack1(layout, regs, _BITS[t], _storage(t))


def _check_regs(kind: MmaKind, a, b, c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(kind, MmaKind):
        raise FormatRuleError(f"kind: must be a refsim.cuda.mma.MmaKind; got {type(kind).__name__}")
    na, nb, nc, _ = kind.registers
    out = []
    for name, x, n in (("a", a, na), ("b", b, nb), ("c", c, nc)):
        x = np.asarray(x)
        if x.dtype != np.uint32 or x.ndim != 3 or x.shape[1:] != (32, n):
            raise ShapeError(f"{name}: must be uint32 (tiles, 32, {n}) registers for {kind}; got {x.dtype} {x.shape}")
        out.append(np.ascontiguousarray(x))
    if not out[0].shape[0] == out[1].shape[0] == out[2].shape[0] >= 1:
        raise ShapeError(f"a, b, c: must hold the same number (>= 1) of tiles; got {[x.shape[0] for x in out]}")
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# the kernel and its reference


def mma_probe(kind: MmaKind, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, backend: str = "ptx",
              arch: str = "sm_80", options: dict | None = None) -> np.ndarray:
    """Run ``kind``'s entry of mma.cu: d uint32 (T, 32, ND) from registers a, b, c (module spec),
    one tile per warp. backend "ptx" (refsim.ptx under ``arch``'s tensor-core model) or "gpu"."""
    if isinstance(kind, MmaKind) and kind not in KINDS:
        raise FormatRuleError(f"kind: mma.cu has no entry for {kind}")
    a, b, c = _check_regs(kind, a, b, c)
    tiles = a.shape[0]
    d = np.zeros((tiles, 32, kind.registers[3]), np.uint32)
    ln = launch.Launch(kind.entry, -(-tiles * 32 // _BLOCK), _BLOCK)
    launch.run(build.ptx(SOURCE, kind.ptx_arch), [(ln, (a, b, c, d, np.int32(tiles)))], backend=backend, arch=arch,
               options=options)
    return d


def _float16(bits: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bits).view(np.float16)


def _arith(kind: MmaKind, arch: str, A, B, C) -> np.ndarray:
    """D (T, 16, 8) in storage form from refsim.arith.tensor_core (NoModel where it has no function)."""
    if kind.atype == kind.btype == "f16" and kind.ctype == kind.dtype and kind.dtype in ("f32", "f16"):
        out = np.float32 if kind.dtype == "f32" else np.float16
        Cf = np.ascontiguousarray(C).view(out)
        if kind.k == 16:
            D = tensor_core.mma_m16n8k16(arch, _float16(A), _float16(B), Cf, out)
        elif tensor_core.model(arch).block == 8:                       # one hardware block of 8 products
            a8 = np.broadcast_to(_float16(A)[:, :, None, :], A.shape[:1] + (16, 8, 8))
            b8 = np.broadcast_to(np.swapaxes(_float16(B), -1, -2)[:, None, :, :], A.shape[:1] + (16, 8, 8))
            D = tensor_core.fdpa(arch, np.ascontiguousarray(a8), np.ascontiguousarray(b8), Cf, out)
        else:
            raise NoModel(f"kind: {kind} at {arch}: the {tensor_core.model(arch).block}-product block has no "
                          f"model for k = 8")
        return np.ascontiguousarray(D).view(_storage(kind.dtype))
    if kind.atype in _INTS and kind.btype in _INTS:
        return tensor_core.mma_int(A.astype(np.int64), B.astype(np.int64), C, atype=kind.atype, btype=kind.btype,
                                   satfinite=kind.satfinite)
    raise NoModel(f"kind: refsim.cuda.mma has no refsim.arith route for {kind}")


def mma_reference(kind: MmaKind, arch: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """What refsim's tensor-core model of ``arch`` computes for the registers a, b, c: d uint32 (T, 32, ND),
    the oracle of :func:`mma_probe`. NoModel where refsim models no such instruction at ``arch``."""
    a, b, c = _check_regs(kind, a, b, c)
    archs = modelled().get(kind)
    if archs is None or arch not in archs:
        raise NoModel(f"kind: refsim models {kind} at {list(archs or ())}; got arch {arch!r}")
    la, lb, lc = layouts(kind)
    D = _arith(kind, arch, unpack(kind, a, "a"), unpack(kind, b, "b"), unpack(kind, c, "c"))
    return _pack1(lc, D, _BITS[kind.dtype])


# ----------------------------------------------------------------------------------------------
# adversarial inputs

FLOAT_CATEGORIES = ("random", "magnitudes", "cancel", "subnormal", "nearmax", "bigC", "cancelC", "zeros")
INT_CATEGORIES = ("random", "extremes", "bigC")


def categories(kind: MmaKind) -> tuple[str, ...]:
    """The input categories of ``kind`` (float or integer inputs)."""
    return INT_CATEGORIES if kind.atype in _INTS else FLOAT_CATEGORIES


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
    if category not in categories(kind):
        raise FormatRuleError(f"category: must be one of {list(categories(kind))} for {kind}; got {category!r}")
    K = kind.k
    sa, sb, sc = (tiles, 16, K), (tiles, K, 8), (tiles, 16, 8)
    if kind.atype in _INTS:
        def draw(t, shape):
            lo, hi = tensor_core._INT_RANGES[t]
            if category == "extremes":
                return rng.choice(np.array(sorted({lo, hi, 0, 1, max(lo, -1)}), np.int64), size=shape)
            return rng.integers(lo, hi + 1, shape)
        A, B = draw(kind.atype, sa).astype(_storage(kind.atype)), draw(kind.btype, sb).astype(_storage(kind.btype))
        if category == "bigC":
            C = rng.choice([-1, 1], sc) * (2**31 - rng.integers(1, 2**16, sc))
        else:
            C = rng.integers(-2**20, 2**20, sc)
        return A, B, C.astype(np.int32)
    ab = "cancel" if category == "cancel" else ("random" if category in ("bigC", "cancelC") else category)
    a = _values(kind.atype, ab, sa, rng)
    b = _values(kind.btype, ab, sb, rng)
    if category == "cancel":                   # A[i, k + K/2] = -A[i, k], B[k + K/2] = B[k]; one small t
        h = K // 2
        a[:, :, h:] = -a[:, :, :h]
        b[:, h:, :] = b[:, :h, :]
        a[:, :, 0] *= 2.0**-12
    A, B = _to_bits(kind.atype, a), _to_bits(kind.btype, b)
    if category == "bigC":
        c = np.sign(rng.standard_normal(sc)) * _format(kind.ctype)[1] * rng.uniform(2.0**-8, 2.0**-2, sc)
    elif category == "cancelC":                # C = -(sum of the exact products), rounded to C's type
        c = -np.matmul(_from_bits(kind.atype, A), _from_bits(kind.btype, B))
    elif category == "zeros":
        c = np.where(rng.random(sc) < 0.5, rng.choice([-0.0, 0.0], sc), rng.standard_normal(sc))
    elif category in ("subnormal",):
        c = np.zeros(sc)
    else:
        c = rng.standard_normal(sc)
    return A, B, _to_bits(kind.ctype, c)
