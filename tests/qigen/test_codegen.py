"""refsim.qigen.codegen: the kernel spec's rules and name, the shift tables by hand, and the generated C
text for tiny configs (its header, defines, entry points and per-ISA intrinsics), compiled only for a
syntax check (a fraction of a second). The generated kernels' bits are tested against the oracle in
test_kernel.py.
"""

import re
import shutil
import subprocess

import pytest

from refsim.errors import FormatRuleError
from refsim.qigen import codegen

ENTRY_POINTS = ["refsim_qigen_sums", "refsim_qigen_prescale", "refsim_qigen_prescale_bc", "refsim_qigen_gemv",
                "refsim_qigen_gemv_ps", "refsim_qigen_gemv_bc", "refsim_qigen_run"]


def test_prescale_exponents_by_hand():
    # 4-bit: codes at bits 0,4,...,28; bit 0 needs no scaling, bit 28 is the top field (srli only)
    assert codegen.prescale_shifts(4) == [0, 4, 8, 12, 16, 20, 24, 0]
    # 3-bit: codes 10 and 21 straddle words, code 31 (bit 29 of word 2) is a top field
    e3 = codegen.prescale_shifts(3)
    assert e3[10] == e3[21] == e3[31] == e3[0] == 0 and e3[11] == 1 and e3[22] == 2 and e3[30] == 26


def test_kernel_spec_rejects_bad_accumulators():
    with pytest.raises(FormatRuleError, match="accumulators"):
        codegen.KernelSpec(4, accumulators=3)
    with pytest.raises(FormatRuleError, match="accumulators"):
        codegen.KernelSpec(4, tu=64, accumulators=2)  # 16 accumulator registers
    assert codegen.KernelSpec(4, tu=32, accumulators=2).name == "q4_tu32_u2_a2_avx2"
    assert "accumulators=2" in codegen.generate(codegen.KernelSpec(4, tu=32, accumulators=2))


def test_prefetch_is_refused_for_the_scalar_kernel():
    with pytest.raises(FormatRuleError, match="prefetch"):
        codegen.KernelSpec(4, isa="scalar", prefetch=True)


def test_bitcast_positions_by_hand():
    # 4-bit: fields at bits 0..12 stay in place, fields at 16..28 are masked in the upper half word
    assert codegen.bitcast_shifts(4) == [0, 4, 8, 12, 0, 4, 8, 12]
    assert codegen.bitcast_shifts(2) == [0, 2, 4, 6, 8, 10, 12, 14] * 2
    t3 = codegen.bitcast_shifts(3)
    # 3-bit word 0: code 5 at bit 15 stays (15 + 3 <= 23), code 6 at bit 18 -> 2; codes 10 and 21
    # straddle (assembled at 0); code 31 at bit 29 of word 2 -> 13
    assert (t3[5], t3[6], t3[9], t3[10], t3[21], t3[31]) == (15, 2, 11, 0, 0, 13)
    assert all(t + 3 <= 23 for t in t3)
    assert codegen.BITCAST_X_MIN == 2.0**-62 and codegen.BITCAST_X_MAX == 2.0**43


def test_bitcast_kernel_source_has_no_per_code_conversion():
    src = codegen.generate(codegen.KernelSpec(4, tu=32, unroll=2, isa="avx2", accumulators=2))
    body = src[src.index("void refsim_qigen_gemv_bc("):src.index("int refsim_qigen_run(")]
    assert "_mm256_cvtepi32_ps" not in body  # fp32 metadata: no conversion at all in this kernel
    assert body.count("_mm256_castsi256_ps(_mm256_and_si256(") == 8 * 4  # 8 codes x 4 vectors
    assert "BC_UNSCALE" in body


@pytest.mark.parametrize("kw, name", [
    ({"bits": 4}, "q4_tu32_u2_avx2"),
    ({"bits": 3, "tu": 16, "isa": "scalar", "openmp": True}, "q3_tu16_u2_scalar_omp"),
    ({"bits": 2, "tu": 8, "unroll": 8, "accumulators": 4, "meta": "f16u8", "prefetch": True}, "q2_tu8_u8_a4_h_pf_avx2"),
])
def test_the_kernel_name_spells_every_compile_time_parameter(kw, name):
    assert codegen.KernelSpec(**kw).name == name


@pytest.mark.parametrize("kw, rule", [
    ({"bits": 4, "tu": 72}, "tu: at most 64 columns .8 accumulators.; got 72"),
    ({"bits": 4, "unroll": 16}, r"unroll: must be one of \[1, 2, 4, 8\] and <= 32/bits; got 16"),
    ({"bits": 4, "isa": "neon"}, "isa"),
    ({"bits": 4, "meta": "bf16"}, "meta"),
    ({"bits": 4, "accumulators": True}, "KernelSpec.accumulators: must be an integer; got True"),
])
def test_kernel_spec_refuses_each_rule_it_states(kw, rule):
    with pytest.raises(FormatRuleError, match=rule):
        codegen.KernelSpec(**kw)


def test_the_generated_text_states_its_spec_and_defines_every_entry_point():
    spec = codegen.KernelSpec(3, tu=16, isa="scalar")
    src = codegen.generate(spec)
    assert src == codegen.generate(codegen.KernelSpec(3, tu=16, isa="scalar"))      # deterministic
    assert src.startswith("/* refsim generated QIGen qGEMV kernel q3_tu16_u2_scalar\n")
    # 3-bit: the chunk is 32 codes in 3 words, in order 0..31 whatever the unroll
    assert "bits=3 tu=16 unroll=2 accumulators=1 meta=f32 isa=scalar openmp=False; chunk order " + \
        ",".join(map(str, range(32))) in src
    assert "#define BITS 3\n#define P 32\n#define TU 16\n#define NA 1\n#define MASK 7\n" in src
    # 2**64 and the bitcast range 2**-62 .. 2**43 as exact hex float literals
    assert "#define BC_C 64\n#define BC_UNSCALE 0x1.0000000000000p+64f\n" in src
    assert "#define BC_XMIN 0x1.0000000000000p-62f\n#define BC_XMAX 0x1.0000000000000p+43f\n" in src
    defined = re.findall(r"^(?:void|int) (refsim_qigen_\w+)\(", src, re.M)
    assert defined == ENTRY_POINTS
    assert "fmaf(" in src and "immintrin" not in src and "_mm256" not in src
    assert "Build: cc -O2 -fPIC -shared -ffp-contract=off (never -ffast-math)" in src


def test_the_avx2_text_uses_fma_intrinsics_and_the_scalar_one_fmaf():
    src = codegen.generate(codegen.KernelSpec(4, tu=16, unroll=4, accumulators=2))
    assert "#include <immintrin.h>\n" in src and "_mm256_fmadd_ps(" in src
    assert "Build: cc -O2 -fPIC -shared -ffp-contract=off -mavx2 -mfma (never -ffast-math)" in src
    # 4-bit, unroll 4: QIGen's in-word order, runs of `unroll` codes from the word's top run down
    # (u = 4, 0): 4,5,6,7 then 0,1,2,3
    assert "chunk order 4,5,6,7,0,1,2,3\n" in src and "#define NA 2\n" in src
    assert "omp parallel for" not in src
    assert "omp parallel for" in codegen.generate(codegen.KernelSpec(4, tu=16, openmp=True))


def test_generate_refuses_anything_but_a_kernel_spec():
    with pytest.raises(FormatRuleError, match="spec: must be a KernelSpec; got dict"):
        codegen.generate({"bits": 4})


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on PATH")
@pytest.mark.parametrize("spec", [codegen.KernelSpec(2, tu=8, isa="scalar"),
                                  codegen.KernelSpec(3, tu=16, accumulators=2, meta="f16u8", prefetch=True)],
                         ids=lambda s: s.name)
def test_the_generated_text_is_valid_c99(tmp_path, spec):
    path = tmp_path / "k.c"
    path.write_text(codegen.generate(spec))
    flags = ["-mavx2", "-mfma"] if spec.isa == "avx2" else []
    done = subprocess.run(["cc", "-std=gnu99", "-fsyntax-only", "-Wall", "-Werror=implicit-function-declaration",
                           *flags, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
