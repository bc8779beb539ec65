"""Warp-level instructions: ``shfl.sync``, ``vote.sync``, ``ldmatrix`` and ``mma.sync`` (kind="warp").

Spec
----
arrays          operands arrive lane-major as (W, 32) (W warps) or (W, 32, n) for register tuples;
                ``active`` (W, 32) bool is the engine's active mask intersected with ``membermask``.
shfl            ``shfl.sync.{up,down,bfly,idx}.b32 d|p, a, b, c, membermask``:
                ``fn(a, b, c, active) -> (d, p)``. Per lane: bval = b[4:0], cval = c[4:0], mask = c[12:8];
                maxLane = (lane & mask) | (cval & ~mask), minLane = lane & mask;
                up j = lane - bval (p = j >= maxLane); down j = lane + bval (p = j <= maxLane);
                bfly j = lane ^ bval (p = j <= maxLane); idx j = minLane | (bval & ~mask) (p = j <= maxLane);
                if !p then j = lane; d = a[j]. The ISA leaves d undefined when lane j is inactive: refsim
                returns lane j's register as the engine holds it (policy; :func:`shfl_sources` tells the
                engine which lanes were read, so its poison checking can report such reads).
                Written once as :data:`SHFL` (expressions of refsim.ptx.semantics.expr over b, c, lane):
                NumPy here, C in the compiled executor (refsim.ptx.compiled.instructions derives it).
vote            ``vote.sync.{all,any,uni}.pred`` -> (W, 32) bool, ``vote.sync.ballot.b32`` -> (W, 32) uint32:
                over the active lanes only (``{!}a`` negation done by the engine). Written once as
                :data:`VOTE`: each mode an expression of the warp's ballot and active mask (all: ballot ==
                active, any: ballot != 0, uni: either), evaluated by NumPy here and emitted as C.
ldmatrix        ``ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared{::cta}.b16``: ``fn(rows)`` with rows
                uint16 (W, num, 8, 8) (matrix i, row r = the 16 bytes at the address of lane
                :func:`ldmatrix_row_lanes` [i, r] = 8i + r) -> uint32 (W, 32, num); register j of lane l =
                M_j[l/4][2(l%4) + h] (h = 0 low half, 1 high) or, with .trans, M_j[2(l%4) + h][l/4] —
                :func:`refsim.arith.fragments.ldmatrix_layout`. The compiled executor's runtime receives
                both as tables emitted from these functions.
stmatrix        :func:`stmatrix` (a function, no handler): the same layout inverted, registers -> rows; the
                instruction is refsim.ptx.hopper.matrix (address side, both executors).
mma             ``fn(a (W,32,na), b (W,32,nb), c (W,32,nc)) -> (d (W,32,nd),)`` uint32 registers.
                Fragments: :mod:`refsim.arith.fragments` (index maps from the PTX ISA figures);
                arithmetic: :mod:`refsim.arith.tensor_core` (T-FDPA model of ``arch`` for f16 inputs; its
                fast path :mod:`refsim.arith.mma_steps` for finite k16 f32 steps),
                :mod:`refsim.arith.integer_mma` (exact int32 for s8/u8/s4/u4, wrap or ``.satfinite``) and
                :mod:`refsim.arith.tensor_core_types` (bf16, tf32, e4m3/e5m2). Shapes executed (the list
                with archs is ``refsim.arith.tensor_core_types.modelled()``):
                    m16n8k16 .row.col f16 x f16 -> f32|f16 (C as D)       na 4, nb 2, nc/nd 4 (f32) or 2 (f16)
                    m16n8k8  .row.col f16 x f16 -> f32|f16 (one hardware block of 8 products)
                    m16n8k16 / m16n8k8 bf16 -> f32, m16n8k8 tf32 -> f32 (sm_80+), m16n8k32 e4m3|e5m2 -> f32 (sm_89+)
                    m16n8k16 / m16n8k32 .row.col s8|u8 -> s32,  m16n8k32 / m16n8k64 .row.col s4|u4 -> s32
                    m16n8k32 / m16n8k64 .kind::f8f6f4|mxf8f6f4|mxf4|mxf4nvf4 (sm_120a only):
                        :mod:`refsim.ptx.semantics.block_scaled_mma`
                Refused with a reason: f64 inputs, f16 accumulation with bf16/tf32/fp8 inputs, C and D of
                different types (ptxas and LLVM's NVPTX back end refuse them for m16n8k8/k16), m8n8k4,
                other layouts, and architectures without the shape or a model (sm_70, sm_75; sm_120's
                ordinary kinds: refsim has no RTX Blackwell f16/bf16/tf32/fp8/integer model).
source          PTX ISA 9.x, "Parallel Synchronization and Communication Instructions: shfl.sync, vote.sync",
                "Warp Level Matrix Multiply-Accumulate Instructions: ldmatrix, mma" and "Matrix Fragments for
                mma.m16n8k8 / m16n8k16 / m16n8k32 / m16n8k64" (figures transcribed in refsim.arith.fragments).
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fragments
from refsim.arith import integer_mma, mma_steps, tensor_core
from refsim.arith import tensor_core_types
from refsim.errors import RefsimError
from refsim.ptx.arch import base_arch, sm_number
from refsim.ptx.semantics import block_scaled_mma, expr
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported

__all__ = ["SHFL", "VOTE", "shfl", "shfl_sources", "shfl_reference", "vote", "ldmatrix", "ldmatrix_row_lanes", "stmatrix", "mma_fragments", "BUILDERS"]

_LANE = np.arange(32, dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# shfl


#: shfl.sync's rule, written once: per mode (source lane j, in-range flag p) as expressions of the sources
#: (b, c, lane) (src(0), src(1), src(2)); j already falls back to the lane itself where p is false.
#: :func:`shfl_sources` evaluates them with NumPy, the compiled executor emits their C (expr.c / c_pred).
_B, _C, _LANE_SRC = expr.src(0), expr.src(1), expr.src(2)
_BVAL, _CVAL, _MASK = _B & 0x1F, _C & 0x1F, (_C >> 8) & 0x1F
_MAX_LANE = (_LANE_SRC & _MASK) | (_CVAL & ~_MASK & 0x1F)
_MIN_LANE = _LANE_SRC & _MASK


def _shfl_rule(j: expr.Expr, cmp: str) -> tuple[expr.Expr, expr.Expr]:
    p = expr.compare(cmp, j, _MAX_LANE, signed=True)          # the ISA's ints: up's lane - bval may be < 0
    return expr.select(p, j, _LANE_SRC), p


SHFL = {
    "up": _shfl_rule(_LANE_SRC - _BVAL, ">="),
    "down": _shfl_rule(_LANE_SRC + _BVAL, "<="),
    "bfly": _shfl_rule(_LANE_SRC ^ _BVAL, "<="),
    "idx": _shfl_rule(_MIN_LANE | (_BVAL & ~_MASK & 0x1F), "<="),
}


def shfl_sources(mode: str, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Source lane j and in-range flag p of every lane: b, c (W, 32) (or broadcastable) unsigned.

    Returns (j int64 (W, 32), p bool (W, 32)): the expressions of :data:`SHFL` (the ISA pseudocode,
    module spec) evaluated on uint32 bits.
    """
    j, p = SHFL[mode]
    lane = np.broadcast_to(_LANE, np.broadcast_shapes(np.shape(b), np.shape(c), (32,)))
    (jv,) = expr.numpy_fn(j, 32)(b, c, lane)
    return jv.astype(np.int64), expr.numpy_pred(p, 32)(b, c, lane)


def shfl(mode: str, a: np.ndarray, b, c) -> tuple[np.ndarray, np.ndarray]:
    """``shfl.sync.{mode}.b32``: a uint32 (W, 32); b, c per-lane operands. Returns (d (W, 32), p (W, 32))."""
    a = np.asarray(a)
    j, p = shfl_sources(mode, b, c)
    j = np.broadcast_to(j, a.shape)
    return np.take_along_axis(a, j, axis=-1), np.broadcast_to(p, a.shape).copy()


def shfl_reference(mode: str, a: list[int], b: list[int], c: list[int]) -> tuple[list[int], list[bool]]:
    """Plain-loop twin of :func:`shfl` for one warp (Python ints), transcribed from the ISA pseudocode."""
    d, ps = [], []
    for lane in range(32):
        bval, cval, mask = b[lane] & 0x1F, c[lane] & 0x1F, (c[lane] >> 8) & 0x1F
        max_lane = (lane & mask) | (cval & ~mask & 0x1F)
        min_lane = lane & mask
        if mode == "up":
            j, p = lane - bval, lane - bval >= max_lane
        elif mode == "down":
            j, p = lane + bval, lane + bval <= max_lane
        elif mode == "bfly":
            j, p = lane ^ bval, (lane ^ bval) <= max_lane
        else:
            j = min_lane | (bval & ~mask & 0x1F)
            p = j <= max_lane
        d.append(a[j if p else lane])
        ps.append(bool(p))
    return d, ps


def _build_shfl(op: Op, arch: str) -> Handler:
    modes = [m for m in op.mods if m in ("up", "down", "bfly", "idx")]
    if "sync" not in op.mods or len(modes) != 1 or set(op.mods) - {"sync", *modes} or op.types != ("b32",):
        raise unsupported(op, "refsim executes shfl.sync.{up,down,bfly,idx}.b32 (the non-.sync form is "
                              "not supported on sm_70+)")
    mode = modes[0]
    return Handler(fn=lambda a, b, c, active=None: shfl(mode, a, b, c), dst_types=("b32", "pred"),
                   src_types=("b32", "b32", "b32"), kind="warp", isa=isa("parallel-synchronization-and-communication", "shfl-sync"))


# ----------------------------------------------------------------------------------------------
# vote


#: vote.sync's modes, written once: the result of each lane as an expression of the warp's ballot
#: (src(0): bit l set when lane l is active and its a is true) and its active mask (src(1): bit l set when
#: lane l is active). :func:`vote` evaluates them with NumPy, the compiled executor emits their C.
_BALLOT, _ACTIVE = expr.src(0), expr.src(1)
VOTE = {
    "ballot": _BALLOT,                                                          # b32
    "all": expr.compare("==", _BALLOT, _ACTIVE),                                # pred
    "any": expr.compare("!=", _BALLOT, expr.ZERO),
    "uni": expr.compare("==", _BALLOT, expr.ZERO) | expr.compare("==", _BALLOT, _ACTIVE),
}


def vote(mode: str, a: np.ndarray, active: np.ndarray) -> np.ndarray:
    """``vote.sync.{all,any,uni,ballot}``: a, active bool (W, 32). Returns bool (W, 32) or, for
    ballot, uint32 (W, 32) with bit l set when lane l is active and its a is true (:data:`VOTE`)."""
    a = np.asarray(a, bool)
    active = np.asarray(active, bool)
    bit = np.uint64(1) << _LANE.astype(np.uint64)
    ballot = np.where(a & active, bit, np.uint64(0)).sum(axis=-1, dtype=np.uint64)
    am = np.where(active, bit, np.uint64(0)).sum(axis=-1, dtype=np.uint64)
    e = VOTE[mode]
    r = expr.numpy_fn(e, 32)(ballot, am)[0] if mode == "ballot" else expr.numpy_pred(e, 32)(ballot, am)
    return np.broadcast_to(np.asarray(r)[..., None], a.shape).copy()


def _build_vote(op: Op, arch: str) -> Handler:
    modes = [m for m in op.mods if m in ("all", "any", "uni", "ballot")]
    if "sync" not in op.mods or len(modes) != 1 or set(op.mods) - {"sync", *modes}:
        raise unsupported(op, "refsim executes vote.sync.{all,any,uni}.pred and vote.sync.ballot.b32")
    mode = modes[0]
    want = ("b32",) if mode == "ballot" else ("pred",)
    if op.types != want:
        raise unsupported(op, f"vote.sync.{mode} has type .{want[0]}")
    return Handler(fn=lambda a, active: (vote(mode, a, active),), dst_types=want, src_types=("pred",),
                   kind="warp", isa=isa("parallel-synchronization-and-communication", "vote-sync"))


# ----------------------------------------------------------------------------------------------
# ldmatrix


def ldmatrix_row_lanes(num: int) -> np.ndarray:
    """int64 (num, 8): the lane whose address gives row r of matrix i of ``ldmatrix .x{num}`` — lane 8i + r
    (PTX ISA "ldmatrix": threads 0-7 give the row addresses of the first matrix, 8-15 the second, ...).
    The address side of both executors reads the rows in this order (refsim.ptx.memory_ops.ldmatrix and
    the compiled executor's table)."""
    return np.arange(8 * num, dtype=np.int64).reshape(num, 8)


def ldmatrix(rows: np.ndarray, trans: bool) -> np.ndarray:
    """rows uint16 (W, num, 8, 8) -> registers uint32 (W, 32, num) (module spec, PTX ISA figures)."""
    rows = np.asarray(rows).astype(np.uint16)
    num = rows.shape[-3]
    lay = fragments.ldmatrix_layout(num, trans)                          # (32, num, 2, 3)
    halves = rows[..., lay[..., 0], lay[..., 1], lay[..., 2]].astype(np.uint32)   # (W, 32, num, 2)
    return halves[..., 0] | (halves[..., 1] << np.uint32(16))


def stmatrix(regs: np.ndarray, trans: bool) -> np.ndarray:
    """registers uint32 (W, 32, num) -> rows uint16 (W, num, 8, 8): ``stmatrix``'s data side, the inverse
    of :func:`ldmatrix` (the ISA gives stmatrix the fragment layout of ldmatrix: element (matrix, row, col)
    of :func:`refsim.arith.fragments.ldmatrix_layout` is half h of register j of lane l; a bijection)."""
    regs = np.asarray(regs).astype(np.uint32)
    W, _, num = regs.shape
    lay = fragments.ldmatrix_layout(num, trans)                          # (32, num, 2, 3)
    halves = np.stack([regs & np.uint32(0xFFFF), regs >> np.uint32(16)], axis=-1).astype(np.uint16)
    rows = np.zeros((W, num, 8, 8), np.uint16)
    rows[:, lay[..., 0], lay[..., 1], lay[..., 2]] = halves              # (W, 32, num, 2) scattered
    return rows


def _build_ldmatrix(op: Op, arch: str) -> Handler:
    mods = set(op.mods)
    nums = [m for m in op.mods if m in ("x1", "x2", "x4")]
    space = mods & {"shared", "shared::cta"}
    if (not {"sync", "aligned", "m8n8"} <= mods or len(nums) != 1 or len(space) != 1
            or mods - {"sync", "aligned", "m8n8", "trans", *nums, *space} or op.types != ("b16",)):
        raise unsupported(op, "refsim executes ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16")
    if arch in ("sm_70",):
        raise unsupported(op, "ldmatrix needs sm_75 or later")
    trans = "trans" in mods
    num = int(nums[0][1])
    return Handler(fn=lambda rows: (ldmatrix(rows, trans),), dst_types=("b32",) * num, src_types=(),
                   kind="warp", isa=isa("warp-level-matrix", "ldmatrix"))


# ----------------------------------------------------------------------------------------------
# mma

_INT_LAYOUTS = {  # (shape, element bits) -> (A layout, B layout)
    ("m16n8k16", 8): (fragments.mma_m16n8k16_s8_a, fragments.mma_m16n8k16_s8_b),
    ("m16n8k32", 8): (fragments.mma_m16n8k32_s8_a, fragments.mma_m16n8k32_s8_b),
    ("m16n8k32", 4): (fragments.mma_m16n8k32_s4_a, fragments.mma_m16n8k32_s4_b),
    ("m16n8k64", 4): (fragments.mma_m16n8k64_s4_a, fragments.mma_m16n8k64_s4_b),
}
_FLOAT_LAYOUTS = {
    "m16n8k16": (fragments.mma_m16n8k16_a, fragments.mma_m16n8k16_b),
    "m16n8k8": (fragments.mma_m16n8k8_a, fragments.mma_m16n8k8_b),
}
_TYPE_LAYOUTS = {  # input type -> (element bits, A layout, B layout) of its one shape
    "tf32": (32, fragments.mma_m16n8k8_tf32_a, fragments.mma_m16n8k8_tf32_b),
    "e4m3": (8, fragments.mma_m16n8k32_f8_a, fragments.mma_m16n8k32_f8_b),
    "e5m2": (8, fragments.mma_m16n8k32_f8_a, fragments.mma_m16n8k32_f8_b),
}


def mma_fragments(shape: str, atype: str):
    """(A layout, B layout, C/D layout) of ``mma.<shape>.row.col`` with element type ``atype``."""
    if atype in ("f16", "bf16"):
        a, b = _FLOAT_LAYOUTS[shape]
    elif atype in _TYPE_LAYOUTS:
        _, a, b = _TYPE_LAYOUTS[atype]
    else:
        a, b = _INT_LAYOUTS[(shape, 4 if atype in ("s4", "u4") else 8)]
    return a(), b(), fragments.mma_m16n8k16_c()


def _regs_to_matrix(regs: np.ndarray, layout, bits: int, signed: bool = False) -> np.ndarray:
    """uint32 registers (W, 32, R) -> matrix (W, rows, cols): uint16 bit patterns for 16-bit elements,
    int64 values for 8/4-bit elements."""
    regs = np.asarray(regs).astype(np.uint32)
    elems = fragments.unpack_registers(regs, bits, signed=signed)      # (W, 32, E) int64
    if bits == 16:
        elems = elems.astype(np.uint16)
    return layout.scatter(elems)


def _matrix_to_regs(m: np.ndarray, layout, per_reg: int) -> np.ndarray:
    frags = layout.gather(m)                                            # (W, 32, 4)
    if per_reg == 1:
        return frags.view(np.uint32) if frags.dtype.itemsize == 4 else frags.astype(np.uint32)
    return fragments.pack_registers(frags.view(np.uint16), 16)


def _build_mma(op: Op, arch: str) -> Handler:
    if any(m.startswith("kind::") for m in op.mods):       # sm_120a's f8f6f4 and block-scaled kinds
        return block_scaled_mma.build(op, arch)
    arch = base_arch(arch)                                  # sm_90a: sm_90's tensor cores
    mods = list(op.mods)
    shapes = [m for m in mods if m.startswith("m") and m[1:].replace("n", "").replace("k", "").isdigit()]
    satfinite = "satfinite" in mods
    if (not {"sync", "aligned"} <= set(mods) or len(shapes) != 1 or [m for m in mods if m in ("row", "col")] != ["row", "col"]
            or set(mods) - {"sync", "aligned", "row", "col", "satfinite", *shapes} or len(op.types) != 4):
        raise unsupported(op, "refsim executes mma.sync.aligned.<shape>.row.col{.satfinite}.<d>.<a>.<b>.<c>")
    shape = shapes[0]
    dtype, atype, btype, ctype = op.types
    if arch not in tensor_core.MMA_ARCHS:
        raise unsupported(op, f"no {shape} tensor-core model for {arch} (refsim models "
                              f"{', '.join(tensor_core.MMA_ARCHS)}; on sm_120a it executes the .kind:: forms only)")
    sec = isa("warp-level-matrix", "mma") + f"; fragments: Matrix Fragments for mma.{shape}"

    if atype in ("f16",) and btype == "f16":
        if shape not in _FLOAT_LAYOUTS or dtype not in ("f32", "f16") or ctype not in ("f32", "f16") or satfinite:
            raise unsupported(op, "f16 mma is executed for m16n8k16/m16n8k8 with f32/f16 C and D")
        if dtype != ctype:
            raise unsupported(op, f"f16 mma.{shape} takes C and D of one type; got .ctype .{ctype} with "
                                  f".dtype .{dtype} (ptxas: \".dtype must be '.{ctype}' when .ctype is '.{ctype}'\")")
        la, lb, lc = mma_fragments(shape, atype)
        K = la.shape[1]
        c_np = np.float32 if ctype == "f32" else np.float16
        d_np = np.float32 if dtype == "f32" else np.float16

        def fmma(a, b, c):
            A = _regs_to_matrix(a, la, 16).view(np.float16)               # (W, 16, K)
            B = _regs_to_matrix(b, lb, 16).view(np.float16)               # (W, K, 8)
            if ctype == "f32":
                C = lc.scatter(np.asarray(c).astype(np.uint32).view(np.float32))
            else:
                C = _regs_to_matrix(c, lc, 16).view(np.float16)
            if K == 16 and dtype == ctype == "f32" and np.isfinite(A).all() and np.isfinite(B).all() \
                    and np.isfinite(C).all():                              # mma_steps: the fast path (finite)
                opa, opb = mma_steps.MmaOperand(A), mma_steps.MmaOperand(np.swapaxes(B, -1, -2))
                D = mma_steps.mma_k16_f32(arch, opa.values[..., :, None, :], opa.exps[..., :, None, :],
                                          opb.values[..., None, :, :], opb.exps[..., None, :, :], C)
            elif K == 16:
                D = tensor_core.mma_m16n8k16(arch, A, B, C, d_np)
            else:                                                         # one block of 8 products
                D = tensor_core.mma_m16n8k8(arch, A, B, C, d_np)
            return (_matrix_to_regs(D, lc, 1 if dtype == "f32" else 2),)

        nc = 4 if ctype == "f32" else 2
        nd = 4 if dtype == "f32" else 2
        return Handler(fn=fmma, dst_types=("b32",) * nd,
                       src_types=("b32",) * (K // 4) + ("b32",) * (K // 8) + ("b32",) * nc, kind="warp", isa=sec)

    if atype in tensor_core_types.TYPES and btype in tensor_core_types.TYPES:
        if dtype != "f32" or ctype != "f32" or satfinite:
            raise unsupported(op, f"{atype} mma is executed with f32 C and D only (refsim models f32 accumulation)")
        try:
            tensor_core_types.model_for(arch, shape, atype, btype)
        except RefsimError as err:
            raise unsupported(op, f"no {shape} .{atype}.{btype} tensor-core model for {arch} ({err})") from None
        la, lb, lc = mma_fragments(shape, atype)
        abits = 16 if atype == "bf16" else _TYPE_LAYOUTS[atype][0]
        container = tensor_core_types.TYPES[atype][2]

        def tmma(a, b, c):
            A = _regs_to_matrix(a, la, abits).astype(container)            # (W, 16, K) raw bits
            B = _regs_to_matrix(b, lb, abits).astype(container)            # (W, K, 8)
            C = lc.scatter(np.asarray(c).astype(np.uint32).view(np.float32))
            return (lc.gather(tensor_core_types.mma(arch, shape, atype, btype, A, B, C)).view(np.uint32),)

        na = la.elements_per_lane // la.per_reg
        nb = lb.elements_per_lane // lb.per_reg
        return Handler(fn=tmma, dst_types=("b32",) * 4, src_types=("b32",) * (na + nb + 4), kind="warp", isa=sec)

    ints = ("s8", "u8", "s4", "u4")
    if atype in ints and btype in ints:
        bits = 4 if atype in ("s4", "u4") else 8
        if (btype in ("s4", "u4")) != (bits == 4) or dtype != "s32" or ctype != "s32" or (shape, bits) not in _INT_LAYOUTS:
            raise unsupported(op, "integer mma is executed for m16n8k16/k32 s8|u8 and m16n8k32/k64 s4|u4 -> s32")
        la, lb, lc = mma_fragments(shape, atype)

        def imma(a, b, c):
            A = _regs_to_matrix(a, la, bits, signed=atype[0] == "s")
            B = _regs_to_matrix(b, lb, bits, signed=btype[0] == "s")
            C = lc.scatter(np.asarray(c).astype(np.uint32).view(np.int32))
            D = integer_mma.mma_int(A, B, C, atype=atype, btype=btype, satfinite=satfinite)
            return (lc.gather(D).view(np.uint32),)

        na = la.elements_per_lane // la.per_reg
        nb = lb.elements_per_lane // lb.per_reg
        return Handler(fn=imma, dst_types=("b32",) * 4, src_types=("b32",) * (na + nb + 4), kind="warp", isa=sec)

    raise unsupported(op, f"mma with .{atype}/.{btype} inputs is not executed: refsim models f16, bf16, tf32, "
                          f"e4m3/e5m2 and integer inputs (f64 and mixed families refused)")


# ----------------------------------------------------------------------------------------------
# redux.sync (integer forms)


def redux(op: str, kind: str, a: np.ndarray, active: np.ndarray) -> np.ndarray:
    """``redux.sync.{add,min,max,and,or,xor}`` over the active lanes of each warp: a uint32 (W, 32),
    active bool (W, 32). add wraps modulo 2^32; min/max compare as ``kind`` ('s' or 'u').
    Returns uint32 (W, 32), the warp's result in every lane."""
    a = np.asarray(a).astype(np.uint32)
    active = np.asarray(active, bool)
    if op in ("and", "or", "xor", "add"):
        ident = {"and": np.uint32(0xFFFFFFFF), "or": np.uint32(0), "xor": np.uint32(0), "add": np.uint32(0)}[op]
        x = np.where(active, a, ident).astype(np.uint64)
        if op == "add":
            r = (x.sum(axis=-1) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        else:
            r = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op].reduce(x, axis=-1).astype(np.uint32)
    else:
        v = a.view(np.int32).astype(np.int64) if kind == "s" else a.astype(np.int64)
        fill = np.int64(2**40) if op == "min" else np.int64(-(2**40))
        v = np.where(active, v, fill)
        r = (v.min(axis=-1) if op == "min" else v.max(axis=-1)).astype(np.int64).astype(np.uint64).astype(np.uint32)
    return np.broadcast_to(r[..., None], a.shape).copy()


def _build_redux(op: Op, arch: str) -> Handler:
    ops = [m for m in op.mods if m in ("add", "min", "max", "and", "or", "xor")]
    t = op.types[0] if len(op.types) == 1 else ""
    if "sync" not in op.mods or len(ops) != 1 or set(op.mods) - {"sync", *ops}:
        raise unsupported(op, "refsim executes the integer forms redux.sync.{add,min,max}.{u32,s32} and "
                              "redux.sync.{and,or,xor}.b32 (float redux refused)")
    o = ops[0]
    if (o in ("and", "or", "xor") and t != "b32") or (o in ("add", "min", "max") and t not in ("u32", "s32")):
        raise unsupported(op, f"redux.sync.{o} does not take .{t}")
    if sm_number(arch) < 80:
        raise unsupported(op, "redux.sync needs sm_80 or later")
    return Handler(fn=lambda a, active: (redux(o, t[0], a, active),), dst_types=(t,), src_types=(t,),
                   kind="warp", isa=isa("parallel-synchronization-and-communication", "redux-sync"))


#: opcode -> handler builder of this family (refsim.ptx.semantics.table assembles the one table)
BUILDERS = {
    "shfl": _build_shfl, "vote": _build_vote, "ldmatrix": _build_ldmatrix, "mma": _build_mma,
    "redux": _build_redux,
}
