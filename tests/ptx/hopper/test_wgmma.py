"""refsim.ptx.hopper.wgmma: the sm_90a kernels of tests/ptx/kernels/wgmma.cu through both executors, bit
for bit equal to each other and to refsim.arith.wgmma on the operands read back from the shared-memory
image (refsim.formats.smem_layouts), plus the refusals and the race=True findings."""

from __future__ import annotations

import functools
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx
from refsim.arith import wgmma as aw
from refsim.formats import smem_layouts as sl

pytestmark = needs_compiled
KERNELS = Path(__file__).parents[1] / "kernels"
SMEM = 32768


@functools.lru_cache(maxsize=None)
def text() -> str:
    return (KERNELS / "wgmma.ptx").read_text()


@functools.lru_cache(maxsize=None)
def module(src: str | None = None) -> ptx.Module:
    return ptx.Module(text() if src is None else src)


def image(*placed) -> np.ndarray:
    """The shared-memory image (SMEM bytes) holding each (matrix, descriptor) where it names it."""
    img = np.zeros(SMEM, np.uint8)
    for m, d in placed:
        img |= sl.smem_from_matrix(m, d, smem_size=SMEM)
    return img


def k_major(start: int, swizzle: str, row_bytes: int) -> int:
    """A K-major descriptor for an operand whose rows are ``row_bytes`` (<= the swizzle row) long."""
    if swizzle == "none":    # core matrices: 8 rows x 16 bytes, K-adjacent ones 128 bytes apart
        return sl.encode_descriptor(start, 128, 128 * (row_bytes // 16))
    w = {"32B": 32, "64B": 64, "128B": 128}[swizzle]
    return sl.encode_descriptor(start, 0, 8 * w, swizzle=swizzle)


def f16(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float16)


def back(img, d, rows, cols, dtype) -> np.ndarray:
    """The operand read back from the image (MN, K) as the descriptor names it."""
    return sl.matrix_from_smem(img, d, rows, cols, dtype)


def launch(kernel, args, *, src=None, expect_error=False, **opts):
    return run_both(module(src), kernel, (1, 1, 1), (128, 1, 1), args, arch="sm_90a", shared_bytes=SMEM,
                    expect_error=expect_error, **opts)


@pytest.mark.parametrize("swizzle, scale_d", [("128B", 1), ("128B", 0), ("64B", 1), ("32B", 1), ("none", 1)])
def test_f16_both_operands_from_descriptors(swizzle, scale_d):
    rng = np.random.default_rng(1 + scale_d)
    A, B = f16(rng, (64, 16)), f16(rng, (64, 16))                  # B as wgmma reads it: (N, K), K-major
    da, db = k_major(0, swizzle, 32), k_major(8192, swizzle, 32)
    img = image((A, da), (B, db))
    C = rng.standard_normal((64, 64)).astype(np.float32)
    D = np.zeros((64, 64), np.float32)
    _, out, _ = launch("wgmma_f16_ss", [img, SMEM, da, db, C, D, scale_d])
    a, b = back(img, da, 64, 16, np.float16), back(img, db, 64, 16, np.float16)
    assert np.array_equal(a, A) and np.array_equal(b, B)
    want = aw.wgmma("f32.f16.f16", a, np.ascontiguousarray(b.T), C, scale_d=bool(scale_d))
    assert out[5].view(np.uint32).tobytes() == want.view(np.uint32).tobytes()


def test_f16_a_from_registers():
    rng = np.random.default_rng(3)
    A, B = f16(rng, (64, 16)), f16(rng, (64, 16))
    db = k_major(0, "128B", 32)
    img = image((B, db))
    C = rng.standard_normal((64, 64)).astype(np.float32)
    D = np.zeros((64, 64), np.float32)
    _, out, _ = launch("wgmma_f16_rs", [img, SMEM, A.view(np.uint32).reshape(-1), db, C, D, 1])
    want = aw.wgmma("f32.f16.f16", A, np.ascontiguousarray(back(img, db, 64, 16, np.float16).T), C)
    assert out[5].tobytes() == want.tobytes()


def e4m3_bits(rng, shape) -> np.ndarray:
    """Random finite e4m3 codes (no NaN: 0x7F / 0xFF drawn again as 0x7E / 0xFE, the largest)."""
    u = rng.integers(0, 256, shape).astype(np.uint8)
    return np.where((u & 0x7F) == 0x7F, u - 1, u).astype(np.uint8)


def test_e4m3_m64n128k32_f32():
    rng = np.random.default_rng(4)
    A, B = e4m3_bits(rng, (64, 32)), e4m3_bits(rng, (128, 32))
    A[0, 0] = 0x7F                                             # NaN: row 0 of D is NaN
    A[1, :6] = [0x00, 0x80, 0x7E, 0xFE, 0x01, 0x81]            # zeros, the largest, subnormals
    da, db = k_major(0, "128B", 32), k_major(8192, "128B", 32)
    img = image((A, da), (B, db))
    C = rng.standard_normal((64, 128)).astype(np.float32)
    C[2, :4] = [np.inf, -np.inf, np.nan, -0.0]
    D = np.zeros((64, 128), np.float32)
    _, out, _ = launch("wgmma_e4m3", [img, SMEM, da, db, C, D, 1])
    a, b = back(img, da, 64, 32, np.uint8), back(img, db, 128, 32, np.uint8)
    want = aw.wgmma("f32.e4m3.e4m3", a, np.ascontiguousarray(b.T), C)
    assert out[5].view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
    got = out[5]
    assert np.isnan(got[0]).all() and np.isnan(got[2, 2]) and got[2, 0] == np.inf and got[2, 1] == -np.inf
    # the FP8 datapath, not fp32 accumulation, decides the low bits: the finite results are e8m13
    rest = got[3:]
    assert np.isfinite(rest).all() and not (rest.view(np.uint32) & 0x3FF).any()
    # so fp64 sums rounded to fp32 differ from it somewhere
    exact = a.view(ml_dtypes.float8_e4m3fn).astype(np.float64) @ b.view(ml_dtypes.float8_e4m3fn).astype(np.float64).T
    assert not np.array_equal((exact[3:] + C[3:]).astype(np.float32), rest)


def test_s8_wraps_like_the_model():
    rng = np.random.default_rng(5)
    A = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    B = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    da, db = k_major(0, "32B", 32), k_major(8192, "32B", 32)
    img = image((A, da), (B, db))
    C = rng.integers(-(2**31), 2**31, (64, 64)).astype(np.int32)
    C[:, :8] = 2**31 - 1                                       # sums that pass int32 wrap
    D = np.zeros((64, 64), np.int32)
    _, out, _ = launch("wgmma_s8", [img, SMEM, da, db, C, D, 1])
    want = aw.wgmma("s32.s8.s8", back(img, da, 64, 32, np.int8), np.ascontiguousarray(back(img, db, 64, 32, np.int8).T), C)
    assert out[5].tobytes() == want.tobytes()
    exact = C.astype(np.int64) + A.astype(np.int64) @ B.astype(np.int64).T
    assert np.array_equal(out[5], ((exact + 2**31) % 2**32 - 2**31).astype(np.int32))


def test_b1_and_popc_reads_bits_little_end_first():
    """The s8 kernel's instruction as m64n64k256.s32.b1.b1.and.popc: the same 32-byte rows hold 256 bits;
    element k is bit k % 8 of byte k // 8; D = C + popc(A_i AND B_j)."""
    rng = np.random.default_rng(16)
    A8 = rng.integers(0, 256, (64, 32)).astype(np.uint8)
    B8 = rng.integers(0, 256, (64, 32)).astype(np.uint8)
    da, db = k_major(0, "32B", 32), k_major(8192, "32B", 32)
    img = image((A8, da), (B8, db))
    C = rng.integers(-1000, 1000, (64, 64)).astype(np.int32)
    src = edited("m64n64k32.s32.s8.s8", "m64n64k256.s32.b1.b1.and.popc")
    _, out, _ = launch("wgmma_s8", [img, SMEM, da, db, C, np.zeros((64, 64), np.int32), 1], src=src)
    bits_a = [[(int(A8[i, k // 8]) >> (k % 8)) & 1 for k in range(256)] for i in range(64)]
    bits_b = [[(int(B8[j, k // 8]) >> (k % 8)) & 1 for k in range(256)] for j in range(64)]
    want = np.array([[int(C[i, j]) + sum(x & y for x, y in zip(bits_a[i], bits_b[j])) for j in range(64)]
                     for i in range(64)], np.int32)
    assert np.array_equal(out[5], want)


def test_two_commit_groups_and_wait_group_1():
    rng = np.random.default_rng(6)
    A, B1, B2 = f16(rng, (64, 16)), f16(rng, (64, 16)), f16(rng, (64, 16))
    da, d1, d2 = (k_major(s, "64B", 32) for s in (0, 8192, 16384))
    img = image((A, da), (B1, d1), (B2, d2))
    D1, D2 = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32)
    stats, out, _ = launch("wgmma_groups", [img, SMEM, da, d1, d2, D1, D2], race=True)
    zero = np.zeros((64, 64), np.float32)
    for got, b in ((out[5], B1), (out[6], B2)):
        assert got.tobytes() == aw.wgmma("f32.f16.f16", A, np.ascontiguousarray(b.T), zero).tobytes()
    assert stats.opcodes["wgmma.commit_group.sync.aligned"] == 8        # 2 per warp, 4 warps


def test_reading_the_accumulator_before_wait_is_a_named_race():
    rng = np.random.default_rng(7)
    A, B = f16(rng, (64, 16)), f16(rng, (64, 16))
    da, db = k_major(0, "128B", 32), k_major(8192, "128B", 32)
    img = image((A, da), (B, db))
    D = np.zeros((64, 64), np.float32)
    _, _, err = launch("wgmma_early_read", [img, SMEM, da, db, D], race=True, expect_error=True)
    assert isinstance(err, ptx.PtxRaceError)
    assert "is an accumulator of a wgmma.mma_async not yet complete" in str(err) and "st.global.f32" in str(err)
    # without race=True it runs (a GPU runs it silently; refsim computes at issue)
    _, out, _ = launch("wgmma_early_read", [img, SMEM, da, db, D])
    want = aw.wgmma("f32.f16.f16", A, np.ascontiguousarray(B.T), np.zeros((64, 64), np.float32))
    assert out[4].tobytes() == want.tobytes()


def edited(old: str, new: str) -> str:
    src = text()
    assert old in src
    return src.replace(old, new, 1)


def ss_args(rng, da=None):
    A, B = f16(rng, (64, 16)), f16(rng, (64, 16))
    da = k_major(0, "128B", 32) if da is None else da
    db = k_major(8192, "128B", 32)
    img = image((B, db)) | image((A, k_major(0, "128B", 32)))
    return [img, SMEM, da, db, np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32), 1]


def test_missing_wgmma_fence_is_a_named_race():
    src = edited("\twgmma.fence.sync.aligned;\n", "")
    _, _, err = launch("wgmma_f16_ss", ss_args(np.random.default_rng(8)), src=src, race=True, expect_error=True)
    assert isinstance(err, ptx.PtxRaceError) and "no wgmma.fence before it" in str(err)


def test_register_written_after_the_fence_is_a_named_race():
    src = edited("\twgmma.fence.sync.aligned;\n", "\twgmma.fence.sync.aligned;\n\tmov.f32 %f1, 0f3F800000;\n")
    _, _, err = launch("wgmma_f16_ss", ss_args(np.random.default_rng(9)), src=src, race=True, expect_error=True)
    assert isinstance(err, ptx.PtxRaceError) and "register %f1 was written by another instruction" in str(err)


def test_partial_warpgroup_is_refused():
    args = ss_args(np.random.default_rng(10))
    _, _, err = run_both(module(), "wgmma_f16_ss", (1, 1, 1), (96, 1, 1), args, arch="sm_90a", shared_bytes=SMEM,
                         expect_error=True)
    assert isinstance(err, ptx.PtxUnsupportedError) and "partial warpgroup" in str(err)
    assert "kernel wgmma_f16_ss, PTX line" in str(err)


def test_descriptor_base_offset_is_refused_with_the_line():
    da = k_major(0, "128B", 32) | 1 << 49
    _, _, err = launch("wgmma_f16_ss", ss_args(np.random.default_rng(11), da), expect_error=True)
    assert isinstance(err, ptx.PtxUnsupportedError)
    assert "PTX line" in str(err) and "wgmma.mma_async" in str(err) and "base_offset" in str(err)


def test_operand_past_shared_memory_is_a_memory_error():
    da = sl.encode_descriptor(SMEM - 128, 0, 1024, swizzle="128B")
    _, _, err = launch("wgmma_f16_ss", ss_args(np.random.default_rng(12), da), expect_error=True)
    assert isinstance(err, ptx.PtxMemoryError) and "operand A" in str(err)


@pytest.mark.parametrize("old, new, why", [
    ("m64n64k16.f32.f16.f16", "m64n60k16.f32.f16.f16", "not legal"),
    ("m64n64k16.f32.f16.f16", "m64n64k16.f32.bf16.f16", "not a dense wgmma kind"),
    ("p, 1, 1, 0, 0;", "p, 1, 1, 0;", "takes 8 operands"),
    ("p, 1, 1, 0, 0;", "p, 2, 1, 0, 0;", "imm-scale must be 1 or -1"),
])
def test_unmodelled_forms_are_refused_at_launch(old, new, why):
    src = edited(old, new)
    _, _, err = launch("wgmma_f16_ss", ss_args(np.random.default_rng(13)), src=src, expect_error=True)
    assert isinstance(err, ptx.PtxUnsupportedError) and why in str(err) and "PTX line" in str(err)


def f16_fragments(M: np.ndarray) -> np.ndarray:
    """The PTX ISA's f16 accumulator fragments of a 64 x 64 f16 matrix, written out per thread: thread t
    (warp q = t // 32, lane l = t % 32) register r holds elements i = 2r (low half) and 2r + 1 (high)
    at row 16q + l // 4 + 8 ((i // 2) % 2), column 8 (i // 4) + 2 (l % 4) + i % 2."""
    bits = M.view(np.uint16)
    out = np.zeros((128, 16), np.uint32)
    for t in range(128):
        q, l = divmod(t, 32)
        for r in range(16):
            halves = []
            for i in (2 * r, 2 * r + 1):
                halves.append(int(bits[16 * q + l // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (l % 4) + i % 2]))
            out[t, r] = halves[0] | halves[1] << 16
    return out.reshape(-1)


@pytest.mark.parametrize("trans", [False, True])
def test_f16_accumulator_fragments_transposes_and_negation(trans):
    rng = np.random.default_rng(14)
    A, B = f16(rng, (64, 16)), f16(rng, (64, 16))                 # (M, K), (N, K)
    major = "MN" if trans else "K"
    # MN-major 128B: 64 f16 of M (or N) per 128-byte row, K groups of 8 rows 1024 bytes apart
    da = sl.encode_descriptor(0, 0, 1024, swizzle="128B") if trans else k_major(0, "128B", 32)
    db = sl.encode_descriptor(8192, 0, 1024, swizzle="128B") if trans else k_major(8192, "128B", 32)
    img = sl.smem_from_matrix(A, da, major, smem_size=SMEM) | sl.smem_from_matrix(B, db, major, smem_size=SMEM)
    C = f16(rng, (64, 64))
    D = np.zeros(2048, np.uint32)
    src = None
    if trans:            # the f16-accumulator kernel's instruction only: imm-scale-a = -1, both transposed
        head, rest = text().split("m64n64k16.f16.f16.f16 {%r", 1)
        src = head + "m64n64k16.f16.f16.f16 {%r" + rest.replace("p, 1, 1, 0, 0;", "p, -1, 1, 1, 1;", 1)
    _, out, _ = launch("wgmma_f16acc", [img, SMEM, da, db, f16_fragments(C), D], src=src)
    a = sl.matrix_from_smem(img, da, 64, 16, np.float16, major)
    b = sl.matrix_from_smem(img, db, 64, 16, np.float16, major)
    assert np.array_equal(a, A) and np.array_equal(b, B)
    want = aw.wgmma("f16.f16.f16", a, np.ascontiguousarray(b.T), C, scale_a=-1 if trans else 1)
    assert out[5].tobytes() == f16_fragments(want).tobytes()


def test_poison_names_an_accumulator_never_written():
    src = edited("\tld.global.f32 \t%f1, [%rd13];\n", "")
    args = ss_args(np.random.default_rng(15))
    _, _, err = launch("wgmma_f16_ss", args, src=src, poison=True, expect_error=True)
    assert isinstance(err, ptx.PtxUninitializedError)
    assert "register %f1 read before written" in str(err) and "wgmma.mma_async" in str(err)
    launch("wgmma_f16_ss", args, poison=True)          # the kernel as compiled writes every register first


def test_a_store_to_shared_memory_a_pending_wgmma_reads_is_a_named_race():
    src = edited("\twgmma.commit_group.sync.aligned;\n", "\twgmma.commit_group.sync.aligned;\n\tst.shared.u32 \t[16], %r1;\n")
    args = ss_args(np.random.default_rng(17))
    _, _, err = launch("wgmma_f16_ss", args, src=src, race=True, expect_error=True)
    assert isinstance(err, ptx.PtxRaceError)
    assert "to byte 0x10, which a wgmma.mma_async not yet complete" in str(err) and "thread (0, 0, 0)" in str(err)
    launch("wgmma_f16_ss", args, race=True)          # the kernel as compiled waits before it exits


WGMMA_SS = ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8, %f9, "
            "%f10, %f11, %f12, %f13, %f14, %f15, %f16, %f17, %f18, %f19, %f20, %f21, %f22, %f23, %f24, %f25, %f26, "
            "%f27, %f28, %f29, %f30, %f31, %f32}, %rd3, %rd4, p, 1, 1, 0, 0;\n")


def test_wgmmas_of_one_shape_chained_on_one_accumulator_are_not_a_race():
    # PTX ISA: wgmma.mma_async of the same shape may accumulate into the same registers back to back
    # (CUTLASS's mainloops do): the second reads the first's result, in order, with no wait between
    src = edited(WGMMA_SS, WGMMA_SS + WGMMA_SS)
    rng = np.random.default_rng(21)
    args = ss_args(rng)
    args[4] = rng.standard_normal((64, 64)).astype(np.float32)
    _, out, _ = launch("wgmma_f16_ss", args, src=src, race=True)
    a, b = back(args[0], args[2], 64, 16, np.float16), back(args[0], args[3], 64, 16, np.float16)
    once = aw.wgmma("f32.f16.f16", a, np.ascontiguousarray(b.T), args[4])
    twice = aw.wgmma("f32.f16.f16", a, np.ascontiguousarray(b.T), once)
    assert out[5].view(np.uint32).tobytes() == twice.view(np.uint32).tobytes()
    assert out[5].tobytes() != once.tobytes()


def test_an_accumulator_overwritten_by_another_instruction_before_wait_is_a_named_race():
    src = edited(WGMMA_SS, WGMMA_SS + "mov.f32 %f1, 0f3F800000;\n")
    _, _, err = launch("wgmma_f16_ss", ss_args(np.random.default_rng(22)), src=src, race=True, expect_error=True)
    assert isinstance(err, ptx.PtxRaceError) and "register %f1" in str(err)
