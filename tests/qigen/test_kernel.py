"""Generated kernels (AVX2 and scalar) vs the oracle bit for bit, pinned and over hypothesis-drawn legal
shapes, bits and groups; build cache and toolchain errors."""

import dataclasses
import platform
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError, ShapeError, ToolchainError
from refsim.formats import gptq
from refsim.formats import qigen as Q
from refsim.native import build
from refsim.native.machine import detect_isa
from refsim.qigen import codegen, kernel, oracle
from refsim.testing import assert_bitexact, examples

HAVE_CC = any(shutil.which(c) for c in ("cc", "gcc", "clang"))
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler on PATH")
ISAS = ["scalar"] + (["avx2"] if detect_isa() == "avx2" else [])


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path_factory.getbasetemp() / "refsim-cache"))


def _problem(rng, m, k, n, bits, gs):
    groups = k // (gs or k)
    q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
    s = (rng.random((groups, n)) * 0.05 + 0.01).astype(np.float32)
    z = rng.integers(0, 2**bits, size=(groups, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    return x, q, s, z, b


@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("gs,order,m", [(None, "panel", 1), (32, "zcurve", 3), (64, "panel", 2)])
def test_kernel_equals_oracle_bit_for_bit(isa, bits, gs, order, m):
    rng = np.random.default_rng(bits * 7 + m)
    k, n = 128, 64
    x, q, s, z, b = _problem(rng, m, k, n, bits, gs)
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=gs, mb=64, tb=32,
                         order=order, bias=b)
    x_before = x.copy()
    y = kernel.qgemv(x, mat, codegen.KernelSpec(bits, tu=16, unroll=2, isa=isa))
    assert_bitexact(y, oracle.qgemv_oracle(x, q, s, z, b, bits, gs, unroll=2), name=f"{isa} {bits}-bit")
    np.testing.assert_array_equal(x, x_before)


@pytest.mark.slow
@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bits", [2, 3, 4])
def test_shift_and_prescaled_paths_agree_and_tiny_x_takes_the_shift_path(isa, bits):
    rng = np.random.default_rng(11 + bits)
    x, q, s, z, b = _problem(rng, 2, 96, 32, bits, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=32, mb=32, tb=32, bias=b)
    spec = codegen.KernelSpec(bits, tu=32, unroll=2, isa=isa)
    want = oracle.qgemv_oracle(x, q, s, z, b, bits, 32)
    assert_bitexact(kernel.qgemv(x, mat, spec, path="shift"), want, name="shift path")
    assert_bitexact(kernel.qgemv(x, mat, spec, path="prescaled"), want, name="prescaled path")
    x[0, ::3] *= np.float32(2.0**-120)  # x * 2**-28 would be subnormal: prescaling would be inexact
    want = oracle.qgemv_oracle(x, q, s, z, b, bits, 32)
    assert_bitexact(kernel.qgemv(x, mat, spec), want, name="auto path with tiny x")
    with pytest.raises(FormatRuleError, match="2\\*\\*-96"):
        kernel.qgemv(x, mat, spec, path="prescaled")


@needs_cc
@pytest.mark.parametrize("unroll", [1, 4])
def test_kernel_follows_its_unroll_order(unroll):
    rng = np.random.default_rng(unroll)
    x, q, s, z, b = _problem(rng, 2, 256, 32, 4, None)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=None, mb=128, tb=32, bias=b)
    y = kernel.qgemv(x, mat, codegen.KernelSpec(4, tu=32, unroll=unroll, isa=ISAS[-1]))
    assert_bitexact(y, oracle.qgemv_oracle(x, q, s, z, b, 4, None, unroll=unroll), name="unroll")


@needs_cc
def test_openmp_build_gives_the_same_bits():
    rng = np.random.default_rng(9)
    x, q, s, z, b = _problem(rng, 2, 256, 128, 4, 128)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=128, mb=64, tb=32,
                         order="zcurve", bias=b)
    y = kernel.qgemv(x, mat, codegen.KernelSpec(4, isa=ISAS[-1], openmp=True))
    assert_bitexact(y, oracle.qgemv_oracle(x, q, s, z, b, 4, 128), name="openmp")


@needs_cc
def test_from_gptq_checkpoint_runs_the_stored_zero_points():
    rng = np.random.default_rng(5)
    x, q, s, z, _ = _problem(rng, 1, 128, 64, 4, 64)
    z = np.clip(z, 1, 15)  # v1 checkpoints cannot hold zero 0 without corruption
    ckpt = gptq.pack(q, s, z.astype(np.int32), 4, group_size=64)
    mat = kernel.from_gptq(ckpt, mb=64, tb=32)
    s16 = ckpt.scales.astype(np.float32)
    assert_bitexact(kernel.qgemv(x, mat), oracle.qgemv_oracle(x, q, s16, z, None, 4, 64), name="from_gptq")
    perm = ckpt.g_idx[::-1].copy()
    with pytest.raises(FormatRuleError, match="act-order"):
        kernel.from_gptq(gptq.GPTQCheckpoint(ckpt.qweight, ckpt.qzeros, ckpt.scales, perm, 4), mb=64, tb=32)


@needs_cc
def test_avx2_object_code_uses_fused_multiply_add_and_scalar_calls_fmaf():
    if "avx2" not in ISAS or shutil.which("objdump") is None:
        pytest.skip("needs an AVX2+FMA CPU and objdump")
    ops = build.objdump_mnemonics(kernel.library_path(codegen.KernelSpec(4, isa="avx2")))
    assert any(o.startswith("vfmadd") for o in ops) and any(o.startswith("vfnmadd") for o in ops)
    assert "-ffast-math" not in build.compile_flags("avx2", True)
    assert "-ffp-contract=off" in build.compile_flags("scalar", False)
    scalar_ops = build.objdump_mnemonics(kernel.library_path(codegen.KernelSpec(4, isa="scalar")))
    assert not any(o.startswith("vfmadd") for o in scalar_ops)  # fused only through the fmaf call


@needs_cc
def test_stale_cache_entry_is_rebuilt_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path))
    src_a = codegen.generate(codegen.KernelSpec(2, isa="scalar"))
    src_b = codegen.generate(codegen.KernelSpec(4, isa="scalar"))
    path_a = build.build(src_a, "scalar")
    path_b = build.build(src_b, "scalar")
    assert path_a != path_b
    shutil.copyfile(path_b, path_a)  # entry A now holds kernel B (wrong id)
    key_a = path_a.parent.name  # entries live under their content hash
    assert not build.entry_valid(path_a, key_a)
    rebuilt = build.build(src_a, "scalar")
    assert rebuilt == path_a and build.entry_valid(rebuilt, key_a)
    assert not build.entry_valid(rebuilt, path_b.parent.name)
    path_a.write_bytes(b"not a library")
    assert build.entry_valid(build.build(src_a, "scalar"), key_a)


@needs_cc
def test_compiler_error_shows_its_output(tmp_path, monkeypatch):
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path))
    with pytest.raises(ToolchainError, match="undeclared|error"):
        build.build("int f(void) { return missing_symbol; }\n", "scalar")


def test_missing_compiler_is_a_clear_toolchain_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "refsim-no-such-compiler")
    with pytest.raises(ToolchainError, match="C compiler"):
        build.build("int f(void) { return 0; }\n", "scalar")


def test_bad_kernel_and_matrix_parameters_raise():
    with pytest.raises(FormatRuleError, match="bit-width"):
        codegen.KernelSpec(8)
    with pytest.raises(ShapeError, match="multiple of 8"):
        codegen.KernelSpec(4, tu=12)
    with pytest.raises(FormatRuleError, match="unroll"):
        codegen.KernelSpec(2, unroll=3)
    rng = np.random.default_rng(0)
    x, q, s, z, b = _problem(rng, 1, 64, 32, 4, None)
    qw = gptq.pack_qweight(q, 4)
    with pytest.raises(ShapeError, match="group_size"):
        kernel.prepare(qw, s, z, bits=4, group_size=48, mb=32, tb=16)
    with pytest.raises(ShapeError, match="shape"):
        kernel.prepare(qw, s[:, :8], z, bits=4, group_size=None, mb=32, tb=16)
    with pytest.raises(ShapeError, match="multiple of the block height"):
        kernel.prepare(qw, s, z, bits=4, group_size=None, mb=128, tb=16)
    mat = kernel.prepare(qw, s, z, bits=4, group_size=None, mb=32, tb=16)
    with pytest.raises(ShapeError, match="micro-tile"):
        kernel.qgemv(x, mat, codegen.KernelSpec(4, tu=32, isa="scalar"))
    with pytest.raises(ShapeError, match="K=64"):
        kernel.qgemv(x[:, :32].copy(), mat, codegen.KernelSpec(4, tu=16, isa="scalar"))
    assert isinstance(Q.QIGenLayout(4, 64, 32, 32, 16), Q.QIGenLayout)


@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("acc,tu", [(2, 32), (4, 16)])
@pytest.mark.parametrize("gs", [None, 64])
def test_kernel_with_accumulators_equals_oracle(isa, bits, acc, tu, gs):
    # mb = 32 < gs: the partial sums are parked in accbuf across K-blocks inside a group
    rng = np.random.default_rng(bits * 13 + acc)
    x, q, s, z, b = _problem(rng, 2, 128, 64, bits, gs)
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=gs, mb=32, tb=32, bias=b)
    spec = codegen.KernelSpec(bits, tu=tu, unroll=2, isa=isa, accumulators=acc)
    want = oracle.qgemv_oracle(x, q, s, z, b, bits, gs, unroll=2, accumulators=acc)
    for path in ("shift", "prescaled", "bitcast"):
        assert_bitexact(kernel.qgemv(x, mat, spec, path=path), want, name=f"{spec.name} {path}")
    # and the order really is different from the single chain somewhere (the test can fail)
    single = oracle.qgemv_oracle(x, q, s, z, b, bits, gs, unroll=2)
    assert not np.array_equal(want.view(np.uint32), single.view(np.uint32))


@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bits", [3, 4])
def test_compact_metadata_kernel_equals_oracle_including_subnormal_fp16_scales(isa, bits):
    rng = np.random.default_rng(40 + bits)
    x, q, s, z, b = _problem(rng, 2, 128, 32, bits, 32)
    s16 = rng.standard_normal(s.shape).astype(np.float16)
    s16.flat[:6] = np.array([2.0**-24, -(2.0**-24), 2.0**-15, 65504.0, -0.0, 0.0], dtype=np.float16)  # subnormal, max, zeros
    s = s16.astype(np.float32)
    z[0, :3] = [0, 2**bits, 255]  # GPTQ zero points are qzeros + 1, so 2**bits occurs; 255 is the uint8 edge
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=32, mb=64, tb=32, bias=b)
    assert mat.compact_meta
    np.testing.assert_array_equal(mat.scales_panels_f16.view(np.float16).astype(np.float32), mat.scales_panels)
    spec = codegen.KernelSpec(bits, tu=16, unroll=2, isa=isa, accumulators=2, meta="f16u8")
    want = oracle.qgemv_oracle(x, q, s, z, b, bits, 32, unroll=2, accumulators=2)
    assert_bitexact(kernel.qgemv(x, mat, spec), want, name=spec.name)
    assert_bitexact(kernel.qgemv(x, mat, spec, path="shift"), want, name=spec.name + " shift")


@needs_cc
def test_compact_metadata_is_refused_when_scales_or_zeros_do_not_fit():
    rng = np.random.default_rng(3)
    x, q, s, z, b = _problem(rng, 1, 64, 32, 4, 32)
    s = s + np.float32(2.0**-20)  # not fp16-exact
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=32, tb=32)
    assert not mat.compact_meta
    with pytest.raises(FormatRuleError, match="meta"):
        kernel.qgemv(x, mat, codegen.KernelSpec(4, tu=16, isa=ISAS[-1], meta="f16u8"))
    z2 = z.copy()
    z2[0, 0] = 0.5  # not an integer zero point
    mat2 = kernel.prepare(gptq.pack_qweight(q, 4), s.astype(np.float16).astype(np.float32), z2, bits=4,
                          group_size=32, mb=32, tb=32)
    assert not mat2.compact_meta
    with pytest.raises(FormatRuleError, match="meta"):
        codegen.KernelSpec(4, meta="bf16")


@pytest.mark.slow
@needs_cc
@pytest.mark.skipif("avx2" not in ISAS, reason="prefetch is AVX2-only")
@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("order", ["panel", "zcurve"])
def test_prefetching_kernel_gives_the_same_bits(bits, order):
    rng = np.random.default_rng(60 + bits)
    x, q, s, z, b = _problem(rng, 2, 128, 96, bits, 64)
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=64, mb=64, tb=32,
                         order=order, bias=b)
    spec = codegen.KernelSpec(bits, tu=16, unroll=2, isa="avx2", accumulators=2, prefetch=True)
    assert "_mm_prefetch" in codegen.generate(spec) and spec.name.endswith("_pf_avx2")
    want = oracle.qgemv_oracle(x, q, s, z, b, bits, 64, unroll=2, accumulators=2)
    assert_bitexact(kernel.qgemv(x, mat, spec), want, name=spec.name)


@pytest.mark.slow
@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bits", [2, 3, 4])
def test_auto_path_choice_follows_the_range_of_x(isa, bits):
    rng = np.random.default_rng(70 + bits)
    x, q, s, z, b = _problem(rng, 2, 96, 32, bits, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=32, mb=32, tb=32, bias=b)
    spec = codegen.KernelSpec(bits, tu=16, unroll=2, isa=isa, accumulators=2)
    cases = [(1.0, "bitcast"), (2.0**-70, "prescaled"), (2.0**-120, "shift"), (2.0**44, "prescaled")]
    for scale, path in cases:
        xx = x.copy()
        xx[0, ::5] *= np.float32(scale)
        want = oracle.qgemv_oracle(xx, q, s, z, b, bits, 32, unroll=2, accumulators=2)
        y, used = kernel.qgemv_with_path(xx, mat, spec)
        assert used == path, (scale, used)
        assert_bitexact(y, want, name=f"auto ({path}) scale {scale}")
        if path != "bitcast":
            with pytest.raises(FormatRuleError, match="bitcast path needs"):
                kernel.qgemv(xx, mat, spec, path="bitcast")


@pytest.mark.slow
@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bits", [3, 4])
def test_bitcast_path_is_exact_at_the_edges_of_its_range(isa, bits):
    # smallest allowed |x| = 2^-62 with pairs that cancel to 2^-85: scaled by 2^-64 the partial
    # sums go down to 2^-149, the smallest subnormal, where an inexact scaling would lose bits;
    # largest allowed |x| just below 2^43 with codes up to 2^bits - 1: large products
    k, n = 128, 32
    rng = np.random.default_rng(80 + bits)
    q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
    q[:, :8] = 1
    s = (rng.random((4, n)) * 0.05 + 0.01).astype(np.float32)
    z = rng.integers(0, 2**bits, size=(4, n)).astype(np.float32)
    lo = np.float32(2.0**-62)
    x_small = np.where(np.arange(k) % 2 == 0, lo * np.float32(1 + 2.0**-23), -lo).astype(np.float32)[None, :]
    x_small[0, 7::11] = np.float32(2.0**-62) * np.float32(3 + 2.0**-22)
    hi = np.nextafter(np.float32(2.0**43), np.float32(0))
    x_big = (rng.standard_normal((1, k)) * 2.0**30).astype(np.float32)
    x_big[0, ::9] = hi
    x_big[0, 4::9] = -hi
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=32, mb=64, tb=32)
    for a in (1, 2, 4):
        spec = codegen.KernelSpec(bits, tu=8 * (4 // a) if a > 1 else 32, unroll=2, isa=isa, accumulators=a)
        for xx in (x_small, x_big):
            want = oracle.qgemv_oracle(xx, q, s, z, None, bits, 32, unroll=2, accumulators=a)
            y, used = kernel.qgemv_with_path(xx, mat, spec, "bitcast")
            assert used == "bitcast"
            assert_bitexact(y, want, name=f"bitcast edge A={a}")
            assert_bitexact(kernel.qgemv(xx, mat, spec, path="shift"), want, name="shift twin")
    # one step outside either end: refused by the bitcast path, still exact through auto
    for xx, factor in ((x_small, np.float32(0.5)), (x_big, np.float32(2.0))):
        out = xx * factor
        with pytest.raises(FormatRuleError, match="2\\*\\*-62, 2\\*\\*43"):
            kernel.qgemv(out, mat, spec, path="bitcast")
        y, used = kernel.qgemv_with_path(out, mat, spec)
        assert used != "bitcast"
        assert_bitexact(y, oracle.qgemv_oracle(out, q, s, z, None, bits, 32, unroll=2, accumulators=spec.accumulators),
                        name="auto outside the bitcast range")


_MXCSR_SRC = """
unsigned int refsim_test_get_mxcsr(void) { unsigned int c; __asm__ volatile("stmxcsr %0" : "=m"(c)); return c; }
void refsim_test_set_mxcsr(unsigned int c) { __asm__ volatile("ldmxcsr %0" : : "m"(c)); }
"""


@needs_cc
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="MXCSR is x86")
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("flag", [0x0040, 0x8000])  # DAZ, FTZ
def test_bitcast_path_is_not_used_when_the_fpu_flushes_subnormals(isa, flag):
    import ctypes

    lib = ctypes.CDLL(str(build.build(_MXCSR_SRC, "scalar")))
    lib.refsim_test_get_mxcsr.restype = ctypes.c_uint
    lib.refsim_test_set_mxcsr.argtypes = [ctypes.c_uint]
    rng = np.random.default_rng(90)
    x, q, s, z, b = _problem(rng, 1, 64, 32, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=32, tb=32, bias=b)
    spec = codegen.KernelSpec(4, tu=16, unroll=2, isa=isa, accumulators=2)
    want = oracle.qgemv_oracle(x, q, s, z, b, 4, 32, unroll=2, accumulators=2)
    old = lib.refsim_test_get_mxcsr()
    lib.refsim_test_set_mxcsr(old | flag)
    try:
        y, used = kernel.qgemv_with_path(x, mat, spec)
        with pytest.raises(FormatRuleError, match="subnormals"):
            kernel.qgemv(x, mat, spec, path="bitcast")
    finally:
        lib.refsim_test_set_mxcsr(old)
    assert used == "prescaled"
    assert_bitexact(y, want, name="auto with the FPU flushing subnormals")
    assert kernel.qgemv_with_path(x, mat, spec)[1] == "bitcast"  # flags restored: bitcast again


@needs_cc
def test_matrix_built_by_hand_without_padding_gets_a_padded_copy():
    # the bitcast kernel reads 2 bytes past a vector of words; prepare() pads, a hand-built
    # QIGenMatrix (plain packed array) is copied into a padded buffer instead
    rng = np.random.default_rng(91)
    x, q, s, z, b = _problem(rng, 1, 64, 32, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=32, tb=32, bias=b)
    assert mat.packed.base is not None and mat.packed.base.size == mat.packed.size + kernel.PAD_WORDS
    bare = dataclasses.replace(mat, packed=mat.packed.copy())
    words = bare._pointers["words"]
    assert words is not bare.packed and words.size == bare.packed.size + kernel.PAD_WORDS
    np.testing.assert_array_equal(words[:bare.packed.size], bare.packed)
    assert mat._pointers["words"] is mat.packed
    spec = codegen.KernelSpec(4, tu=16, unroll=2, isa=ISAS[-1])
    assert_bitexact(kernel.qgemv(x, bare, spec), oracle.qgemv_oracle(x, q, s, z, b, 4, 32), name="unpadded")


# --- call plans (the hot path of qgemv_with_path after one validated call) ---------------------


@needs_cc
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("path", ["auto", "bitcast", "prescaled", "shift"])
def test_call_plan_calls_give_oracle_bits_and_fresh_arrays(isa, path):
    rng = np.random.default_rng(131)
    x, q, s, z, b = _problem(rng, 2, 128, 64, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=64, tb=32, bias=b)
    spec = codegen.KernelSpec(4, tu=32, unroll=2, isa=isa, accumulators=2)
    assert "_plans" not in mat.__dict__
    y1, used1 = kernel.qgemv_with_path(x, mat, spec, path)  # validated call, stores the plan
    assert len(mat.__dict__["_plans"]) == 1
    kept = y1.copy()
    for scale in (1.0, 2.0**-30, 3.0):  # later calls take the plan, with other x of that shape
        x2 = (rng.standard_normal(x.shape) * scale).astype(np.float32)
        y2, used2 = kernel.qgemv_with_path(x2, mat, spec, path)
        want = oracle.qgemv_oracle(x2, q, s, z, b, 4, 32, unroll=2, accumulators=2)
        assert_bitexact(y2, want, name=f"{isa} {path} plan call, x * {scale}")
        assert used2 == (used1 if path != "auto" else "bitcast")
        assert y2 is not y1 and not np.shares_memory(y2, y1)
    assert len(mat.__dict__["_plans"]) == 1  # the same plan served every call
    np.testing.assert_array_equal(y1, kept)  # an earlier result is never overwritten


@needs_cc
def test_call_plan_calls_still_raise_every_error():
    from refsim.errors import DtypeError, NonFiniteError

    rng = np.random.default_rng(132)
    x, q, s, z, b = _problem(rng, 1, 64, 32, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=32, tb=32)
    spec = codegen.KernelSpec(4, tu=16, unroll=2, isa=ISAS[-1])
    for path in ("auto", "bitcast", "prescaled"):
        kernel.qgemv(x, mat, spec, path)  # plan stored
        bad = x.copy()
        bad[0, 5] = np.nan
        with pytest.raises(NonFiniteError):
            kernel.qgemv(bad, mat, spec, path)
    huge = x.copy()
    huge[0, 3] = 2.0**44
    with pytest.raises(FormatRuleError, match=r"bitcast path needs .*2\*\*43"):
        kernel.qgemv(huge, mat, spec, "bitcast")
    tiny = x.copy()
    tiny[0, 3] = 2.0**-100
    with pytest.raises(FormatRuleError, match=r"prescaled path needs .*2\*\*-96"):
        kernel.qgemv(tiny, mat, spec, "prescaled")
    with pytest.raises(DtypeError):
        kernel.qgemv(x.astype(np.float64), mat, spec)  # not float32: the validated path refuses it
    with pytest.raises(ShapeError):
        kernel.qgemv(np.zeros((1, 32), np.float32), mat, spec)
    with pytest.raises(FormatRuleError, match="path"):
        kernel.qgemv(x, mat, spec, "fast")
    with pytest.raises(FormatRuleError, match="path"):
        kernel.qgemv(x, mat, spec, ["auto"])  # unhashable: still the specific error


@needs_cc
def test_call_plan_is_not_used_for_other_layouts_or_specs():
    rng = np.random.default_rng(133)
    x, q, s, z, b = _problem(rng, 3, 64, 32, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=32, tb=32, bias=b)
    spec = codegen.KernelSpec(4, tu=16, unroll=2, isa=ISAS[-1], accumulators=2)
    want2 = oracle.qgemv_oracle(x, q, s, z, b, 4, 32, unroll=2, accumulators=2)
    assert_bitexact(kernel.qgemv(x, mat, spec), want2, name="first call")
    # Fortran order and a strided view: not C-contiguous, so the validated path (which copies)
    xf = np.asfortranarray(x)
    assert_bitexact(kernel.qgemv(xf, mat, spec), want2, name="Fortran-order x")
    wide = np.zeros((3, 128), np.float32)
    wide[:, ::2] = x
    assert_bitexact(kernel.qgemv(wide[:, ::2], mat, spec), want2, name="strided x")
    # an equal spec given as another object, and a different spec (another order of the sums)
    assert_bitexact(kernel.qgemv(x, mat, dataclasses.replace(spec)), want2, name="equal spec object")
    spec1 = codegen.KernelSpec(4, tu=16, unroll=2, isa=ISAS[-1], accumulators=1)
    want1 = oracle.qgemv_oracle(x, q, s, z, b, 4, 32, unroll=2, accumulators=1)
    assert_bitexact(kernel.qgemv(x, mat, spec1), want1, name="A = 1 spec after A = 2")
    assert_bitexact(kernel.qgemv(x, mat, spec), want2, name="A = 2 again")
    # another batch size is another plan
    assert_bitexact(kernel.qgemv(x[:1].copy(), mat, spec), want2[:1], name="batch 1")


@needs_cc
def test_call_plans_are_per_thread_and_survive_their_scratch_cache():
    import threading

    rng = np.random.default_rng(134)
    x, q, s, z, b = _problem(rng, 2, 128, 64, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=64, tb=32, bias=b)
    spec = codegen.KernelSpec(4, tu=32, unroll=2, isa=ISAS[-1], accumulators=2)
    xs = [(rng.standard_normal(x.shape) * (i + 1)).astype(np.float32) for i in range(4)]
    wants = [oracle.qgemv_oracle(xi, q, s, z, b, 4, 32, unroll=2, accumulators=2) for xi in xs]
    bad = []

    def work(i, barrier=None):
        if barrier is not None:
            barrier.wait()  # all four alive at once: four thread ids, four plans
        for _ in range(20):
            y = kernel.qgemv(xs[i], mat, spec)
            if not np.array_equal(y.view(np.uint32), wants[i].view(np.uint32)):
                bad.append(i)
        if barrier is not None:
            barrier.wait()

    barrier = threading.Barrier(4)
    threads = [threading.Thread(target=work, args=(i, barrier)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
    assert len({key[3] for key in mat.__dict__["_plans"]}) == 4
    # threads one after another: a new thread may get a finished thread's id (and so its plan)
    # after that thread's scratch cache is gone; the plan keeps its buffers alive
    for i in range(4):
        t = threading.Thread(target=work, args=(i,))
        t.start()
        t.join()
    assert bad == []
    # one thread: a plan stays valid after more than 16 other shapes cleared the scratch cache
    assert_bitexact(kernel.qgemv(xs[0], mat, spec), wants[0], name="plan made")
    for m in range(1, 19):
        kernel.qgemv(np.ones((m, 128), np.float32) * m, mat, spec)
    assert_bitexact(kernel.qgemv(xs[0], mat, spec), wants[0], name="plan after the cache was cleared")


@needs_cc
def test_used_matrix_pickles_and_copies_without_its_process_local_caches():
    import copy
    import pickle

    rng = np.random.default_rng(135)
    x, q, s, z, b = _problem(rng, 1, 64, 32, 4, 32)
    mat = kernel.prepare(gptq.pack_qweight(q, 4), s, z, bits=4, group_size=32, mb=32, tb=32, bias=b)
    spec = codegen.KernelSpec(4, tu=16, unroll=2, isa=ISAS[-1])
    want = oracle.qgemv_oracle(x, q, s, z, b, 4, 32, unroll=2)
    assert_bitexact(kernel.qgemv(x, mat, spec), want, name="original")
    assert {"_pointers", "_plans"} <= set(mat.__dict__)
    for other in (pickle.loads(pickle.dumps(mat)), copy.deepcopy(mat), copy.copy(mat)):
        assert not {"_pointers", "_plans"} & set(other.__dict__)
        assert_bitexact(kernel.qgemv(x, other, spec), want, name="copy")
        assert_bitexact(kernel.qgemv(x, other, spec), want, name="copy, plan call")


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def problems(draw):
    """Only legal problems: K multiple of mb (multiple of 32), N multiple of tb (multiple of tu)."""
    bits = draw(st.sampled_from([2, 3, 4]))
    tu = draw(st.sampled_from([8, 16, 32]))
    tb = tu * draw(st.integers(1, 3))
    n = tb * draw(st.integers(1, 3))
    mb = 32 * draw(st.integers(1, 3))
    k = mb * draw(st.integers(1, 3))
    gs = draw(st.sampled_from([None] + [g for g in (32, 64, 96, 128) if k % g == 0]))
    m = draw(st.integers(1, 3))
    order = draw(st.sampled_from(Q.ORDERS))
    unroll = draw(st.sampled_from([u for u in (1, 2, 4, 8) if bits == 3 or u <= 32 // bits]))
    isa = draw(st.sampled_from(ISAS))
    acc = draw(st.sampled_from([a for a in (1, 2, 4) if a * tu <= 64]))
    path = draw(st.sampled_from(kernel.PATHS))
    seed = draw(st.integers(0, 2**32 - 1))
    return bits, tu, tb, n, mb, k, gs, m, order, unroll, isa, acc, path, seed


@pytest.mark.slow
@settings(max_examples=examples(40))
@given(problems())
def test_kernel_equals_oracle(p):
    bits, tu, tb, n, mb, k, gs, m, order, unroll, isa, acc, path, seed = p
    rng = np.random.default_rng(seed)
    groups = k // (gs or k)
    q = rng.integers(0, 2**bits, size=(k, n), dtype=np.uint8)
    s = (rng.random((groups, n)) * 0.1).astype(np.float32)
    z = rng.integers(0, 2**bits, size=(groups, n)).astype(np.float32)
    x = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if seed % 2 else None
    mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=gs, mb=mb, tb=tb,
                         order=order, bias=b)
    y = kernel.qgemv(x, mat, codegen.KernelSpec(bits, tu=tu, unroll=unroll, isa=isa, accumulators=acc), path=path)
    assert_bitexact(y, oracle.qgemv_oracle(x, q, s, z, b, bits, gs, unroll=unroll, accumulators=acc),
                    name=f"kernel A={acc} path={path}")
    exact = x.astype(np.float64) @ ((q.astype(np.float64).reshape(groups, -1, n) - z[:, None, :])
                                    * s[:, None, :]).reshape(k, n)
    if b is not None:
        exact = exact + b
    assert np.all(np.abs(y - exact) <= oracle.error_bound(x, q, s, z, b, gs))
