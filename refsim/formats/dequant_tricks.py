"""INT4 / INT8 -> FP16 dequantization bit tricks, emulated on uint32 words.

Spec block
----------
- **Input**: uint32 words (NumPy ``uint32`` arrays of any shape). INT4: 8 biased nibbles
  (code ``u = x + 8`` in ``[0, 15]``); INT8: 4 biased bytes (``u = x + 128``).
- **Output**: uint32 words each holding two fp16 bit patterns (low half = first element),
  i.e. exactly the ``half2`` registers the kernels produce.
- **Element order**: INT4 words are stored interleaved, nibble ``i`` = element
  ``[0,2,4,6,1,3,5,7][i]`` ("64207531" read MSB-first per 16-bit half), so that a ``lop3`` with
  mask ``0x000f000f`` yields elements ``(e0, e1)`` in the two halves. INT8 words store bytes
  ``[e0, e2, e1, e3]``.
- **Exactness**: every intermediate is exactly representable in fp16, so each result equals the
  arithmetic definition ``fp16(u - 8)`` (resp. ``fp16(u - 128)``) whatever the rounding mode.
  The fp16 ops below still round correctly (RN) so the emulation is faithful in general.
- **Sources matched**: IST-DASLab/marlin ``marlin/marlin_cuda_kernel.cu`` (``lop3``,
  ``dequant``) at ``2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c``; NVIDIA FasterTransformer /
  TensorRT-LLM ``cutlass_extensions/.../interleaved_numeric_conversion.h``
  (``FastInterleavedAndBiasedNumericArrayConverter`` for ``uint4b_t`` x 8 and ``uint8_t`` x 4),
  (FasterTransformer / TensorRT-LLM ``interleaved_numeric_conversion.h``, Marlin ``dequant``).

The INT4 trick, bit by bit (one 16-bit half shown; the other half is the same)::

    fp16 0x6400 = 0 11001 0000000000 = 1024.0   (exponent 10: mantissa ulp = 1)
    lo = (q & 0x000f) | 0x6400  = 0 11001 000000 nnnn   = 1024 + n        (n = nibble 0)
    hi = (q & 0x00f0) | 0x6400  = 0 11001 00 nnnn 0000  = 1024 + 16 n     (n = nibble 1)
    lo - 0x6408 (1032)           = n - 8                                    exact
    fma(hi, 0x2c00 (1/16), 0xd480 (-72)) = 64 + n - 72 = n - 8              exact

    worked example: q = 0x0000_00b3  ->  lo half = 0x6403 = 1027 -> 1027 - 1032 = -5 = 3 - 8
                                         hi half = 0x64b0 = 1200 -> 1200/16 - 72 = 3 = 11 - 8

The INT8 trick (byte order in the word ``[e0, e2, e1, e3]``)::

    i8s = b3 b2 b1 b0 (bytes, MSB .. LSB)      {b:a} = 64 64 64 64 | b3 b2 b1 b0  (bytes 7..0)
    prmt selector 0x5250: d.byte0 = src[0] = b0, d.byte1 = src[5] = 0x64,
                          d.byte2 = src[2] = b2, d.byte3 = src[5] = 0x64
    -> halves 0x64b0 | 0x64b2 = 1024 + b (fp16 0x6400 = 1024, mantissa ulp 1, b < 256 fits)
    minus 0x6480 (1152 = 1024 + 128)  ->  b - 128, exact
    selector 0x5351 does the same for b1, b3.

    worked example: b0 = 0x85 (133): 0x6485 = 1157 -> 1157 - 1152 = 5 = 133 - 128
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_dtype, require_int, require_integer_array
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = [
    "LOP3_AND_OR",
    "lop3",
    "prmt",
    "hadd2",
    "hsub2",
    "hmul2",
    "hfma2",
    "halves",
    "marlin_dequant",
    "marlin_dequant_word",
    "ft_int4_to_fp16",
    "int8_to_fp16",
    "int4_word_reference",
    "int8_word_reference",
]

#: immLut for (a & b) | c, spelled in Marlin as (0xf0 & 0xcc) | 0xaa
LOP3_AND_OR = (0xF0 & 0xCC) | 0xAA  # = 0xEA
INT4_INTERLEAVE = (0, 2, 4, 6, 1, 3, 5, 7)
INT8_INTERLEAVE = (0, 2, 1, 3)


def _u32(x, name: str = "word") -> np.ndarray:
    """32-bit words: a Python/NumPy integer or an integer array, every value in [0, 2**32), as
    uint32 (never wrapped; floats, bools and objects refused)."""
    if isinstance(x, (bool, np.bool_)):
        raise DtypeError(f"{name}: must be 32-bit words (integers); got {x!r}")
    if isinstance(x, (int, np.integer)):
        x = np.asarray(int(x)) if 0 <= int(x) < 1 << 32 else None
        if x is None:
            raise FormatRuleError(f"{name}: a 32-bit word must lie in [0, 2**32); got a value outside")
    x = require_integer_array(name, x)
    if x.dtype != np.uint32:
        if x.size and (int(x.min()) < 0 or int(x.max()) >= 1 << 32):
            raise FormatRuleError(f"{name}: 32-bit words must lie in [0, 2**32); got range "
                                  f"[{int(x.min())}, {int(x.max())}]")
        x = x.astype(np.uint32)
    return x


def _broadcast(*arrays: np.ndarray) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ShapeError(f"operands: shapes must broadcast together; got {[a.shape for a in arrays]}") from None


def lop3(a, b, c, imm_lut: int) -> np.ndarray:
    """PTX ``lop3.b32``: bit i of the result is bit ``4 a_i + 2 b_i + c_i`` of ``imm_lut``."""
    a, b, c = _u32(a, "a"), _u32(b, "b"), _u32(c, "c")
    imm_lut = require_int("imm_lut", imm_lut, minimum=0)
    if imm_lut > 0xFF:
        raise FormatRuleError(f"imm_lut: an 8-bit truth table must lie in [0, 255]; got {imm_lut}")
    out = np.zeros(_broadcast(a, b, c), dtype=np.uint32)
    for idx in range(8):  # each minterm of (a, b, c)
        if (imm_lut >> idx) & 1:
            ta = a if idx & 4 else ~a
            tb = b if idx & 2 else ~b
            tc = c if idx & 1 else ~c
            out |= ta & tb & tc
    return out


def prmt(a, b, sel: int) -> np.ndarray:
    """PTX ``prmt.b32`` default mode: byte j of d = byte ``(sel >> 4j) & 7`` of ``{b:a}``;
    if bit 3 of that selector nibble is set, the selected byte's sign bit is replicated."""
    a, b = _u32(a, "a"), _u32(b, "b")
    sel = require_int("sel", sel, minimum=0)
    if sel > 0xFFFF:
        raise FormatRuleError(f"sel: four 4-bit byte selectors must lie in [0, 0xFFFF]; got {sel:#x}")
    shape = _broadcast(a, b)
    src = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)  # 8 bytes, a = bytes 0..3
    out = np.zeros(shape, dtype=np.uint32)
    for j in range(4):
        nib = (sel >> (4 * j)) & 0xF
        byte = ((src >> np.uint64(8 * (nib & 7))) & np.uint64(0xFF)).astype(np.uint32)
        if nib & 8:
            byte = np.where(byte & 0x80, np.uint32(0xFF), np.uint32(0))
        out |= byte << np.uint32(8 * j)
    return out


def halves(w) -> tuple[np.ndarray, np.ndarray]:
    """Split uint32 words into (low, high) float16 values."""
    w = _u32(w, "w")
    lo = (w & 0xFFFF).astype(np.uint16).view(np.float16)
    hi = (w >> 16).astype(np.uint16).view(np.float16)
    return lo, hi


def _join(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.float16).view(np.uint16).astype(np.uint32) | (
        hi.astype(np.float16).view(np.uint16).astype(np.uint32) << np.uint32(16)
    )


def _elementwise2(f, *words) -> np.ndarray:
    words = [_u32(w, name) for w, name in zip(words, "abc")]
    _broadcast(*words)
    parts = [halves(w) for w in words]
    lo = f(*[p[0].astype(np.float64) for p in parts])
    hi = f(*[p[1].astype(np.float64) for p in parts])
    return _join(_to_f16_rn(lo), _to_f16_rn(hi))


def _to_f16_rn(x: np.ndarray) -> np.ndarray:
    # float64 -> float16 is a single RN rounding in NumPy
    return np.asarray(x, dtype=np.float64).astype(np.float16)


def hadd2(a, b) -> np.ndarray:
    """``__hadd2`` (RN): fp16 sums are exact in float64 (operands span < 2**41), one rounding."""
    return _elementwise2(lambda x, y: x + y, a, b)


def hsub2(a, b) -> np.ndarray:
    """``__hsub2`` (RN), exact in float64 then one rounding to fp16."""
    return _elementwise2(lambda x, y: x - y, a, b)


def hmul2(a, b) -> np.ndarray:
    """``__hmul2`` (RN): fp16 x fp16 is exact in float64 (22 significant bits)."""
    return _elementwise2(lambda x, y: x * y, a, b)


def hfma2(a, b, c) -> np.ndarray:
    """``__hfma2`` (``fma.rn.f16x2``): ``a*b + c`` rounded once.

    The product is exact in float64; the float64 sum is made round-to-odd (TwoSum error term),
    and rounding a round-to-odd float64 (53 >= 11 + 2 bits) to fp16 equals a single RN rounding.
    """

    def fma(x, y, z):
        p = x * y
        s = p + z
        bb = s - p
        err = (p - (s - bb)) + (z - bb)  # exact error of the float64 sum (TwoSum)
        bits = s.view(np.int64)
        inexact_even = (err != 0) & ((bits & 1) == 0) & np.isfinite(s)
        toward = np.where(err > 0, np.inf, -np.inf)
        return np.where(inexact_even, np.nextafter(s, toward), s)

    return _elementwise2(fma, a, b, c)


def marlin_dequant_word(q) -> tuple[np.ndarray, np.ndarray]:
    """Marlin's ``dequant(int q)``: one word -> the B fragment ``(frag_b[0], frag_b[1])``.

    ``frag_b[0] = (nib0 - 8, nib4 - 8)``, ``frag_b[1] = (nib1 - 8, nib5 - 8)`` as fp16 halves.
    """
    q = _u32(q, "q")
    lo = lop3(q, 0x000F000F, 0x64006400, LOP3_AND_OR)
    hi = lop3(q, 0x00F000F0, 0x64006400, LOP3_AND_OR)
    b0 = hsub2(lo, 0x64086408)  # (1024 + n) - 1032
    b1 = hfma2(hi, 0x2C002C00, 0xD480D480)  # (1024 + 16 n) / 16 - 72
    return b0, b1


def marlin_dequant(q) -> np.ndarray:
    """Both MMAs' B fragments from one Marlin word, as the kernel's main loop computes them.

    Returns uint32 ``(..., 4)``: ``dequant(q)`` then ``dequant(q >> 8)`` with the *arithmetic*
    shift of a signed int (the sign copies land in bits 24..31 and are masked off), i.e.
    halves ``(n0,n4) (n1,n5) (n2,n6) (n3,n7)`` minus 8.
    """
    q = require_dtype("q", np.asarray(q), np.uint32)
    shifted = (q.view(np.int32) >> 8).view(np.uint32)  # arithmetic shift, as on an `int`
    b0, b1 = marlin_dequant_word(q)
    b2, b3 = marlin_dequant_word(shifted)
    return np.stack([b0, b1, b2, b3], axis=-1)


def ft_int4_to_fp16(i4s) -> np.ndarray:
    """FasterTransformer/TensorRT-LLM interleaved uint4 -> half converter (8 elements per word).

    Returns uint32 ``(..., 4)`` = ``h0..h3`` holding elements ``(e0,e1) (e2,e3) (e4,e5) (e6,e7)``
    minus 8, where nibble ``i`` stores ``e[INT4_INTERLEAVE[i]]``. ``top = i4s >> 8`` (logical).
    """
    i4s = require_dtype("i4s", np.asarray(i4s), np.uint32)
    top = i4s >> np.uint32(8)
    h0 = lop3(i4s, 0x000F000F, 0x64006400, LOP3_AND_OR)
    h1 = lop3(i4s, 0x00F000F0, 0x64006400, LOP3_AND_OR)
    h2 = lop3(top, 0x000F000F, 0x64006400, LOP3_AND_OR)
    h3 = lop3(top, 0x00F000F0, 0x64006400, LOP3_AND_OR)
    h0 = hsub2(h0, 0x64086408)
    h1 = hfma2(h1, 0x2C002C00, 0xD480D480)
    h2 = hsub2(h2, 0x64086408)
    h3 = hfma2(h3, 0x2C002C00, 0xD480D480)
    return np.stack([h0, h1, h2, h3], axis=-1)


def int8_to_fp16(i8s) -> np.ndarray:
    """FasterTransformer / vLLM-Marlin 8-bit converter (``prmt``): 4 biased bytes -> 2 half2.

    Returns uint32 ``(..., 2)``: ``(b0, b2) - 128`` and ``(b1, b3) - 128``; with byte order
    ``[e0, e2, e1, e3]`` these are ``(e0, e1)`` and ``(e2, e3)``.
    """
    i8s = require_dtype("i8s", np.asarray(i8s), np.uint32)
    h0 = prmt(i8s, 0x64646464, 0x5250)  # bytes: b0, 0x64, b2, 0x64
    h1 = prmt(i8s, 0x64646464, 0x5351)  # bytes: b1, 0x64, b3, 0x64
    return np.stack([hsub2(h0, 0x64806480), hsub2(h1, 0x64806480)], axis=-1)


def int4_word_reference(q) -> np.ndarray:
    """Arithmetic definition: uint32 ``(...)`` -> fp16 ``(..., 8)`` element values ``e_k = u_k - 8``
    in logical order (nibble i holds ``e[INT4_INTERLEAVE[i]]``)."""
    q = _u32(q, "q")
    out = np.empty(q.shape + (8,), dtype=np.float16)
    for nib, e in enumerate(INT4_INTERLEAVE):
        out[..., e] = (((q >> np.uint32(4 * nib)) & 0xF).astype(np.int16) - 8).astype(np.float16)
    return out


def int8_word_reference(q) -> np.ndarray:
    """Arithmetic definition: uint32 ``(...)`` -> fp16 ``(..., 4)`` values ``u - 128`` in logical
    order (byte i holds ``e[INT8_INTERLEAVE[i]]``)."""
    q = _u32(q, "q")
    out = np.empty(q.shape + (4,), dtype=np.float16)
    for byte, e in enumerate(INT8_INTERLEAVE):
        out[..., e] = (((q >> np.uint32(8 * byte)) & 0xFF).astype(np.int16) - 128).astype(np.float16)
    return out
