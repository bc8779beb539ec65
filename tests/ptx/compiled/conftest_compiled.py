"""Helpers of the compiled-path tests (tests/ptx/compiled/conftest.py puts this folder on sys.path).

run_both: Run one launch through both executors of refsim.ptx and require the same outcome, bit for bit.

``run_both(module, kernel, grid, block, args, expect_error=False, **launch_options)`` copies every
array argument, runs the NumPy interpreter (the reference) on one copy and the compiled path
(``executor="compiled"``) on the other, and asserts: the same exception class and message (and an
exception exactly when ``expect_error``), or the same ``LaunchStats`` (every counter and the
per-opcode dict, in first-execution order) and the same bytes in every array afterwards. Returns the
compiled run's (stats, arrays, error).

alu_module / bit_patterns: Small PTX kernels for the conformance tables: per thread, 4 input words, one output slot per case.

``alu_module(cases)`` builds a kernel ``k(in, out)``: thread t (of the whole grid) reads four 64-bit words
``in[t, 0..3]`` into ``%da %db %dc %dd`` (b64), their low halves ``%ra %rb %rc %rd`` (b32), low
quarters ``%ha %hb %hc %hd`` (b16), low bytes' bit 0 ``%pa %pb %pc %pd`` (pred), and runs each case:
a line with ``{d}`` for its destination, e.g. ``"lop3.b32 {d}, %ra, %rb, %rc, 0x96;"`` with
destination class ``"b32"``. Case j stores its destination, zero-extended, at ``out[t, j]`` (8 bytes;
predicates as 0/1). ``bit_patterns(n, seed)`` draws (n, 4) uint64 words mixing specials (zeros,
infinities and NaNs of f16/f32/f64 in the low bits, integer extremes) with random words.

translated / template: The C of one kernel without building it.

``translated(body)`` translates kernel ``k(.param .u64 pout, .param .u32 n)`` whose body (registers
%r<8> b32, %rd<8> b64, %p<3> pred declared) is ``body``; ``template(tr, idx)`` is the C function
instruction ``idx`` runs (the body between its braces).
"""

from __future__ import annotations

import numpy as np

import pytest

from refsim import ptx

_LAUNCH = ptx.Module.launch        # the method itself (callers may wrap Module.launch with run_both)


def _why_not_here() -> str | None:
    """Why this machine has no compiled path by choice or by lack of a compiler (None: it must have
    one, and a runtime that fails to build then fails the tests instead of skipping them)."""
    from refsim import native
    from refsim.errors import ToolchainError
    from refsim.native import build

    if native.disabled():
        return "REFSIM_NATIVE=0"
    try:
        build.find_compiler()
    except ToolchainError as e:
        return str(e)
    return None


_WHY = _why_not_here()
#: skips a test that compares with the compiled path where it cannot run (REFSIM_NATIVE=0, no compiler)
needs_compiled = pytest.mark.skipif(_WHY is not None, reason=f"the compiled path is unavailable here: {_WHY}")


def _run(module, kernel, grid, block, args, executor, options):
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        stats = _LAUNCH(module, kernel, grid, block, arrays, executor=executor, **options)
        return stats, None, arrays
    except Exception as e:  # the outcome under comparison, whatever the error family
        return None, e, arrays


def run_both(module, kernel, grid, block, args, *, expect_error: bool = False, **options):
    si, ei, ai = _run(module, kernel, grid, block, args, "interpreter", options)
    sc, ec, ac = _run(module, kernel, grid, block, args, "compiled", options)
    assert (type(ec), str(ec)) == (type(ei), str(ei)), f"errors differ:\n interpreter {ei!r}\n compiled    {ec!r}"
    assert expect_error == (ei is not None), f"the launch {'succeeded' if ei is None else f'raised {ei!r}'}"
    if ei is None:
        assert sc == si, f"statistics differ:\n interpreter {si}\n compiled    {sc}"
        assert list(sc.opcodes) == list(si.opcodes), "opcode counts in another first-execution order"
        for j, (x, y) in enumerate(zip(ai, ac)):
            if isinstance(x, np.ndarray):
                assert x.tobytes() == y.tobytes(), (
                    f"argument {j} differs at bytes {np.flatnonzero(x.view(np.uint8) != y.view(np.uint8))[:8].tolist()}")
    return sc, ac, ec



HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
_STORE = {"b16": "st.global.u16", "b32": "st.global.u32", "b64": "st.global.u64"}


def alu_module(cases: list[tuple[str, str]]) -> str:
    """PTX text of the conformance kernel ``k`` (see the module docstring)."""
    lines = [HEAD + ".visible .entry k(.param .u64 pin, .param .u64 pout)\n{",
             ".reg .pred %pa, %pb, %pc, %pd;", ".reg .b16 %ha, %hb, %hc, %hd;", ".reg .b32 %ra, %rb, %rc, %rd, %t;",
             ".reg .b64 %da, %db, %dc, %dd, %in, %out, %off;", ".reg .b32 %tmp;",
             "ld.param.u64 %in, [pin];", "ld.param.u64 %out, [pout];", "mov.u32 %t, %ctaid.x;",
             "mov.u32 %tmp, %ntid.x;", "mul.lo.s32 %t, %t, %tmp;", "mov.u32 %tmp, %tid.x;", "add.s32 %t, %t, %tmp;",
             "mul.wide.u32 %off, %t, 32;", "add.s64 %in, %in, %off;",
             f"mul.wide.u32 %off, %t, {8 * len(cases)};", "add.s64 %out, %out, %off;",
             "ld.global.v2.u64 {%da, %db}, [%in];", "ld.global.v2.u64 {%dc, %dd}, [%in+16];"]
    for x in "abcd":
        lines += [f"cvt.u32.u64 %r{x}, %d{x};", f"cvt.u16.u64 %h{x}, %d{x};", f"and.b32 %tmp, %r{x}, 1;",
                  f"setp.ne.u32 %p{x}, %tmp, 0;"]
    for j, (kind, text) in enumerate(cases):
        if kind == "pred":
            lines += [".reg .pred %q" + str(j) + ";", text.format(d=f"%q{j}"),
                      f"selp.u32 %tmp, 1, 0, %q{j};", f"st.global.u32 [%out+{8 * j}], %tmp;"]
        else:
            lines += [f".reg .{kind} %o{j};", text.format(d=f"%o{j}"), f"{_STORE[kind]} [%out+{8 * j}], %o{j};"]
    lines += ["ret;", "}"]
    return "\n".join(lines) + "\n"


_F32 = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
        0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00001, 0x4B800000, 0xCF000000,
        0x4F000000, 0x5F000000, 0x477FE000, 0x477FF000, 0x33800000, 0x33000000, 0x38800000, 0x3F000000]
_F16 = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
        0xFE01, 0x3800, 0x5BFF, 0x7BFE]
_F64 = [0x0, 0x8000000000000000, 0x3FF0000000000000, 0x7FF0000000000000, 0xFFF8000000000000, 0x1,
        0x43E0000000000000, 0xC3E0000000000000, 0x7FEFFFFFFFFFFFFF, 0x41DFFFFFFFC00000, 0x3FE0000000000000]
_INT = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1, 0xFF, 0x80, 0x7F, 0xFFFF, 0x8000, 31, 32, 33,
        63, 64, 65, 255, 256]


def bit_patterns(n: int, seed: int) -> np.ndarray:
    """(n, 4) uint64 words: specials of every type in the low bits mixed with random words."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**64, (n, 4), dtype=np.uint64)
    specials = [np.uint64(v) for v in _INT + _F64]
    specials += [np.uint64(v | (int(rng.integers(0, 2**32)) << 32)) for v in _F32]
    specials += [np.uint64(v | (int(rng.integers(0, 2**48)) << 16)) for v in _F16]
    pick = rng.random((n, 4)) < 0.6
    choice = rng.integers(0, len(specials), (n, 4))
    return np.where(pick, np.array(specials, np.uint64)[choice], words)


def translated(body: str):
    from refsim.ptx.compiled.translate import translate

    m = ptx.Module(".version 8.0\n.target sm_80\n.address_size 64\n"
                   ".visible .entry k(.param .u64 pout, .param .u32 n)\n{\n"
                   ".reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<3>;\n" + body + "\n}\n")
    return translate(m._kernel("k"), m._lookup("k", "sm_80"), m._parsed.globals)


def template(tr, idx: int) -> str:
    import re

    table = re.search(r"TABLE\[\d+\]\)\(.*?\) = \{\n    (.*?)\n\};", tr.source, re.S).group(1).split(", ")
    name = table[idx]
    head = f"static int {name}(rt_state *S, const rt_desc *D, const int32_t *th, int32_t n) {{\n"
    start = tr.source.index(head) + len(head)
    return tr.source[start:tr.source.index("\n}\n", start)]
