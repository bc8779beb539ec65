"""``tensormap.replace`` and ``tensormap.cp_fenceproxy``: a kernel edits a tensor map in memory
(PTX ISA 8.3+, "tensormap.replace"), defined once for both executors.

Spec
----
replace         ``tensormap.replace.tile.FIELD{.global,.shared::cta}.b1024.{b32,b64} [map], {ord,} new_val``:
                the 128-byte map at ``map`` (64-byte aligned; a generic address in the shared window is
                shared memory, any other global) is decoded (refsim.formats.tensor_map.decode_tiled), one
                field changed, and encoded again (encode_tiled, the fmha_v2 layout), so every write must
                leave a map the driver's rules accept (stricter than a GPU, which checks at use only):
                global_address (b64), rank (new_val = rank - 1; added dims start as extent 1, stride 0,
                box 1, element stride 1, dropped dims are forgotten), box_dim / global_dim /
                element_stride (ord = dimension, innermost 0), global_stride (ord i = the byte stride of
                dimension i + 1), elemtype (the ISA's codes 0-12: u8 u16 u32 s32 u64 s64 f16 f32 f32.ftz
                f64 bf16 tf32 tf32.ftz, which are fmha's format codes with tf32 as f32 plus its bit),
                interleave_layout (0 none, 1 16B, 2 32B), swizzle_mode (0 none, 1 32B, 2 64B, 3 128B),
                fill_mode (0 zero, 1 NaN request). Refused: im2col mode, swizzle_atomicity and the sm_100
                codes.
cp_fenceproxy   ``tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
                [dst], [src], 128``: the 128 bytes at shared ``src`` copied to global ``dst`` (the fence part
                orders nothing in refsim's coherent memory).
fences          ``fence.proxy.tensormap::generic.{release,acquire}`` are fences (refsim.ptx.barriers): no
                effect on values, since the map is read from memory at each tensor copy.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from refsim.errors import RefsimError
from refsim.formats import tensor_map
from refsim.ptx.errors import PtxMemoryError, PtxMisalignedError, PtxUnsupportedError
from refsim.ptx.hopper import mbarrier
from refsim.ptx.hopper.bulk import global_bytes
from refsim.ptx.memory import SHARED_WINDOW, WINDOW_BYTES
from refsim.ptx.memory_ops import address
from refsim.ptx.operands import reader
from refsim.ptx.parse import Instruction

__all__ = ["build", "ELEMTYPES"]

#: tensormap.replace elemtype code -> refsim.formats.tensor_map data type
ELEMTYPES = ("uint8", "uint16", "uint32", "int32", "uint64", "int64", "float16", "float32", "float32_ftz",
             "float64", "bfloat16", "tfloat32", "tfloat32_ftz")
_ENUMS = {"interleave_layout": ("interleave", tensor_map.INTERLEAVES), "swizzle_mode": ("swizzle", tensor_map.SWIZZLES),
          "fill_mode": ("oob_fill", tensor_map.OOB_FILLS), "elemtype": ("data_type", ELEMTYPES)}
_ORDINAL = {"box_dim": "box_dims", "global_dim": "global_dims", "global_stride": "global_strides",
            "element_stride": "element_strides"}


def _map_view(L, ins, t: int, op, space: str) -> np.ndarray:
    """The writable uint8 view of the 128-byte map at address operand ``op`` of thread ``t``."""
    one = np.asarray([t])
    if space == "shared":
        a = int(mbarrier.shared_offsets(L, ins, op, one, tensor_map.MAP_BYTES, 64, "tensor map", "shared")[0])
        base = int(L.slot_of[t]) * L.shared_stride + a
        return L.shared[base:base + tensor_map.MAP_BYTES]
    a = int(np.broadcast_to(address(L, op, ins, "generic" if space == "generic" else "global")(one), (1,))[0])
    if space == "generic" and SHARED_WINDOW <= a < SHARED_WINDOW + WINDOW_BYTES:
        return _map_view(L, ins, t, ("addr", None, a - SHARED_WINDOW), "shared")
    if a % 64:
        raise PtxMisalignedError(f"{L.where(ins)}: tensor map address 0x{a:x} is not 64-byte aligned (by {L.who(t)})")
    return global_bytes(L, ins, t, a, tensor_map.MAP_BYTES, True)


def _space(ins) -> str:
    return "global" if "global" in ins.mods else "shared" if "shared::cta" in ins.mods else "generic"


def _replace(m, field: str, ordinal, v: int):
    """The map ``m`` with ``field`` set to ``v`` (ordinal: the dimension of the per-dimension fields)."""
    if field == "global_address":
        return dataclasses.replace(m, global_address=v)
    if field == "rank":
        r, old = v + 1, m.rank
        if not 1 <= r <= 5:
            raise ValueError(f"rank field {v} is not rank - 1 of a rank in [1, 5]")
        grow = max(0, r - old)

        def fit(t, fill):
            return tuple(t[:r]) + (fill,) * grow
        return dataclasses.replace(m, global_dims=fit(m.global_dims, 1), box_dims=fit(m.box_dims, 1),
                                   element_strides=fit(m.element_strides, 1),
                                   global_strides=tuple(m.global_strides[:r - 1]) + (0,) * max(0, r - 1 - len(m.global_strides)))
    if field in _ORDINAL:
        name = _ORDINAL[field]
        values = list(getattr(m, name))
        if not 0 <= ordinal < len(values):
            raise ValueError(f"ordinal {ordinal} is not a dimension of this field ({len(values)} of them)")
        values[ordinal] = v
        return dataclasses.replace(m, **{name: tuple(values)})
    name, codes = _ENUMS[field]
    if not 0 <= v < len(codes):
        raise ValueError(f"{field} code {v} is not one refsim models (0..{len(codes) - 1})")
    return dataclasses.replace(m, **{name: codes[v]})


def build(L, ins: Instruction, idx: int):
    """The step function of one ``tensormap`` instruction (see the module spec)."""
    where = L.where(ins)
    mods = ins.mods
    if "cp_fenceproxy" in mods:
        ops = ins.operands
        if len(ops) != 3 or ops[2][0] != "imm" or int(ops[2][1]) != tensor_map.MAP_BYTES:
            raise PtxUnsupportedError(f"{where}: expected tensormap.cp_fenceproxy [dst], [src], 128")

        def run_copy(sel):
            for t in L.threads(sel).tolist():
                _map_view(L, ins, t, ops[0], "global")[:] = _map_view(L, ins, t, ops[1], "shared")
            L.progress += 1
        return run_copy
    field = next((f for f in ("global_address", "rank", *_ORDINAL, *_ENUMS) if f in mods), None)
    if "replace" not in mods or "tile" not in mods or field is None:
        raise PtxUnsupportedError(f"{where}: only tensormap.replace.tile of global_address, rank, box_dim, global_dim, "
                                  f"global_stride, element_stride, elemtype, interleave_layout, swizzle_mode, "
                                  f"fill_mode is supported")
    ops = ins.operands
    ordinal = None
    if field in _ORDINAL:
        if len(ops) != 3 or ops[1][0] != "imm":
            raise PtxUnsupportedError(f"{where}: expected [map], ord (an immediate), new_val")
        ordinal = int(ops[1][1])
    elif len(ops) != 2:
        raise PtxUnsupportedError(f"{where}: expected [map], new_val")
    new = reader(L, ops[-1], ins.types[0] if ins.types else "b32", ins)
    space = _space(ins)

    def run(sel):
        th = L.threads(sel)
        vals = np.broadcast_to(new(sel), th.shape)
        for t, v in zip(th.tolist(), vals.tolist()):
            view = _map_view(L, ins, t, ops[0], space)
            try:
                m = _replace(tensor_map.decode_tiled(bytes(view)), field, ordinal, int(v))
                view[:] = np.frombuffer(tensor_map.encode_tiled(**dataclasses.asdict(m)), np.uint8)
            except (RefsimError, ValueError) as e:
                raise PtxMemoryError(f"{where}: tensormap.replace of {field} = {int(v)} leaves no valid tensor map "
                                     f"({e}; by {L.who(t)})") from None
        L.progress += 1
    return run
