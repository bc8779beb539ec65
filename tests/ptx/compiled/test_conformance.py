"""Conformance tables through both executors: every ALU form of refsim.ptx.semantics that the
compiled path translates (and a sample of those it hands back to the handler), on bit patterns full
of specials, must give the interpreter's bits. Tables transcribed from the ISA's forms: all 256 lop3
immediates, every prmt mode, bfe/bfi, shifts, integer arithmetic, comparisons, floating point
(.rn, .ftz, NaN/Inf/-0), and every cvt between the integer and float types. The engine forms
refsim.ptx.control defines as expressions (mov's pack/unpack, cvta, isspacep, createpolicy) on the
edges of the generic windows, against values worked from the address map of docs/ptx.md."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.compiled.alu import alu
from refsim.ptx.semantics import Op
from refsim.ptx.semantics.floating import C_TWINS
from conftest_compiled import HEAD, alu_module, bit_patterns, needs_compiled, run_both

pytestmark = needs_compiled

THREADS = 160


def _check(cases, seed: int):
    m = ptx.Module(alu_module(cases))
    words = bit_patterns(THREADS, seed)
    out = np.zeros((THREADS, len(cases)), np.uint64)
    run_both(m, "k", 1, THREADS, [words, out])


def test_lop3_every_immediate():
    _check([("b32", f"lop3.b32 {{d}}, %ra, %rb, %rc, {imm};") for imm in range(256)], 1)


def test_prmt_every_mode_and_bit_fields():
    cases = [("b32", f"prmt.b32{m} {{d}}, %ra, %rb, %rc;") for m in ("", ".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16")]
    cases += [("b32", f"bfe.{t}32 {{d}}, %ra, %rb, %rc;") for t in "us"]
    cases += [("b64", f"bfe.{t}64 {{d}}, %da, %rb, %rc;") for t in "us"]
    cases += [("b32", "bfi.b32 {d}, %ra, %rb, %rc, %rd;"), ("b64", "bfi.b64 {d}, %da, %db, %rc, %rd;")]
    _check(cases, 2)


_W = {16: ("b16", "h"), 32: ("b32", "r"), 64: ("b64", "d")}


def test_integer_arithmetic_shifts_and_logic():
    cases = []
    for w, (kind, r) in _W.items():
        for t in (f"s{w}", f"u{w}"):
            cases += [(kind, f"{op}.{t} {{d}}, %{r}a, %{r}b;") for op in ("add", "sub", "min", "max")]
            cases += [(kind, f"{op}.{t} {{d}}, %{r}a, %{r}b;") for op in ("div", "rem")]
            cases += [(kind, f"mul.{p}.{t} {{d}}, %{r}a, %{r}b;") for p in ("lo", "hi")]
            cases += [(kind, f"shr.{t} {{d}}, %{r}a, %rb;"), ("pred", f"setp.ge.{t} {{d}}, %{r}a, %{r}b;")]
        cases += [(kind, f"{op}.s{w} {{d}}, %{r}a;") for op in ("abs", "neg")]
        cases += [(kind, f"shl.b{w} {{d}}, %{r}a, %rb;"), (kind, f"not.b{w} {{d}}, %{r}a;"),
                  (kind, f"cnot.b{w} {{d}}, %{r}a;")]
        cases += [(kind, f"{op}.b{w} {{d}}, %{r}a, %{r}b;") for op in ("and", "or", "xor")]
        cases += [("pred", f"setp.{c}.s{w} {{d}}, %{r}a, %{r}b;") for c in ("eq", "ne", "lt", "le", "gt")]
        cases += [("pred", f"setp.{c}.u{w} {{d}}, %{r}a, %{r}b;") for c in ("lo", "ls", "hi", "hs")]
        cases.append((kind, f"selp.b{w} {{d}}, %{r}a, %{r}b, %pc;"))
    for w in (16, 32):
        kind2 = _W[2 * w][0]
        r = _W[w][1]
        cases += [(kind2, f"mul.wide.{t}{w} {{d}}, %{r}a, %{r}b;") for t in "su"]
    cases += [("b32", f"mad.{p}.{t}32 {{d}}, %ra, %rb, %rc;") for p in ("lo", "hi") for t in "su"]
    cases += [("b64", f"mad.wide.{t}32 {{d}}, %ra, %rb, %dc;") for t in "su"]
    cases += [("b32", "add.sat.s32 {d}, %ra, %rb;"), ("b32", "sub.sat.s32 {d}, %ra, %rb;"),
              ("b32", "mad.hi.sat.s32 {d}, %ra, %rb, %rc;"), ("b32", "max.relu.s32 {d}, %ra, %rb;"),
              ("b32", "min.relu.s32 {d}, %ra, %rb;"), ("b32", "sad.u32 {d}, %ra, %rb, %rc;"),
              ("b32", "dp4a.u32.s32 {d}, %ra, %rb, %rc;")]
    cases += [("b32", f"{op}.b{w} {{d}}, %{_W[w][1]}a;") for op in ("popc", "clz") for w in (32, 64)]
    cases += [("b32", "brev.b32 {d}, %ra;"), ("b64", "brev.b64 {d}, %da;")]
    cases += [("b32", f"bfind{s}.{t}{w} {{d}}, %{_W[w][1]}a;") for s in ("", ".shiftamt") for t in "us" for w in (32, 64)]
    cases += [("b32", f"shf.{lr}.{m}.b32 {{d}}, %ra, %rb, %rc;") for lr in "lr" for m in ("clamp", "wrap")]
    cases += [("pred", f"{op}.pred {{d}}, %pa, %pb;") for op in ("and", "or", "xor")] + [("pred", "not.pred {d}, %pa;")]
    cases += [("pred", f"setp.lt.{b}.s32 {{d}}, %ra, %rb, %pc;") for b in ("and", "or", "xor")]
    cases += [("pred", "setp.ne.and.s32 {d}, %ra, %rb, !%pc;")]
    _check(cases, 3)


_FCMP = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")


def test_floating_point_rn_forms_specials_and_comparisons():
    cases = []
    for t, kind, r in (("f32", "b32", "r"), ("f16", "b16", "h"), ("f16x2", "b32", "r")):
        cases += [(kind, f"{op}.rn.{t} {{d}}, %{r}a, %{r}b;") for op in ("add", "sub", "mul")]
        cases += [(kind, f"{op}.{t} {{d}}, %{r}a, %{r}b;") for op in ("add", "min", "max")]
        cases += [(kind, f"fma.rn.{t} {{d}}, %{r}a, %{r}b, %{r}c;"), (kind, f"neg.{t} {{d}}, %{r}a;"),
                  (kind, f"abs.{t} {{d}}, %{r}a;"), (kind, f"neg.ftz.{t} {{d}}, %{r}a;"), (kind, f"abs.ftz.{t} {{d}}, %{r}a;")]
    cases += [("b32", f"{op}.rn.f32 {{d}}, %ra, %rb;") for op in ("div",)]
    cases += [("b32", f"{op}.rn.f32 {{d}}, %ra;") for op in ("rcp", "sqrt")]
    cases += [("b32", "mad.rn.f32 {d}, %ra, %rb, %rc;"), ("b64", "neg.f64 {d}, %da;"), ("b64", "abs.f64 {d}, %da;"),
              ("b16", "neg.bf16 {d}, %ha;"), ("b32", "abs.bf16x2 {d}, %ra;")]
    # forms the compiled path hands to the handler: directed rounding, .ftz/.sat, bf16, f64, .NaN
    cases += [("b32", "add.rz.f32 {d}, %ra, %rb;"), ("b32", "mul.rm.ftz.f32 {d}, %ra, %rb;"),
              ("b32", "fma.rp.sat.f32 {d}, %ra, %rb, %rc;"), ("b16", "add.rn.bf16 {d}, %ha, %hb;"),
              ("b64", "fma.rn.f64 {d}, %da, %db, %dc;"), ("b32", "max.NaN.f32 {d}, %ra, %rb;"),
              ("b32", "min.ftz.f32 {d}, %ra, %rb;"), ("b32", "copysign.f32 {d}, %ra, %rb;"),
              ("pred", "testp.subnormal.f32 {d}, %ra;"), ("b32", "add.ftz.f16x2 {d}, %ra, %rb;")]
    for t, r in (("f32", "r"), ("f16", "h"), ("f64", "d"), ("bf16", "h")):
        cases += [("pred", f"setp.{c}.{t} {{d}}, %{r}a, %{r}b;") for c in _FCMP]
    cases += [("pred", f"setp.{c}.ftz.f32 {{d}}, %ra, %rb;") for c in ("eq", "lt", "geu")]
    cases += [("pred", f"setp.{c}.ftz.f16 {{d}}, %ha, %hb;") for c in ("eq", "ltu")]
    _check(cases, 4)


def test_every_float_twin_of_the_semantics_table_runs_bit_identically():
    """One case per row of floating.C_TWINS (the table pairing each float form's model with its C twin),
    each checked to compile to that row's C, all run through both executors on specials."""
    reg = {"f32": ("b32", "r"), "f16": ("b16", "h"), "f16x2": ("b32", "r")}
    cases = []
    for (name, t), (rule, expr, _) in C_TWINS.items():
        n = 1 + max(int(c) for c in "012" if "{" + c + "}" in expr)
        mods = ("rn",) if rule else ()
        assert alu(Op(name, mods, (t,)), list("abc"[:n]), [("reg", "%r1")] * n)[0][0] == expr.format(*"abc"), (name, t)
        kind, r = reg[t]
        srcs = ", ".join(f"%{r}{x}" for x in "abc"[:n])
        cases.append((kind, f"{name}{''.join('.' + m for m in mods)}.{t} {{d}}, {srcs};"))
    assert len(cases) == len(C_TWINS) >= 20
    _check(cases, 7)


_INTS = {"u8": ("b16", "h"), "s8": ("b16", "h"), "u16": ("b16", "h"), "s16": ("b16", "h"),
         "u32": ("b32", "r"), "s32": ("b32", "r"), "u64": ("b64", "d"), "s64": ("b64", "d")}
_FLOATS = {"f16": ("b16", "h"), "bf16": ("b16", "h"), "f32": ("b32", "r"), "f64": ("b64", "d")}


@pytest.mark.parametrize("part", ["int", "float"])


def test_cvt_between_every_pair_of_types(part):
    cases = []
    if part == "int":
        for (dt, (dk, _)), (st, (_, sr)) in itertools.product(_INTS.items(), _INTS.items()):
            cases += [(dk, f"cvt{sat}.{dt}.{st} {{d}}, %{sr}a;") for sat in ("", ".sat")]
    else:
        for (dt, (dk, _)), (st, (_, sr)) in itertools.product(_INTS.items(), _FLOATS.items()):
            if st == "bf16":
                continue
            cases += [(dk, f"cvt.{rnd}.{dt}.{st} {{d}}, %{sr}a;") for rnd in ("rni", "rzi", "rmi", "rpi")]
            if st == "f32":
                cases.append((dk, f"cvt.rmi.ftz.{dt}.f32 {{d}}, %ra;"))
        for (dt, (dk, _)), (st, (_, sr)) in itertools.product(_FLOATS.items(), _INTS.items()):
            cases += [(dk, f"cvt.{rnd}.{dt}.{st} {{d}}, %{sr}a;") for rnd in ("rn", "rz")]
        for (dt, (dk, _)), (st, (_, sr)) in itertools.product(_FLOATS.items(), _FLOATS.items()):
            if dt != st:
                cases += [(dk, f"cvt.{rnd}.{dt}.{st} {{d}}, %{sr}a;") for rnd in ("rn", "rm")]
        cases += [("b32", "cvt.f32.f16 {d}, %ha;"), ("b32", "cvt.f32.bf16 {d}, %ha;"), ("b64", "cvt.f64.f32 {d}, %ra;"),
                  ("b32", "cvt.rn.f16x2.f32 {d}, %ra, %rb;"), ("b32", "cvt.rn.bf16x2.f32 {d}, %ra, %rb;"),
                  ("b32", "cvt.rz.relu.f16x2.f32 {d}, %ra, %rb;"), ("b16", "cvt.rn.satfinite.f16.f32 {d}, %ra;"),
                  ("b32", "cvt.rni.f32.f32 {d}, %ra;"), ("b32", "cvt.ftz.sat.f32.f16 {d}, %ha;")]
    _check(cases, 5 if part == "int" else 6)


def _f32(x: float) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


def test_fma_and_narrowing_round_once_where_a_double_rounding_would_not():
    # exact a*b + c = 1 + 2^-24 + 2^-70: above the midpoint, RN gives 1 + 2^-23; a float64 evaluation
    # rounds to the midpoint first and ties to 1.0 (the case of tests/arith/test_fp.py)
    a, b, c = _f32(1 + 2.0**-23), _f32(1 - 2.0**-24), _f32(2.0**-47 * (1 + 2.0**-23))
    d64 = int(np.array([1 + 2.0**-11 + 2.0**-40]).view(np.uint64)[0])       # f16 midpoint + 2^-40
    words = np.tile(np.array([a, b, c, d64], np.uint64), (32, 1))
    cases = [("b32", "fma.rn.f32 {d}, %ra, %rb, %rc;"), ("b32", "mad.rn.f32 {d}, %ra, %rb, %rc;"),
             ("b16", "cvt.rn.f16.f64 {d}, %dd;")]
    m = ptx.Module(alu_module(cases))
    out = np.zeros((32, len(cases)), np.uint64)
    _, got, _ = run_both(m, "k", 1, 32, [words, out])
    expected = [_f32(1 + 2.0**-23)] * 2 + [int(np.array([1 + 2.0**-10], np.float16).view(np.uint16)[0])]
    assert (got[1] == np.array(expected, np.uint64)).all()


def test_fp16_conversions_for_every_half_and_a_million_floats():
    rng = np.random.default_rng(7)
    n = 65536
    f32 = rng.integers(0, 2**32, n, dtype=np.uint64)
    f32[: n // 2] = (rng.standard_normal(n // 2) * 2.0 ** rng.integers(-27, 18, n // 2)).astype(np.float32).view(np.uint32)
    f64 = (rng.standard_normal(n) * 2.0 ** rng.integers(-27, 18, n)).view(np.uint64)
    words = np.stack([np.arange(n, dtype=np.uint64), f32, f64, np.arange(n, dtype=np.uint64)[::-1]], axis=1)
    cases = [("b32", "cvt.f32.f16 {d}, %ha;"), ("b16", "cvt.rn.f16.f32 {d}, %rb;"), ("b16", "cvt.rn.f16.f64 {d}, %dc;"),
             ("b16", "add.rn.f16 {d}, %ha, %hd;"), ("b16", "mul.rn.f16 {d}, %ha, %hd;"),
             ("b16", "fma.rn.f16 {d}, %ha, %hd, %ha;")]
    m = ptx.Module(alu_module(cases))
    out = np.zeros((n, len(cases)), np.uint64)
    _, (_, got), _ = run_both(m, "k", 64, 1024, [words, out])
    with np.errstate(all="ignore"):                                  # the fp16 casts, against NumPy's
        half = np.arange(n, dtype=np.uint16).view(np.float16)
        want = [half.astype(np.float32).view(np.uint32), f32.astype(np.uint32).view(np.float32).astype(np.float16).view(np.uint16),
                f64.view(np.float64).astype(np.float16).view(np.uint16)]
    for j, w in enumerate(want):
        nan = np.isnan(w.view(np.float32 if j == 0 else np.float16))
        assert (got[~nan, j] == w[~nan]).all(), f"case {cases[j][1]}"


def test_carry_chains_run_their_handler_with_the_carry_flag():
    cases = []
    for t, kind, r in (("u32", "b32", "r"), ("s64", "b64", "d")):
        cases += [(kind, f"add.cc.{t} {{d}}, %{r}a, %{r}b;"), (kind, f"addc.{t} {{d}}, %{r}c, %{r}d;"),
                  (kind, f"sub.cc.{t} {{d}}, %{r}a, %{r}b;"), (kind, f"subc.cc.{t} {{d}}, %{r}c, %{r}d;"),
                  (kind, f"subc.{t} {{d}}, %{r}a, %{r}d;"), (kind, f"mad.lo.cc.{t} {{d}}, %{r}a, %{r}b, %{r}c;"),
                  (kind, f"madc.hi.{t} {{d}}, %{r}a, %{r}b, %{r}c;")]
    _check(cases, 8)


def test_shfl_and_vote_edge_cases_give_the_plain_loop_transcription_on_both_executors():
    """shfl.sync / vote.sync, whose C is derived from refsim.ptx.semantics.warp.SHFL / VOTE: b >= 32 and c
    with segment-mask bits (random words and the specials 31..256), immediate c of width-8 segments,
    lanes made inactive by a guard or left out of their own membermask; each result equals the ISA's
    plain-loop transcription (warp.shfl_reference; vote by hand), and the two executors agree bit for bit."""
    from refsim.ptx.semantics import warp

    shfl_forms = []                          # (case text, c operand, membermask operand, guard)
    for mode in ("up", "down", "bfly", "idx"):
        shfl_forms += [(mode, "%rc", "-1", "@%pa "), (mode, "%rc", "%rd", ""), (mode, "0x181f", "-1", ""),
                       (mode, "0x1800", "-1", "@%pa ")]
    cases = []
    for mode, c, mask, guard in shfl_forms:
        cases.append(("b32", f"mov.b32 {{d}}, 7;\n{guard}shfl.sync.{mode}.b32 {{d}}, %ra, %rb, {c}, {mask};"))
        cases.append(("pred", f"setp.ne.u32 {{d}}, %ra, %ra;\n{guard}shfl.sync.{mode}.b32 %tmp|{{d}}, %ra, %rb, {c}, {mask};"))
    vote_forms = [(m, g, mask) for m in ("all", "any", "uni", "ballot") for g, mask in (("@%pa ", "-1"), ("", "%rd"))]
    for mode, guard, mask in vote_forms:
        kind, init = ("b32", "mov.b32 {d}, 7;") if mode == "ballot" else ("pred", "setp.ne.u32 {d}, %ra, %ra;")
        cases.append((kind, f"{init}\n{guard}vote.sync.{mode}.{'b32' if mode == 'ballot' else 'pred'} {{d}}, !%pb, {mask};"))
    m = ptx.Module(alu_module(cases))
    words = bit_patterns(THREADS, 11)
    words[::3, 1] = np.uint64(0xFFFFFFFF00000000) | np.arange(0, THREADS, 3, dtype=np.uint64) % 70  # b near 32 and 64
    _, (_, out), _ = run_both(m, "k", 1, THREADS, [words, np.zeros((THREADS, len(cases)), np.uint64)])
    lo = (words & np.uint64(0xFFFFFFFF)).astype(np.int64)
    for w in range(THREADS // 32):
        rows = slice(32 * w, 32 * w + 32)
        a, b, cr, rd = (lo[rows, k].tolist() for k in range(4))
        pa = [x & 1 == 1 for x in a]
        pb = [x & 1 == 1 for x in b]
        for k, (mode, c, mask, guard) in enumerate(shfl_forms):
            cv = cr if c == "%rc" else [int(c, 16)] * 32
            d, p = warp.shfl_reference(mode, a, b, cv)
            on = [(not guard or pa[l]) and (mask == "-1" or (rd[l] >> l) & 1 == 1) for l in range(32)]
            assert out[rows, 2 * k].tolist() == [d[l] if on[l] else 7 for l in range(32)], (mode, c, mask, guard)
            assert out[rows, 2 * k + 1].tolist() == [int(p[l]) if on[l] else 0 for l in range(32)], (mode, c, mask, guard)
        for k, (mode, guard, mask) in enumerate(vote_forms):
            on = [(not guard or pa[l]) and (mask == "-1" or (rd[l] >> l) & 1 == 1) for l in range(32)]
            votes = [not pb[l] for l in range(32) if on[l]]
            r = {"all": int(all(votes)), "any": int(any(votes)), "uni": int(all(votes) or not any(votes)),
                 "ballot": sum(1 << l for l in range(32) if on[l] and not pb[l])}[mode]
            assert out[rows, 2 * len(shfl_forms) + k].tolist() == [r if on[l] else (7 if mode == "ballot" else 0)
                                                                     for l in range(32)], (mode, guard, mask)


# ---------------------------------------------------------------------------------------------- atom / red
# (op, type): rows (old, b, c, new) worked by hand from the PTX ISA's atom text (c: cas only); f32 on
# global memory flushes subnormal inputs and results (the ISA's "current implementation"), f16/f16x2 .noftz
# keep them; NaN results are the canonical NaN.
_F32_SHARED_DIFFERS = {0x00000001: 0x00000001, 0x80000001: 0x80000001, 0x00C00000: 0x00400000}
_ATOMIC_ROWS = {
    ("and", "b32"): [(0xF0F0F0F0, 0xFF00FF00, 0, 0xF000F000), (0xFFFFFFFF, 0, 0, 0), (0xFFFFFFFF, 0x80000001, 0, 0x80000001)],
    ("or", "b32"): [(0xF0F0F0F0, 0x0F0F0F0F, 0, 0xFFFFFFFF), (0, 0, 0, 0), (0x80000000, 1, 0, 0x80000001)],
    ("xor", "b32"): [(0xFFFFFFFF, 0x0F0F0F0F, 0, 0xF0F0F0F0), (0x12345678, 0x12345678, 0, 0)],
    ("and", "b64"): [(0xF0F0F0F000000001, 0x0FFFFFFF00000003, 0, 0x00F0F0F000000001)],
    ("or", "b64"): [(0x8000000000000000, 0x00000000FFFFFFFF, 0, 0x80000000FFFFFFFF)],
    ("xor", "b64"): [(2**64 - 1, 0x100000000, 0, 0xFFFFFFFEFFFFFFFF)],
    ("exch", "b32"): [(7, 0xFFFFFFFF, 0, 0xFFFFFFFF), (0xDEADBEEF, 0, 0, 0)],
    ("exch", "b64"): [(1, 0x8000000000000005, 0, 0x8000000000000005)],
    ("cas", "b32"): [(5, 5, 9, 9), (6, 5, 9, 6), (0xFFFFFFFF, 0xFFFFFFFF, 0, 0), (0, 0x80000000, 1, 0)],
    ("cas", "b64"): [(2**40 + 1, 2**40 + 1, 2**63, 2**63), (2**32 + 5, 5, 9, 2**32 + 5), (0, 0, 2**64 - 1, 2**64 - 1)],
    ("add", "u32"): [(0xFFFFFFFF, 2, 0, 1), (0x80000000, 0x80000000, 0, 0), (1, 2, 0, 3)],
    ("add", "s32"): [(0x7FFFFFFF, 1, 0, 0x80000000), (0xFFFFFFFF, 0xFFFFFFFF, 0, 0xFFFFFFFE),
                     (0x80000000, 0xFFFFFFFF, 0, 0x7FFFFFFF)],
    ("add", "u64"): [(2**64 - 1, 3, 0, 2), (0xFFFFFFFF, 1, 0, 0x100000000)],
    ("add", "s64"): [(2**63 - 1, 1, 0, 2**63), (2**63, 2**64 - 1, 0, 2**63 - 1)],
    ("min", "s32"): [(0x80000000, 0x7FFFFFFF, 0, 0x80000000), (0xFFFFFFFF, 0, 0, 0xFFFFFFFF),
                     (0x7FFFFFFF, 0x80000000, 0, 0x80000000), (5, 3, 0, 3)],
    ("max", "s32"): [(0x80000000, 0xFFFFFFFF, 0, 0xFFFFFFFF), (0x7FFFFFFF, 0x80000000, 0, 0x7FFFFFFF), (0xFFFFFFFF, 0, 0, 0)],
    ("min", "u32"): [(0x80000000, 0x7FFFFFFF, 0, 0x7FFFFFFF), (0xFFFFFFFF, 0, 0, 0)],
    ("max", "u32"): [(0xFFFFFFFF, 0, 0, 0xFFFFFFFF), (0x80000000, 0x7FFFFFFF, 0, 0x80000000)],
    ("min", "s64"): [(2**63, 2**63 - 1, 0, 2**63), (2**64 - 1, 0, 0, 2**64 - 1), (0xFFFFFFFF, 2**32, 0, 0xFFFFFFFF)],
    ("max", "s64"): [(2**63, 2**64 - 1, 0, 2**64 - 1), (2**63 - 1, 2**63, 0, 2**63 - 1), (0x80000000, 0x7FFFFFFF, 0, 0x80000000)],
    ("min", "u64"): [(2**63, 1, 0, 1), (2**32, 0xFFFFFFFF, 0, 0xFFFFFFFF)],
    ("max", "u64"): [(2**63, 2**63 - 1, 0, 2**63), (2**64 - 1, 0, 0, 2**64 - 1)],
    ("inc", "u32"): [(4, 5, 0, 5), (5, 5, 0, 0), (9, 5, 0, 0), (0xFFFFFFFF, 0xFFFFFFFF, 0, 0),     # old >= b ? 0 : old + 1
                     (0xFFFFFFFE, 0xFFFFFFFF, 0, 0xFFFFFFFF), (0, 0, 0, 0), (0x80000000, 0xFFFFFFFF, 0, 0x80000001)],
    ("dec", "u32"): [(0, 5, 0, 5), (9, 5, 0, 5), (3, 5, 0, 2), (0, 0xFFFFFFFF, 0, 0xFFFFFFFF),   # old == 0 or old > b ? b
                     (1, 0, 0, 0), (0, 0, 0, 0), (0x80000000, 0xFFFFFFFF, 0, 0x7FFFFFFF)],        # : old - 1
    ("add", "f32"): [(0x3F800000, 0x33800000, 0, 0x3F800000), (0x3F800001, 0x33800000, 0, 0x3F800002),  # ties to even
                     (0x3F800000, 0x33800001, 0, 0x3F800001), (0x7FC00001, 0x3F800000, 0, 0x7FFFFFFF),
                     (0x7F800000, 0xFF800000, 0, 0x7FFFFFFF), (0x80000000, 0x80000000, 0, 0x80000000),
                     (0x80000000, 0, 0, 0), (0x7F7FFFFF, 0x7F7FFFFF, 0, 0x7F800000),
                     (0x00000001, 0, 0, 0), (0x80000001, 0x80000000, 0, 0x80000000),             # flushed (global)
                     (0x00C00000, 0x80800000, 0, 0)],                                               # 2^-127 flushed
    ("add.noftz", "f16"): [(0x3C00, 0x1000, 0, 0x3C00), (0x3C01, 0x1000, 0, 0x3C02), (0x3C00, 0x1001, 0, 0x3C01),
                           (0x7E01, 0x3C00, 0, 0x7FFF), (0x7C00, 0xFC00, 0, 0x7FFF), (0x8000, 0x8000, 0, 0x8000),
                           (0x8000, 0, 0, 0), (0x0001, 0x0001, 0, 0x0002), (0x7BFF, 0x7BFF, 0, 0x7C00),
                           (0x0400, 0x8001, 0, 0x03FF)],
    ("add.noftz", "f16x2"): [(0x80003C00, 0x80001000, 0, 0x80003C00), (0x7E013C00, 0x00003C00, 0, 0x7FFF4000),
                             (0x00010000, 0x80000001, 0, 0x00010001), (0x3C008000, 0xBC000000, 0, 0),
                             (0x7BFF0400, 0x7BFF8001, 0, 0x7C0003FF), (0xFC000001, 0x7C000001, 0, 0x7FFF0002)],
}
_ROWS = max(len(r) for r in _ATOMIC_ROWS.values())
_WIDTH = {"b32": 32, "b64": 64, "u32": 32, "s32": 32, "u64": 64, "s64": 64, "f32": 32, "f16": 16, "f16x2": 32}
_REG = {16: "%h", 32: "%r", 64: "%rd"}


def _atomic_module() -> str:
    """k(mem, mem2, b, c, out): case j, thread t: slot (j, t) of 8 bytes in each array; atom on mem (its old
    value to out), red on mem2."""
    lines = [HEAD + ".visible .entry k(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3, .param .u64 p4)",
             "{", ".reg .b16 %h<3>;", ".reg .b32 %r<3>, %t;", ".reg .b64 %rd<3>, %a<5>, %off;",
             "mov.u32 %t, %tid.x;", "mul.wide.u32 %off, %t, 8;"]
    for i in range(5):
        lines += [f"ld.param.u64 %a{i}, [p{i}];", f"cvta.to.global.u64 %a{i}, %a{i};", f"add.s64 %a{i}, %a{i}, %off;"]
    for j, (op, t) in enumerate(_ATOMIC_ROWS):
        w, off = _WIDTH[t], 8 * _ROWS * j
        r, u = _REG[w], f"u{w}"
        c = f", {r}2" if op == "cas" else ""
        lines += [f"ld.global.{u} {r}1, [%a2+{off}];", f"ld.global.{u} {r}2, [%a3+{off}];",
                  f"atom.global.{op}.{t} {r}0, [%a0+{off}], {r}1{c};", f"st.global.{u} [%a4+{off}], {r}0;",
                  f"red.global.{op}.{t} [%a1+{off}], {r}1{c};"]
    return "\n".join(lines + ["ret;", "}"]) + "\n"


def test_every_atomic_form_on_edge_values_through_both_executors():
    """Each (op, type) the compiled executor generates (semantics.atomic.c_apply) against hand-worked
    values: wrap at 2^32/2^64, signed min/max at INT_MIN, the inc/dec wrap rules, cas hit and miss (a
    64-bit miss in the high word), f32 ties/NaN/Inf/-0 and the global flush, f16/f16x2 lanes with
    NaN, -0 and subnormals; red stores the same values, atom also returns the old one."""
    cases = list(_ATOMIC_ROWS.values())
    rows = [[r[i % len(r)] for i in range(_ROWS)] for r in cases]          # pad: repeat a case's rows
    old, b, c, new = (np.array([[x[k] for x in rr] for rr in rows], np.uint64) for k in range(4))
    out = np.zeros_like(old)
    _, (mem, mem2, _, _, got_old), _ = run_both(ptx.Module(_atomic_module()), "k", 1, _ROWS,
                                               [old, old.copy(), b, c, out])
    for j, key in enumerate(_ATOMIC_ROWS):
        assert mem[j].tolist() == new[j].tolist(), key
        assert mem2[j].tolist() == new[j].tolist(), key
        assert got_old[j].tolist() == old[j].tolist(), key


def test_f32_atomic_add_flushes_on_global_memory_only_through_both_executors():
    """atom.shared.add.f32 and a generic atom.add.f32 into the shared window keep subnormals; a generic
    one into global memory flushes them (semantics.atomic's space rule, chosen per access at run time)."""
    rows = _ATOMIC_ROWS[("add", "f32")]
    n = len(rows)
    text = (HEAD + ".visible .entry k(.param .u64 p0, .param .u64 p1, .param .u64 p2)\n{\n"
            ".shared .align 4 .b32 s[64];\n.reg .b32 %r<4>, %t;\n.reg .b64 %a<3>, %off, %s, %g;\n"
            "mov.u32 %t, %tid.x;\nmul.wide.u32 %off, %t, 4;\n"
            + "".join(f"ld.param.u64 %a{i}, [p{i}];\ncvta.to.global.u64 %a{i}, %a{i};\nadd.s64 %a{i}, %a{i}, %off;\n"
                      for i in range(3))
            + "mov.u64 %s, s;\nadd.s64 %s, %s, %off;\ncvta.shared.u64 %g, %s;\n"
            "ld.global.u32 %r1, [%a0];\nld.global.u32 %r2, [%a1];\n"
            "st.shared.u32 [%s], %r1;\natom.shared.add.f32 %r3, [%s], %r2;\nld.shared.u32 %r3, [%s];\n"
            f"st.global.u32 [%a2], %r3;\nst.shared.u32 [%s+{4 * n}], %r1;\n"
            f"add.s64 %g, %g, {4 * n};\natom.add.f32 %r3, [%g], %r2;\nld.shared.u32 %r3, [%s+{4 * n}];\n"
            f"st.global.u32 [%a2+{4 * n}], %r3;\n"
            "cvta.global.u64 %g, %a0;\natom.add.f32 %r3, [%g], %r2;\nret;\n}\n")
    old = np.array([r[0] for r in rows], np.uint32)
    b = np.array([r[1] for r in rows], np.uint32)
    out = np.zeros(2 * n, np.uint32)
    _, (mem, _, got), _ = run_both(ptx.Module(text), "k", 1, n, [old, b, out])
    flushed = [r[3] for r in rows]
    kept = [_F32_SHARED_DIFFERS.get(r[0], r[3]) for r in rows]
    assert got[:n].tolist() == kept and got[n:].tolist() == kept
    assert mem.tolist() == flushed and kept != flushed
# the generic windows of docs/ptx.md's address map, written out (not read from refsim.ptx.memory)
_SW, _LW, _WB = 0x1_0000_0000, 0x2_0000_0000, 0x1_0000_0000
_EDGES = [0, 0x10, _SW - 1, _SW, _SW + 1, _SW + _WB - 1, _LW, _LW + 0x123, _LW + _WB - 1, _LW + _WB,
          1 << 40, 2**63, 2**64 - 1, 0xFFFF_FFFF]


def _control_cases():
    """(kind, PTX, expected(a, b, c, d) on the four input words as Python ints) of every derived form
    (braces of vector operands doubled: the PTX is a format string of ``{d}``)."""
    m32, m64 = 2**32 - 1, 2**64 - 1
    cases = []
    for space, base in (("shared", _SW), ("local", _LW)):
        cases += [("b64", f"cvta.to.{space}.u64 {{d}}, %da;", lambda a, b, c, d, base=base: (a - base) & m64),
                  ("b64", f"cvta.{space}.u64 {{d}}, %da;", lambda a, b, c, d, base=base: (a + base) & m64),
                  ("b32", f"cvta.to.{space}.u32 {{d}}, %ra;", lambda a, b, c, d, base=base: ((a & m32) - base) & m32),
                  ("b32", f"cvta.{space}.u32 {{d}}, %ra;", lambda a, b, c, d, base=base: ((a & m32) + base) & m32)]
        cases.append(("pred", f"isspacep.{space} {{d}}, %da;",
                      lambda a, b, c, d, base=base: int(base <= a < base + _WB)))
    outside = lambda a, b, c, d: int(not (_SW <= a < _SW + _WB or _LW <= a < _LW + _WB))  # noqa: E731
    cases += [("pred", "isspacep.global {d}, %da;", outside), ("pred", "isspacep.const {d}, %da;", outside),
              ("pred", "isspacep.param {d}, %da;", lambda a, b, c, d: 0),
              ("b64", "cvta.to.global.u64 {d}, %da;", lambda a, b, c, d: a),
              ("b64", "createpolicy.fractional.L2::evict_last.b64 {d}, 1.0;", lambda a, b, c, d: 0),
              ("b32", "mov.b32 {d}, %rb;", lambda a, b, c, d: b & m32)]
    h = lambda x, i: (x >> (16 * i)) & 0xFFFF        # noqa: E731   16-bit part i of a word
    y = lambda x, i: (x >> (8 * i)) & 0xFF           # noqa: E731   byte i
    cases += [  # pack: part 0 in the lowest bits
        ("b32", "mov.b32 {d}, {{%ha, %hb}};", lambda a, b, c, d: h(b, 0) << 16 | h(a, 0)),
        ("b64", "mov.b64 {d}, {{%ra, %rb}};", lambda a, b, c, d: (b & m32) << 32 | (a & m32)),
        ("b64", "mov.b64 {d}, {{%ha, %hb, %hc, %hd}};",
         lambda a, b, c, d: h(d, 0) << 48 | h(c, 0) << 32 | h(b, 0) << 16 | h(a, 0)),
        # unpack into 2 and 4 parts, repacked in another order
        ("b64", ".reg .b32 %x<2>; mov.b64 {{%x0, %x1}}, %da; mov.b64 {d}, {{%x1, %x0}};",
         lambda a, b, c, d: (a & m32) << 32 | a >> 32),
        ("b64", ".reg .b16 %y<4>; mov.b64 {{%y0, %y1, %y2, %y3}}, %da; mov.b64 {d}, {{%y2, %y0, %y3, %y1}};",
         lambda a, b, c, d: h(a, 1) << 48 | h(a, 3) << 32 | h(a, 0) << 16 | h(a, 2)),
        ("b32", ".reg .b8 %z<4>; mov.b32 {{%z0, %z1, %z2, %z3}}, %rb; mov.b32 {d}, {{%z3, %z2, %z1, %z0}};",
         lambda a, b, c, d: y(b, 0) << 24 | y(b, 1) << 16 | y(b, 2) << 8 | y(b, 3)),
        ("b16", ".reg .b8 %w<2>; mov.b16 {{%w0, %w1}}, %hc; mov.b16 {d}, {{%w1, %w0}};",
         lambda a, b, c, d: y(c, 0) << 8 | y(c, 1)),
    ]
    return cases


def test_the_engine_forms_control_defines_as_expressions_on_the_window_edges():
    from refsim.ptx.compiled.translate import translate

    cases = _control_cases()
    m = ptx.Module(alu_module([(kind, text) for kind, text, _ in cases]))
    tr = translate(m._kernel("k"), m._lookup("k", "sm_80"), m._parsed.globals)
    ins = m._kernel("k").instructions
    assert tr.reason is None                              # every form compiled to C, none runs Python
    assert {ins[i].opcode for i in tr.callbacks} <= {"ret", "exit"}          # (the exits: Launch.exit_threads)
    words = bit_patterns(64, 9)
    words[: len(_EDGES), 0] = _EDGES                     # %da (and %ra, its low half) on the window edges
    out = np.zeros((64, len(cases)), np.uint64)
    _, (_, got), _ = run_both(m, "k", 1, 64, [words, out])
    for j, (_, text, want) in enumerate(cases):
        expected = [want(*map(int, row)) for row in words]
        assert got[:, j].tolist() == expected, text
