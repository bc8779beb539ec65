"""bitsandbytes' 4-bit blockwise formats NF4 and FP4 (QLoRA), with double quantization of absmax.

Spec
----
    element      4-bit code c in [0, 16): an index into a 16-entry float32 code table
                 (:func:`code_table`, ``bitsandbytes.functional.get_4bit_type``)
    blocks       the tensor flattened row-major, cut into blocks of ``blocksize`` consecutive values
                 (32, 64 (default), 128, ..., 4096); the last block may be partial
    absmax       float32 per block: ``max |x|`` over the block (exact)
    code choice  ``s = x * fl32(1 / absmax)`` (a reciprocal, then a multiply; but the CPU kernel DIVIDES
                 a partial last block: ``s = x / absmax``, one rounding, which differs in the last bit),
                 then the nearest table entry found by comparing with thresholds, never argmin:
                 ``kernel="cpu"``  bitsandbytes' default torch kernel (what ``quantize_4bit`` runs on a
                                  CPU): ``1 / max(absmax, 1e-38)``, ``s`` clamped to [-1, 1], then
                                  ``torch.bucketize(s, mid)`` over the float32 midpoints ``mid`` of the
                                  sorted table: the code of sorted entry ``#(mid < s)``, so a value equal
                                  to a midpoint takes the LOWER entry. FP4's sorted table holds +0 twice
                                  (codes 0 and 8, stable order): 0 and -0 give code 0, values in
                                  (0, mid] give code 8.
                 ``kernel="cuda"`` the decision trees ``dQuantizeNF4`` / ``dQuantizeFP4`` of
                                  csrc/kernels.cu: ``if (x > t)`` at every node, so the code is
                                  ``#(t < s)`` over the sorted thresholds ``t``, ties again LOWER. NF4's
                                  thresholds equal the float32 midpoints; FP4's are decimal constants
                                  (0.00260417f, ..., 0.8333333f) up to 14 ulp off the midpoints, taken on
                                  ``|s|`` with the sign bit (8) set for ``s < 0``. No floor on absmax: a
                                  block of zeros gives ``0 * inf = NaN``, which every ``>`` rejects: code 0
                                  (NF4 -1.0, dequantized -0.0; FP4 +0).
    packing      two codes per byte, element 2i in the HIGH nibble, 2i+1 in the low nibble; an odd
                 element count pads one nibble with the code of a 0 in the last block (NF4 7, FP4 0; on
                 "cuda" a zero block's NaN code 0); ``packed`` is uint8
                 ((n + 1) // 2,)
    value        ``fl32(table[c] * absmax)`` in float32, then ONE round-to-nearest-even to the model
                 dtype (float16 or bfloat16; float32 stays). FP4 code 8 reads as -0.0 (the C++ CPU and
                 CUDA kernels: ``sign * lut[c & 7]``); the CPU op's torch fallback for an odd last
                 dimension (taken for a ``kernel="cpu"`` record of such a shape) reads the table's +0.0.
    double quant ``compress_statistics=True``: ``offset = mean(absmax)`` (float32), then the float32
                 differences ``d = absmax - offset`` are quantized to 8 bits with bitsandbytes' CPU
                 ``quantize_blockwise`` (blocksize 256, code ``code2`` = :func:`dynamic_map`):
                 ``absmax2 = max |d|`` per 256; ``u = d * fl32(1 / absmax2)``; NOT the nearest entry of
                 code2 but a 65536-bin table: bin ``trunc(fma((u + 1) * 0.5, 65535, 0.5))`` of
                 :func:`nested_lut`, which holds the nearest entry to the bin's centre (so a u near a
                 midpoint may take the farther entry); a block with absmax2 = 0 codes 0. Read back:
                 ``absmax = fl32(code2[q] * absmax2) + offset``.
    source       bitsandbytes 0.50.2 (``functional.quantize_4bit``/``dequantize_4bit``,
                 ``backends/default/ops.py``, csrc/cpu_ops.cpp, csrc/common.cpp, csrc/kernels.cu);
                 goldens: tests/formats/data/make_bnb4_goldens.py (the CPU path; the CUDA trees are
                 transcribed, not run here)

One NF4 block (blocksize 32 shown as its first four values; absmax = 2.0, 1/absmax = 0.5)::

    x      =  2.0     -1.0     0.08      0.0   ...
    s      =  1.0     -0.5     0.04      0.0        (x * 0.5)
    code   =  15       2        8         7         (-0.5 in (-0.61063, -0.46000]: code 2;
                                                      0.04 > 0.039790 (midpoint of codes 7, 8): code 8)
    byte 0 = 0xF2 (15 high, 2 low)   byte 1 = 0x87
    value  =  2.0    -1.0501461 0.15916060 0.0      (table[c] * 2.0)

``offset`` is torch's float32 ``absmax.mean()``: its CPU cascade sum over 8-lane vectors is
reproduced (AVX2 and default builds; an AVX-512 build sums 16 lanes, and from 32768 blocks torch
splits the sum across threads, so the last bit of ``offset`` may differ there). The offset is stored
in the record, so reading back is exact whichever machine quantized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    plain_scalar,
    require_bool,
    require_bounded,
    require_choice,
    require_dtype,
    require_dtype_arg,
    require_fields,
    require_finite,
    require_int,
    require_ndim,
    require_shape,
    set_fields,
)
from refsim.arith.fp import cvt_f32_to_bf16
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "KINDS",
    "KERNELS",
    "BLOCKSIZES",
    "NESTED_BLOCKSIZE",
    "BnB4",
    "code_table",
    "dynamic_map",
    "nested_lut",
    "pack",
    "unpack",
    "quantize",
    "quantize_reference",
    "dequantize",
    "dequantize_reference",
]

KINDS: tuple[str, ...] = ("nf4", "fp4")
KERNELS: tuple[str, ...] = ("cpu", "cuda")
BLOCKSIZES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048, 4096)
NESTED_BLOCKSIZE = 256

_F32 = np.float32
# get_4bit_type("nf4"): bitsandbytes' literal float list, as float32 bit patterns (hex of each value)
_NF4_HEX = ("-0x1p+0", "-0x1.647362p-1", "-0x1.0cd66p-1", "-0x1.94654p-2", "-0x1.23449ap-2", "-0x1.7a6a7ep-3",
            "-0x1.74f0e2p-4", "0x0p+0", "0x1.45f5fep-4", "0x1.4995c6p-3", "0x1.f809bap-3", "0x1.5a0674p-2",
            "0x1.c3497p-2", "0x1.200f56p-1", "0x1.722766p-1", "0x1p+0")
# get_4bit_type("fp4"): sign bit 3, then e2m1 with bias 3 and 0b001 a subnormal 0.0625; divided by 12 in float32
_FP4_RAW = (0.0, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0)
# dQuantizeFP4's thresholds on |x| (csrc/kernels.cu), ascending, with the 3-bit magnitude code of each interval
_FP4_CUDA_T = _F32([0.00260417, 0.0859375, 0.20833333, 0.29166667, 0.4166667, 0.583333, 0.8333333])
_FP4_CUDA_MAG = np.array([0b000, 0b001, 0b110, 0b111, 0b100, 0b101, 0b010, 0b011], np.uint8)


def code_table(kind: str) -> np.ndarray:
    """float32 (16,): the code table of ``kind`` ("nf4" or "fp4") exactly as ``get_4bit_type`` builds it
    (NF4: the literal list; FP4: ``[0, 0.0625, 8, 12, 4, 6, 2, 3, -0, ...] / 12`` in float32, whose
    entry 8 is +0.0 because Python's ``-0`` is the integer 0)."""
    kind = require_choice("kind", plain_scalar(kind), KINDS)
    if kind == "nf4":
        return np.array([float.fromhex(h) for h in _NF4_HEX], _F32)
    raw = _F32(_FP4_RAW + tuple(-v for v in _FP4_RAW)) + _F32(0)  # + 0 turns -0.0 into +0.0
    return (raw / _F32(12)).astype(_F32)


def _read_table(record: "BnB4") -> np.ndarray:
    """The table as the dequantize kernels read it: FP4 code 8 is ``-1 * lut[0] = -0.0``, except where
    bitsandbytes' CPU op falls back to its torch kernel (an odd last dimension), which reads the
    table's +0.0."""
    t = code_table(record.kind)
    if record.kind == "fp4" and not (record.kernel == "cpu" and record.shape[-1] % 2):
        t[8] = -_F32(0)
    return t


def _linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps, dtype=float32)`` as torch's CPU kernel computes it: step =
    fl32((end - start) / (steps - 1)); element i is ``start + step * i`` below ``steps // 2`` and
    ``end - step * (steps - 1 - i)`` from there, each ONE rounding (the compiler contracts the
    expression into an FMA; checked equal to torch 2.13 for every linspace the map uses)."""
    s, e = _F32(start), _F32(end)
    step = _F32((e - s) / _F32(steps - 1))
    i = np.arange(steps, dtype=np.float64)
    lo = np.float64(s) + np.float64(step) * i  # exact in float64 (24-bit step times a 7-bit i)
    hi = np.float64(e) - np.float64(step) * (steps - 1 - i)
    return np.where(i < steps // 2, lo, hi).astype(_F32)


def dynamic_map() -> np.ndarray:
    """float32 (256,) ascending: ``create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8)``,
    the 8-bit code of the nested absmax. For exponent i = 0..6: the midpoints of
    ``linspace(0.1, 1, 2**i + 1)`` times ``10**(i - 6)`` (both signs, float32), then 0 and 1.0, sorted."""
    data = [0.0, 1.0]
    for i in range(7):
        b = _linspace_f32(0.1, 1.0, 2 ** i + 1)
        means = ((b[:-1] + b[1:]) / _F32(2)).astype(_F32)
        scale = _F32(10.0 ** (i - 6))
        data += list((scale * means).astype(_F32)) + list((-scale * means).astype(_F32))
    return np.sort(np.array(data, _F32))


@dataclass(frozen=True)
class BnB4:
    """One tensor in bitsandbytes' 4-bit format (the data of a ``QuantState``).

    packed   uint8 ((n + 1) // 2,), n = prod(shape): codes, element 2i in the high nibble
    absmax   float32 (blocks,), blocks = ceil(n / blocksize); None with double quantization, which stores
    qabsmax  uint8 (blocks,), absmax2 float32 (ceil(blocks / 256),), code2 float32 (256,), offset float
    shape    the tensor's shape; kind "nf4"/"fp4"; blocksize one of BLOCKSIZES; kernel "cpu"/"cuda"
    """

    packed: np.ndarray
    absmax: np.ndarray | None
    shape: tuple[int, ...]
    kind: str
    blocksize: int
    kernel: str = "cpu"
    qabsmax: np.ndarray | None = None
    absmax2: np.ndarray | None = None
    code2: np.ndarray | None = None
    offset: float | None = None

    def __post_init__(self):
        require_fields(self)
        kind = require_choice("kind", self.kind, KINDS)
        kernel = require_choice("kernel", self.kernel, KERNELS)
        blocksize = require_choice("blocksize", self.blocksize, BLOCKSIZES)
        n = _count(self.shape)
        blocks = -(-n // blocksize)
        packed = require_dtype("packed", self.packed, np.uint8)
        require_shape("packed", packed, ((n + 1) // 2,))
        nested = (self.qabsmax, self.absmax2, self.code2, self.offset)
        if self.absmax is not None:
            if any(v is not None for v in nested):
                raise FormatRuleError("absmax: give either absmax or the double-quantized "
                                      "(qabsmax, absmax2, code2, offset), not both")
            absmax = require_dtype("absmax", self.absmax, np.float32)
            require_shape("absmax", absmax, (blocks,))
            require_finite("absmax", absmax)
            set_fields(self, absmax=absmax)
        else:
            if any(v is None for v in nested):
                raise FormatRuleError("qabsmax, absmax2, code2, offset: all four are required without absmax")
            require_shape("qabsmax", require_dtype("qabsmax", self.qabsmax, np.uint8), (blocks,))
            a2 = require_dtype("absmax2", self.absmax2, np.float32)
            require_shape("absmax2", a2, (-(-blocks // NESTED_BLOCKSIZE),))
            require_finite("absmax2", a2)
            c2 = require_dtype("code2", self.code2, np.float32)
            require_shape("code2", c2, (256,))
            require_finite("code2", c2)
            set_fields(self, offset=float(_F32(self.offset)))
        set_fields(self, kind=kind, kernel=kernel, blocksize=blocksize, packed=packed)

    def block_absmax(self) -> np.ndarray:
        """float32 (blocks,): absmax, read back from the double quantization when there is one."""
        if self.absmax is not None:
            return self.absmax
        a2 = np.repeat(self.absmax2, NESTED_BLOCKSIZE)[: self.qabsmax.size]  # (blocks,)
        return ((self.code2[self.qabsmax] * a2).astype(_F32) + _F32(self.offset)).astype(_F32)


def _count(shape) -> int:
    if not isinstance(shape, tuple) or len(shape) == 0:
        raise ShapeError(f"shape: must be a non-empty tuple of ints; got {shape!r}")
    n = 1
    for i, d in enumerate(shape):
        n *= require_int(f"shape[{i}]", d, minimum=1)
    if n > (1 << 31) - 1:
        raise ShapeError(f"shape: element count must be <= {(1 << 31) - 1}; got {n}")
    return n


def pack(codes: np.ndarray) -> np.ndarray:
    """uint8 (n/2,) from uint8 codes (n,) in [0, 16), n even: element 2i high nibble, 2i+1 low."""
    codes = require_dtype("codes", codes, np.uint8)
    require_ndim("codes", codes, 1)
    if codes.size % 2:
        raise ShapeError(f"codes: length must be even (two codes per byte); got {codes.size}")
    if codes.size and int(codes.max()) > 15:
        raise FormatRuleError(f"codes: must be 4-bit (< 16); got {int(codes.max())}")
    return ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)


def unpack(packed: np.ndarray) -> np.ndarray:
    """uint8 codes (2m,) from uint8 packed (m,): the high nibble of byte i is element 2i."""
    packed = require_dtype("packed", packed, np.uint8)
    require_ndim("packed", packed, 1)
    require_bounded("packed (two codes per byte)", 2 * packed.size)
    return np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)  # (m, 2) -> (2m,)


def _check(w, kind, blocksize, double_quant, kernel):
    w = require_dtype("w", w, np.float16, np.float32)
    if w.ndim == 0 or w.size == 0:
        raise ShapeError(f"w: must have at least one dimension and one element; got shape {w.shape}")
    require_finite("w", w)
    kind = require_choice("kind", plain_scalar(kind), KINDS)
    blocksize = require_choice("blocksize", plain_scalar(blocksize), BLOCKSIZES)
    double_quant = require_bool("double_quant", double_quant)
    kernel = require_choice("kernel", plain_scalar(kernel), KERNELS)
    if kernel == "cuda" and double_quant:
        raise FormatRuleError("double_quant: the CUDA 8-bit blockwise quantizer (dQuantize's pivot search) is "
                              "not modelled; use kernel='cpu' for double quantization; got kernel='cuda'")
    return w, kind, blocksize, double_quant, kernel


def _sorted_midpoints(kind: str) -> tuple[np.ndarray, np.ndarray]:
    t = code_table(kind)
    order = np.argsort(t, kind="stable")
    srt = t[order]
    return ((srt[:-1] + srt[1:]) / _F32(2)).astype(_F32), order.astype(np.uint8)


def _codes(s: np.ndarray, kind: str, kernel: str) -> np.ndarray:
    """uint8 codes of scaled values ``s`` (float32, any shape) by threshold counting."""
    if kernel == "cpu":
        mid, order = _sorted_midpoints(kind)
        return order[np.searchsorted(mid, np.clip(s, -1, 1), side="left")]
    with np.errstate(invalid="ignore"):
        if kind == "nf4":
            mid, _ = _sorted_midpoints(kind)  # the tree's thresholds are these midpoints exactly
            return np.where(np.isnan(s), 0, np.searchsorted(mid, s, side="left")).astype(np.uint8)
        mag = _FP4_CUDA_MAG[np.searchsorted(_FP4_CUDA_T, np.abs(s), side="left")]
        return np.where(np.isnan(s), 0, mag | np.where(s < 0, 8, 0)).astype(np.uint8)


def _blocks(w: np.ndarray, blocksize: int) -> tuple[np.ndarray, int]:
    x = w.astype(_F32).reshape(-1)
    n = x.size
    pad = np.zeros(-(-n // blocksize) * blocksize, _F32)
    pad[:n] = x
    return pad.reshape(-1, blocksize), n  # (blocks, blocksize), zero-padded (zeros never raise a max)


def _cascade(rows: np.ndarray) -> np.ndarray:
    """torch's ``multi_row_sum`` (aten/src/ATen/native/cpu/SumKernel.cpp): rows (size, ...) float32
    summed in float32 through 4 cascade levels of 2**max(4, ceil(log2 size) // 4) rows each."""
    size = rows.shape[0]
    power = max(4, (int(size - 1).bit_length() if size > 1 else 0) // 4)
    step, mask = 1 << power, (1 << power) - 1
    acc = np.zeros((4,) + rows.shape[1:], _F32)  # (levels, ...)
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = acc[0] + rows[i]
            i += 1
        for j in range(1, 4):
            acc[j] = acc[j] + acc[j - 1]
            acc[j - 1] = 0
            if i & (mask << (j * power)):
                break
    for r in rows[i:]:
        acc[0] = acc[0] + r
    for j in range(1, 4):
        acc[0] = acc[0] + acc[j]
    return acc[0]


def _row_sum(x: np.ndarray) -> np.ndarray:
    """torch's ``row_sum``: 4 interleaved cascades (ilp 4), the tail into the first, then combined."""
    k = x.shape[0] // 4
    part = _cascade(x[: 4 * k].reshape((k, 4) + x.shape[1:])) if k else np.zeros((4,) + x.shape[1:], _F32)
    for r in x[4 * k:]:
        part[0] = part[0] + r
    for j in range(1, 4):
        part[0] = part[0] + part[j]
    return part[0]


def _torch_mean_f32(x: np.ndarray, lanes: int = 8) -> np.float32:
    """``x.mean()`` of a contiguous float32 vector as torch computes it on a CPU: a float32 cascade sum
    over vectors of ``lanes`` (8: AVX2 and the default build; AVX-512 has 16), the tail added one by
    one, then the lanes, then ``sum / n``. Checked equal to torch 2.13 (AVX2) for every length up to
    30000; from 32768 elements torch splits the sum across threads."""
    n = x.size
    if n < lanes:
        return _F32(_row_sum(x) / _F32(n))
    v = n // lanes
    lanes_acc = _row_sum(x[: v * lanes].reshape(v, lanes))  # (lanes,)
    total = _F32(0)
    for r in list(x[v * lanes:]) + list(lanes_acc):
        total = _F32(total + r)
    return _F32(total / _F32(n))


def nested_lut() -> np.ndarray:
    """uint8 (65536,): bitsandbytes' CPU ``build_quantize_lut(dynamic_map())``: bin i stands for
    ``v = fl32(fl32(2i) / 65535) - 1`` and holds the number of float32 midpoints
    ``(code[j] + code[j+1]) * 0.5`` below v (the nearest entry, a value on a midpoint taking the lower)."""
    code = dynamic_map()
    mid = ((code[:-1] + code[1:]) * _F32(0.5)).astype(_F32)  # (255,)
    v = ((np.arange(65536, dtype=_F32) * _F32(2)) / _F32(65535) - _F32(1)).astype(_F32)
    return np.searchsorted(mid, v, side="left").astype(np.uint8)


def _lut_index(u: np.ndarray) -> np.ndarray:
    """``norm_to_lut_index``: ``trunc(fma((clamp(u, -1, 1) + 1) * 0.5, 65535, 0.5))`` (the FMA is one
    rounding: the float64 product of a float32 and 65535 is exact). NaN (``0 * inf`` when absmax2 is
    so small that its reciprocal overflows) converts to 0x80000000, whose low 16 bits are bin 0."""
    t = ((np.clip(u, _F32(-1), _F32(1)) + _F32(1)).astype(_F32) * _F32(0.5)).astype(_F32)
    t = np.where(np.isnan(t), _F32(0), t)
    return np.trunc((t.astype(np.float64) * 65535.0 + 0.5).astype(_F32)).astype(np.int64)


def _nested(absmax: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """bitsandbytes' CPU ``quantize_blockwise(absmax - mean, blocksize=256)`` (``quantize_cpu_impl``)."""
    offset = _torch_mean_f32(absmax)
    d = (absmax - offset).astype(_F32)  # (blocks,)
    blocks = -(-d.size // NESTED_BLOCKSIZE)
    pad = np.zeros(blocks * NESTED_BLOCKSIZE, _F32)
    pad[: d.size] = np.abs(d)
    a2 = pad.reshape(blocks, NESTED_BLOCKSIZE).max(axis=1).astype(_F32)  # (blocks2,)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.repeat(np.where(a2 == 0, _F32(0), _F32(1) / a2), NESTED_BLOCKSIZE)[: d.size]  # zero blocks: code 0
        q = nested_lut()[_lut_index((d * inv).astype(_F32))]
    zero = np.repeat(a2 == 0, NESTED_BLOCKSIZE)[: d.size]
    return np.where(zero, 0, q).astype(np.uint8), a2, dynamic_map(), float(offset)


def quantize(w: np.ndarray, kind: str = "nf4", blocksize: int = 64, double_quant: bool = False,
             kernel: str = "cpu") -> BnB4:
    """``bitsandbytes.functional.quantize_4bit(w, blocksize, compress_statistics=double_quant,
    quant_type=kind)``: w float16/float32, any shape (flattened row-major into blocks). Returns a
    :class:`BnB4`. ``kernel`` picks whose code choice (module docstring); double quantization is
    the CPU's. Raises DtypeError, ShapeError, FormatRuleError, NonFiniteError."""
    w, kind, blocksize, double_quant, kernel = _check(w, kind, blocksize, double_quant, kernel)
    xb, n = _blocks(w, blocksize)
    absmax = np.abs(xb).max(axis=1).astype(_F32)  # (blocks,)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = _F32(1) / (np.maximum(absmax, _F32(1e-38)) if kernel == "cpu" else absmax)
        s = (xb * inv[:, None]).astype(_F32)  # (blocks, blocksize)
        if kernel == "cpu" and n % blocksize:  # the torch kernel DIVIDES the partial last block
            s[-1] = (xb[-1] / np.maximum(absmax[-1], _F32(1e-38))).astype(_F32)
        s = s.reshape(-1)[: n + n % 2]  # an odd n codes one padding 0 too
    packed = pack(_codes(s, kind, kernel))
    if not double_quant:
        return BnB4(packed, absmax, tuple(w.shape), kind, blocksize, kernel)
    q, a2, code2, offset = _nested(absmax)
    return BnB4(packed, None, tuple(w.shape), kind, blocksize, kernel, q, a2, code2, offset)


def _tree_nf4(x: float) -> int:
    """dQuantizeNF4 (csrc/kernels.cu), transcribed node for node; thresholds as float32."""
    t = [_F32(v) for v in (0.03979014977812767, 0.3893125355243683, 0.6427869200706482, 0.8614784181118011,
                           0.5016634166240692, 0.2035212516784668, 0.2920137718319893, 0.1202552504837513,
                           -0.33967943489551544, -0.13791173323988914, -0.045525018125772476,
                           -0.23460740596055984, -0.6106329262256622, -0.4599952697753906, -0.8480964004993439)]
    if x > t[0]:
        if x > t[1]:
            if x > t[2]:
                return 0b1111 if x > t[3] else 0b1110
            return 0b1101 if x > t[4] else 0b1100
        if x > t[5]:
            return 0b1011 if x > t[6] else 0b1010
        return 0b1001 if x > t[7] else 0b1000
    if x > t[8]:
        if x > t[9]:
            return 0b0111 if x > t[10] else 0b0110
        return 0b0101 if x > t[11] else 0b0100
    if x > t[12]:
        return 0b0011 if x > t[13] else 0b0010
    return 0b0001 if x > t[14] else 0b0000


def _tree_fp4(x: float) -> int:
    """dQuantizeFP4 (csrc/kernels.cu), transcribed node for node."""
    sign = 0b1000 if x < 0 else 0
    x = abs(x)
    if x > _F32(0.29166667):
        if x > _F32(0.583333):
            return (0b0011 if x > _F32(0.8333333) else 0b0010) + sign
        return (0b101 if x > _F32(0.4166667) else 0b100) + sign
    if x > _F32(0.0859375):
        return (0b0111 if x > _F32(0.20833333) else 0b0110) + sign
    return (0b0001 if x > _F32(0.00260417) else 0b0000) + sign


def quantize_reference(w: np.ndarray, kind: str = "nf4", blocksize: int = 64, double_quant: bool = False,
                       kernel: str = "cpu") -> BnB4:
    """Plain-loop twin of :func:`quantize`, element by element from the spec block (a bucket count
    over the midpoints for "cpu", the literal decision trees for "cuda")."""
    w, kind, blocksize, double_quant, kernel = _check(w, kind, blocksize, double_quant, kernel)
    x = [_F32(v) for v in w.reshape(-1)]
    n = len(x)
    mid, order = _sorted_midpoints(kind)
    absmax, codes = [], []
    for b0 in range(0, n, blocksize):
        block = x[b0:b0 + blocksize]
        amax = max(abs(v) for v in block)
        absmax.append(amax)
        partial = kernel == "cpu" and len(block) < blocksize
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inv = _F32(1) / (max(amax, _F32(1e-38)) if kernel == "cpu" else amax)
            for v in block + ([_F32(0)] if b0 + blocksize >= n and n % 2 else []):
                s = _F32(v / max(amax, _F32(1e-38))) if partial else _F32(v * inv)
                if kernel == "cpu":
                    s = min(max(s, _F32(-1)), _F32(1))
                    i = 0
                    while i < 15 and mid[i] < s:
                        i += 1
                    codes.append(int(order[i]))
                else:
                    codes.append(_tree_nf4(s) if kind == "nf4" else _tree_fp4(s))
    packed = np.array([(codes[2 * i] << 4) | codes[2 * i + 1] for i in range(len(codes) // 2)], np.uint8)
    absmax = np.array(absmax, _F32)
    if not double_quant:
        return BnB4(packed, absmax, tuple(w.shape), kind, blocksize, kernel)
    offset = _torch_mean_f32(absmax)  # one definition of torch's float32 mean
    code2 = dynamic_map()
    mid = [_F32((code2[j] + code2[j + 1]) * _F32(0.5)) for j in range(255)]
    q, a2 = [], []
    for b0 in range(0, len(absmax), NESTED_BLOCKSIZE):
        d = [_F32(a - offset) for a in absmax[b0:b0 + NESTED_BLOCKSIZE]]
        m = max(abs(v) for v in d)
        a2.append(m)
        for v in d:
            if m == 0:
                q.append(0)
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                u = _F32(v * _F32(_F32(1) / m))
            if np.isnan(u):  # 0 * inf: the conversion's 0x80000000 reads bin 0
                i = 0
            else:
                t = _F32(_F32(min(max(u, _F32(-1)), _F32(1)) + _F32(1)) * _F32(0.5))
                i = int(_F32(float(t) * 65535.0 + 0.5))  # the FMA, one rounding, then truncation
            bin_value = _F32(_F32(_F32(2 * i) / _F32(65535)) - _F32(1))
            q.append(sum(1 for m_j in mid if m_j < bin_value))
    return BnB4(packed, None, tuple(w.shape), kind, blocksize, kernel, np.array(q, np.uint8),
                np.array(a2, _F32), code2, float(offset))


def _out(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == np.float32:
        return v
    if dtype == np.float16:
        return v.astype(np.float16)  # NumPy's float32 -> float16 is one RNE, like __float2half_rn
    return cvt_f32_to_bf16(v)


def _dtypes() -> tuple:
    import ml_dtypes

    return (np.float32, np.float16, ml_dtypes.bfloat16)


def dequantize(record: BnB4, dtype=np.float32) -> np.ndarray:
    """The tensor of ``record`` (its ``shape``) in ``dtype`` (float32, float16 or ml_dtypes.bfloat16):
    ``fl32(table[c] * absmax[block])`` rounded once to ``dtype`` (``dequantize_4bit``)."""
    if not isinstance(record, BnB4):
        raise FormatRuleError(f"record: must be a BnB4; got {type(record).__name__}")
    dt = require_dtype_arg("dtype", dtype, _dtypes())
    n = int(np.prod(record.shape))
    codes = unpack(record.packed)[:n]  # (n,)
    scale = np.repeat(record.block_absmax(), record.blocksize)[:n]  # (n,)
    v = (_read_table(record)[codes] * scale).astype(_F32)
    return _out(v, dt).reshape(record.shape)


def dequantize_reference(record: BnB4, dtype=np.float32) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize`."""
    if not isinstance(record, BnB4):
        raise FormatRuleError(f"record: must be a BnB4; got {type(record).__name__}")
    dt = require_dtype_arg("dtype", dtype, _dtypes())
    table = _read_table(record)
    absmax = record.block_absmax()
    n = int(np.prod(record.shape))
    out = np.zeros(n, _F32)
    for i in range(n):
        byte = int(record.packed[i // 2])
        c = byte >> 4 if i % 2 == 0 else byte & 15
        out[i] = _F32(table[c] * absmax[i // record.blocksize])
    return _out(out, dt).reshape(record.shape)

