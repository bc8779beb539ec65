"""C code generator for refsim's QIGen-style qGEMV kernels (AVX2/FMA intrinsics or portable C).

One generated translation unit computes ``out = x @ dequant(W)`` over the packed layout of
:mod:`refsim.formats.qigen` for one bit-width, one micro-tile width ``tu`` (columns kept in
registers: ``tu/8`` accumulators) and one ``unroll`` (QIGen's order of the codes inside a packed
word). Shapes (M, K, N), block sizes (mb, tb), the group size and the block order are run-time
arguments, so one compiled library serves every shape.

Loop nest (per column the FMA order is exactly :func:`refsim.qigen.oracle.kernel_k_order`)::

    for p in panels                      # "#pragma omp parallel for" when openmp=True
      for kb in K-blocks (increasing)    # block storage slot from slot_of[p*KB + kb]
        for b in batch rows              # the block stays in L1 while the batch reuses it
          for j1 in 0, tu, 2tu, ... < tb # micro-GEMV: tu/8 vector accumulators
            acc <- accbuf[b, cols]       # per-column running sum of the current group
            for chunk in block (P rows)  # one word (2/4-bit) or word triple (3-bit) per column
              load tu/8 words (x3 for 3-bit)
              for v in chunk_order: acc = fma(set1(x[b,k0+v]), cvt((w >> bits*v) & mask), acc)
              if group ends: y = fma(fnmadd(z, r, acc), s, y); acc = 0
            accbuf[b, cols] <- acc

The scalar variant has the same loop nest with ``float acc[tu]`` and ``fmaf`` (C99), so it is
bit-identical to the AVX2 one. The generated code needs ``-ffp-contract=off`` (no implicit
fusion beyond the explicit ``_mm256_fmadd_ps``/``fmaf``) and must never be built with
``-ffast-math``; :mod:`refsim.qigen.build` takes care of both.
"""

from __future__ import annotations

from dataclasses import dataclass

from refsim._validate import require_bits, require_choice, require_divisible
from refsim.errors import FormatRuleError
from refsim.qigen.oracle import UNROLLS, chunk_order

__all__ = ["KernelSpec", "generate", "ISAS"]

ISAS = ("avx2", "scalar")


@dataclass(frozen=True)
class KernelSpec:
    """Compile-time parameters of one generated kernel.

    bits: 2, 3 or 4. tu: columns per micro-tile (multiple of 8; ``tu/8`` vector accumulators).
    unroll: 1, 2, 4 or 8 (QIGen's in-word order; ignored for 3-bit, whose order is 0..31).
    isa: "avx2" (AVX2 + FMA intrinsics) or "scalar" (portable C99 ``fmaf``). openmp: parallel
    over panels.
    """

    bits: int
    tu: int = 32
    unroll: int = 2
    isa: str = "avx2"
    openmp: bool = False

    def __post_init__(self) -> None:
        require_bits(self.bits, (2, 3, 4))
        require_divisible("tu", self.tu, 8, "micro-tile width tu must be a positive multiple of 8")
        if self.tu > 64:
            raise FormatRuleError(f"tu: at most 64 columns (8 accumulators); got {self.tu}")
        if self.unroll not in UNROLLS or (self.bits != 3 and self.unroll > 32 // self.bits):
            raise FormatRuleError(f"unroll: must be one of {list(UNROLLS)} and <= 32/bits; got {self.unroll}")
        require_choice("isa", self.isa, ISAS)

    @property
    def name(self) -> str:
        omp = "_omp" if self.openmp else ""
        return f"q{self.bits}_tu{self.tu}_u{self.unroll}_{self.isa}{omp}"


def _extract(bits: int, v: int, word: str, shift_fn, or_fn, and_fn) -> str:
    """Expression extracting code ``v`` of a chunk (3-bit: from words w0, w1, w2)."""
    if bits != 3:
        return and_fn(shift_fn(word.format(0), bits * v))
    bit = 3 * v
    w, s = divmod(bit, 32)
    if s <= 29:
        return and_fn(shift_fn(word.format(w), s))
    # straddles words w and w+1: low (32-s) bits from w, the rest from w+1
    return and_fn(or_fn(shift_fn(word.format(w), s), f"SHL({word.format(w + 1)}, {32 - s})"))


_HEADER = """\
/* refsim generated QIGen qGEMV kernel {name}
 *
 * out[b, c] = sum over groups g of s[g,c] * (sum_k x[b,k]*q[k,c] - z[g,c]*sum_k x[b,k]) + bias[c]
 * computed in fp32 with the exact operation order of refsim/qigen/oracle.py (qgemv_oracle),
 * which this kernel must match bit for bit. Layout: refsim/formats/qigen.py.
 * bits={bits} tu={tu} unroll={unroll} isa={isa} openmp={openmp}; chunk order {order}
 * Build: cc -O2 -fPIC -shared -ffp-contract=off {isa_flags}(never -ffast-math)
 */
#include <stdint.h>
#include <math.h>
"""


def _sums_fn() -> str:
    return """
/* r[b, g] = x[b, g*gs] + ... + x[b, g*gs+gs-1], sequential fp32 adds */
void refsim_qigen_sums(const float* x, int M, int K, int gs, float* r) {
  for (int b = 0; b < M; b++)
    for (int g = 0; g < K / gs; g++) {
      float acc = 0.0f;
      for (int k = g * gs; k < (g + 1) * gs; k++) acc = acc + x[(int64_t)b * K + k];
      r[(int64_t)b * (K / gs) + g] = acc;
    }
}
"""


def _signature() -> str:
    return """
/* x (M,K) f32; W packed int32 (refsim.formats.qigen); scales, zeros (K/gs, N) f32;
 * r (M, K/gs) f32 from refsim_qigen_sums; slot_of (N/tb * K/mb) int32: storage slot of block
 * (kb, p) at p*KB + kb; accbuf (M,N) f32 zero on entry; y (M,N) f32 = bias (or 0) on entry. */
void refsim_qigen_gemv(const float* restrict x, const int32_t* restrict W,
                       const float* restrict scales, const float* restrict zeros,
                       const float* restrict r, const int32_t* restrict slot_of,
                       float* restrict accbuf, float* restrict y,
                       int M, int K, int N, int mb, int tb, int gs) {
  const int KB = K / mb, NP = N / tb, G = K / gs;
  const int64_t wpb = (int64_t)mb * BITS / 32 * tb;   /* words per block */
"""


def generate(spec: KernelSpec) -> str:
    """C99 source of the kernel described by ``spec`` (a str, deterministic for a given spec)."""
    bits, tu = spec.bits, spec.tu
    order = chunk_order(bits, spec.unroll if bits != 3 else 1)
    p = len(order)
    nv = tu // 8
    avx = spec.isa == "avx2"
    lines = [_HEADER.format(name=spec.name, bits=bits, tu=tu, unroll=spec.unroll, isa=spec.isa,
                            openmp=spec.openmp, order=",".join(map(str, order)),
                            isa_flags="-mavx2 -mfma " if avx else "")]
    if avx:
        lines.append("#include <immintrin.h>\n")
    lines.append(f"#define BITS {bits}\n#define P {p}\n#define TU {tu}\n#define MASK {(1 << bits) - 1}\n")
    lines.append(_sums_fn())
    lines.append(_signature())
    if avx:
        lines.append("  const __m256i mask = _mm256_set1_epi32(MASK);\n")
    if spec.openmp:
        lines.append("  #pragma omp parallel for schedule(static)\n")
    lines.append("  for (int p = 0; p < NP; p++) {\n")
    lines.append("    for (int kb = 0; kb < KB; kb++) {\n")
    lines.append("      const int32_t* Wb = W + (int64_t)slot_of[p * KB + kb] * wpb;\n")
    lines.append("      for (int b = 0; b < M; b++) {\n")
    lines.append("        const float* xb = x + (int64_t)b * K;\n")
    lines.append("        for (int j1 = 0; j1 < tb; j1 += TU) {\n")
    lines.append("          const int64_t col = (int64_t)p * tb + j1;\n")
    lines.append("          float* ab = accbuf + (int64_t)b * N + col;\n")
    lines.append("          float* yb = y + (int64_t)b * N + col;\n")
    if avx:
        for v in range(nv):
            lines.append(f"          __m256 acc{v} = _mm256_loadu_ps(ab + {8 * v});\n")
    else:
        lines.append("          float acc[TU];\n")
        lines.append("          for (int c = 0; c < TU; c++) acc[c] = ab[c];\n")
    lines.append("          for (int ch = 0; ch < mb / P; ch++) {\n")
    lines.append("            const int k0 = kb * mb + ch * P;\n")
    # word loads
    if bits == 3:
        lines.append("            const int32_t* wc = Wb + (int64_t)ch * 3 * tb + (j1 / 8) * 24;\n")
    else:
        lines.append("            const int32_t* wc = Wb + (int64_t)ch * tb + j1;\n")
    if avx:
        for v in range(nv):
            if bits == 3:
                for w in range(3):
                    lines.append(f"            const __m256i w{w}_{v} = _mm256_loadu_si256((const __m256i*)(wc + {24 * v + 8 * w}));\n")
            else:
                lines.append(f"            const __m256i w0_{v} = _mm256_loadu_si256((const __m256i*)(wc + {8 * v}));\n")
        for u in order:
            lines.append(f"            {{ const __m256 xv = _mm256_set1_ps(xb[k0 + {u}]);\n")
            for v in range(nv):
                expr = _extract(
                    bits, u, "w{}_" + str(v),
                    lambda a, s: f"_mm256_srli_epi32({a}, {s})" if s else a,
                    lambda a, b2: f"_mm256_or_si256({a}, {b2})",
                    lambda a: f"_mm256_and_si256({a}, mask)",
                ).replace("SHL(", "_mm256_slli_epi32(")
                lines.append(f"              acc{v} = _mm256_fmadd_ps(xv, _mm256_cvtepi32_ps({expr}), acc{v});\n")
            lines.append("            }\n")
    else:
        lines.append("            for (int c = 0; c < TU; c++) {\n")
        if bits == 3:
            lines.append("              const uint32_t* wq = (const uint32_t*)wc + (c / 8) * 24 + (c % 8);\n")
            lines.append("              const uint32_t w0 = wq[0], w1 = wq[8], w2 = wq[16];\n")
        else:
            lines.append("              const uint32_t w0 = (uint32_t)wc[c];\n")
        for u in order:
            expr = _extract(
                bits, u, "w{}",
                lambda a, s: f"({a} >> {s})" if s else a,
                lambda a, b2: f"({a} | {b2})",
                lambda a: f"({a} & MASK)",
            ).replace("SHL(", "SHLU(")
            lines.append(f"              acc[c] = fmaf(xb[k0 + {u}], (float)(int32_t){expr}, acc[c]);\n")
        lines.append("            }\n")
    # group epilogue
    lines.append("            if ((k0 + P) % gs == 0) {\n")
    lines.append("              const int g = (k0 + P) / gs - 1;\n")
    lines.append("              const float* sg = scales + (int64_t)g * N + col;\n")
    lines.append("              const float* zg = zeros + (int64_t)g * N + col;\n")
    if avx:
        lines.append("              const __m256 rv = _mm256_set1_ps(r[(int64_t)b * G + g]);\n")
        for v in range(nv):
            o = 8 * v
            lines.append(
                f"              _mm256_storeu_ps(yb + {o}, _mm256_fmadd_ps(_mm256_fnmadd_ps(_mm256_loadu_ps(zg + {o}), rv, acc{v}),"
                f" _mm256_loadu_ps(sg + {o}), _mm256_loadu_ps(yb + {o})));\n")
            lines.append(f"              acc{v} = _mm256_setzero_ps();\n")
    else:
        lines.append("              const float rg = r[(int64_t)b * G + g];\n")
        lines.append("              for (int c = 0; c < TU; c++) {\n")
        lines.append("                yb[c] = fmaf(fmaf(-zg[c], rg, acc[c]), sg[c], yb[c]);\n")
        lines.append("                acc[c] = 0.0f;\n")
        lines.append("              }\n")
    lines.append("            }\n")
    lines.append("          }\n")  # chunk loop
    if avx:
        for v in range(nv):
            lines.append(f"          _mm256_storeu_ps(ab + {8 * v}, acc{v});\n")
    else:
        lines.append("          for (int c = 0; c < TU; c++) ab[c] = acc[c];\n")
    lines.append("        }\n      }\n    }\n  }\n}\n")
    src = "".join(lines)
    if not avx:
        src = src.replace("#define MASK", "#define SHLU(a, s) ((uint32_t)((a) << (s)))\n#define MASK", 1)
    return src
