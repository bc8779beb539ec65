"""sm_90a instructions of refsim.ptx, each defined once in Python against the interpreter's launch
state (refsim.ptx.engine.Launch) and run by both executors.

Spec
----
modules         mbarrier.py   ``mbarrier.*``: transaction barriers in shared memory, a side table of
                              their state, the waits' yield and deadlock naming,
                              arrivals on another CTA's barrier (``.shared::cluster``)
                bulk.py       ``cp.async.bulk`` / ``cp.reduce.async.bulk`` / ``cp.async.bulk.tensor``
                              (tile mode, ``.multicast::cluster`` to a CTA mask) and their bulk groups:
                              the async proxy's copies
                tensormap.py  ``tensormap.replace``, ``tensormap.cp_fenceproxy``: kernels editing tensor maps
                warp.py       ``elect.sync``, ``griddepcontrol``
                wgmma.py      ``wgmma.mma_async`` (every dense kind of refsim.arith.wgmma), ``wgmma.fence``,
                              ``wgmma.commit_group``, ``wgmma.wait_group`` and their race checks
                matrix.py     ``stmatrix``: the inverse of ldmatrix's layout, stored as ``st`` stores
                cluster.py    thread-block clusters: the launch shape, the cluster special registers,
                              ``barrier.cluster``
                dsmem.py      distributed shared memory: ``mapa``, refsim's ``.shared::cluster`` addresses, the
                              shared step of ``ld``/``st``/``atom``/``red`` on another CTA's bytes
                registers.py  ``setmaxnreg``: warpgroup register reallocation checked against the CTA's budget
one definition  every module offers build functions ``build(L, ins, idx) -> run(sel)``, entered in the
                one dispatch table (refsim.ptx.dispatch, :data:`OPCODES` here). The interpreter calls
                them with its ``Launch``; the compiled executor hands such a step to Python and calls
                the same function over a refsim.ptx.compiled.view.LaunchView of its own state, so
                the two executors cannot disagree on these instructions.
state           per launch, in ``L.ext`` (a dict both launch kinds carry), keyed by module name.
"""

from __future__ import annotations

from refsim.ptx.hopper import bulk, cluster, dsmem, matrix, mbarrier, registers, tensormap, warp, wgmma

__all__ = ["OPCODES", "SETS_PC", "python_defined", "is_proxy_async_fence", "tracks_shared_bytes", "bulk", "mbarrier", "tensormap",
           "warp", "wgmma", "registers", "matrix", "cluster", "dsmem"]

#: opcode -> build function of the engine-level definitions (``cp`` is shared with cp.async:
#: :func:`python_defined` says which cp forms are defined here)
OPCODES = {"mbarrier": mbarrier.build, "tensormap": tensormap.build, "elect": warp.elect,
           "griddepcontrol": warp.griddepcontrol, "wgmma": wgmma.build, "setmaxnreg": registers.build,
           "stmatrix": matrix.stmatrix, "mapa": dsmem.mapa}
#: opcodes whose step function moves the pc itself (a blocked ``setmaxnreg.inc`` stays)
SETS_PC = frozenset({"setmaxnreg"})


def is_proxy_async_fence(ins) -> bool:
    """``fence.proxy.async*``: defined here (bulk.fence_proxy_async); other fences stay the engine's."""
    return ins.opcode == "fence" and "proxy" in ins.mods and "async" in ins.mods


def tracks_shared_bytes(kernel) -> bool:
    """True when ``kernel`` holds mbarrier or bulk-copy instructions: its launches keep the per-byte
    state of shared memory these rules need (``hbytes``: live mbarrier bytes; under race ``gen_w``: unfenced
    generic writers, ``async_bid``/``async_phase``/``async_obs``: the barrier and phase completing each
    async-proxy write and the phases each thread observed), checked by every generic ld/st."""
    return any(ins.opcode == "mbarrier" or (ins.opcode == "cp" and "bulk" in ins.mods) for ins in kernel.instructions)


def python_defined(ins) -> bool:
    """True when instruction ``ins`` is defined by this package (the compiled executor calls back)."""
    return (ins.opcode in OPCODES or (ins.opcode == "cp" and "bulk" in ins.mods) or is_proxy_async_fence(ins)
            or (ins.opcode == "barrier" and "cluster" in ins.mods) or cluster.reads_special(ins))
