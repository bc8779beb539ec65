"""The async proxy's copies (PTX ISA 8.x, "Data Movement: cp.async.bulk", "cp.reduce.async.bulk",
"cp.async.bulk.tensor", "cp.async.bulk.commit_group / wait_group"), defined once for both executors.

Spec
----
timing          a copy lands when it is issued (one admissible order of the copy engine: the issuing
                thread's later instructions cannot tell); a copy into shared memory then signals
                ``complete_tx(bytes)`` on its mbarrier (refsim.ptx.hopper.mbarrier), which may complete
                the barrier's phase. Bulk groups therefore complete at once: ``commit_group`` and
                ``wait_group{.read} N`` are checked and do nothing.
bulk            ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [d], [s], size, [mbar]``
                (``.shared::cta`` destinations too; and ``.shared::cluster.shared::cta`` within the CTA),
                ``cp.async.bulk.global.shared::cta.bulk_group [d], [s], size``; size a multiple of 16,
                both addresses 16-byte aligned (PtxMisalignedError otherwise), every byte inside its
                space (PtxMemoryError).
reduce          ``cp.reduce.async.bulk.global.shared::cta.bulk_group.OP{.noftz}.TYPE [d], [s], size``: d[i] =
                d[i] OP s[i] elementwise, OP/TYPE: add/min/max on u32 s32 u64 s64, inc/dec on u32, and/or/xor
                on b32 b64 (the atomics' rules, refsim.ptx.semantics.atomic); the float forms the ISA's
                table lists for a .global destination: add.f32 (RN; subnormal inputs and results flushed
                to sign-preserving zero: the ISA's "current implementation" sentence), add.f64 (RN),
                add.noftz.f16 / add.noftz.bf16 (RN, subnormals kept; the ISA requires ``.noftz`` on
                them), all through refsim.ptx.semantics.atomic's one float add (``atom.add`` on global
                memory); min/max on f16 and bf16: the ALU's ``min.f16`` / ``max.bf16`` ... handlers
                (refsim.ptx.semantics.floating: one NaN operand gives the other, both NaN the canonical
                NaN, -0 < +0; the ISA states no NaN or signed-zero rule for the reduction). Refused:
                min/max on f32/f64, inc/dec/bit operations on floats, add.f16/bf16 without ``.noftz``,
                ``.noftz`` anywhere else (not in the ISA's table).
tensor          ``cp.async.bulk.tensor.Nd.shared::cluster.global{.tile}.mbarrier::complete_tx::bytes
                [d], [map, {c0..}], [mbar]`` and ``cp.async.bulk.tensor.Nd.global.shared::cta{.tile}.bulk_group
                [map, {c0..}], [s]``: the map is 128 bytes at a generic address (a ``__grid_constant__``
                parameter through ``cvta.param``, whose generic address refsim's map makes the parameter
                offset, or global memory), decoded by refsim.formats.tensor_map.decode_tiled; the box
                is refsim.formats.tensor_map.tile_box (out-of-bounds fill included) laid out row-major
                in shared memory from ``d`` (128-byte aligned), each byte at refsim.formats.smem_layouts.
                swizzle(address, map's swizzle). A store writes the in-bounds elements of the box only.
batched         the tensor copies of one step run together: every check first (no side effect), then each
                map's boxes in one tile_box call, landing in thread order (a later box wins a byte), then
                each thread's complete_tx in thread order. Where a check fails the step reruns thread by
                thread, so the error raised is the first failing thread's, with the earlier threads'
                copies done, as if the threads ran one after another.
multicast       ``.multicast::cluster`` on the global -> shared loads (``cp.async.bulk`` and ``cp.async.bulk.tensor``,
                the operand ``ctaMask`` (b16) after ``[mbar]``): the data lands at the same offset ``d`` of
                the shared memory of every CTA whose ``%cluster_ctarank`` bit is set in ctaMask, in rank
                order, and each such CTA's mbarrier at the same offset ``mbar`` gets ``complete_tx`` of the
                bytes it received (PTX ISA, "cp.async.bulk.tensor": "multicast to the same CTA-relative
                offset ... the mbarrier signal is also multicast"). The poison and race marking of each
                destination's bytes is the non-multicast copy's, with that CTA's barrier. A mask bit at or
                above ``%cluster_nctarank``, an empty mask, or a destination CTA that has exited:
                PtxMemoryError naming the mask.
hints           ``.L2::cache_hint`` (its policy operand) is accepted and ignored.
refused         im2col mode, tensor reductions, ``.shared::cluster`` destinations of another CTA without
                ``.multicast::cluster``, multicast of stores or shared -> shared copies.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from refsim.errors import RefsimError
from refsim.formats import smem_layouts, tensor_map
from refsim.ptx.errors import PtxMemoryError, PtxMisalignedError, PtxRaceError, PtxUnsupportedError, message
from refsim.ptx.hopper import mbarrier
from refsim.ptx.memory import SHARED_WINDOW
from refsim.ptx.memory_ops import address
from refsim.ptx.operands import reader
from refsim.ptx.parse import Instruction
from refsim.ptx.semantics.atomic import atom_apply
from refsim.ptx.semantics.handler import Op
from refsim.ptx.semantics.table import lookup

__all__ = ["build", "fence_proxy_async", "global_bytes", "REDUCE_OPS"]

#: cp.reduce.async.bulk: operation -> the types refsim defines it on
REDUCE_OPS = {"add": ("u32", "s32", "u64", "s64", "f32", "f64", "f16", "bf16"),
              "min": ("u32", "s32", "u64", "s64", "f16", "bf16"), "max": ("u32", "s32", "u64", "s64", "f16", "bf16"),
              "inc": ("u32",), "dec": ("u32",), "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64")}
#: the forms the ISA writes ``.noftz`` on, and requires it on (PTX ISA, "cp.reduce.async.bulk")
_NOFTZ = {("add", "f16"), ("add", "bf16")}
_ESIZE = {"f16": 2, "bf16": 2}


def _reduce_apply(op: str, type: str, noftz: bool, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    """New destination bits of one ``cp.reduce.async.bulk.OP{.noftz}.TYPE`` (module spec): ``old``, ``src``
    unsigned bit arrays of the type's width (uint16 for f16/bf16), same shape; returns that dtype.
    add/inc/dec/bit operations and integer min/max are refsim.ptx.semantics.atomic.atom_apply on global
    memory; f16/bf16 min/max are the ALU handler of ``min.TYPE`` / ``max.TYPE`` (table.lookup)."""
    if type in ("f16", "bf16") and op in ("min", "max"):
        return _alu(op, type)(old, src)[0]
    return atom_apply(op, type, old, src, None, noftz=noftz, space="global")


@lru_cache(maxsize=None)
def _alu(op: str, type: str):
    """The ALU handler's ``fn`` of ``op.type`` (the one min/max definition of the float family)."""
    return lookup(Op(op, (), (type,)), arch="sm_90").fn


def global_bytes(L, ins, t: int, a: int, n: int, write: bool) -> np.ndarray:
    """The uint8 view of global bytes ``[a, a + n)`` (one buffer; PtxMemoryError otherwise)."""
    bi, ok = L.gmem.locate(np.asarray([a], np.uint64), n)
    if not ok[0]:
        raise PtxMemoryError(f"{L.where(ins)}: "
                             + message("fault", what=f"out-of-bounds {n}-byte .global bulk access", addr=a, who=L.who(t)))
    b = int(bi[0])
    buf = L.gmem.buffers[b]
    if write and not buf.flags.writeable:
        from refsim.ptx.memory import read_only_error

        raise read_only_error(L.where(ins), L.gmem.names[b])
    off = a - L.gmem.bases[b]
    return buf[off:off + n]


def _shared(L, t: int, a: int, n: int) -> np.ndarray:
    base = int(L.slot_of[t]) * L.shared_stride + a
    return L.shared[base:base + n]


def _landed(L, ins, t: int, flat: np.ndarray, bar: int, slot: int) -> None:
    """An async-proxy copy issued by thread ``t`` wrote the shared bytes ``flat`` (flat indices) of block
    slot ``slot``, completing on that block's barrier at ``bar``: poison marks them written; race tracks
    them until that phase is observed."""
    if L.poison:
        L.shared_init[flat] = True
    mbarrier.copy_landed(L, ins, t, bar, flat, slot)


def _async_read(L, ins, t: int, flat: np.ndarray) -> None:
    """Under race: the async proxy reads the shared bytes ``flat`` for thread ``t``; a byte whose last
    generic write was not followed by fence.proxy.async in the writing thread is a PtxRaceError (PTX ISA
    "Proxies": generic-proxy writes are visible to the async proxy only after a proxy fence)."""
    if L.gen_w is None:
        return
    w = L.gen_w[flat]
    if (w >= 0).any():
        j = int(np.flatnonzero(w >= 0)[0])
        raise PtxRaceError(f"{L.where(ins)}: async-proxy read of .shared 0x{int(flat[j]) % L.shared_stride:x} "
                           f"(issued by {L.who(t)}) of a byte {L.who(int(w[j]))} wrote through the generic proxy "
                           f"with no fence.proxy.async after the write")


def fence_proxy_async(L, ins: Instruction, idx: int):
    """``fence.proxy.async{.shared::cta,.global,...}``: orders the executing thread's generic-proxy
    accesses before its later async-proxy ones. refsim's memory is coherent, so it changes no value;
    under race it ends the executing threads' unfenced generic writes (see :func:`_async_read`)."""
    def run(sel):
        if L.gen_w is not None:
            th = L.threads(sel)
            L.gen_w[np.isin(L.gen_w, th)] = -1
    return run


def build(L, ins: Instruction, idx: int):
    """The step function of one ``cp.async.bulk*`` / ``cp.reduce.async.bulk*`` instruction."""
    mods = set(ins.mods)
    where = L.where(ins)
    if mods & {"im2col", "im2col::w", "im2col::w::128", "gather4", "scatter4"}:
        raise PtxUnsupportedError(f"{where}: only the tile mode of cp.async.bulk.tensor is supported")
    if "prefetch" in mods:
        return lambda sel: None                        # a cache hint: no effect on values
    if "commit_group" in mods:
        return lambda sel: None
    if "wait_group" in mods:
        n = ins.operands[0] if ins.operands else None
        if n is None or n[0] != "imm" or int(n[1]) < 0:
            raise PtxUnsupportedError(f"{where}: cp.async.bulk.wait_group takes an immediate count >= 0")
        return lambda sel: None
    ops = list(ins.operands)
    if "L2::cache_hint" in mods:
        ops = ops[:-1]                                 # the cache policy: accepted, no effect
    mask_of = None
    if "multicast::cluster" in mods:
        if "reduce" in mods or "mbarrier::complete_tx::bytes" not in mods or _direction(ins) != "g2s" or not ops:
            raise PtxUnsupportedError(f"{where}: .multicast::cluster is defined on global -> shared::cluster loads "
                                      f"completing on an mbarrier only")
        mask_of, ops = reader(L, ops[-1], "b16", ins), ops[:-1]
    if "tensor" in mods:
        if "reduce" in mods:
            raise PtxUnsupportedError(f"{where}: cp.reduce.async.bulk.tensor is not supported yet")
        return _tensor(L, ins, ops, mods, mask_of)
    if "reduce" in mods:
        return _reduce(L, ins, ops, mods)
    return _copy(L, ins, ops, mods, mask_of)


def _destinations(L, ins, t: int, mask_of) -> list[int]:
    """The block slots a global -> shared copy issued by thread ``t`` lands in: its own, or with
    ``.multicast::cluster`` those of the CTAs whose rank bit is set in ctaMask (module spec)."""
    if mask_of is None:
        return [int(L.slot_of[t])]
    from refsim.ptx.hopper import dsmem

    one = np.asarray([t])
    mask = int(np.broadcast_to(mask_of(one), (1,))[0]) & 0xFFFF
    n = int(L.cluster[0] * L.cluster[1] * L.cluster[2])
    if mask == 0 or mask >> n:
        bad = "names no CTA" if mask == 0 else (f"names CTA rank {(mask >> n).bit_length() + n - 1} of the cluster, "
                                                f"which has {n} CTA(s) (ranks 0..{n - 1})")
        raise PtxMemoryError(f"{L.where(ins)}: .multicast::cluster ctaMask 0x{mask:04x} {bad} (by {L.who(t)})")
    ranks = np.asarray([r for r in range(n) if mask >> r & 1], np.int64)
    return dsmem.slots_of_ranks(L, ins, np.full(len(ranks), t), ranks).tolist()


def _direction(ins):
    """"g2s" (global -> shared, mbarrier), "s2g" (shared -> global, bulk group), "s2s" (shared -> shared
    of the same CTA, mbarrier) from the destination and source state spaces, or None."""
    spaces = [m for m in ins.mods if m in ("global", "shared::cluster", "shared::cta", "shared")][:2]
    if len(spaces) < 2:
        return None
    if spaces[0] == "global" and spaces[1] in ("shared::cta", "shared"):
        return "s2g"
    if spaces[0] != "global" and spaces[1] == "global":
        return "g2s"
    return "s2s" if spaces[1] in ("shared::cta", "shared") else None


def _copy(L, ins, ops, mods, mask_of=None):
    where = L.where(ins)
    direction = _direction(ins)
    if direction is None:
        raise PtxUnsupportedError(f"{where}: unknown cp.async.bulk state spaces")
    with_bar = direction != "s2g"
    if with_bar != ("mbarrier::complete_tx::bytes" in mods) or len(ops) != (4 if with_bar else 3):
        raise PtxUnsupportedError(f"{where}: expected cp.async.bulk [dst], [src], size{', [mbar]' if with_bar else ''}")
    d_of, s_of = ops[0], ops[1]
    size_of = reader(L, ops[2], "u32", ins)
    g_dst, g_src = (address(L, d_of, ins, "global") if direction == "s2g" else None,
                    address(L, s_of, ins, "global") if direction == "g2s" else None)

    def run(sel):
        th = L.threads(sel)
        sizes = np.broadcast_to(size_of(sel), th.shape).astype(np.int64)
        bad = sizes % 16 != 0
        if bad.any():
            raise PtxMisalignedError(f"{where}: cp.async.bulk size must be a multiple of 16; got {int(sizes[bad][0])} "
                                     f"(by {L.who(int(th[bad][0]))})")
        for i, t in enumerate(th.tolist()):
            one = np.asarray([t])
            n = int(sizes[i])
            if direction == "g2s" or direction == "s2s":
                sd = int(mbarrier.shared_offsets(L, ins, d_of, one, n, 16, "cp.async.bulk destination", "shared")[0])
                bar = int(mbarrier.shared_offsets(L, ins, ops[3], one, 8, 8, "mbarrier", "shared")[0])
                if direction == "g2s":
                    ga = int(np.broadcast_to(g_src(one), (1,))[0])
                    if ga % 16:
                        raise PtxMisalignedError(f"{where}: cp.async.bulk source 0x{ga:x} is not 16-byte aligned "
                                                 f"(by {L.who(t)})")
                    data = global_bytes(L, ins, t, ga, n, False).copy()
                    L.stats.global_bytes_read += n
                else:
                    ss = int(mbarrier.shared_offsets(L, ins, s_of, one, n, 16, "cp.async.bulk source", "shared")[0])
                    _async_read(L, ins, t, int(L.slot_of[t]) * L.shared_stride + ss + np.arange(n))
                    data = _shared(L, t, ss, n).copy()
                for slot in _destinations(L, ins, t, mask_of):
                    base = slot * L.shared_stride
                    L.shared[base + sd:base + sd + n] = data
                    _landed(L, ins, t, base + sd + np.arange(n), bar, slot)
                    mbarrier.complete_tx(L, ins, t, bar, n, slot)
            else:
                ss = int(mbarrier.shared_offsets(L, ins, s_of, one, n, 16, "cp.async.bulk source", "shared")[0])
                _async_read(L, ins, t, int(L.slot_of[t]) * L.shared_stride + ss + np.arange(n))
                ga = int(np.broadcast_to(g_dst(one), (1,))[0])
                if ga % 16:
                    raise PtxMisalignedError(f"{where}: cp.async.bulk destination 0x{ga:x} is not 16-byte aligned "
                                             f"(by {L.who(t)})")
                global_bytes(L, ins, t, ga, n, True)[:] = _shared(L, t, ss, n)
                L.stats.global_bytes_written += n
        L.progress += 1
    return run


def _reduce(L, ins, ops, mods):
    where = L.where(ins)
    op = next((m for m in ins.mods if m in REDUCE_OPS), None)
    t = ins.types[0] if ins.types else None
    noftz = "noftz" in mods
    if op is None or t not in REDUCE_OPS[op]:
        raise PtxUnsupportedError(f"{where}: cp.reduce.async.bulk .{op}.{t} is not defined here (defined: "
                                  + ", ".join(f"{o}.{'/'.join(ts)}" for o, ts in REDUCE_OPS.items()) + ")")
    if noftz != ((op, t) in _NOFTZ):
        raise PtxUnsupportedError(f"{where}: cp.reduce.async.bulk .{op}.{t} "
                                  + ("requires .noftz (PTX ISA: the f16/bf16 adds keep subnormals)" if not noftz
                                     else "takes no .noftz (the ISA defines .noftz on add.f16/add.bf16 only)"))
    if not ({"global", "shared::cta"} <= mods and "bulk_group" in mods) or len(ops) != 3:
        raise PtxUnsupportedError(f"{where}: only cp.reduce.async.bulk.global.shared::cta.bulk_group [d], [s], size "
                                  f"is supported")
    esize = _ESIZE.get(t, 8 if t.endswith("64") else 4)
    dt = np.dtype(f"<u{esize}")
    g_dst = address(L, ops[0], ins, "global")
    size_of = reader(L, ops[2], "u32", ins)
    atype = t

    def run(sel):
        th = L.threads(sel)
        sizes = np.broadcast_to(size_of(sel), th.shape).astype(np.int64)
        for i, tt in enumerate(th.tolist()):
            one = np.asarray([tt])
            n = int(sizes[i])
            if n % 16:
                raise PtxMisalignedError(f"{where}: cp.reduce.async.bulk size must be a multiple of 16; got {n} "
                                         f"(by {L.who(tt)})")
            ss = int(mbarrier.shared_offsets(L, ins, ops[1], one, n, 16, "cp.reduce.async.bulk source", "shared")[0])
            _async_read(L, ins, tt, int(L.slot_of[tt]) * L.shared_stride + ss + np.arange(n))
            ga = int(np.broadcast_to(g_dst(one), (1,))[0])
            if ga % 16:
                raise PtxMisalignedError(f"{where}: cp.reduce.async.bulk destination 0x{ga:x} is not 16-byte aligned "
                                         f"(by {L.who(tt)})")
            dst = global_bytes(L, ins, tt, ga, n, True).view(dt)
            src = _shared(L, tt, ss, n).view(dt)
            dst[:] = _reduce_apply(op, atype, noftz, dst.copy(), src.copy())
            L.stats.global_bytes_read += n
            L.stats.global_bytes_written += n
        L.progress += 1
    return run


def _map_bytes(L, ins, t: int, a: int) -> bytes:
    """The 128 bytes of the tensor map at generic address ``a``: the parameter space when ``a`` is a
    parameter offset (``cvta.param``), else global memory (128-byte aligned, as the ISA requires)."""
    if a % 64:
        raise PtxMisalignedError(f"{L.where(ins)}: tensor map address 0x{a:x} is not 64-byte aligned (by {L.who(t)})")
    if a + tensor_map.MAP_BYTES <= L.param.size - 16 and a < SHARED_WINDOW:
        return bytes(L.param[a:a + tensor_map.MAP_BYTES])
    return bytes(global_bytes(L, ins, t, a, tensor_map.MAP_BYTES, False))


def _tensor_view(L, ins, t: int, m) -> np.ndarray:
    """Global memory from the map's address on, as the uint8 array tile_box reads."""
    extent = sum((d - 1) * s for d, s in zip(m.global_dims[1:], m.global_strides)) \
        + m.global_dims[0] * tensor_map.DATA_TYPES[m.data_type][1]
    return global_bytes(L, ins, t, m.global_address, extent, False)


def _decode(L, ins, t, a):
    image = _map_bytes(L, ins, t, a)
    maps = L.ext.setdefault("tensor_maps", {})         # image -> TensorMap: a map is decoded once per launch
    m = maps.get(image)
    if m is not None:
        return m
    try:
        m = maps[image] = tensor_map.decode_tiled(image)
    except RefsimError as e:
        if isinstance(e, (PtxMemoryError,)):
            raise
        raise PtxMemoryError(f"{L.where(ins)}: the tensor map at 0x{a:x} is not a valid tiled map ({e}; "
                             f"by {L.who(t)})") from None
    return m


def _physical(L, s: int, n: int, swizzle: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(phys, order): the ``.shared`` offsets of the box bytes ``[s, s + n)`` under ``swizzle``, and, when
    they fill exactly ``[s, s + n)`` (the swizzle permutes within the window), the order with
    ``shared[s + j] = box[order[j]]`` (else None); cached per launch, equal orders shared."""
    plans = L.ext.setdefault("tensor_smem", {})
    key = (s, n, swizzle)
    plan = plans.get(key)
    if plan is None:
        phys = s + np.arange(n, dtype=np.int64)
        phys = smem_layouts.swizzle(phys, swizzle) if swizzle != "none" else phys
        rel = phys - s
        order = None
        if rel.min() == 0 and rel.max() == n - 1:          # a swizzle is one-to-one: rel permutes 0..n-1
            orders = L.ext.setdefault("tensor_smem_orders", {})
            order = orders.get(rel.tobytes())
            if order is None:
                order = orders[rel.tobytes()] = np.argsort(rel)
        plan = plans[key] = (phys, order)
    return plan


def _tensor(L, ins, ops, mods, mask_of=None):
    where = L.where(ins)
    rank = next((int(m[0]) for m in ins.mods if len(m) == 2 and m[1] == "d" and m[0] in "12345"), None)
    load = "mbarrier::complete_tx::bytes" in mods
    taddr = ops[1] if load else ops[0]
    if rank is None or taddr[0] != "taddr" or len(taddr[2][1]) != rank or len(ops) != (3 if load else 2):
        raise PtxUnsupportedError(f"{where}: expected cp.async.bulk.tensor.Nd with [map, {{N coordinates}}]")
    map_of = address(L, taddr[1], ins, "generic")
    coord_of = [reader(L, c, "s32", ins) for c in taddr[2][1]]
    smem_op = ops[0] if load else ops[1]

    def plan(th):
        """Every check of the copies of threads ``th`` (raising for a bad one) and what they move, as
        groups of threads naming one map: (threads, map, corners, box bytes, box data (loads), each
        thread's shared base, box offset and :func:`_physical` plan, barrier offsets (loads), each
        thread's destination block slots (loads: its own, or the multicast mask's)). No side effects."""
        maps = np.broadcast_to(map_of(th), th.shape).astype(np.uint64)
        corners = np.stack([np.broadcast_to(c(th), th.shape).astype(np.uint32).view(np.int32) for c in coord_of], 1)
        groups = []
        for a in dict.fromkeys(maps.tolist()):
            sel = np.flatnonzero(maps == a)
            t0 = int(th[sel[0]])
            m = _decode(L, ins, t0, a)
            esize = tensor_map.DATA_TYPES[m.data_type][1]
            try:
                box = tensor_map.tile_box(_tensor_view(L, ins, t0, m), m, corners[sel]) if load else None
            except RefsimError as e:
                raise PtxMemoryError(f"{where}: tensor copy with map at 0x{a:x}: {e} (by {L.who(t0)})") from None
            steps = (1,) + tuple(m.element_strides[1:])
            n = esize * int(np.prod([-(-b // s) for b, s in zip(m.box_dims, steps)]))
            ts = th[sel]
            s = mbarrier.shared_offsets(L, ins, smem_op, ts, n, 128, "cp.async.bulk.tensor shared address", "shared")
            base = L.slot_of[ts] * L.shared_stride
            phys = [_physical(L, x, n, m.swizzle) for x in s.tolist()]
            bars = mbarrier.shared_offsets(L, ins, ops[2], ts, 8, 8, "mbarrier", "shared") if load else None
            dests = [_destinations(L, ins, t, mask_of) for t in ts.tolist()] if load else None
            groups.append((ts, m, corners[sel], n, box, base, s, phys, bars, dests))
        return groups

    def apply(groups):
        for ts, m, corners, n, box, base, s, phys, bars, dests in groups:
            if load:                # the copies land in thread order (a later box wins a shared byte)
                data = box.view(np.uint8).reshape(len(ts), -1)
                windows = None
                if all(order is not None for _, order in phys):      # each box fills its window: slices
                    rows = {}
                    for i, (_, order) in enumerate(phys):
                        rows.setdefault(id(order), (order, []))[1].append(i)
                    windows = [None] * len(ts)
                    for order, idx in rows.values():
                        for i, w in zip(idx, data[idx].take(order, axis=1)):
                            windows[i] = w
                for i, (x, (p, _)) in enumerate(zip(s.tolist(), phys)):
                    for slot in dests[i]:
                        b = slot * L.shared_stride
                        if windows is not None:
                            L.shared[b + x:b + x + n] = windows[i]
                        else:
                            L.shared[b + p] = data[i]
                L.stats.global_bytes_read += n * len(ts)
                track = L.poison or L.async_bid is not None
                for i, (t, bar) in enumerate(zip(ts.tolist(), bars.tolist())):
                    for slot in dests[i]:
                        if track:
                            _landed(L, ins, t, slot * L.shared_stride + phys[i][0], bar, slot)
                        mbarrier.complete_tx(L, ins, t, bar, n, slot)
            else:
                esize = tensor_map.DATA_TYPES[m.data_type][1]
                for t, b, (p, _), c in zip(ts.tolist(), base.tolist(), phys, corners.tolist()):
                    f = b + p                                # flat .shared indices of the thread's bytes
                    _async_read(L, ins, t, f)
                    _store_box(L, ins, t, m, c, L.shared[f], esize)

    def run(sel):
        th = L.threads(sel)
        try:
            groups = plan(th)
        except RefsimError:
            if len(th) == 1:
                raise
            for t in th.tolist():           # one thread at a time: the first bad one raises its error
                run(np.asarray([t]))
            raise
        apply(groups)
        L.progress += 1
    return run


def _store_box(L, ins, t, m, coords, data: np.ndarray, esize: int) -> None:
    """A tensor store: the box's in-bounds elements from ``data`` (its bytes, row-major) to global."""
    steps = (1,) + tuple(m.element_strides[1:])
    counts = [-(-b // s) for b, s in zip(m.box_dims, steps)]
    idx = np.indices(counts[::-1]).reshape(len(counts), -1)[::-1]      # innermost first
    c = np.asarray(coords, np.int64)[:, None] + idx * np.asarray(steps, np.int64)[:, None]
    inb = ((c >= 0) & (c < np.asarray(m.global_dims, np.int64)[:, None])).all(axis=0)
    strides = np.asarray((esize,) + tuple(m.global_strides), np.int64)
    offs = (c[:, inb] * strides[:, None]).sum(axis=0)
    view = _tensor_view(L, ins, t, m)
    if not view.flags.writeable:
        global_bytes(L, ins, t, m.global_address, 1, True)
    src = data.reshape(-1, esize)[inb]
    view[(offs[:, None] + np.arange(esize)).reshape(-1)] = src.reshape(-1)
    L.stats.global_bytes_written += int(inb.sum()) * esize
