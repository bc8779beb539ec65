"""Hopper (sm_90a) instructions of refsim.ptx, each family defined once for both executors.

Spec
----
modules         ``wgmma``   ``wgmma.mma_async`` (every dense kind of :mod:`refsim.arith.wgmma`, A from
                            registers or a descriptor, B from a descriptor), ``wgmma.fence``,
                            ``wgmma.commit_group``, ``wgmma.wait_group`` with their async bookkeeping
one definition  each module's ``build(L, ins, idx) -> run(threads)`` is an engine entry of
                :data:`refsim.ptx.dispatch.OPCODES`; the compiled executor runs the same ``build`` from
                its Python callback (refsim.ptx.compiled.runner), so the semantics live here only.
launch view     what a definition may use of its launch ``L`` (the interpreter's ``Launch`` and the
                compiled ``CompiledLaunch`` both have these names and meanings): ``k`` (kernel),
                ``T``, ``tpb``, ``nthreads``, ``regs`` (one (T,) array per register slot), ``exited``,
                ``shared`` (flat bytes, block slot s at ``s * shared_stride``), ``shared_stride``,
                ``shared_size``, ``race``, ``poison``, ``reg_init``, ``where(ins)``, ``who(t)``.
"""

from refsim.ptx.hopper import wgmma

__all__ = ["wgmma", "ENTRIES"]

#: opcode -> build(L, ins, idx) of the engine entries defined here
ENTRIES = {"wgmma": wgmma.build}
