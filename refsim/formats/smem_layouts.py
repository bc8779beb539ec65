"""Hopper shared-memory operand layouts: the 64-bit wgmma matrix descriptor, the four swizzle
modes, and the matrix a descriptor names.

Spec
----
descriptor      one 64-bit word (``wgmma.mma_async`` operands ``a-desc``/``b-desc``), fields::

                 63 62 61   52 51  49 48 46 45        32 31 30 29        16 15 14 13         0
                +-----+-------+------+-----+------------+-----+------------+-----+------------+
                | swz |   0   | base |  0  |  SBO >> 4  |  0  |  LBO >> 4  |  0  | addr >> 4  |
                +-----+-------+------+-----+------------+-----+------------+-----+------------+

                addr = (start_address & 0x3FFFF) >> 4 (bits 0-13), LBO = leading dimension byte
                offset >> 4 (bits 16-29), SBO = stride dimension byte offset >> 4 (bits 32-45),
                base offset (bits 49-51), swizzle (bits 62-63: 0 none, 1 128B, 2 64B, 3 32B).
                Every other bit is 0. Here the three byte values must be multiples of 16 below
                2**18 (18-bit shared window; a value that does not fit is an error, never masked).
swizzle         on a shared-memory byte address ``a``: 128B XORs bits [7:9] into bits [4:6]
                (CuTe ``Swizzle<3,4,3>``), 64B bits [7:8] into [4:5] (``Swizzle<2,4,3>``), 32B bit
                7 into bit 4 (``Swizzle<1,4,3>``), none leaves ``a``. In words: the 16-byte chunk
                index within a 128-byte line is XORed with the line index modulo 8 / 4 / 2. The
                XOR reads absolute address bits, so a descriptor whose start lies inside a swizzle
                pattern (CUTLASS's k-step advance by 32 bytes) reads the swizzled data correctly.
canonical       in elements of ``E`` bytes, ``T = 16 / E`` elements per 16-byte chunk, ``W`` = 1
layouts         (none), 2 (32B), 4 (64B), 8 (128B); CuTe layout ``shape:stride`` from matrix
                coordinates (mn, k) to the element offset before the swizzle (LBO/SBO in elements
                here, bytes in the descriptor):

                K-major,  none      ((8,m),(T,2k)):((1T,SBO),(1,LBO))
                K-major,  swizzled  ((8,m),(T,2k)):((WT,SBO),(1,T))      LBO unused
                MN-major, none      ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
                MN-major, swizzled  ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO))

                So a core matrix is 8 rows of 16 bytes (128 contiguous bytes when unswizzled); in
                the none mode LBO steps between core matrices along K (K-major) or along K too
                (MN-major: the leading dimension is K), SBO along MN. With a swizzle, K-major keeps
                K contiguous inside one swizzle row (K extent <= 16 W bytes) and SBO steps 8 rows;
                MN-major puts LBO between swizzle-atom columns along MN and SBO between 8-deep
                K groups.
matrix          ``matrix_from_smem`` returns the operand as ``(rows, cols) = (MN, K)``: A is
                (M, K); B is returned as (N, K), the transpose of wgmma's K x N B.
base offset     only 0 is modelled (patterns starting on their own repeat boundary); a nonzero
                base offset in a descriptor passed to :func:`matrix_from_smem` is an error.
source          PTX ISA §9.7.15.5.1 "Shared Memory Matrix Layout" / "Strides" and §9.7.15.5.1.2
                "Matrix Descriptor Format" (asynchronous-warpgroup-level-matrix-shared-memory-
                layout-matrix-descriptor). The ISA page itself could not be retrieved while this
                was written; the fields were checked against NVIDIA CUTLASS
                ``include/cute/arch/mma_sm90_desc.hpp`` (``GmmaDescriptor`` bit fields, with the
                layout codes SWIZZLE_NONE = 0, 128B = 1, 64B = 2, 32B = 3) and the canonical
                layouts against ``include/cute/atom/mma_traits_sm90_gmma.hpp`` (comment of
                ``make_gmma_desc``, commit 6433f99), read, not copied. The ISA's 32-byte-atom and
                matrix-descriptor "version" fields belong to sm_100 ``tcgen05`` and are not here.

The 128B swizzle on a 1024-byte pattern (8 lines of 128 bytes, chunk = 16 bytes; the number is
the logical chunk that lands in each physical chunk)::

    line 0:  0 1 2 3 4 5 6 7
    line 1:  1 0 3 2 5 4 7 6
    line 2:  2 3 0 1 6 7 4 5
    line 3:  3 2 1 0 7 6 5 4
    line 4:  4 5 6 7 0 1 2 3
    line 5:  5 4 7 6 1 0 3 2
    line 6:  6 7 4 5 2 3 0 1
    line 7:  7 6 5 4 3 2 1 0
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from refsim._validate import (require_array, require_choice, require_dtype, require_dtype_arg, require_fields,
                              require_int, require_ndim)
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats.swizzle import Swizzle

__all__ = [
    "SWIZZLE_MODES", "MatrixDescriptor", "encode_descriptor", "decode_descriptor",
    "swizzle", "swizzle_reference", "matrix_offsets", "matrix_addresses",
    "matrix_from_smem", "matrix_from_smem_reference", "smem_from_matrix",
]

#: the swizzle modes by their descriptor code (bits 62-63)
SWIZZLE_MODES = ("none", "128B", "64B", "32B")
#: bytes in one swizzle row (16 W): the K extent a swizzled K-major descriptor covers at most
_ROW_BYTES = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
_XOR = {"none": Swizzle(0, 4, 3), "32B": Swizzle(1, 4, 3), "64B": Swizzle(2, 4, 3), "128B": Swizzle(3, 4, 3)}
SMEM_WINDOW = 1 << 18  # the descriptor keeps address bits 4..17
_DTYPES = (np.uint8, np.int8, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.uint16, np.int16, np.float16,
           ml_dtypes.bfloat16, np.uint32, np.int32, np.float32)
_MAJORS = ("K", "MN")
_RESERVED = ~((0x3FFF << 0) | (0x3FFF << 16) | (0x3FFF << 32) | (0x7 << 49) | (0x3 << 62)) & (2**64 - 1)


def _byte_field(name: str, value) -> int:
    v = require_int(name, value, minimum=0)
    if v % 16 or v >= SMEM_WINDOW:
        raise FormatRuleError(f"{name}: must be a multiple of 16 below 2**18 (14 bits after >> 4); got {v}")
    return v


@dataclass(frozen=True)
class MatrixDescriptor:
    """The fields of a wgmma matrix descriptor, in bytes (``start_address``,
    ``leading_byte_offset``, ``stride_byte_offset``: multiples of 16 below 2**18), ``base_offset``
    (0..7) and ``swizzle`` (one of :data:`SWIZZLE_MODES`). ``int(d)`` is the 64-bit word."""

    start_address: int
    leading_byte_offset: int
    stride_byte_offset: int
    base_offset: int = 0
    swizzle: str = "none"

    def __post_init__(self):
        require_fields(self)
        for name in ("start_address", "leading_byte_offset", "stride_byte_offset"):
            object.__setattr__(self, name, _byte_field(name, getattr(self, name)))
        b = require_int("base_offset", self.base_offset, minimum=0)
        if b > 7:
            raise FormatRuleError(f"base_offset: must be in [0, 7] (3 bits); got {b}")
        object.__setattr__(self, "base_offset", b)
        object.__setattr__(self, "swizzle", require_choice("swizzle", self.swizzle, SWIZZLE_MODES))

    def __int__(self) -> int:
        return ((self.start_address >> 4) | (self.leading_byte_offset >> 4) << 16
                | (self.stride_byte_offset >> 4) << 32 | self.base_offset << 49
                | SWIZZLE_MODES.index(self.swizzle) << 62)


def encode_descriptor(start_address: int, leading_byte_offset: int, stride_byte_offset: int,
                      base_offset: int = 0, swizzle: str = "none") -> int:
    """The 64-bit descriptor word (a Python int in [0, 2**64)) of the given byte values.

    Rules: each byte value a multiple of 16 below 2**18, ``base_offset`` in 0..7, ``swizzle`` one
    of ``"none", "128B", "64B", "32B"``; anything else raises ``FormatRuleError``."""
    return int(MatrixDescriptor(start_address, leading_byte_offset, stride_byte_offset, base_offset, swizzle))


def decode_descriptor(desc: int) -> MatrixDescriptor:
    """The fields of the 64-bit descriptor ``desc`` (an int in [0, 2**64) with every reserved
    bit 0, else ``FormatRuleError``), byte values multiplied back by 16."""
    d = require_int("desc", desc, minimum=0)
    if d >= 1 << 64:
        raise FormatRuleError(f"desc: must fit in 64 bits; got {d:#x}")
    if d & _RESERVED:
        raise FormatRuleError(f"desc: reserved bits must be 0; got bits {d & _RESERVED:#x} set in {d:#018x}")
    return MatrixDescriptor(((d >> 0) & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4,
                            (d >> 49) & 7, SWIZZLE_MODES[d >> 62])


def _addresses_arg(name: str, a):
    if isinstance(a, (bool, np.bool_)):
        raise FormatRuleError(f"{name}: must be an integer or an integer array; got {a!r}")
    if isinstance(a, (int, np.integer)):
        x = np.asarray(int(a))
    else:
        x = require_array(name, a)
        if x.dtype.kind not in "iu":
            raise FormatRuleError(f"{name}: must be an integer array; got {x.dtype}")
    if x.size and (int(x.min()) < 0 or int(x.max()) >= SMEM_WINDOW):
        raise FormatRuleError(f"{name}: shared-memory byte addresses must lie in [0, 2**18); "
                              f"got range [{int(x.min())}, {int(x.max())}]")
    return x.astype(np.int64)


def swizzle(byte_offset, mode: str):
    """The physical byte address of logical shared-memory byte address ``byte_offset`` (an int
    or integer array, each in [0, 2**18)) under swizzle ``mode``; an int in, an int out."""
    mode = require_choice("mode", mode, SWIZZLE_MODES)
    x = _addresses_arg("byte_offset", byte_offset)
    out = _XOR[mode](x)
    return int(out) if np.ndim(out) == 0 else out


def swizzle_reference(byte_offset: int, mode: str) -> int:
    """Plain twin of :func:`swizzle` for one address, from the ISA's picture: within each
    128-byte line, the 16-byte chunk index is XORed with the line index modulo the pattern height
    (8 lines for 128B, 4 for 64B, 2 for 32B, 1 for none)."""
    mode = require_choice("mode", mode, SWIZZLE_MODES)
    a = int(_addresses_arg("byte_offset", byte_offset)) if np.ndim(byte_offset) == 0 else None
    if a is None:
        raise ShapeError(f"byte_offset: the plain twin takes one address; got shape {np.shape(byte_offset)}")
    height = _ROW_BYTES[mode] // 16  # 1, 2, 4, 8 chunks are permuted
    line, within = divmod(a, 128)
    chunk, byte = divmod(within, 16)
    new_chunk = (chunk // height) * height + ((chunk % height) ^ (line % height))
    return line * 128 + new_chunk * 16 + byte


def _descriptor_arg(descriptor) -> MatrixDescriptor:
    if isinstance(descriptor, MatrixDescriptor):
        return descriptor
    if isinstance(descriptor, (int, np.integer)) and not isinstance(descriptor, (bool, np.bool_)):
        return decode_descriptor(descriptor)
    raise FormatRuleError(f"descriptor: must be a 64-bit descriptor int or a MatrixDescriptor; "
                          f"got {type(descriptor).__name__}")


def _check_shape(rows: int, cols: int, itemsize: int, major: str, mode: str) -> tuple[int, int]:
    rows = require_int("rows", rows, minimum=1)
    cols = require_int("cols", cols, minimum=1)
    t = 16 // itemsize
    if rows * cols * itemsize > SMEM_WINDOW:
        raise ShapeError(f"rows x cols: the matrix must fit the 2**18-byte shared window; got {rows} x {cols} "
                         f"of {itemsize} bytes")
    if major == "K":
        if rows % 8 or cols % t:
            raise ShapeError(f"rows, cols: a K-major operand is a grid of 8-row x 16-byte core matrices: rows a "
                             f"multiple of 8 and cols a multiple of {t}; got ({rows}, {cols})")
        if mode != "none" and cols * itemsize > _ROW_BYTES[mode]:
            raise ShapeError(f"cols: a K-major {mode}-swizzled operand spans at most one {_ROW_BYTES[mode]}-byte "
                             f"swizzle row along K; got {cols} elements of {itemsize} bytes")
    elif rows % t or cols % 8:
        raise ShapeError(f"rows, cols: an MN-major operand is a grid of 16-byte x 8-deep core matrices: rows a "
                         f"multiple of {t} and cols a multiple of 8; got ({rows}, {cols})")
    return rows, cols


def matrix_offsets(rows: int, cols: int, itemsize: int, major: str, swizzle_mode: str,
                   leading_byte_offset: int, stride_byte_offset: int) -> np.ndarray:
    """The canonical byte offset (before the swizzle, relative to the start address) of element
    (mn, k) of a ``(rows, cols) = (MN, K)`` operand: an int64 array of that shape.

    ``itemsize`` 1, 2 or 4 bytes; ``major`` "K" or "MN"; the layouts of the module spec."""
    e = require_choice("itemsize", itemsize, (1, 2, 4))
    major = require_choice("major", major, _MAJORS)
    mode = require_choice("swizzle_mode", swizzle_mode, SWIZZLE_MODES)
    lbo = _byte_field("leading_byte_offset", leading_byte_offset)
    sbo = _byte_field("stride_byte_offset", stride_byte_offset)
    rows, cols = _check_shape(rows, cols, e, major, mode)
    t, w = 16 // e, _ROW_BYTES[mode] // 16
    mn = np.arange(rows, dtype=np.int64)[:, None]  # (rows, 1)
    k = np.arange(cols, dtype=np.int64)[None, :]  # (1, cols)
    if major == "K":
        if mode == "none":  # ((8,m),(T,2k)):((1T,SBO),(1,LBO))
            off = (mn % 8) * 16 + (mn // 8) * sbo + (k % t) * e + (k // t) * lbo
        else:  # ((8,m),(T,2k)):((WT,SBO),(1,T))
            off = (mn % 8) * 16 * w + (mn // 8) * sbo + k * e
    elif mode == "none":  # ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
        off = (mn % t) * e + (mn // t) * sbo + (k % 8) * 16 + (k // 8) * lbo
    else:  # ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO))
        off = (mn % t) * e + (mn // t % w) * 16 + (mn // (t * w)) * lbo + (k % 8) * 16 * w + (k // 8) * sbo
    return off


def matrix_addresses(descriptor, rows: int, cols: int, dtype, major: str = "K") -> np.ndarray:
    """The shared-memory byte address (int64, ``(rows, cols)``) of each element of the
    ``(MN, K)`` operand that ``descriptor`` (a 64-bit int or :class:`MatrixDescriptor`) names:
    ``swizzle(start_address + matrix_offsets(...), mode)``. Element size from ``dtype`` (1, 2 or
    4 bytes: u8/s8/e4m3/e5m2, u16/s16/f16/bf16, u32/s32/f32(tf32))."""
    d = _descriptor_arg(descriptor)
    if d.base_offset:
        raise FormatRuleError(f"descriptor: only base_offset 0 is modelled (patterns that start on their repeat "
                              f"boundary); got {d.base_offset}")
    dt = require_dtype_arg("dtype", dtype, _DTYPES)
    off = matrix_offsets(rows, cols, dt.itemsize, major, d.swizzle, d.leading_byte_offset, d.stride_byte_offset)
    logical = d.start_address + off
    if int(logical.max()) + dt.itemsize > SMEM_WINDOW:
        raise ShapeError(f"descriptor: the operand runs past the 2**18-byte shared window (last byte "
                         f"{int(logical.max()) + dt.itemsize - 1})")
    return _XOR[d.swizzle](logical)


def _smem_arg(smem_bytes) -> np.ndarray:
    s = require_dtype("smem_bytes", smem_bytes, np.uint8)
    require_ndim("smem_bytes", s, 1)
    if s.size > SMEM_WINDOW:
        raise ShapeError(f"smem_bytes: at most 2**18 bytes of shared memory; got {s.size}")
    return s


def matrix_from_smem(smem_bytes: np.ndarray, descriptor, rows: int, cols: int, dtype, major: str = "K") -> np.ndarray:
    """The ``(rows, cols) = (MN, K)`` operand of ``dtype`` that wgmma reads through
    ``descriptor`` from ``smem_bytes`` (1-D uint8, shared memory from address 0, little-endian
    elements). Every byte read must lie inside ``smem_bytes`` (``ShapeError`` otherwise)."""
    s = _smem_arg(smem_bytes)
    addr = matrix_addresses(descriptor, rows, cols, dtype, major)
    dt = np.dtype(dtype)
    last = int(addr.max()) + dt.itemsize
    if last > s.size:
        raise ShapeError(f"smem_bytes: the operand reads up to byte {last - 1}; got {s.size} bytes")
    raw = s[addr[..., None] + np.arange(dt.itemsize)]  # (rows, cols, itemsize) bytes, low byte first
    return np.ascontiguousarray(raw).view(dt).reshape(addr.shape)  # little-endian host


def matrix_from_smem_reference(smem_bytes: np.ndarray, descriptor, rows: int, cols: int, dtype,
                               major: str = "K") -> np.ndarray:
    """Plain-loop twin of :func:`matrix_from_smem`: per element, the canonical offset written out
    from the layout table, then :func:`swizzle_reference`, then the bytes."""
    s = _smem_arg(smem_bytes)
    d = _descriptor_arg(descriptor)
    major = require_choice("major", major, _MAJORS)
    dt = require_dtype_arg("dtype", dtype, _DTYPES)
    if d.base_offset:
        raise FormatRuleError(f"descriptor: only base_offset 0 is modelled; got {d.base_offset}")
    e = dt.itemsize
    rows, cols = _check_shape(rows, cols, e, major, d.swizzle)
    t, w = 16 // e, _ROW_BYTES[d.swizzle] // 16
    lbo, sbo = d.leading_byte_offset, d.stride_byte_offset
    out = np.zeros((rows, cols), dt)
    for mn in range(rows):
        for k in range(cols):
            if major == "K" and d.swizzle == "none":
                core_row, core_mn, chunk, core_k = mn % 8, mn // 8, k % t, k // t
                off = core_row * 16 + core_mn * sbo + chunk * e + core_k * lbo
            elif major == "K":
                off = (mn % 8) * (16 * w) + (mn // 8) * sbo + k * e
            elif d.swizzle == "none":
                off = (mn % t) * e + (mn // t) * sbo + (k % 8) * 16 + (k // 8) * lbo
            else:
                chunk_in_row, atom_col = (mn // t) % w, mn // (t * w)
                off = (mn % t) * e + chunk_in_row * 16 + atom_col * lbo + (k % 8) * (16 * w) + (k // 8) * sbo
            a = swizzle_reference(d.start_address + off, d.swizzle)
            if a + e > s.size:
                raise ShapeError(f"smem_bytes: the operand reads up to byte {a + e - 1}; got {s.size} bytes")
            out[mn, k] = np.frombuffer(bytes(s[a:a + e]), dt)[0]
    return out


def smem_from_matrix(matrix: np.ndarray, descriptor, major: str = "K", smem_size: int | None = None) -> np.ndarray:
    """The inverse of :func:`matrix_from_smem`: 1-D uint8 shared memory of ``smem_size`` bytes
    (default: just past the last byte written) holding the ``(MN, K)`` ``matrix`` where
    ``descriptor`` names it, every other byte 0. Two elements mapped to one address (an LBO or
    SBO that overlaps core matrices) raise ``FormatRuleError``."""
    m = require_array("matrix", matrix)
    require_ndim("matrix", m, 2)
    require_dtype_arg("matrix.dtype", m.dtype, _DTYPES)
    addr = matrix_addresses(descriptor, m.shape[0], m.shape[1], m.dtype, major)
    e = m.dtype.itemsize
    byte_addr = (addr[..., None] + np.arange(e)).reshape(-1)
    if np.unique(byte_addr).size != byte_addr.size:
        raise FormatRuleError("descriptor: its offsets map two bytes of the operand to one shared-memory address")
    end = int(byte_addr.max()) + 1
    size = end if smem_size is None else require_int("smem_size", smem_size, minimum=0)
    if size < end or size > SMEM_WINDOW:
        raise ShapeError(f"smem_size: must be in [{end}, 2**18] to hold the operand; got {size}")
    out = np.zeros(size, np.uint8)
    out[byte_addr] = np.ascontiguousarray(m).view(np.uint8).reshape(-1)  # little-endian host: low byte first
    return out
