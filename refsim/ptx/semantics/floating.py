"""Floating-point instructions of PTX (f16, f16x2, bf16, bf16x2, f32, f64) as pure handlers.

Spec
----
values          bit patterns (f16/bf16 uint16; f32, f16x2, bf16x2 uint32; f64 uint64), decoded exactly
                to float64, computed by :mod:`refsim.arith.rounding` (exact rounding in every mode),
                encoded back. Packed x2 types apply the scalar rule to the low and the high half.
rounding        ``.rn`` (default when no modifier is written), ``.rz``, ``.rm``, ``.rp`` for f32/f64
                add/sub/mul/fma (and ``mad.rnd.f32`` = ``fma.rnd.f32``); f16/bf16 forms take ``.rn`` only
                (the ISA's syntax). div/rcp/sqrt: ``.rn`` (IEEE, exact). Everything the ISA calls
                approximate is refused: ``div.approx/.full``, ``rcp/sqrt.approx``, ``rsqrt``, ``ex2``,
                ``lg2``, ``sin``, ``cos``, ``tanh`` -> PtxUnsupportedError (no hardware-sourced model).
modifiers       ``.ftz``: subnormal inputs and results become sign-preserving zero (f32, f16); a result
                is flushed after rounding. ``.sat``: clamp to [0, 1], NaN -> +0.
NaN             NaN results of f16/bf16/f32 are the canonical NaN (0x7FFF / 0x7FFF / 0x7FFFFFFF: the
                ISA leaves single/half NaN bits unspecified; the canonical pattern is what NVIDIA GPUs
                write). f64 keeps IEEE payload propagation (quieted first NaN operand).
min/max         one NaN operand -> the other operand; both NaN, or any NaN with ``.NaN`` -> canonical NaN;
                -0 is taken as smaller than +0 (documented choice; IEEE 754-2019 minimum/maximum).
neg/abs         flip/clear the sign bit (``.ftz`` flushes a subnormal input first), NaN included.
contraction     PTX permits ptxas to fuse ``mul`` + ``add`` *without* a rounding modifier into one fma;
                refsim executes them as written (two roundings). Kernels under test should use ``.rn``
                (``__fmul_rn``/``__fadd_rn``) where the difference matters (docs/ptx_semantics.md).
source          PTX ISA 9.x, "Floating Point Instructions" (add, sub, mul, fma, mad, div, abs, neg, min,
                max, rcp, sqrt, testp, copysign) and "Half Precision Floating Point Instructions" (add, sub,
                mul, fma, neg, abs, min, max); each handler's ``isa`` names its section and anchor.
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fp, rounding
from refsim.ptx.semantics.cexpr import cast
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported

__all__ = ["decode", "encode", "flush_subnormal", "build", "elementwise", "bits_rn", "CANONICAL_NAN", "BUILDERS",
           "C_TWINS", "C_FORMS", "c_form"]

CANONICAL_NAN = fp.CANONICAL_NAN   # one definition: refsim.arith.fp
_BITS = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}
_MIN_NORMAL = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126, "f64": 2.0**-1022}
_ROUND = ("rn", "rz", "rm", "rp")


def decode(bits, t: str, *, ftz: bool = False) -> np.ndarray:
    """Bit patterns of scalar type ``t`` ('f16', 'bf16', 'f32', 'f64') -> exact float64 values."""
    u = np.asarray(bits)
    with np.errstate(invalid="ignore"):
        x = _decode(u, t)
    x = np.asarray(x, np.float64)
    return flush_subnormal(x, t) if ftz else x


def _decode(u: np.ndarray, t: str) -> np.ndarray:
    if t == "f16":
        x = (u.astype(np.uint64) & np.uint64(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float64)
    elif t == "bf16":
        x = ((u.astype(np.uint64) & np.uint64(0xFFFF)) << np.uint64(16)).astype(np.uint32).view(np.float32).astype(np.float64)
    elif t == "f32":
        x = (u.astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32).astype(np.float64)
    else:
        x = u.astype(np.uint64).view(np.float64)
    return x


def flush_subnormal(x: np.ndarray, t: str) -> np.ndarray:
    """``.ftz``: values of magnitude below the smallest normal of ``t`` become sign-preserving zero."""
    return np.where((np.abs(x) < _MIN_NORMAL[t]) & (x != 0), np.copysign(0.0, x), x)


def encode(x: np.ndarray, t: str) -> np.ndarray:
    """float64 values *representable in* ``t`` -> bit patterns (NaN -> the canonical NaN of ``t``;
    f64 keeps its NaN bits)."""
    x = np.asarray(x, np.float64)
    if t == "f64":
        return x.view(np.uint64).copy()
    with np.errstate(all="ignore"):
        if t == "f16":
            bits = x.astype(np.float16).view(np.uint16)
        elif t == "f32":
            bits = x.astype(np.float32).view(np.uint32)
        else:
            bits = (x.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(x), _BITS[t](CANONICAL_NAN[t]), bits).astype(_BITS[t])


def _scalar_type(t: str) -> str:
    return {"f16x2": "f16", "bf16x2": "bf16"}.get(t, t)


def _lanes(t: str):
    """(scalar type, lanes): packed x2 types are two 16-bit lanes of a 32-bit register."""
    return (_scalar_type(t), 2) if t.endswith("x2") else (t, 1)


def elementwise(t: str, scalar_fn):
    """Lift ``scalar_fn(*float64 arrays) -> float64 values representable in t`` to bit patterns."""
    st, lanes = _lanes(t)
    if lanes == 1:
        # an immediate source decodes to a 0-d value: broadcast it like a register over the threads
        return lambda *srcs: (encode(scalar_fn(*np.broadcast_arrays(*[np.asarray(decode(s, st)) for s in srcs])), st),)

    def packed(*srcs):
        halves = []
        for h in range(2):
            sh = np.uint32(16 * h)
            vals = [np.asarray(decode((np.asarray(s).astype(np.uint32) >> sh) & np.uint32(0xFFFF), st)) for s in srcs]
            halves.append(encode(scalar_fn(*np.broadcast_arrays(*vals)), st).astype(np.uint32))
        return ((halves[0] | (halves[1] << np.uint32(16))).astype(np.uint32),)

    return packed


_FMA16 = lambda a, b, c: fp.f16_fma(a, b, c, fused=True)  # noqa: E731
_FMA32 = lambda a, b, c: fp.f32_fma(a, b, c, fused=True)  # noqa: E731
_MINMAX16X2 = ("((uint32_t)(rt_fminmax((uint16_t){0}, (uint16_t){1}, %d, 1) | "
               "(rt_fminmax((uint16_t)({0} >> 16), (uint16_t)({1} >> 16), %d, 1) << 16)))")

#: The float forms both executors run, each paired with its C twin in one place:
#: (opcode, type) -> (modifiers: "rn?" none or .rn, "rn" exactly .rn, "" none; the C expression over
#: the sources {0} {1} {2}, calling refsim/native/ptx_runtime.h; the refsim.arith.fp RN primitive the
#: handler runs on the native dtype, or None where the handler takes the exact float64 path of
#: refsim.arith.rounding). A form not listed here (directed rounding, .ftz/.sat, bf16, f64, .NaN) is
#: defined by its handler alone; tests/ptx/compiled/test_conformance.py runs every row on both executors.
C_TWINS = {
    ("add", "f32"): ("rn?", "rt_fadd({0}, {1})", fp.f32_add), ("sub", "f32"): ("rn?", "rt_fsub({0}, {1})", fp.f32_sub),
    ("mul", "f32"): ("rn?", "rt_fmul({0}, {1})", fp.f32_mul), ("fma", "f32"): ("rn", "rt_ffma({0}, {1}, {2})", _FMA32),
    ("mad", "f32"): ("rn", "rt_ffma({0}, {1}, {2})", None),
    ("add", "f16"): ("rn?", "rt_hadd({0}, {1})", fp.f16_add), ("sub", "f16"): ("rn?", "rt_hsub({0}, {1})", fp.f16_sub),
    ("mul", "f16"): ("rn?", "rt_hmul({0}, {1})", fp.f16_mul), ("fma", "f16"): ("rn", "rt_hfma({0}, {1}, {2})", _FMA16),
    ("add", "f16x2"): ("rn?", "RT_X2(rt_hadd, {0}, {1})", fp.f16_add),
    ("sub", "f16x2"): ("rn?", "RT_X2(rt_hsub, {0}, {1})", fp.f16_sub),
    ("mul", "f16x2"): ("rn?", "RT_X2(rt_hmul, {0}, {1})", fp.f16_mul),
    ("fma", "f16x2"): ("rn", "RT_X3(rt_hfma, {0}, {1}, {2})", _FMA16),
    ("div", "f32"): ("rn", "rt_fdiv({0}, {1})", None), ("rcp", "f32"): ("rn", "rt_fdiv(0x3F800000u, {0})", None),
    ("sqrt", "f32"): ("rn", "rt_fsqrt({0})", None),
    ("min", "f32"): ("", "rt_fminmax({0}, {1}, 0, 0)", None), ("max", "f32"): ("", "rt_fminmax({0}, {1}, 1, 0)", None),
    ("min", "f16"): ("", "((uint16_t)rt_fminmax({0}, {1}, 0, 1))", None),
    ("max", "f16"): ("", "((uint16_t)rt_fminmax({0}, {1}, 1, 1))", None),
    ("min", "f16x2"): ("", _MINMAX16X2 % (0, 0), None), ("max", "f16x2"): ("", _MINMAX16X2 % (1, 1), None),
}
_C_WIDTH = {"f32": 32, "f16": 16, "f16x2": 32}

# .rn without .ftz/.sat on f16/f32: straight to the RN primitives of refsim.arith.fp on the native
# dtype (the same values as the float64 path, tested against the Fraction twin; ~5x faster)
_FAST_RN = {key: prim for key, (_, _, prim) in C_TWINS.items() if prim is not None and key[1] != "f16x2"}


def bits_rn(t: str, prim):
    """Lift a native-dtype RN primitive to bit patterns of ``t`` (f16, f16x2 or f32)."""
    st, lanes = _lanes(t)
    ftype, utype = (np.float16, np.uint16) if st == "f16" else (np.float32, np.uint32)
    nan = utype(CANONICAL_NAN[st])

    def run(*vals):
        r = prim(*vals)
        return np.where(np.isnan(r), nan, r.view(utype)).astype(utype)

    if lanes == 1:
        return lambda *srcs: (run(*[np.asarray(x).astype(utype).view(ftype) for x in srcs]),)

    def packed(*srcs):
        shape = np.broadcast_shapes(*(np.shape(x) for x in srcs))
        halves = []
        for x in srcs:
            u = np.broadcast_to(np.asarray(x).astype(np.uint32), shape)
            halves.append(np.stack([(u & np.uint32(0xFFFF)), u >> np.uint32(16)]).astype(np.uint16).view(np.float16))
        r = run(*halves).astype(np.uint32)                                  # (2, ...) low, high
        return ((r[0] | (r[1] << np.uint32(16))).astype(np.uint32),)

    return packed


def _finish(x: np.ndarray, st: str, ftz: bool, sat: bool) -> np.ndarray:
    if ftz:
        x = flush_subnormal(x, st)
    if sat:
        x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
        x = np.where(x == 0, 0.0, x)  # -0 clamps to +0
    return x


def build(op: Op, arch: str) -> Handler:
    """Handler for a floating-point ``op`` (called by the opcode dispatchers of the table)."""
    if len(op.types) != 1:
        raise unsupported(op, "expects one floating-point type")
    t = op.types[0]
    st, _ = _lanes(t)
    if st not in _BITS:
        raise unsupported(op, f"type .{t} is not a floating-point type refsim executes")
    name = op.opcode
    mods = list(op.mods)
    rnd = [m for m in mods if m in _ROUND]
    if len(rnd) > 1:
        raise unsupported(op, "more than one rounding modifier")
    mode = rnd[0] if rnd else "rn"
    ftz, sat = "ftz" in mods, "sat" in mods
    rest = set(mods) - set(_ROUND) - {"ftz", "sat"}
    half = st in ("f16", "bf16")
    if half and mode != "rn":
        raise unsupported(op, f".{mode} is not a rounding mode of {name}.{t} (the ISA allows .rn only)")
    if ftz and st not in ("f32", "f16"):
        raise unsupported(op, ".ftz applies to .f32 and .f16 only")
    if sat and st not in ("f32", "f16"):
        raise unsupported(op, ".sat applies to .f32 and .f16 only")
    inputs = (lambda x: flush_subnormal(x, st)) if ftz else (lambda x: x)
    alu = lambda fn, n, sec: Handler(fn=elementwise(t, fn), dst_types=(t,), src_types=(t,) * n,  # noqa: E731
                                     kind="alu", isa=sec)
    sec = isa("half-precision-floating-point" if half else "floating-point", name)

    if name in ("add", "sub", "mul", "fma", "mad"):
        if rest:
            raise unsupported(op, f"modifier(s) {sorted(rest)} not supported")
        fast = _FAST_RN.get((name, st))
        if fast is not None and mode == "rn" and not ftz and not sat and (name != "fma" or rnd):
            return Handler(fn=bits_rn(t, fast), dst_types=(t,), src_types=(t,) * (3 if name == "fma" else 2),
                           kind="alu", isa=sec)
        if name == "mad":
            if st != "f32" and st != "f64":
                raise unsupported(op, "mad is defined for .f32/.f64 (use fma for half types)")
            if not rnd:
                raise unsupported(op, "mad without a rounding modifier is the sm_1x unfused form; refsim "
                                      "executes mad.rnd.f32/f64 (= fma.rnd) only")
        if name in ("add", "sub"):
            flip = np.negative if name == "sub" else np.positive   # a - b = a + (-b), signs of zeros included
            return alu(lambda a, b: _finish(rounding.fp_add(inputs(a), flip(inputs(b)), st, mode), st, ftz, sat), 2, sec)
        if name == "mul":
            return alu(lambda a, b: _finish(rounding.fp_mul(inputs(a), inputs(b), st, mode), st, ftz, sat), 2, sec)
        if name == "fma" and half and not rnd:
            raise unsupported(op, "fma on half types needs .rn")
        return alu(lambda a, b, c: _finish(rounding.fp_fma(inputs(a), inputs(b), inputs(c), st, mode), st, ftz, sat),
                   3, sec)

    if name in ("div", "rcp", "sqrt"):
        if rest or (name == "div" and half):
            why = f"modifier(s) {sorted(rest)}" if rest else "half-precision division"
            raise unsupported(op, f"{why}: approximate results are implementation-defined and refsim has no "
                                  f"hardware-sourced model (use the .rn form)")
        if not rnd or mode != "rn":
            raise unsupported(op, f"only the .rn form is executed exactly (directed {name} not implemented)")
        if name == "div":
            return alu(lambda a, b: _finish(rounding.fp_div(inputs(a), inputs(b), st), st, ftz, sat), 2, sec)
        if name == "rcp":
            return alu(lambda a: _finish(rounding.fp_div(np.ones_like(a), inputs(a), st), st, ftz, sat), 1, sec)
        return alu(lambda a: _finish(rounding.fp_sqrt(inputs(a), st), st, ftz, sat), 1, sec)

    if name in ("neg", "abs"):
        if rest or rnd or sat:
            raise unsupported(op, "neg/abs take .ftz only")
        st_bits = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[st]
        lanes = 2 if t.endswith("x2") else 1
        w = st_bits * lanes
        sign = sum(1 << (st_bits * (i + 1) - 1) for i in range(lanes))
        utype = {16: np.uint16, 32: np.uint32, 64: np.uint64}[w]

        exp_mask = {"f16": 0x7C00, "bf16": 0x7F80, "f32": 0x7F800000, "f64": 0x7FF0000000000000}[st]

        def bitfn(a):
            u = np.asarray(a).astype(utype)
            if ftz:  # a lane with a zero exponent field keeps only its sign bit
                for i in range(lanes):
                    sh = utype(st_bits * i)
                    lane = (u >> sh) & utype((1 << st_bits) - 1)
                    sub = (lane & utype(exp_mask)) == 0
                    keep = utype(((1 << (st_bits - 1)) << (st_bits * i)) | ~(((1 << st_bits) - 1) << (st_bits * i)) & ((1 << w) - 1))
                    u = np.where(sub, u & keep, u)
            return ((u ^ utype(sign)) if name == "neg" else (u & utype(~sign & ((1 << w) - 1))),)

        return Handler(fn=bitfn, dst_types=(t,), src_types=(t,), kind="alu", isa=sec)

    if name in ("min", "max"):
        nan_mod = "NaN" in rest
        if rest - {"NaN"}:
            raise unsupported(op, f"modifier(s) {sorted(rest - {'NaN'})} (e.g. .xorsign.abs) not supported")
        is_max = name == "max"

        def mm(a, b):
            a, b = inputs(a), inputs(b)
            with np.errstate(invalid="ignore"):
                neg_first = np.signbit(a) & ~np.signbit(b)  # a is -0/-x, b is +0/+x
                a_less = (a < b) | ((a == b) & neg_first)
                r = np.where(a_less != is_max, a, b)
            na, nb = np.isnan(a), np.isnan(b)
            r = np.where(na & ~nb, b, np.where(nb & ~na, a, r))
            r = np.where((na & nb) | ((na | nb) & nan_mod), np.nan, r)
            return _finish(r, st, ftz, False)

        return alu(mm, 2, sec)

    if name == "copysign":
        if st not in ("f32", "f64") or mods:
            raise unsupported(op, "copysign is defined for .f32/.f64 without modifiers")
        return alu(lambda a, b: np.copysign(np.where(np.isnan(b), np.nan, b), a), 2, sec)

    if name == "testp":
        kinds = [m for m in mods if m in ("finite", "infinite", "number", "notanumber", "normal", "subnormal")]
        if len(kinds) != 1 or len(mods) != 1 or st not in ("f32", "f64"):
            raise unsupported(op, "needs one of .finite/.infinite/.number/.notanumber/.normal/.subnormal on .f32/.f64")
        k = kinds[0]

        def test(a):
            x = decode(a, st)
            ax = np.abs(x)
            r = {"finite": np.isfinite(x), "infinite": np.isinf(x), "number": ~np.isnan(x),
                 "notanumber": np.isnan(x), "normal": np.isfinite(x) & (ax >= _MIN_NORMAL[st]),
                 "subnormal": (ax < _MIN_NORMAL[st]) & (x != 0)}[k]
            return (np.asarray(r, bool),)

        return Handler(fn=test, dst_types=("pred",), src_types=(t,), kind="alu", isa=sec)

    raise unsupported(op, f"{name} on .{t} is not executed by refsim (approximate or unsupported)")


def _build_float_only(op: Op, arch: str) -> Handler:
    return build(op, arch)


#: opcode -> handler builder of this family (refsim.ptx.semantics.table assembles the one table)
BUILDERS = {
    "fma": _build_float_only, "rcp": _build_float_only, "sqrt": _build_float_only, "rsqrt": _build_float_only,
    "ex2": _build_float_only, "lg2": _build_float_only, "sin": _build_float_only, "cos": _build_float_only,
    "tanh": _build_float_only, "testp": _build_float_only, "copysign": _build_float_only,
}


# ----------------------------------------------------------------------------------------------
# the C forms of this family (refsim.ptx.semantics.cexpr): the rows of C_TWINS, and neg/abs as the
# sign-bit operations they are; None leaves a form to its handler


def c_form(op: Op, s):
    """The C destinations of a float ``op`` over source expressions ``s`` (see C_TWINS), or None."""
    t = op.types[0]
    if op.opcode in ("neg", "abs"):
        return _c_negabs(t, op.opcode, "ftz" in op.mods, s[0])
    row = C_TWINS.get((op.opcode, t))
    if row is None:
        return None
    rule, expr, _ = row
    mods = set(op.mods)
    if not {"rn?": mods <= {"rn"}, "rn": mods == {"rn"}, "": not mods}[rule]:
        return None
    return [(expr.format(*s), _C_WIDTH[t])]


def _c_negabs(t: str, name: str, ftz: bool, a: str):
    lanes, st = (2, t[:-2]) if t.endswith("x2") else (1, t)
    if st not in ("f16", "bf16", "f32", "f64"):
        return None
    sb = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[st]
    w = sb * lanes
    exp = {"f16": 0x7C00, "bf16": 0x7F80, "f32": 0x7F800000, "f64": 0x7FF0000000000000}[st]
    sign = sum(1 << (sb * (i + 1) - 1) for i in range(lanes))
    v = f"((uint64_t){a})"
    if ftz:               # a lane whose exponent field is zero keeps only its sign bit
        for i in range(lanes):
            lane_exp, lane = exp << (sb * i), ((1 << sb) - 1) << (sb * i)
            keep = (1 << (sb * (i + 1) - 1)) | (((1 << w) - 1) & ~lane)
            v = f"(({v} & {lane_exp:#x}ull) == 0 ? ({v} & {keep:#x}ull) : {v})"
    r = f"{v} ^ {sign:#x}ull" if name == "neg" else f"{v} & {((1 << w) - 1) & ~sign:#x}ull"
    return [(cast(w, r), w)]


#: opcode -> (the modifiers its C reads, its C form); the float forms of add/sub/mul/mad/div/abs/neg/
#: min/max come here through the integer family's C forms, as their handlers do
C_FORMS = {name: ({"rn"}, lambda op, s, _: c_form(op, s)) for name in ("fma", "rcp", "sqrt")}
