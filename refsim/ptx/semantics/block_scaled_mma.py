"""``mma.sync`` with ``.kind::f8f6f4`` and with block scaling (sm_120a): operands out of the warp's registers,
arithmetic by :mod:`refsim.arith.block_scaled` (``verified=False``).

Spec
----
forms           (PTX ISA 9.x, "Warp Level Matrix Multiply-Accumulate Instructions: mma", syntax "Alternate
                floating point type" and "... with block scaling"; every form needs ``.target sm_120a`` and a
                launch on ``arch="sm_120a"``, anything else is refused naming the reason)::

                    mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.<a>.<b>.f32            d, a, b, c;
                    mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale{.scale_vec::1X}
                        .f32.<a>.<b>.f32.ue8m0                                               d, a, b, c, SA;
                    mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale{.scale_vec::2X}
                        .f32.e2m1.e2m1.f32.ue8m0                                             d, a, b, c, SA;
                    mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::{2X|4X}
                        .f32.e2m1.e2m1.f32.{ue8m0|ue4m3}                                     d, a, b, c, SA;
                    SA = scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}

                <a>, <b> in e4m3 e5m2 e3m2 e2m3 e2m1 (may differ). The modifiers may come in any order (CUTLASS
                writes ``.kind::...block_scale.scale_vec::1X.m16n8k32.row.col``; ptxas takes both). f16 C/D of
                kind::f8f6f4 is refused (refsim models f32 accumulation).
fragments       ("Matrix Fragments for mma.m16n8k32 / mma.m16n8k64", transcribed in :mod:`refsim.arith.fragments`):
                k32: A four .b32 registers of four 8-bit containers, B two — the s8/u8 layouts
                (``mma_m16n8k32_s8_a/_b``); k64 (mxf4*): A four .b32 registers of eight packed .e2m1, B two —
                the s4/u4 layouts (``mma_m16n8k64_s4_a/_b``), element i at bits [4i, 4i+4) of its register. C, D:
                four .f32 (``mma_m16n8k16_c``). The ISA on kind::f8f6f4 / kind::mxf8f6f4 containers: "the
                individual 4-bit and the 6-bit floating point type elements must be packed in an 8-bit container.
                The matrix element of type .e2m1 resides in central 4 bits of the 8-bit container with padding in
                the upper 2 bits and lower 2 bits of the container. When the matrix element is of type .e3m2 or
                .e2m3, the matrix element resides in the lower 6 bits of the 8-bit container with padding in the
                upper 2 bits of the container. In contrast, note that when using mma with .kind::mxf4 or
                .kind::mxf4nvf4, no explicit padding is necessary". Container bits (padding ``.`` not read,
                an assumption: the ISA gives padding no meaning)::

                    e4m3 / e5m2   SEEEEMMM / SEEEEEMM      e3m2   ..SEEEMM      e2m3   ..SEEMMM      e2m1   ..SEEM..
scales          (PTX ISA, "Block Scaling" of the warp-level mma section) "The components thread-id-a,
                thread-id-b decides which threads among the quad contribute the SF_A and SF_B values ... when
                thread-id-a set to 0, thread-pair satisfying: %laneid % 4 == 0 or 1 provides the SF_A. In contrast
                when thread-id-a set to 1, thread-pair satisfying: %laneid % 4 == 2 or 3 provides the SF_A ...
                each thread satisfying: %laneid % 4 == thread-id-b provides the SF_B." "When .scale_vec_size is
                .scale_vec::1X: One byte each within scale-a-data and scale-b-data determined by byte-id-a,
                byte-id-b respectively contributes the SF_A and SF_B values. When .scale_vec::2X: One byte-pair
                (two bytes) ... The value of 0 selects lower two bytes whereas value of 2 selects upper two bytes
                ... When .scale_vec::4X: All four bytes ... Hence, byte-id-a, byte-id-b must be zero." Which lane
                of the pair holds which row, and which byte which K block, are Figures 43-45 (images), read here as
                CUTLASS's SM120 ``SFALayout`` (threads (2,2,8):(8,0,1)) and ``SFBLayout`` ((4,8):(0,1)) read them::

                    scale_A[m, j] = byte (byte-id-a + j) of scale-a-data in lane 4*(m % 8) + 2*thread-id-a + m // 8
                    scale_B[j, n] = byte (byte-id-b + j) of scale-b-data in lane 4*n + thread-id-b
                    (j = K block: 0 for 1X; 0, 1 for 2X; 0..3 for 4X; bytes little-endian, byte 0 = bits 7:0)

                    lane:      0  1  2  3 |  4  5  6  7 | ...  28 29 30 31
                    tid-a 0:  m0 m8  .  . | m1 m9  .  . | ...  m7 m15 .  .
                    tid-a 1:   .  . m0 m8 |  .  . m1 m9 | ...   .  . m7 m15
                    tid-b 2:   .  . n0  . |  .  . n1  . | ...   .  . n7  .
                Table 37's selector values (1X: byte-id 0..3; 2X: 0 or 2; 4X: 0; thread-id-a 0..1, thread-id-b
                0..3) are the only defined ones ("Any other value results in an undefined behavior"): refsim
                refuses any other, and selectors that differ between the lanes of a warp (.aligned), at run time.
source          PTX ISA 9.x sections named above; arithmetic: :mod:`refsim.arith.block_scaled` (module spec).
"""

from __future__ import annotations

import numpy as np

from refsim.arith import block_scaled, fragments
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported

__all__ = ["ARCH", "SELECTORS", "scale_matrix", "scale_matrix_reference", "element_codes", "build"]

#: the one architecture-specific target with these forms (:data:`refsim.archs.ARCH_SPECIFIC`)
ARCH = "sm_120a"
#: scale_vec -> (K blocks per row/column, allowed byte-id, allowed thread-id-a, allowed thread-id-b): Table 37
SELECTORS = {"1X": (1, (0, 1, 2, 3), (0, 1), (0, 1, 2, 3)),
             "2X": (2, (0, 2), (0, 1), (0, 1, 2, 3)),
             "4X": (4, (0,), (0, 1), (0, 1, 2, 3))}
_CONTAINER = {"e4m3": (0, 0xFF), "e5m2": (0, 0xFF), "e3m2": (0, 0x3F), "e2m3": (0, 0x3F), "e2m1": (2, 0xF)}


def _scale_lanes(operand: str, thread_id: int) -> np.ndarray:
    """Lane of each row (operand "a": 16 rows) or column ("b": 8 columns) of the scale matrix."""
    if operand == "a":
        m = np.arange(16)
        return 4 * (m % 8) + 2 * thread_id + m // 8
    return 4 * np.arange(8) + thread_id


def scale_matrix(data: np.ndarray, operand: str, scale_vec: str, byte_id: int, thread_id: int) -> np.ndarray:
    """The scale matrix one ``mma ... .block_scale`` reads (module spec, "scales").

    data: uint32 (W, 32), ``scale-a-data`` (operand "a") or ``scale-b-data`` ("b") of every lane;
    scale_vec "1X" / "2X" / "4X"; byte_id, thread_id: the selector pair (checked against Table 37).
    Returns uint8 scale codes: (W, 16, blocks) for "a" (scale_A[m, j]), (W, blocks, 8) for "b" (scale_B[j, n]).
    """
    blocks, byte_ids, tid_a, tid_b = SELECTORS[scale_vec]
    if byte_id not in byte_ids or thread_id not in (tid_a if operand == "a" else tid_b):
        raise PtxUnsupportedError(f"{{byte-id-{operand}, thread-id-{operand}}}: scale_vec::{scale_vec} takes byte-id "
                                  f"in {list(byte_ids)} and thread-id in {list(tid_a if operand == 'a' else tid_b)} "
                                  f"(PTX ISA Table 37; other values are undefined); got {{{byte_id}, {thread_id}}}")
    words = np.asarray(data).astype(np.uint32)[:, _scale_lanes(operand, thread_id)]      # (W, 16 or 8)
    shifts = 8 * (byte_id + np.arange(blocks, dtype=np.uint32))                          # (blocks,)
    codes = ((words[..., None] >> shifts) & 0xFF).astype(np.uint8)                        # (W, rows, blocks)
    return codes if operand == "a" else np.swapaxes(codes, -1, -2)                         # b: (W, blocks, 8)


def scale_matrix_reference(data: list[int], operand: str, scale_vec: str, byte_id: int,
                           thread_id: int) -> list[list[int]]:
    """Plain-loop twin of :func:`scale_matrix` for one warp: data 32 Python ints -> scale_A as 16 rows of
    ``blocks`` codes, or scale_B as ``blocks`` rows of 8 codes, written from the ISA sentences above."""
    blocks = SELECTORS[scale_vec][0]
    if operand == "a":
        out = [[0] * blocks for _ in range(16)]
        for lane in range(32):
            if lane % 4 // 2 == thread_id:                  # the selected thread-pair of the quad
                m = lane // 4 + 8 * (lane % 2)              # first of the pair: row groupID, second: groupID + 8
                for j in range(blocks):
                    out[m][j] = (data[lane] >> (8 * (byte_id + j))) & 0xFF
        return out
    out = [[0] * 8 for _ in range(blocks)]
    for lane in range(32):
        if lane % 4 == thread_id:                           # one thread of the quad: column groupID
            for j in range(blocks):
                out[j][lane // 4] = (data[lane] >> (8 * (byte_id + j))) & 0xFF
    return out


def element_codes(regs: np.ndarray, layout, t: str, packed: bool) -> np.ndarray:
    """Registers uint32 (W, 32, R) of A or B -> element codes uint8 (W, rows, cols), right-aligned as
    :mod:`refsim.arith.block_scaled` takes them: ``packed`` (kind::mxf4*) eight e2m1 per register, else one
    8-bit container per byte with the element at the module spec's bits (padding dropped)."""
    if packed:
        return layout.scatter(fragments.unpack_registers(regs, 4)).astype(np.uint8)
    shift, mask = _CONTAINER[t]
    bytes_ = layout.scatter(fragments.unpack_registers(regs, 8))                           # (W, rows, cols) int64
    return ((bytes_ >> shift) & mask).astype(np.uint8)


def _selector(sel: np.ndarray, op: Op, operand: str) -> tuple[int, int]:
    """The warp-uniform (byte-id, thread-id) pair of (W, 32, 2) operand values."""
    s = np.asarray(sel).astype(np.int64)
    if s.size and not (s == s[:, :1, :]).all():
        raise unsupported(op, f"{{byte-id-{operand}, thread-id-{operand}}} differ between the lanes of a warp "
                              f"(.aligned: every lane gives the same selector)")
    return int(s[0, 0, 0]), int(s[0, 0, 1])


def build(op: Op, arch: str) -> Handler:
    """The warp handler of one ``mma ... .kind::`` form (module spec) on ``arch``: ``fn(a, b, c)`` for
    kind::f8f6f4, ``fn(a, b, c, scale_a_data, sel_a, scale_b_data, sel_b)`` for the block-scaled kinds, every
    argument uint32 (W, 32, n) (n: registers of that operand group), returning (d (W, 32, 4),)."""
    mods = list(op.mods)
    kinds = [m[len("kind::"):] for m in mods if m.startswith("kind::")]
    shapes = [m for m in mods if m in ("m16n8k32", "m16n8k64")]
    vecs = [m[len("scale_vec::"):] for m in mods if m.startswith("scale_vec::")]
    known = {"sync", "aligned", "row", "col", "block_scale", *(f"kind::{k}" for k in kinds), *shapes,
             *(f"scale_vec::{v}" for v in vecs)}
    form = ("refsim executes mma.sync.aligned.{m16n8k32,m16n8k64}.row.col.kind::<kind>{.block_scale"
            "{.scale_vec::<X>}}.f32.<a>.<b>.f32{.<stype>}")
    if (not {"sync", "aligned"} <= set(mods) or len(kinds) != 1 or len(shapes) != 1 or len(vecs) > 1
            or [m for m in mods if m in ("row", "col")] != ["row", "col"] or set(mods) - known):
        raise unsupported(op, form)
    kind, shape = kinds[0], shapes[0]
    if arch != ARCH:
        raise unsupported(op, f"mma .kind::{kind} is an sm_120a instruction (PTX ISA: it needs .target sm_120a "
                              f"and runs only there); got arch {arch} (launch with arch='sm_120a')")
    rows = [r for r in block_scaled.modelled() if r.instruction == "mma.sync" and r.kind == kind]
    if not rows:
        raise unsupported(op, f"no model of .kind::{kind} (refsim models kind::f8f6f4, mxf8f6f4, mxf4, mxf4nvf4)")
    scaled = "block_scale" in mods
    if scaled != bool(rows[0].stype):
        raise unsupported(op, f".kind::{kind} {'needs' if rows[0].stype else 'takes no'} .block_scale")
    if vecs:
        rows = [r for r in rows if r.scale_vec == vecs[0]]
    elif len(rows) > 1:
        raise unsupported(op, f".kind::{kind} needs .scale_vec::<X> (one of {[r.scale_vec for r in rows]})")
    if len(rows) != 1:
        raise unsupported(op, f".kind::{kind} has no .scale_vec::{vecs[0]}")
    k = rows[0]
    want_types = 5 if k.stype else 4
    if len(op.types) != want_types:
        raise unsupported(op, f"{form}; got types .{'.'.join(op.types)}")
    dtype, atype, btype, ctype = op.types[:4]
    if (dtype, ctype) != ("f32", "f32"):
        raise unsupported(op, f".kind::{kind} is executed with f32 C and D only (refsim models f32 accumulation); "
                              f"got .{dtype} / .{ctype}")
    if shape != f"m16n8k{k.k}":
        raise unsupported(op, f".kind::{kind} has shape m16n8k{k.k}; got {shape}")
    if atype not in k.types or btype not in k.types:
        raise unsupported(op, f".kind::{kind} takes .atype/.btype in {list(k.types)}; got .{atype}.{btype}")
    if k.stype and op.types[4] != k.stype:
        raise unsupported(op, f".kind::{kind}.scale_vec::{k.scale_vec} takes .{k.stype} scales; got .{op.types[4]}")
    packed = k.datapath == "mxf4"
    la, lb = ((fragments.mma_m16n8k64_s4_a(), fragments.mma_m16n8k64_s4_b()) if packed
              else (fragments.mma_m16n8k32_s8_a(), fragments.mma_m16n8k32_s8_b()))
    lc = fragments.mma_m16n8k16_c()
    counts = (la.elements_per_lane // la.per_reg, lb.elements_per_lane // lb.per_reg, 4) + ((1, 2, 1, 2) if k.stype else ())

    names = "d, a, b, c" + (", scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}"
                            if k.stype else "")

    def fn(*groups):
        got = tuple(np.shape(g)[-1] for g in groups)
        if got != counts:
            raise unsupported(op, f"operands {names} take {(4,) + counts} registers each; got {(4,) + got}")
        a, b, c = groups[:3]
        A = element_codes(a, la, atype, packed)                            # (W, 16, K)
        B = element_codes(b, lb, btype, packed)                            # (W, K, 8)
        C = lc.scatter(np.asarray(c).astype(np.uint32).view(np.float32))  # (W, 16, 8)
        sa = sb = None
        if k.stype:
            sa = scale_matrix(groups[3][..., 0], "a", k.scale_vec, *_selector(groups[4], op, "a"))
            sb = scale_matrix(groups[5][..., 0], "b", k.scale_vec, *_selector(groups[6], op, "b"))
        D = block_scaled.mma_block_scaled(kind, shape, atype, btype, A, B, C, sa, sb, k.scale_vec or None)
        return (lc.gather(D).view(np.uint32),)

    return Handler(fn=fn, dst_types=("b32",) * 4, src_types=("b32",) * sum(counts), kind="warp",
                   isa=isa("warp-level-matrix", "mma") + f"; fragments: Matrix Fragments for mma.{shape}; "
                       "scales: Block Scaling")
