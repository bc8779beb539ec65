"""QIGen in refsim: generated CPU qGEMV kernels, their bit-exact oracle and the performance model.

    machine   what the model knows about this CPU (L1d, L2, ISA, vector registers, provenance)
    model     register search (m_u, t_u), L1 MILP (mb, tb), time estimate, printed plan
    codegen   C source (AVX2/FMA intrinsics or portable scalar) for one KernelSpec
    build     system C compiler, content-hash cache, ctypes loading (ToolchainError if no compiler)
    kernel    prepare / from_gptq / qgemv on NumPy arrays
    oracle    the kernel's fp32 arithmetic in NumPy, bit for bit (exact FMA emulation)

The packed layout itself is :mod:`refsim.formats.qigen`. Walkthrough: docs/qigen.md.
"""
