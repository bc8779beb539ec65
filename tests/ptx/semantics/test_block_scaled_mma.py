"""refsim/ptx/semantics/block_scaled_mma.py: the sm_120a mma .kind:: forms, their scale selection against the
PTX ISA's "Block Scaling" rules, and the kernels of tests/ptx/kernels/block_scaled_mma.cu through both
executors, bit-equal to refsim.arith.block_scaled on operands scattered here from the ISA's fragment maps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from refsim import ptx
from refsim.arith import block_scaled
from refsim.ptx.semantics import Op, lookup
from refsim.ptx.semantics import block_scaled_mma as bsm

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
PTX = (KERNELS / "block_scaled_mma.ptx").read_text()

# ------------------------------------------------------------------ the ISA's maps, transcribed here
# "Matrix Fragments for mma.m16n8k32 / m16n8k64" (g = %laneid >> 2, t = %laneid % 4), element i of a lane
# lives in register i // per_reg at sub-position i % per_reg (low bits first)


def _a_k32(g, t, i):
    return (g if (i < 4 or 8 <= i < 12) else g + 8), t * 4 + (i & 3) + (16 if i >= 8 else 0)


def _b_k32(g, t, i):
    return t * 4 + (i & 3) + (16 if i >= 4 else 0), g


def _a_k64(g, t, i):
    return (g if (i < 8 or 16 <= i < 24) else g + 8), t * 8 + (i & 7) + (32 if i >= 16 else 0)


def _b_k64(g, t, i):
    return t * 8 + (i & 7) + (32 if i >= 8 else 0), g


def _c(g, t, i):
    return g + (8 if i >= 2 else 0), 2 * t + (i & 1)


def _scatter(regs, n_regs, per_reg, where, shape, bits):
    """One warp's registers (32 * n_regs uint32, lane-major) -> matrix of sub-words (bits wide)."""
    out = np.zeros(shape, np.int64)
    for lane in range(32):
        for i in range(n_regs * per_reg):
            word = int(regs[lane * n_regs + i // per_reg])
            out[where(lane >> 2, lane % 4, i)] = (word >> (bits * (i % per_reg))) & ((1 << bits) - 1)
    return out


def _container(byte, t):
    # ISA: e2m1 in the central 4 bits, e3m2/e2m3 in the lower 6 bits of an 8-bit container
    return {"e2m1": (byte >> 2) & 0xF, "e3m2": byte & 0x3F, "e2m3": byte & 0x3F}.get(t, byte)


def _scales_a(data, blocks, byte_id, tid):
    """scale_A (16, blocks): the thread-pair tid of each quad, first lane row groupID, second groupID + 8."""
    out = np.zeros((16, blocks), np.uint8)
    for lane in range(32):
        if (lane % 4) // 2 == tid:
            for j in range(blocks):
                out[lane // 4 + 8 * (lane % 2), j] = (int(data[lane]) >> (8 * (byte_id + j))) & 0xFF
    return out


def _scales_b(data, blocks, byte_id, tid):
    """scale_B (blocks, 8): thread tid of quad n gives column n."""
    out = np.zeros((blocks, 8), np.uint8)
    for lane in range(32):
        if lane % 4 == tid:
            for j in range(blocks):
                out[j, lane // 4] = (int(data[lane]) >> (8 * (byte_id + j))) & 0xFF
    return out


# kernel -> (kind, shape, atype, btype, scale_vec, (byte-id-a, thread-id-a), (byte-id-b, thread-id-b)), as its asm says
KINDS = {
    "f8f6f4_e3m2_e2m1": ("f8f6f4", "m16n8k32", "e3m2", "e2m1", None, None, None),
    "mxf8f6f4_e2m3_e4m3": ("mxf8f6f4", "m16n8k32", "e2m3", "e4m3", "1X", (3, 1), (1, 2)),
    "mxf4_2x": ("mxf4", "m16n8k64", "e2m1", "e2m1", "2X", (2, 0), (0, 3)),
    "mxf4nvf4_2x": ("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", "2X", (0, 1), (2, 1)),
    "mxf4nvf4_4x": ("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", "4X", (0, 0), (0, 0)),
}


def _operands(kernel, warps, seed):
    """Random registers of ``warps`` warps (scale bytes from a moderate range, a few NaN codes left in)."""
    kind, *_ , vec, _sa, _sb = KINDS[kernel]
    rng = np.random.default_rng(seed)
    T = 32 * warps
    a = rng.integers(0, 2**32, 4 * T, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 2 * T, dtype=np.uint64).astype(np.uint32)
    c = (rng.standard_normal(4 * T) * 2.0 ** rng.integers(-8, 9, 4 * T)).astype(np.float32)
    lo, hi = (0x20, 0x48) if vec == "4X" else (117, 138)         # ue4m3 0.03..2.0 / ue8m0 2^-10..2^10
    sf = rng.integers(lo, hi, (2 * T, 4)).astype(np.uint8).view("<u4").reshape(-1).astype(np.uint32)
    return a, b, c, sf


def _expected(kernel, a, b, c, sf, warps):
    """D registers (4 per lane, lane-major) from refsim.arith.block_scaled on the operands scattered here."""
    kind, shape, at, bt, vec, sel_a, sel_b = KINDS[kernel]
    k64 = shape == "m16n8k64"
    out = np.zeros(4 * 32 * warps, np.uint32)
    for w in range(warps):
        ra, rb = a[128 * w:128 * (w + 1)], b[64 * w:64 * (w + 1)]
        rc = c[128 * w:128 * (w + 1)].view(np.uint32)
        if k64:
            A = _scatter(ra, 4, 8, _a_k64, (16, 64), 4).astype(np.uint8)
            B = _scatter(rb, 2, 8, _b_k64, (64, 8), 4).astype(np.uint8)
        else:
            A = np.vectorize(lambda v: _container(v, at))(_scatter(ra, 4, 4, _a_k32, (16, 32), 8)).astype(np.uint8)
            B = np.vectorize(lambda v: _container(v, bt))(_scatter(rb, 2, 4, _b_k32, (32, 8), 8)).astype(np.uint8)
        C = _scatter(rc, 4, 1, _c, (16, 8), 32).astype(np.uint32).view(np.float32)
        SA = SB = None
        if vec:
            blocks = {"1X": 1, "2X": 2, "4X": 4}[vec]
            SA = _scales_a(sf[64 * w:64 * (w + 1):2], blocks, *sel_a)
            SB = _scales_b(sf[64 * w + 1:64 * (w + 1):2], blocks, *sel_b)
        D = block_scaled.mma_block_scaled(kind, shape, at, bt, A, B, C, SA, SB, vec).view(np.uint32)
        for lane in range(32):
            for i in range(4):
                out[128 * w + 4 * lane + i] = D[_c(lane >> 2, lane % 4, i)]
    return out


@pytest.fixture(scope="module")
def module():
    return ptx.Module(PTX)


def test_the_kernels_load_on_their_sm_120a_target(module):
    assert module.target == "sm_120a" and module.unsupported == {} and set(module.kernels) == set(KINDS)
    assert {k: n for k, n in module.instruction_mix("mxf4nvf4_4x").items() if n and k.startswith("mma")} == {
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3": 1}


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
@pytest.mark.parametrize("kernel", sorted(KINDS))
def test_each_kind_equals_the_block_scaled_model_bit_for_bit(module, kernel, executor):
    a, b, c, sf = _operands(kernel, 2, seed=sorted(KINDS).index(kernel))
    d = np.zeros(4 * 64, np.float32)
    module.launch(kernel, 2, 32, [a, b, c, sf, d], arch="sm_120a", executor=executor)
    want = _expected(kernel, a, b, c, sf, 2)
    got = d.view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{kernel} ({executor}): {bad.size} of {got.size} differ; first at register {bad[0]}: "
                           f"{got[bad[0]]:#010x} != {want[bad[0]]:#010x}")
    assert np.isfinite(d).mean() > 0.5                      # the operands exercise real sums, not only NaN


def test_the_selected_scale_bytes_and_no_other_reach_the_product(module):
    # every unselected byte of every lane set to NaN (0xFF): the result stays finite only if none is read
    kernel = "mxf8f6f4_e2m3_e4m3"
    a, b, c, _ = _operands(kernel, 1, seed=7)
    b = np.full_like(b, 0x38383838)                        # e4m3 1.0 everywhere: no NaN element
    sf = np.full(64, 0xFFFFFFFF, np.uint32)
    lanes_a = [4 * (m % 8) + 2 + m // 8 for m in range(16)]   # thread-id-a 1
    lanes_b = [4 * n + 2 for n in range(8)]                    # thread-id-b 2
    for lane in lanes_a:
        sf[2 * lane] = 0x7FFFFFFF                               # byte 3 = 2^0
    for lane in lanes_b:
        sf[2 * lane + 1] = 0xFFFF7FFF                           # byte 1 = 2^0
    d = np.zeros(128, np.float32)
    module.launch(kernel, 1, 32, [a, b, c, sf, d], arch="sm_120a", executor="interpreter")
    assert np.isfinite(d).all()
    assert (d.view(np.uint32) == _expected(kernel, a, b, c, sf, 1)).all()


@pytest.mark.parametrize("vec", ["1X", "2X", "4X"])
def test_scale_matrix_equals_its_plain_reference_for_every_defined_selector(vec):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 2**32, (1, 32), dtype=np.uint64).astype(np.uint32)
    blocks, byte_ids, tids_a, tids_b = bsm.SELECTORS[vec]
    for byte_id in byte_ids:
        for operand, tids in (("a", tids_a), ("b", tids_b)):
            for tid in tids:
                got = bsm.scale_matrix(data, operand, vec, byte_id, tid)[0]
                ref = bsm.scale_matrix_reference([int(x) for x in data[0]], operand, vec, byte_id, tid)
                mine = (_scales_a if operand == "a" else _scales_b)(data[0], blocks, byte_id, tid)
                assert got.tolist() == ref == mine.tolist(), (vec, operand, byte_id, tid)


def test_the_scale_lanes_are_the_isa_figures():
    # Figure 43 (thread-id-a 0): lanes 0 and 1 of quad g give rows g and g + 8; Figure 44 (thread-id-b 3):
    # lane 4n + 3 gives column n
    data = np.arange(32, dtype=np.uint32)[None, :]                    # lane number in byte 0
    assert bsm.scale_matrix(data, "a", "1X", 0, 0)[0, :, 0].tolist() == [0, 4, 8, 12, 16, 20, 24, 28,
                                                                        1, 5, 9, 13, 17, 21, 25, 29]
    assert bsm.scale_matrix(data, "a", "1X", 0, 1)[0, :, 0].tolist() == [2, 6, 10, 14, 18, 22, 26, 30,
                                                                        3, 7, 11, 15, 19, 23, 27, 31]
    assert bsm.scale_matrix(data, "b", "1X", 0, 3)[0, 0].tolist() == [3, 7, 11, 15, 19, 23, 27, 31]
    word = np.full((1, 32), 0x44332211, np.uint32)                    # Figure 45: bytes low to high = K blocks
    assert bsm.scale_matrix(word, "a", "2X", 2, 0)[0, 0].tolist() == [0x33, 0x44]
    assert bsm.scale_matrix(word, "b", "4X", 0, 0)[0, :, 0].tolist() == [0x11, 0x22, 0x33, 0x44]


@pytest.mark.parametrize("vec, operand, sel", [("1X", "a", (4, 0)), ("1X", "a", (0, 2)), ("2X", "b", (1, 0)),
                                               ("4X", "a", (2, 0)), ("1X", "b", (0, 4))])
def test_undefined_selectors_are_refused(vec, operand, sel):
    with pytest.raises(ptx.PtxUnsupportedError, match=rf"thread-id-{operand}\}}: scale_vec::{vec} .*Table 37.*"
                                                      rf"got \{{{sel[0]}, {sel[1]}\}}"):
        bsm.scale_matrix(np.zeros((1, 32), np.uint32), operand, vec, *sel)


def test_an_undefined_selector_in_a_kernel_is_refused_when_it_runs():
    m = ptx.Module(PTX.replace("%r7, {2, 0}, %r8, {0, 3}", "%r7, {1, 0}, %r8, {0, 3}"))
    a, b, c, sf = _operands("mxf4_2x", 1, 0)
    for executor in ("interpreter", "compiled"):
        with pytest.raises(ptx.PtxUnsupportedError, match=r"scale_vec::2X takes byte-id in \[0, 2\]"):
            m.launch("mxf4_2x", 1, 32, [a, b, c, sf, np.zeros(128, np.float32)], arch="sm_120a", executor=executor)


def test_selectors_that_differ_between_lanes_are_refused():
    h = lookup(Op("mma", ("sync", "aligned", "m16n8k32", "row", "col", "kind::mxf8f6f4", "block_scale"),
                  ("f32", "e4m3", "e4m3", "f32", "ue8m0")), arch="sm_120a")
    z = lambda n: np.zeros((1, 32, n), np.uint32)    # noqa: E731
    sel = z(2)
    sel[0, 5, 1] = 1
    with pytest.raises(ptx.PtxUnsupportedError, match=r"\{byte-id-a, thread-id-a\} differ between the lanes"):
        h.fn(z(4), z(2), z(4), z(1), sel, z(1), z(2))


def test_the_forms_run_on_sm_120a_only():
    m = ptx.Module(PTX)
    a, b, c, sf = _operands("mxf4_2x", 1, 0)
    with pytest.raises(ptx.PtxUnsupportedError, match=r"sm_120a instruction .* got arch sm_120 \(launch with "
                                                      r"arch='sm_120a'\)"):
        m.launch("mxf4_2x", 1, 32, [a, b, c, sf, np.zeros(128, np.float32)], arch="sm_120")
    plain = ptx.Module(PTX.replace(".target sm_120a", ".target sm_120"))
    assert all("is an sm_120a instruction" in why for why in plain.unsupported.values())
    assert set(plain.unsupported) == set(KINDS)


REFUSED = [  # (mods after sync.aligned, types, the reason)
    (("m16n8k32", "row", "col", "kind::f8f6f4"), ("f16", "e4m3", "e4m3", "f16"), r"f32 C and D only"),
    (("m16n8k64", "row", "col", "kind::mxf4nvf4", "block_scale"), ("f32", "e2m1", "e2m1", "f32", "ue8m0"),
     r"needs \.scale_vec::<X> \(one of \['2X', '4X'\]\)"),
    (("m16n8k64", "row", "col", "kind::mxf4nvf4", "block_scale", "scale_vec::4X"),
     ("f32", "e2m1", "e2m1", "f32", "ue8m0"), r"scale_vec::4X takes \.ue4m3 scales; got \.ue8m0"),
    (("m16n8k32", "row", "col", "kind::mxf4", "block_scale"), ("f32", "e2m1", "e2m1", "f32", "ue8m0"),
     r"has shape m16n8k64; got m16n8k32"),
    (("m16n8k32", "row", "col", "kind::mxf8f6f4"), ("f32", "e4m3", "e4m3", "f32"), r"needs \.block_scale"),
    (("m16n8k32", "row", "col", "kind::f8f6f4", "block_scale"), ("f32", "e4m3", "e4m3", "f32"),
     r"takes no \.block_scale"),
    (("m16n8k64", "row", "col", "kind::mxf4", "block_scale"), ("f32", "e4m3", "e2m1", "f32", "ue8m0"),
     r"takes \.atype/\.btype in \['e2m1'\]"),
    (("m16n8k32", "row", "col", "kind::i8f4"), ("f32", "e4m3", "e4m3", "f32"), r"no model of \.kind::i8f4"),
    (("m16n8k32", "col", "row", "kind::f8f6f4"), ("f32", "e4m3", "e4m3", "f32"), r"refsim executes mma"),
]


@pytest.mark.parametrize("mods, types, why", REFUSED)
def test_forms_refsim_does_not_model_are_refused_with_the_reason(mods, types, why):
    with pytest.raises(ptx.PtxUnsupportedError, match=why):
        lookup(Op("mma", ("sync", "aligned") + mods, types), arch="sm_120a")


def test_sm_120s_ordinary_mma_kinds_are_refused_naming_the_missing_model():
    with pytest.raises(ptx.PtxUnsupportedError, match=r"no m16n8k16 tensor-core model for sm_120 .*\.kind:: forms only"):
        lookup(Op("mma", ("sync", "aligned", "m16n8k16", "row", "col"), ("f32", "f16", "f16", "f32")), arch="sm_120a")
