"""``stmatrix``: a warp stores 8x8 b16 matrices to shared memory (PTX ISA 8.x, "Data Movement and Conversion
Instructions: stmatrix", sm_90), defined once for both executors.

Spec
----
form            ``stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared{::cta}}.b16 [p], {r0, ...}``:
                num = 1, 2 or 4 b32 registers per lane; others (``.m16n8``, ``.b8``) refused at load.
layout          the inverse of ``ldmatrix``: half h of register j of lane l is element
                (matrix, row, col) of refsim.arith.fragments.ldmatrix_layout(num, trans), the one layout
                definition (refsim.ptx.semantics.warp.stmatrix scatters with it); lanes 8j..8j+7 give
                the addresses of matrix j's 8 rows (16 bytes each, 16-byte aligned).
memory rules    each row is one 16-byte store by the lane that gave its address, checked as ``st`` checks
                (refsim.ptx.memory_ops.shared_access): bounds and alignment, a live mbarrier's bytes,
                poison (the bytes become written), race (a write conflicting since the last barrier, two
                lanes storing one byte, async-proxy rules), and the same wavefront count. A generic
                address outside the shared window is PtxMemoryError (the ISA requires shared memory).
warp            ``.sync.aligned``: every lane of the warp executes it (a partial warp: PtxUnsupportedError).
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import memory_ops
from refsim.ptx.errors import PtxMemoryError, PtxUnsupportedError
from refsim.ptx.memory import SHARED_WINDOW, WINDOW_BYTES
from refsim.ptx.operands import flatten, reader
from refsim.ptx.parse import Instruction
from refsim.ptx.semantics import warp as warp_semantics

__all__ = ["stmatrix"]

_FORM = "stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared{::cta}}.b16 [p], {r...}"


def stmatrix(L, ins: Instruction, idx: int):
    """The step function of one ``stmatrix`` (module spec); refused forms name kernel, line and form."""
    mods = set(ins.mods)
    nums = [m for m in ins.mods if m in ("x1", "x2", "x4")]
    space = mods & {"shared", "shared::cta"}
    if (not {"sync", "aligned", "m8n8"} <= mods or len(nums) != 1 or len(space) > 1
            or mods - {"sync", "aligned", "m8n8", "trans", *nums, *space} or ins.types != ("b16",)
            or len(ins.operands) != 2):
        raise PtxUnsupportedError(f"{L.where(ins)}: refsim executes {_FORM}")
    num, trans = int(nums[0][1]), "trans" in mods
    srcs = flatten([ins.operands[1]])
    if len(srcs) != num:
        raise PtxUnsupportedError(f"{L.where(ins)}: stmatrix .x{num} takes {num} registers; got {len(srcs)}")
    readers = [reader(L, o, "b32", ins) for o in srcs]
    sp = "shared" if space else "generic"
    addr_of = memory_ops.address(L, ins.operands[0], ins, sp)

    def run(sel):
        warps, lanes, active = L.warps(sel)
        if not active.all():
            raise PtxUnsupportedError(f"{L.where(ins)}: stmatrix executed by a partial warp "
                                      f"(.sync.aligned: every lane executes it)")
        regs = np.stack([np.broadcast_to(r(lanes), lanes.shape) for r in readers], axis=-1)   # (W, 32, num)
        rows = warp_semantics.stmatrix(regs, trans).reshape(-1, 8)                           # lane 8j + r: M_j row r
        src = lanes[:, :8 * num].reshape(-1)
        addr = np.broadcast_to(addr_of(src), src.shape)
        if sp == "generic":
            out = (addr < np.uint64(SHARED_WINDOW)) | (addr >= np.uint64(SHARED_WINDOW + WINDOW_BYTES))
            if out.any():
                memory_ops.fault(L, ins, src, out, addr, "stmatrix row address outside shared memory", PtxMemoryError)
        parts = memory_ops.resolve(L, ins, src, sp, addr, 16, 2)
        for mm, view, ei, _ in parts:
            memory_ops.shared_access(L, ins, src, mm, ei, 2, 8, write=True)
            view[ei[:, None] + np.arange(8)] = rows[mm]
        L.progress += 1
    return run
