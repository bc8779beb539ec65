"""C code generator for refsim's QIGen-style qGEMV kernels (AVX2/FMA intrinsics or portable C).

One generated translation unit computes ``out = x @ dequant(W)`` over the packed layout of
:mod:`refsim.formats.qigen` for one bit-width, one micro-tile width ``tu`` (columns kept in
registers: ``tu/8`` accumulators) and one ``unroll`` (QIGen's order of the codes inside a packed
word) and ``accumulators`` (A independent partial sums per column, combined at the end of
each group by a fixed tree: see :mod:`refsim.qigen.oracle`). Shapes (M, K, N), block sizes (mb, tb), the group size and the block order are run-time
arguments, so one compiled library serves every shape.

Loop nest (per column the FMA order is exactly :func:`refsim.qigen.oracle.kernel_k_order`)::

    for p in panels                      # "#pragma omp parallel for" when openmp=True
      for kb in K-blocks (increasing)    # block storage slot from slot_of[p*KB + kb]
        for b in batch rows              # the block stays in L1 while the batch reuses it
          for j1 in 0, tu, 2tu, ... < tb # micro-GEMV: A * tu/8 vector accumulators
            acc[a] <- accbuf[a, b, cols] # per-column partial sums of the current group
            for chunk in block (P rows)  # one word (2/4-bit) or word triple (3-bit) per column
              load tu/8 words (x3 for 3-bit)
              [prefetch: the same number of bytes of the NEXT block, so that the whole next block
               is requested while this one is computed - the panel's tiles read a block with a
               tb*4-byte stride, which the hardware prefetchers stream poorly when mb is small]
              for i, v in enumerate(chunk_order):
                acc[i%A] = fma(set1(x[b,k0+v]), cvt((w >> bits*v) & mask), acc[i%A])
                [bitcast path: fma(set1(xs[b,k0+v]), bits_as_fp32(w_or_w>>16 & (MASK << t)), acc)
                 with xs = x * 2^(149 - t - 64) and the partial sums carrying 2^-64; see
                 bitcast_shifts and docs/qigen.md section 3]
              if group ends: t = tree(acc); y = fma(fnmadd(z, r, t), s, y); acc[:] = 0
            accbuf[a, b, cols] <- acc[a]

With A = 1 each column's sum is one chain of dependent FMAs, so a micro-tile retires at most
``tu/8`` FMAs per FMA latency; A = 2 or 4 gives the out-of-order core A times more independent
chains for the same number of loaded words (A * tu/8 <= 8 accumulator registers).

The scalar variant has the same loop nest with ``float acc[tu]`` and ``fmaf`` (C99), so it is
bit-identical to the AVX2 one. The generated code needs ``-ffp-contract=off`` (no implicit
fusion beyond the explicit ``_mm256_fmadd_ps``/``fmaf``) and must never be built with
``-ffast-math``; :mod:`refsim.native.build` takes care of both.
"""

from __future__ import annotations

from dataclasses import dataclass

from refsim._validate import require_bits, require_choice, require_divisible, require_fields
from refsim.errors import FormatRuleError
from refsim.qigen.oracle import ACCUMULATORS, UNROLLS, chunk_order

__all__ = ["KernelSpec", "generate", "prescale_shifts", "bitcast_shifts", "ISAS", "METAS",
           "BITCAST_SCALE_EXP", "BITCAST_X_MIN", "BITCAST_X_MAX"]

ISAS = ("avx2", "scalar")
METAS = ("f32", "f16u8")  # scales/zeros operands: fp32/fp32, or fp16 bits (uint16) / uint8

# Bitcast path (see docs/qigen.md section 3): codes are read as subnormal fp32 bit patterns
# q * 2**(t - 149); x is pre-scaled by 2**(149 - t - C) so each product is x * q * 2**-C, and
# the partial sums carry the exact factor 2**-C until the group's end. Exact (the same bits as
# the shift path) when every nonzero |x| >= 2**(C - 126) (every partial sum is then a multiple
# of 2**-149 after scaling: no subnormal rounding) and every |x| < 2**(C - 21) (x * 2**(149 - C)
# does not overflow), with the FPU flushing no subnormals (MXCSR FTZ and DAZ clear).
BITCAST_SCALE_EXP = 64
BITCAST_X_MIN = 2.0 ** (BITCAST_SCALE_EXP - 126)  # 2**-62
BITCAST_X_MAX = 2.0 ** (BITCAST_SCALE_EXP - 21)  # 2**43


@dataclass(frozen=True)
class KernelSpec:
    """Compile-time parameters of one generated kernel.

    bits: 2, 3 or 4. tu: columns per micro-tile (multiple of 8; ``tu/8`` vector accumulators).
    unroll: 1, 2, 4 or 8 (QIGen's in-word order; ignored for 3-bit, whose order is 0..31).
    isa: "avx2" (AVX2 + FMA intrinsics) or "scalar" (portable C99 ``fmaf``). openmp: parallel
    over panels. accumulators: partial sums per column, 1, 2 or 4 (A = 1 is the single-chain
    order); at most 8 vector accumulators in all (``accumulators * tu/8 <= 8``).
    meta: how the kernel reads scales and zeros: "f32" (float32 both) or "f16u8" (scales as
    IEEE binary16 bit patterns, zeros as uint8; 3 bytes per group and column instead of 8).
    "f16u8" is only for matrices whose scales are exactly fp16 values and whose zeros are
    integers in [0, 255] (:attr:`refsim.qigen.kernel.QIGenMatrix.compact_meta`); the kernel
    widens them exactly, so both give the same bits.
    prefetch: (AVX2 only) software-prefetch the next block's words, spread over the current
    block's iterations; no effect on the arithmetic.
    """

    bits: int
    tu: int = 32
    unroll: int = 2
    isa: str = "avx2"
    openmp: bool = False
    accumulators: int = 1
    meta: str = "f32"
    prefetch: bool = False

    def __post_init__(self) -> None:
        require_fields(self)
        require_bits(self.bits, (2, 3, 4))
        require_divisible("tu", self.tu, 8, "micro-tile width tu must be a positive multiple of 8")
        if self.tu > 64:
            raise FormatRuleError(f"tu: at most 64 columns (8 accumulators); got {self.tu}")
        if self.unroll not in UNROLLS or (self.bits != 3 and self.unroll > 32 // self.bits):
            raise FormatRuleError(f"unroll: must be one of {list(UNROLLS)} and <= 32/bits; got {self.unroll}")
        require_choice("isa", self.isa, ISAS)
        if isinstance(self.accumulators, bool) or self.accumulators not in ACCUMULATORS:
            raise FormatRuleError(f"accumulators: must be one of {list(ACCUMULATORS)}; got {self.accumulators!r}")
        require_choice("meta", self.meta, METAS)
        if self.prefetch and self.isa != "avx2":
            raise FormatRuleError(f"prefetch: only the avx2 kernel prefetches; got isa={self.isa!r}")
        if self.accumulators * self.tu > 64:
            raise FormatRuleError(f"accumulators: accumulators * tu/8 must be <= 8 vector registers; got "
                                  f"{self.accumulators} x {self.tu // 8}")

    @property
    def name(self) -> str:
        omp = "_omp" if self.openmp else ""
        acc = f"_a{self.accumulators}" if self.accumulators > 1 else ""
        meta = "_h" if self.meta == "f16u8" else ""
        pf = "_pf" if self.prefetch else ""
        return f"q{self.bits}_tu{self.tu}_u{self.unroll}{acc}{meta}{pf}_{self.isa}{omp}"


def _code_position(bits: int, v: int) -> tuple[int, int, bool]:
    """(word, shift, straddles) of code ``v`` of a chunk (3-bit chunks are 3 words)."""
    if bits != 3:
        return 0, bits * v, False
    w, sh = divmod(3 * v, 32)
    return w, sh, sh > 29


def prescale_shifts(bits: int, unroll: int = 2) -> list[int]:
    """For each code ``v`` of a chunk, the power of two ``2**-e`` the pre-scaled x carries.

    Fast path: a code whose field sits at bit ``s`` with ``0 < s`` and ``s + bits < 32`` is
    extracted with one ``and`` against ``MASK << s`` (value ``q * 2**s``, exact in fp32) and
    multiplied by ``x * 2**-s`` (exact while ``x * 2**-s`` stays normal), so the product, and
    the fused result, equal those of ``x * q``. Codes at bit 0, at the top of a word
    (``srli`` alone) and straddling words use ``e = 0``.
    """
    bits = require_bits(bits, (2, 3, 4))
    if isinstance(unroll, bool) or unroll not in UNROLLS:
        raise FormatRuleError(f"unroll: must be one of {list(UNROLLS)}; got {unroll!r}")
    out = []
    for v in range(32 if bits == 3 else 32 // bits):
        _, sh, straddle = _code_position(bits, v)
        out.append(sh if (sh > 0 and sh + bits < 32 and not straddle) else 0)
    return out


def bitcast_shifts(bits: int) -> list[int]:
    """For each code ``v`` of a chunk, the bit position ``t`` at which the bitcast path leaves it.

    The bitcast path (:data:`BITCAST_SCALE_EXP`) extracts code ``q`` as the int32 ``q * 2**t`` with
    ``t + bits <= 23`` and reads those bits as an fp32: a subnormal (or zero) of value
    ``q * 2**(t - 149)``, so no int-to-float conversion is needed. A field starting at bit
    ``s < 16`` stays in place (one ``and`` against ``MASK << s``, ``t = s``; ``s + bits <= 18``);
    a field starting at ``s >= 16`` is masked in the word's upper half, ``w >> 16`` (``t = s - 16``;
    the AVX2 kernel gets it by a load 2 bytes further on, the scalar one by a shift); codes
    straddling two words (3-bit codes 10 and 21) are assembled at ``t = 0`` as on the shift path.
    """
    bits = require_bits(bits, (2, 3, 4))
    out = []
    for v in range(32 if bits == 3 else 32 // bits):
        out.append(_bitcast_field(bits, v)[1])
    return out


def _bitcast_field(bits: int, v: int) -> tuple[str, int]:
    """(how, t) of code ``v`` on the bitcast path: how in {"straddle", "top", "low", "high"}."""
    _, sh, straddle = _code_position(bits, v)
    if straddle:
        return "straddle", 0
    if sh < 16:
        return "low", sh
    return "high", sh - 16


def _uses_high_half(bits: int, word: int) -> bool:
    """True if some code of chunk word ``word`` is masked in that word shifted right by 16."""
    return any(_code_position(bits, v)[0] == word and _bitcast_field(bits, v)[0] == "high"
               for v in range(32 if bits == 3 else 32 // bits))


def _extract(bits: int, v: int, word: str, isa: str, mode: str) -> str:
    """Expression of code ``v`` of a chunk as an int32: ``q`` (mode "shift"), ``q * 2**e``
    (mode "prescaled", :func:`prescale_shifts`) or ``q * 2**t`` (mode "bitcast",
    :func:`bitcast_shifts`; ``word`` with "w" replaced by "wh" names the word shifted right by 16)."""
    w, sh, straddle = _code_position(bits, v)
    src = word.format(w)
    if isa == "avx2":
        srl = lambda a, k: f"_mm256_srli_epi32({a}, {k})" if k else a  # noqa: E731
        band = lambda a, m: f"_mm256_and_si256({a}, {m})"  # noqa: E731
        shl = lambda a, k: f"_mm256_slli_epi32({a}, {k})"  # noqa: E731
        bor = lambda a, b: f"_mm256_or_si256({a}, {b})"  # noqa: E731
        mask = "mask"
        shifted_mask = f"mask_s{sh}"
    else:
        srl = lambda a, k: f"({a} >> {k})" if k else a  # noqa: E731
        band = lambda a, m: f"({a} & {m})"  # noqa: E731
        shl = lambda a, k: f"((uint32_t)({a} << {k}))"  # noqa: E731
        bor = lambda a, b: f"({a} | {b})"  # noqa: E731
        mask = "MASK"
        shifted_mask = f"((uint32_t)MASK << {sh})"
    if straddle:
        return band(bor(srl(src, sh), shl(word.format(w + 1), 32 - sh)), mask)
    if sh + bits == 32 and mode != "bitcast":
        return srl(src, sh)  # top field: the logical shift leaves exactly the code
    if mode == "bitcast":
        how, t = _bitcast_field(bits, v)
        if how == "high":
            high = word.replace("w", "wh", 1).format(w)
            if isa == "avx2":
                return band(high, f"mask_s{t}" if t else mask)
            return band(high, f"((uint32_t)MASK << {t})")
        return band(src, shifted_mask) if sh else band(src, mask)
    if mode == "prescaled" and sh > 0:
        return band(src, shifted_mask)
    return band(srl(src, sh), mask)


_HEADER = """\
/* refsim generated QIGen qGEMV kernel {name}
 *
 * out[b, c] = sum over groups g of s[g,c] * (sum_k x[b,k]*q[k,c] - z[g,c]*sum_k x[b,k]) + bias[c]
 * computed in fp32 with the exact operation order of refsim/qigen/oracle.py (qgemv_oracle),
 * which this kernel must match bit for bit. Layout: refsim/formats/qigen.py.
 * bits={bits} tu={tu} unroll={unroll} accumulators={acc} meta={meta} isa={isa} openmp={openmp}; chunk order {order}
 * (the i-th FMA of a group goes to partial sum i % accumulators; at the group's end the partial
 * sums are combined as a0, a0+a1 or (a0+a1)+(a2+a3))
 * Entry points: refsim_qigen_gemv (codes shifted down, any finite x), refsim_qigen_gemv_ps
 * (x pre-scaled by refsim_qigen_prescale, codes masked in place: one op fewer per code; the
 * caller uses it only when every nonzero |x| >= 2^-96 so the pre-scaling is exact) and
 * refsim_qigen_gemv_bc (x pre-scaled by refsim_qigen_prescale_bc, codes masked to q * 2^t and
 * read as subnormal fp32 bit patterns, no conversion; partial sums carry 2^-BC_C; exact while
 * every nonzero |x| is in [2^(BC_C-126), 2^(BC_C-21)) and subnormals are not flushed).
 * Build: cc -O2 -fPIC -shared -ffp-contract=off {isa_flags}(never -ffast-math)
 */
#include <stdint.h>
#include <string.h>
#include <math.h>

/* binary16 bits -> float, exact: the fp32 with bits (h & 0x7fff) << 13 (sign moved to bit 31)
 * is the half's value times 2^-112 for normal and subnormal halves alike; times 2^112 is exact.
 * (Scales are finite, so no inf/NaN patterns occur.) */
static inline float refsim_h2f(uint16_t h) {{
  uint32_t b = ((uint32_t)(h & 0x7fffu) << 13) | ((uint32_t)(h & 0x8000u) << 16);
  float f;
  memcpy(&f, &b, 4);
  return f * 0x1p112f;
}}

/* int32 bits -> the fp32 with those bits (the bitcast path: q * 2^t reads as q * 2^(t-149)) */
static inline float refsim_i2f(uint32_t b) {{
  float f;
  memcpy(&f, &b, 4);
  return f;
}}

/* 1 if the FPU flushes subnormal inputs or outputs (x86 MXCSR DAZ or FTZ): the bitcast path
 * reads codes as subnormals and is then not used */
static int refsim_flushes_subnormals(void) {{
#if defined(__SSE__) || defined(__x86_64__)
  unsigned int csr;
  __asm__ volatile("stmxcsr %0" : "=m"(csr));
  return (csr & 0x8040u) != 0;
#else
  volatile float tiny = 0x1p-149f;
  return tiny * 1.0f == 0.0f;
#endif
}}
"""


def _sums_fn(bits: int, unroll: int) -> str:
    exps = prescale_shifts(bits, unroll)
    table = ", ".join(f"{float.hex(2.0 ** -e)}f" for e in exps)  # exact hex literals
    bc_table = ", ".join(f"{float.hex(2.0 ** (149 - t - BITCAST_SCALE_EXP))}f" for t in bitcast_shifts(bits))
    return f"""
/* r[b, g] = x[b, g*gs] + ... + x[b, g*gs+gs-1], sequential fp32 adds within each group; the
 * groups' chains are interleaved (independent, so the core overlaps them; same order per group) */
void refsim_qigen_sums(const float* x, int M, int K, int gs, float* r) {{
  const int G = K / gs;
  for (int b = 0; b < M; b++) {{
    float* rb = r + (int64_t)b * G;
    const float* xb = x + (int64_t)b * K;
    for (int g = 0; g < G; g++) rb[g] = 0.0f;
    for (int i = 0; i < gs; i++)
      for (int g = 0; g < G; g++) rb[g] = rb[g] + xb[(int64_t)g * gs + i];
  }}
}}

/* xs[b, k] = x[b, k] * 2^-e(k mod P): exact powers of two (see prescale_shifts) while every
 * nonzero |x| >= 2^-96. Returns 1 if some nonzero |x| < 2^-96 (the caller then uses the shift
 * path and ignores xs), else 0. */
int refsim_qigen_prescale(const float* x, int M, int K, float* xs) {{
  static const float f[P] = {{ {table} }};
  int tiny = 0;
  for (int64_t k0 = 0; k0 < (int64_t)M * K; k0 += P)
    for (int v = 0; v < P; v++) {{
      const float a = x[k0 + v];
      tiny |= (fabsf(a) < 0x1p-96f) & (a != 0.0f);
      xs[k0 + v] = a * f[v];
    }}
  return tiny;
}}

/* Bitcast path: xs[b, k] = x[b, k] * 2^(149 - t(k mod P) - BC_C), exact powers of two (see
 * bitcast_shifts). Returns 1 (xs then unused) if some nonzero |x| < 2^(BC_C-126) or some
 * |x| >= 2^(BC_C-21), or if the FPU flushes subnormals; else 0. */
int refsim_qigen_prescale_bc(const float* x, int M, int K, float* xs) {{
  static const float f[P] = {{ {bc_table} }};
  if (refsim_flushes_subnormals()) return 1;
  int out = 0;
  for (int64_t k0 = 0; k0 < (int64_t)M * K; k0 += P)
    for (int v = 0; v < P; v++) {{
      const float a = fabsf(x[k0 + v]);
      out |= ((a < BC_XMIN) & (a != 0.0f)) | (a >= BC_XMAX);
      xs[k0 + v] = x[k0 + v] * f[v];
    }}
  return out;
}}
"""


def _signature(fn: str, meta: str) -> str:
    st, zt = ("float", "float") if meta == "f32" else ("uint16_t", "uint8_t")
    return f"""
/* x (M,K) f32; W packed int32 (refsim.formats.qigen); scales, zeros panel-major (N/tb, K/gs, tb)
 * ({st} scales, {zt} zeros)
 * (each panel's metadata contiguous: one stream instead of K/gs strided ones);
 * r (M, K/gs) f32 from refsim_qigen_sums; slot_of (N/tb * K/mb) int32: storage slot of block
 * (kb, p) at p*KB + kb; accbuf (A,M,N) f32 zero on entry (A = accumulators); y (M,N) f32 = bias (or 0) on entry. */
void {fn}(const float* restrict x, const int32_t* restrict W,
                       const {st}* restrict scales, const {zt}* restrict zeros,
                       const float* restrict r, const int32_t* restrict slot_of,
                       float* restrict accbuf, float* restrict y,
                       int M, int K, int N, int mb, int tb, int gs) {{
  const int KB = K / mb, NP = N / tb, G = K / gs;
  const int64_t wpb = (int64_t)mb * BITS / 32 * tb;   /* words per block */
"""


def _body(spec: KernelSpec, order: list[int], fn: str, mode: str) -> str:
    """C source of one kernel entry point; mode: "shift", "prescaled" or "bitcast" (how codes
    become fp32 operands, see :func:`_extract`; same bits for every mode)."""
    bits, tu, na = spec.bits, spec.tu, spec.accumulators
    nv = tu // 8
    avx = spec.isa == "avx2"
    lines = [_signature(fn, spec.meta)]
    compact = spec.meta == "f16u8"
    lines.append("  const int64_t MN = (int64_t)M * N;\n")
    if avx:
        lines.append("  const __m256i mask = _mm256_set1_epi32(MASK);\n")
        if compact:
            lines.append("  const __m256i h_mag = _mm256_set1_epi32(0x7fff), h_sign = _mm256_set1_epi32(0x8000);\n")
            lines.append("  const __m256 h_scale = _mm256_set1_ps(0x1p112f);\n")
        if mode == "prescaled":
            for sh in sorted(set(e for e in prescale_shifts(bits) if e)):
                lines.append(f"  const __m256i mask_s{sh} = _mm256_set1_epi32(MASK << {sh});\n")
        if mode == "bitcast":
            for sh in sorted(set(t for t in bitcast_shifts(bits) if t)):
                lines.append(f"  const __m256i mask_s{sh} = _mm256_set1_epi32(MASK << {sh});\n")
    if spec.openmp:
        lines.append("  #pragma omp parallel for schedule(static)\n")
    lines.append("  for (int p = 0; p < NP; p++) {\n")
    lines.append("    for (int kb = 0; kb < KB; kb++) {\n")
    lines.append("      const int32_t* Wb = W + (int64_t)slot_of[p * KB + kb] * wpb;\n")
    if avx and spec.prefetch:
        # the block processed next (next K-block of this panel, else the next panel's first)
        lines.append("      const int32_t* Wn = W + (int64_t)slot_of[kb + 1 < KB ? p * KB + kb + 1 : "
                     "(p + 1 < NP ? (p + 1) * KB : p * KB + kb)] * wpb;\n")
    lines.append("      for (int b = 0; b < M; b++) {\n")
    lines.append("        const float* xb = x + (int64_t)b * K;\n")
    lines.append("        for (int j1 = 0; j1 < tb; j1 += TU) {\n")
    lines.append("          const int64_t col = (int64_t)p * tb + j1;\n")
    lines.append("          float* ab = accbuf + (int64_t)b * N + col;\n")
    lines.append("          float* yb = y + (int64_t)b * N + col;\n")
    if avx:
        for a in range(na):
            for v in range(nv):
                lines.append(f"          __m256 acc{v}_{a} = _mm256_loadu_ps(ab + {a} * MN + {8 * v});\n")
    else:
        lines.append("          float acc[NA][TU];\n")
        lines.append("          for (int a = 0; a < NA; a++)\n")
        lines.append("            for (int c = 0; c < TU; c++) acc[a][c] = ab[a * MN + c];\n")
    # group bookkeeping without a division per chunk: g = current group, left = rows to its end
    lines.append("          int g = (kb * mb) / gs, left = gs - (kb * mb) % gs;\n")
    lines.append("          for (int ch = 0; ch < mb / P; ch++) {\n")
    lines.append("            const int k0 = kb * mb + ch * P;\n")
    if bits == 3:
        lines.append("            const int32_t* wc = Wb + (int64_t)ch * 3 * tb + (j1 / 8) * 24;\n")
    else:
        lines.append("            const int32_t* wc = Wb + (int64_t)ch * tb + j1;\n")
    if avx and spec.prefetch:
        # spread the next block's lines over this block's (tb/TU)*(mb/P) chunk iterations:
        # WPI words (= the words one iteration reads) per iteration, one prefetch per 64-byte line
        wpi = 3 * tu if bits == 3 else tu
        lines.append(f"            {{ const char* pf = (const char*)(Wn + ((int64_t)(j1 / TU) * (mb / P) + ch) * {wpi});\n")
        for off in range(0, wpi * 4, 64):
            lines.append(f"              _mm_prefetch(pf + {off}, _MM_HINT_T0);\n")
        lines.append("            }\n")
    if avx:
        # 3-bit: word w is loaded just before the first code that needs it (codes 10 and 21
        # straddle into words 1 and 2), so at most two words per column vector are live:
        # 8 + tu/8 accumulators + x fits the 16 ymm registers at tu = 32
        first_use = {0: order[0]} if bits != 3 else {0: 0, 1: 10, 2: 21}
        for i, u in enumerate(order):
            a = i % na
            for w, at in first_use.items():
                if u == at:
                    for v in range(nv):
                        off = 24 * v + 8 * w if bits == 3 else 8 * v
                        lines.append(f"            const __m256i w{w}_{v} = _mm256_loadu_si256((const __m256i*)(wc + {off}));\n")
                        if mode == "bitcast" and _uses_high_half(bits, w):
                            # the upper half words (w >> 16 in the low 16 bits of each lane) by one
                            # unaligned load 2 bytes on instead of a shift: the lane's upper 16 bits
                            # (the next column's low half) are masked away; the packed words are
                            # padded (kernel.PAD_WORDS) so the last lane stays in the buffer
                            lines.append(f"            const __m256i wh{w}_{v} = _mm256_loadu_si256((const __m256i*)((const char*)(wc + {off}) + 2));\n")
            lines.append(f"            {{ const __m256 xv = _mm256_set1_ps(xb[k0 + {u}]);\n")
            for v in range(nv):
                expr = _extract(bits, u, "w{}_" + str(v), "avx2", mode)
                fexpr = f"_mm256_castsi256_ps({expr})" if mode == "bitcast" else f"_mm256_cvtepi32_ps({expr})"
                lines.append(f"              acc{v}_{a} = _mm256_fmadd_ps(xv, {fexpr}, acc{v}_{a});\n")
            lines.append("            }\n")
    else:
        lines.append("            for (int c = 0; c < TU; c++) {\n")
        if bits == 3:
            lines.append("              const uint32_t* wq = (const uint32_t*)wc + (c / 8) * 24 + (c % 8);\n")
            lines.append("              const uint32_t w0 = wq[0], w1 = wq[8], w2 = wq[16];\n")
        else:
            lines.append("              const uint32_t w0 = (uint32_t)wc[c];\n")
        if mode == "bitcast":
            for w in range(3 if bits == 3 else 1):
                if _uses_high_half(bits, w):
                    lines.append(f"              const uint32_t wh{w} = w{w} >> 16;\n")
        for i, u in enumerate(order):
            expr = _extract(bits, u, "w{}", "scalar", mode)
            a = i % na
            fexpr = f"refsim_i2f({expr})" if mode == "bitcast" else f"(float)(int32_t){expr}"
            lines.append(f"              acc[{a}][c] = fmaf(xb[k0 + {u}], {fexpr}, acc[{a}][c]);\n")
        lines.append("            }\n")
    lines.append("            left -= P;\n")
    lines.append("            if (left == 0) {\n")
    st, zt = ("uint16_t", "uint8_t") if compact else ("float", "float")
    lines.append(f"              const {st}* sg = scales + ((int64_t)p * G + g) * tb + j1;\n")
    lines.append(f"              const {zt}* zg = zeros + ((int64_t)p * G + g) * tb + j1;\n")
    if avx:
        lines.append("              const __m256 rv = _mm256_set1_ps(r[(int64_t)b * G + g]);\n")
        for v in range(nv):
            o = 8 * v
            if compact:
                h = f"_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(sg + {o})))"
                lines.append(f"              const __m256i h{v} = {h};\n")
                lines.append(
                    f"              const __m256 sv{v} = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_or_si256("
                    f"_mm256_slli_epi32(_mm256_and_si256(h{v}, h_mag), 13), _mm256_slli_epi32(_mm256_and_si256(h{v}, h_sign), 16))), h_scale);\n")
                lines.append(
                    f"              const __m256 zv{v} = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32("
                    f"_mm_loadl_epi64((const __m128i*)(zg + {o}))));\n")
                zexpr, sexpr = f"zv{v}", f"sv{v}"
            else:
                zexpr, sexpr = f"_mm256_loadu_ps(zg + {o})", f"_mm256_loadu_ps(sg + {o})"
            t = _tree([f"acc{v}_{a}" for a in range(na)], lambda p, q: f"_mm256_add_ps({p}, {q})")
            if mode == "bitcast":  # partial sums carry 2^-BC_C: back to scale, exactly
                t = f"_mm256_mul_ps({t}, _mm256_set1_ps(BC_UNSCALE))"
            lines.append(
                f"              _mm256_storeu_ps(yb + {o}, _mm256_fmadd_ps(_mm256_fnmadd_ps({zexpr}, rv, {t}),"
                f" {sexpr}, _mm256_loadu_ps(yb + {o})));\n")
            for a in range(na):
                lines.append(f"              acc{v}_{a} = _mm256_setzero_ps();\n")
    else:
        lines.append("              const float rg = r[(int64_t)b * G + g];\n")
        lines.append("              for (int c = 0; c < TU; c++) {\n")
        t = _tree([f"acc[{a}][c]" for a in range(na)], lambda p, q: f"({p} + {q})")
        if mode == "bitcast":  # partial sums carry 2^-BC_C: back to scale, exactly
            t = f"({t}) * BC_UNSCALE"
        lines.append(f"                const float t = {t};\n")
        sc, zc = ("refsim_h2f(sg[c])", "(float)zg[c]") if compact else ("sg[c]", "zg[c]")
        lines.append(f"                yb[c] = fmaf(fmaf(-{zc}, rg, t), {sc}, yb[c]);\n")
        lines.append("                for (int a = 0; a < NA; a++) acc[a][c] = 0.0f;\n")
        lines.append("              }\n")
    lines.append("              g++;\n              left = gs;\n")
    lines.append("            }\n")
    lines.append("          }\n")
    if avx:
        for a in range(na):
            for v in range(nv):
                lines.append(f"          _mm256_storeu_ps(ab + {a} * MN + {8 * v}, acc{v}_{a});\n")
    else:
        lines.append("          for (int a = 0; a < NA; a++)\n")
        lines.append("            for (int c = 0; c < TU; c++) ab[a * MN + c] = acc[a][c];\n")
    lines.append("        }\n      }\n    }\n  }\n}\n")
    return "".join(lines)


def _run_fn(spec: KernelSpec) -> str:
    st, zt = ("float", "float") if spec.meta == "f32" else ("uint16_t", "uint8_t")
    return f"""
/* One call per product (each ctypes call costs microseconds): checks x is finite, picks the
 * path, pre-scales x for it, computes r, clears accbuf (NA*M*N), sets y to bias (or +0) and runs
 * the path's kernel. path: 0 "auto" (bitcast when x is in its range and the FPU keeps
 * subnormals, else prescaled when every nonzero |x| >= 2^-96, else shift), 1 "prescaled",
 * 2 "shift", 3 "bitcast". *used = the path that ran (1, 2 or 3). Returns 0; 2 if x has a
 * non-finite value; 1 if path == 1 and x is too tiny for it; 3 if path == 3 and x is outside the
 * bitcast range or the FPU flushes subnormals (nothing computed in the error cases). */
int refsim_qigen_run(const float* x, float* xs, const int32_t* W, const {st}* scales,
                     const {zt}* zeros, float* r, const int32_t* slot_of, float* accbuf, float* y,
                     const float* bias, int M, int K, int N, int mb, int tb, int gs, int path,
                     int* used) {{
  const int64_t MK = (int64_t)M * K;
  for (int64_t i = 0; i < MK; i++)
    if (!isfinite(x[i])) return 2;
  int p = 2;
  if (path == 0 || path == 3) {{
    if (!refsim_qigen_prescale_bc(x, M, K, xs)) p = 3;
    else if (path == 3) return 3;
  }}
  if (p == 2 && (path == 0 || path == 1)) {{
    if (!refsim_qigen_prescale(x, M, K, xs)) p = 1;
    else if (path == 1) return 1;
  }}
  *used = p;
  refsim_qigen_sums(x, M, K, gs, r);
  memset(accbuf, 0, sizeof(float) * (size_t)NA * (size_t)M * (size_t)N);
  for (int b = 0; b < M; b++)
    for (int c = 0; c < N; c++) y[(int64_t)b * N + c] = bias ? bias[c] : 0.0f;
  if (p == 3) refsim_qigen_gemv_bc(xs, W, scales, zeros, r, slot_of, accbuf, y, M, K, N, mb, tb, gs);
  else if (p == 1) refsim_qigen_gemv_ps(xs, W, scales, zeros, r, slot_of, accbuf, y, M, K, N, mb, tb, gs);
  else refsim_qigen_gemv(x, W, scales, zeros, r, slot_of, accbuf, y, M, K, N, mb, tb, gs);
  return 0;
}}
"""


def _tree(parts: list[str], add) -> str:
    """C expression combining ``parts`` pairwise: a0 | add(a0,a1) | add(add(a0,a1), add(a2,a3))."""
    while len(parts) > 1:
        parts = [add(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
    return parts[0]


def generate(spec: KernelSpec) -> str:
    """C99 source of the kernel described by ``spec`` (a str, deterministic for a given spec).

    Defines ``refsim_qigen_sums``, ``refsim_qigen_prescale``, ``refsim_qigen_prescale_bc``,
    ``refsim_qigen_gemv``, ``refsim_qigen_gemv_ps`` and ``refsim_qigen_gemv_bc`` (same results;
    see the header comment of the generated file), and
    ``refsim_qigen_run`` which does all of a product in one call (what :func:`qgemv` uses).
    """
    if not isinstance(spec, KernelSpec):
        raise FormatRuleError(f"spec: must be a KernelSpec; got {type(spec).__name__}")
    bits, tu = spec.bits, spec.tu
    order = chunk_order(bits, spec.unroll if bits != 3 else 1)
    avx = spec.isa == "avx2"
    parts = [_HEADER.format(name=spec.name, bits=bits, tu=tu, unroll=spec.unroll, acc=spec.accumulators, meta=spec.meta, isa=spec.isa,
                            openmp=spec.openmp, order=",".join(map(str, order)),
                            isa_flags="-mavx2 -mfma " if avx else "")]
    if avx:
        parts.append("#include <immintrin.h>\n")
    parts.append(f"#define BITS {bits}\n#define P {len(order)}\n#define TU {tu}\n#define NA {spec.accumulators}\n#define MASK {(1 << bits) - 1}\n")
    parts.append(f"#define BC_C {BITCAST_SCALE_EXP}\n#define BC_UNSCALE {float.hex(2.0 ** BITCAST_SCALE_EXP)}f\n"
                 f"#define BC_XMIN {float.hex(BITCAST_X_MIN)}f\n#define BC_XMAX {float.hex(BITCAST_X_MAX)}f\n")
    parts.append(_sums_fn(bits, spec.unroll))
    parts.append(_body(spec, order, "refsim_qigen_gemv", mode="shift"))
    parts.append(_body(spec, order, "refsim_qigen_gemv_ps", mode="prescaled"))
    parts.append(_body(spec, order, "refsim_qigen_gemv_bc", mode="bitcast"))
    parts.append(_run_fn(spec))
    return "".join(parts)
