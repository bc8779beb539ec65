"""refsim.testing: what a kernel author and refsim's own tests use to check bits.

    bits       assert_bitexact, ulp_distance, BitMismatch: raw-bit comparison with a report
    profiles   the 'ci' and 'dev' hypothesis profiles, examples(n)
    harness    check_kernel / rebuild_case / strategy: a kernel (callable, .cu or .ptx) against
               refsim's emulator of its format, pinned and drawn cases, shrink and diagnosis
    runner     one guarded kernel call (copies, inputs verified unchanged, deadline, sys.exit)
    sandbox    ``refsim check``'s kernel process: the user's module imported there only, bytes in and out
    kernel_process  that process's loop and the wire format ``refsim check`` parses strictly
    diagnose   shrinking a failing case, the diagnosis and the report
    accuracy   accuracy mode: the forward-error bound of a stated accumulation, decided exactly
    cases      the formats check_kernel knows, one module each: legal shapes, inputs, structure,
               probes, bug classes, the exact linear form
    validate   ``refsim validate``: refsim.cuda's kernels, the official launches and the mma probes on a
               GPU (or refsim.ptx) against refsim's answers, one verdict per case

``check_kernel(kernel, fmt)`` draws legal cases for a format, packs them, calls your kernel and
compares it bit for bit with refsim's emulator of that kernel (docs/harness.md).
"""

from __future__ import annotations

from refsim.testing.bits import BitMismatch, assert_bitexact, ulp_distance
from refsim.testing.harness import check_kernel, rebuild_case
from refsim.testing.profiles import CI_EXAMPLE_SCALE, examples, register_hypothesis_profiles

__all__ = ["assert_bitexact", "ulp_distance", "register_hypothesis_profiles", "BitMismatch", "check_kernel",
           "rebuild_case", "examples", "CI_EXAMPLE_SCALE"]
