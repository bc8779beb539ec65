"""The TMA tensor map (``CUtensorMap``, tiled mode): the arguments of ``cuTensorMapEncodeTiled``,
validated as the CUDA driver documents them, a 128-byte image, and the box a tile load reads.

Spec
----
arguments       data type, rank 1..5, global address, global dims (innermost first), rank - 1
                global strides in bytes (dim 0 is contiguous), box dims, element strides,
                interleave, swizzle, L2 promotion, out-of-bounds fill.
rules           CUDA Driver API §6.30 "Tensor Map Object Management", ``cuTensorMapEncodeTiled``:
                rank non-zero and <= 5, and >= 3 when interleave is not NONE; globalAddress 16-byte
                aligned (32 with INTERLEAVE_32B); each globalDim non-zero and <= 2**32; each
                globalStride a multiple of 16 (32 with INTERLEAVE_32B) and < 2**40; each boxDim
                non-zero and <= 256, and with INTERLEAVE_NONE boxDim[0] * elementSize a multiple of
                16 bytes; each elementStride non-zero and <= 8 (dim 0's is ignored with
                INTERLEAVE_NONE); with INTERLEAVE_NONE and a swizzle, boxDim[0] * elementSize <= the
                swizzle span (32, 64, 128 bytes); INTERLEAVE_32B requires SWIZZLE_32B;
                FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA only for floating-point types. The pseudo-code
                the driver docs give for strides ("globalStrides[0] = globalDim[0] * elementSize +
                padding[0]; ... assert(globalStrides[i] >= globalDim[i])") explains padding but
                states no checkable rule beyond the ones above, so none is enforced from it.
                The sm_100 additions (16U4/16U6 packed types, 128B_ATOM swizzles) have no code in
                the Hopper layout below and are refused.
image           the driver's byte layout is not published. NVIDIA's TensorRT-LLM fmha_v2 builds
                tensor maps without the driver (``cudaTmaDescTiled`` in
                ``cpp/kernels/fmha_v2/src/fmha/hopper/tma_types.h``, written by
                ``Multiple_tma_descriptor::set_tma_desctriptor`` in ``.../hopper/tma_descriptor.h``,
                commit 53cf5734a33bdb8b3f6bcb8553aad5c7d167b72f), read, not copied. That 64-byte
                layout (little-endian) is used here, then 64 zero bytes (``CUtensorMap`` is 128
                bytes, 64-byte aligned)::

                  bytes  0- 7  global address
                  bytes  8-11  common1: bit 0 type (0 tiled), bits 1-3 version (1), bits 4-6
                               rank - 1, bits 7-10 format, bits 11-12 interleave, bits 13-14
                               swizzle, bit 15 OOB fill (1 = NaN request), bit 16 f32->tf32,
                               bits 17-18 L2 promotion
                  bytes 12-27  stride_lower[4]: (globalStrides[i] >> 4) & 0xFFFFFFFF
                  bytes 28-31  stride_upper: bits 4i..4i+3 = (globalStrides[i] >> 4) >> 32
                  bytes 32-51  size[5]: globalDim[i] - 1
                  bytes 52-55  bits 3i..3i+2 = elementStrides[i] - 1; bits 24-31 boxDim[0] - 1
                  bytes 56-59  bits 8(i-1)..8(i-1)+7 = boxDim[i] - 1, i = 1..4
                  bytes 60-63  0

                The format codes are fmha's ``cudaTmaDescFormat`` (U8 0, U16 1, U32 2, S32 3, U64 4,
                S64 5, F16 6, F32 7, F32_FTZ 8, F64 9, BF16 10), which order FLOAT64 / BFLOAT16 /
                FLOAT32_FTZ differently from the driver's ``CUtensorMapDataType``; TFLOAT32(_FTZ)
                is F32(_FTZ) with the f32->tf32 bit (fmha's ``round_to_tf32`` argument; the pairing
                with the driver's TFLOAT32 enum is an inference). fmha writes boxDim[0] only for
                rank > 1; here it is written for rank 1 too, so the image round-trips.
tile load       PTX ISA "Tensor" / ``cp.async.bulk.tensor`` tile mode: the box starts at the
                signed tensor coordinates ``coords`` (innermost first); along dim i it visits
                ceil(boxDim[i] / elementStrides[i]) elements at coords[i] + j * elementStrides[i]
                (dim 0 stride 1 with INTERLEAVE_NONE); an element with a coordinate outside
                [0, globalDim[i]) is out of bounds and filled with zero, or with the NaN-request
                constant for FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA. That constant's bit pattern is
                not published; the type's canonical quiet NaN stands in for it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from refsim._validate import MAX_ELEMENTS, require_array, require_bounded, require_choice, require_fields, require_int
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = ["DATA_TYPES", "TensorMap", "encode_tiled", "decode_tiled", "tile_box"]

#: driver data type name -> (CUtensorMapDataType value, bytes, fmha format code, f32->tf32 bit, float?)
DATA_TYPES = {
    "uint8": (0, 1, 0, 0, False), "uint16": (1, 2, 1, 0, False), "uint32": (2, 4, 2, 0, False),
    "int32": (3, 4, 3, 0, False), "uint64": (4, 8, 4, 0, False), "int64": (5, 8, 5, 0, False),
    "float16": (6, 2, 6, 0, True), "float32": (7, 4, 7, 0, True), "float64": (8, 8, 9, 0, True),
    "bfloat16": (9, 2, 10, 0, True), "float32_ftz": (10, 4, 8, 0, True), "tfloat32": (11, 4, 7, 1, True),
    "tfloat32_ftz": (12, 4, 8, 1, True),
}
_NUMPY = {"uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "int32": np.int32, "uint64": np.uint64,
          "int64": np.int64, "float16": np.float16, "float32": np.float32, "float64": np.float64,
          "bfloat16": ml_dtypes.bfloat16}
INTERLEAVES = ("none", "16B", "32B")
SWIZZLES = ("none", "32B", "64B", "128B")
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("zero", "nan")
_SPAN = {"32B": 32, "64B": 64, "128B": 128}
MAP_BYTES = 128


def _int_tuple(name: str, values, length: int, lo: int, hi: int) -> tuple[int, ...]:
    if not isinstance(values, (tuple, list)):
        raise FormatRuleError(f"{name}: must be a tuple of {length} ints; got {type(values).__name__}")
    if len(values) != length:
        raise ShapeError(f"{name}: must hold {length} values (one per dimension); got {len(values)}")
    out = tuple(require_int(f"{name}[{i}]", v) for i, v in enumerate(values))
    for i, v in enumerate(out):
        if not lo <= v <= hi:
            raise FormatRuleError(f"{name}[{i}]: must be in [{lo}, {hi}]; got {v}")
    return out


@dataclass(frozen=True)
class TensorMap:
    """A tiled tensor map's arguments (see the module spec for each rule). ``global_dims``,
    ``box_dims``, ``element_strides``: ``rank`` ints, innermost first; ``global_strides``:
    ``rank - 1`` byte strides of dims 1.. (dim 0 is contiguous)."""

    data_type: str
    global_address: int
    global_dims: tuple
    global_strides: tuple
    box_dims: tuple
    element_strides: tuple
    interleave: str = "none"
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"

    def __post_init__(self):
        require_fields(self)
        dt = require_choice("data_type", self.data_type, DATA_TYPES)
        il = require_choice("interleave", self.interleave, INTERLEAVES)
        sw = require_choice("swizzle", self.swizzle, SWIZZLES)
        l2 = require_choice("l2_promotion", self.l2_promotion, L2_PROMOTIONS)
        oob = require_choice("oob_fill", self.oob_fill, OOB_FILLS)
        if not isinstance(self.global_dims, (tuple, list)):
            raise FormatRuleError(f"global_dims: must be a tuple of ints; got {type(self.global_dims).__name__}")
        rank = len(self.global_dims)
        if not 1 <= rank <= 5:
            raise FormatRuleError(f"rank: tensorRank must be non-zero and <= 5; got {rank}")
        if il != "none" and rank < 3:
            raise FormatRuleError(f"rank: with interleave {il} tensorRank must be >= 3; got {rank}")
        align = 32 if il == "32B" else 16
        addr = require_int("global_address", self.global_address, minimum=0)
        if addr >= 1 << 64 or addr % align:
            raise FormatRuleError(f"global_address: globalAddress must be a {align}-byte aligned 64-bit address; "
                                  f"got {addr:#x}")
        dims = _int_tuple("global_dims", self.global_dims, rank, 1, 1 << 32)
        strides = _int_tuple("global_strides", self.global_strides, rank - 1, 0, (1 << 40) - 1)
        for i, s in enumerate(strides):
            if s % align:
                raise FormatRuleError(f"global_strides[{i}]: globalStrides must be a multiple of {align} "
                                      f"(and < 2**40); got {s}")
        box = _int_tuple("box_dims", self.box_dims, rank, 1, 256)
        estr = _int_tuple("element_strides", self.element_strides, rank, 1, 8)
        inner = box[0] * DATA_TYPES[dt][1]
        if il == "none" and inner % 16:
            raise FormatRuleError(f"box_dims[0]: with interleave none boxDim[0] * elementSize must be a multiple "
                                  f"of 16 bytes; got {inner}")
        if il == "none" and sw != "none" and inner > _SPAN[sw]:
            raise FormatRuleError(f"box_dims[0]: with swizzle {sw} the box inner dimension must be <= "
                                  f"{_SPAN[sw]} bytes; got {inner}")
        if il == "32B" and sw != "32B":
            raise FormatRuleError(f"swizzle: interleave 32B requires swizzle 32B; got {sw}")
        if oob == "nan" and not DATA_TYPES[dt][4]:
            raise FormatRuleError(f"oob_fill: the NaN-request fill needs a floating-point data type; got {dt}")
        for name, v in (("global_address", addr), ("global_dims", dims), ("global_strides", strides),
                        ("box_dims", box), ("element_strides", estr), ("data_type", dt), ("interleave", il),
                        ("swizzle", sw), ("oob_fill", oob), ("l2_promotion", l2)):
            object.__setattr__(self, name, v)

    @property
    def rank(self) -> int:
        return len(self.global_dims)


def _pack(m: TensorMap) -> bytes:
    _, _, fmt, tf32, _ = DATA_TYPES[m.data_type]
    common1 = (0 | 1 << 1 | (m.rank - 1) << 4 | fmt << 7 | INTERLEAVES.index(m.interleave) << 11
               | SWIZZLES.index(m.swizzle) << 13 | OOB_FILLS.index(m.oob_fill) << 15 | tf32 << 16
               | L2_PROMOTIONS.index(m.l2_promotion) << 17)
    lower = [0] * 4
    upper = 0
    for i, s in enumerate(m.global_strides):
        lower[i] = (s >> 4) & 0xFFFFFFFF
        upper |= ((s >> 4) >> 32) << (4 * i)
    sizes = [0] * 5
    for i, d in enumerate(m.global_dims):
        sizes[i] = d - 1
    trav_box0 = (m.box_dims[0] - 1) << 24
    for i, e in enumerate(m.element_strides):
        trav_box0 |= (e - 1) << (3 * i)
    box_end = 0
    for i in range(1, m.rank):
        box_end |= (m.box_dims[i] - 1) << (8 * (i - 1))
    head = struct.pack("<QI4II5III", m.global_address, common1, *lower, upper, *sizes, trav_box0, box_end)
    return head + bytes(MAP_BYTES - len(head))


def encode_tiled(data_type: str, global_address: int, global_dims, global_strides, box_dims, element_strides,
                 interleave: str = "none", swizzle: str = "none", l2_promotion: str = "none",
                 oob_fill: str = "zero") -> bytes:
    """The 128-byte tensor map image (``bytes``) of ``cuTensorMapEncodeTiled``'s arguments, after
    the driver's rules (``FormatRuleError``/``ShapeError`` naming the broken rule). Names:
    ``data_type`` a key of :data:`DATA_TYPES`; ``interleave`` none/16B/32B; ``swizzle``
    none/32B/64B/128B; ``l2_promotion`` none/64B/128B/256B; ``oob_fill`` zero/nan."""
    return _pack(TensorMap(data_type, global_address, global_dims, global_strides, box_dims, element_strides,
                           interleave, swizzle, l2_promotion, oob_fill))


def decode_tiled(image: bytes) -> TensorMap:
    """The :class:`TensorMap` a 128-byte image holds (``bytes``). A field outside the layout (an
    im2col type bit, a version other than 1, an unknown format code, a set reserved bit) or a map
    the driver would refuse raises ``FormatRuleError``."""
    if not isinstance(image, (bytes, bytearray)):
        raise FormatRuleError(f"image: must be bytes; got {type(image).__name__}")
    if len(image) != MAP_BYTES:
        raise ShapeError(f"image: a tensor map is {MAP_BYTES} bytes; got {len(image)}")
    addr, common1, *rest = struct.unpack_from("<QI4II5III", image)
    lower, upper, sizes, trav_box0, box_end = rest[:4], rest[4], rest[5:10], rest[10], rest[11]
    if any(image[60:]) or common1 >> 19:
        raise FormatRuleError("image: bytes 60-127 and common1 bits 19-31 must be 0")
    if common1 & 1 or (common1 >> 1) & 7 != 1:
        raise FormatRuleError(f"image: must be a tiled (type 0), version-1 map; got common1 {common1:#x}")
    rank = ((common1 >> 4) & 7) + 1
    fmt, tf32 = (common1 >> 7) & 0xF, (common1 >> 16) & 1
    names = [n for n, v in DATA_TYPES.items() if v[2] == fmt and v[3] == tf32]
    if not names or rank > 5:
        raise FormatRuleError(f"image: format code {fmt} (tf32 bit {tf32}) and rank {rank} are not a tiled map")
    il, sw = (common1 >> 11) & 3, (common1 >> 13) & 3
    if il >= len(INTERLEAVES):
        raise FormatRuleError(f"image: interleave code {il} is not defined")
    strides = tuple(((upper >> (4 * i) & 0xF) << 32 | lower[i]) << 4 for i in range(rank - 1))
    unused = (any(lower[rank - 1:]) or upper >> (4 * (rank - 1)) or any(sizes[rank:])
              or (trav_box0 & 0xFFFFFF) >> (3 * rank) or box_end >> (8 * (rank - 1)))
    if unused:
        raise FormatRuleError(f"image: fields past rank {rank} must be 0")
    box = ((trav_box0 >> 24) + 1,) + tuple((box_end >> (8 * (i - 1)) & 0xFF) + 1 for i in range(1, rank))
    return TensorMap(names[0], addr, tuple(s + 1 for s in sizes[:rank]), strides, box,
                     tuple((trav_box0 >> (3 * i) & 7) + 1 for i in range(rank)), INTERLEAVES[il], SWIZZLES[sw],
                     L2_PROMOTIONS[(common1 >> 17) & 3], OOB_FILLS[(common1 >> 15) & 1])


def tile_box(tensor: np.ndarray, tensor_map: TensorMap, coords) -> np.ndarray:
    """The box a ``cp.async.bulk.tensor`` tile load of ``tensor_map`` at ``coords`` reads.

    ``tensor``: a NumPy array whose raw bytes (C order) are global memory from the map's global
    address on (so row padding in ``global_strides`` is honoured); it must hold every in-bounds
    element. ``coords``: ``rank`` signed 32-bit ints, innermost first, or an integer array (n, rank)
    of n boxes' corners (n loads of one map at once). Returns an array of the map's type (bfloat16
    as ``ml_dtypes.bfloat16``) of shape ``(n[rank-1], ..., n[0])`` (with a leading axis of n for
    corners (n, rank)) with ``n[i] = ceil(box_dims[i] / element_strides[i])`` (``n[0] = box_dims[0]``
    with interleave none), the logical box before any shared-memory swizzle; out-of-bounds elements
    zero or NaN (module spec). The float32_ftz/tfloat32 types raise ``FormatRuleError``: what the
    copy does to their bits (flush, tf32 rounding) is not published."""
    if not isinstance(tensor_map, TensorMap):
        raise FormatRuleError(f"tensor_map: must be a TensorMap; got {type(tensor_map).__name__}")
    m = tensor_map
    if m.data_type not in _NUMPY:
        raise FormatRuleError(f"tensor_map.data_type: the copy semantics of {m.data_type} are not modelled")
    if m.interleave != "none":
        raise FormatRuleError(f"tensor_map.interleave: only interleave none is modelled; got {m.interleave}")
    t = require_array("tensor", tensor)
    if t.dtype.hasobject:
        raise DtypeError(f"tensor: must hold plain bytes (global memory), not Python objects; got {t.dtype}")
    many = isinstance(coords, np.ndarray) and coords.ndim == 2
    if many:
        if coords.dtype.kind not in "iu" or coords.shape[1] != m.rank:
            raise ShapeError(f"coords: an array of corners must be integer (n, {m.rank}); got {coords.dtype} "
                             f"{coords.shape}")
        c = coords.astype(np.int64)
        if ((c < -(1 << 31)) | (c > (1 << 31) - 1)).any():
            raise FormatRuleError(f"coords: must be in [{-(1 << 31)}, {(1 << 31) - 1}]; got {c.min()}..{c.max()}")
    else:
        c = np.asarray([_int_tuple("coords", coords, m.rank, -(1 << 31), (1 << 31) - 1)], np.int64)
    dt = np.dtype(_NUMPY[m.data_type])
    e = dt.itemsize
    steps = (1,) + tuple(m.element_strides[1:])
    counts = tuple(-(-b // s) for b, s in zip(m.box_dims, steps))
    total = len(c)
    for n in counts:
        total *= n
    require_bounded("box", total, MAX_ELEMENTS, what="element count")
    byte_strides = (e,) + tuple(m.global_strides)
    need = sum((d - 1) * s for d, s in zip(m.global_dims, byte_strides)) + e
    if t.nbytes < need:
        raise ShapeError(f"tensor: the map's in-bounds elements reach byte {need - 1}; got {t.nbytes} bytes")
    mem = np.ascontiguousarray(t).reshape(-1).view(np.uint8)
    idx = [c[:, i, None] + steps[i] * np.arange(counts[i], dtype=np.int64) for i in range(m.rank)]   # (n, counts[i])
    if all(((x >= 0) & (x < d)).all() for x, d in zip(idx, m.global_dims)):
        # every element in bounds: gather whole rows (dim 0 is contiguous, element stride 1)
        offset = c[:, 0] * e
        for i in reversed(range(1, m.rank)):
            offset = offset[..., None] + (idx[i] * byte_strides[i]).reshape((len(c),) + (1,) * (offset.ndim - 1)
                                                                           + (counts[i],))
        rows = np.lib.stride_tricks.sliding_window_view(mem, counts[0] * e)[offset]
        out = rows.view(dt).reshape((len(c),) + counts[::-1])
        return out if many else out[0]
    offset = np.zeros(len(c), np.int64)
    inside = np.ones(len(c), bool)
    for i in reversed(range(m.rank)):  # outermost first, so axis 1 of the result is dim rank-1
        x = idx[i].reshape((len(c),) + (1,) * (m.rank - 1 - i) + (counts[i],))
        offset = offset[..., None] + x * byte_strides[i]
        inside = inside[..., None] & (x >= 0) & (x < m.global_dims[i])
    safe = np.where(inside, offset, 0)
    raw = mem[safe[..., None] + np.arange(e)]  # (..., e) bytes, low byte first (little-endian host)
    out = np.ascontiguousarray(raw).view(dt).reshape((len(c),) + counts[::-1])
    fill = dt.type(np.nan) if m.oob_fill == "nan" else dt.type(0)
    out = np.where(inside, out, fill).astype(dt)
    return out if many else out[0]
