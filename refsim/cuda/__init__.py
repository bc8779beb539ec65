"""Real CUDA kernels diffed bit-exactly against the oracle (design card).

No kernel has been added yet: the tasks lent no GPU so far, and a kernel that cannot be run here
cannot be checked. The bit-exact targets such kernels must meet already exist: the warp-level
emulators in :mod:`refsim.emulator` and the harness :func:`refsim.testing.check_kernel`.
"""
