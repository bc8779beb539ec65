"""mma.sync.aligned.m16n8k8 (f16) on every architecture refsim models with it: one tensor-core block of the
arch's width, checked against the plain-loop exact-rational block (refsim.arith.tensor_core.fdpa_reference)
with the 8 products padded by zero products to the block (16 on sm_90); the H100's own bits for this
instruction are in tests/ptx/test_replay.py (tc_k8_* cases)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import fragments, tensor_core
from refsim.ptx.semantics import Op, lookup, warp
from refsim.testing import assert_bitexact


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_87", "sm_89", "sm_90"])
@pytest.mark.parametrize("ctype", ["f32", "f16"])
def test_m16n8k8_f16_is_one_block_of_the_arch(arch, ctype):
    rng = np.random.default_rng(21)
    cdt = np.float32 if ctype == "f32" else np.float16
    A = (rng.standard_normal((1, 16, 8)) * 2.0 ** rng.integers(-6, 6, (1, 16, 8))).astype(np.float16)
    B = (rng.standard_normal((1, 8, 8)) * 2.0 ** rng.integers(-6, 6, (1, 8, 8))).astype(np.float16)
    C = (rng.standard_normal((1, 16, 8)) * 8).astype(cdt)
    la, lb, lc = warp.mma_fragments("m16n8k8", "f16")
    h = lookup(Op("mma", ("sync", "aligned", "m16n8k8", "row", "col"), (ctype, "f16", "f16", ctype)), arch=arch)
    regs_c = (lc.gather(C.view(np.float32)).view(np.uint32) if ctype == "f32"
              else fragments.pack_registers(lc.gather(C).view(np.uint16), 16))
    (d,) = h.fn(fragments.pack_registers(la.gather(A).view(np.uint16), 16),
                fragments.pack_registers(lb.gather(B).view(np.uint16), 16), regs_c)
    L = tensor_core.model(arch).block
    want = np.empty((16, 8), cdt)
    for i in range(16):
        for j in range(8):
            a = np.zeros(L, np.float16)
            b = np.zeros(L, np.float16)
            a[:8], b[:8] = A[0, i], B[0, :, j]
            want[i, j] = tensor_core.fdpa_reference(arch, a, b, C[0, i, j:j + 1].reshape(()), cdt)
    got = lc.scatter(d.view(np.float32)) if ctype == "f32" else \
        lc.scatter(np.stack([d & 0xFFFF, d >> 16], -1).reshape(1, 32, -1).astype(np.uint16).view(np.float16))
    assert_bitexact(got[0], want, f"mma.m16n8k8 {arch} {ctype}")
