"""Argument validation of refsim.cuda's public functions: each wrong argument is refused
with a named RefsimError before any PTX runs. (The hostile fuzz, tests/test_fuzz_hostile.py, also
runs refsim.cuda's host functions and kernels from a legal call; this table pins the messages.)"""

import numpy as np
import pytest

from refsim import cuda
from refsim.cuda import mma
from refsim.errors import RefsimError
from refsim.formats import atom, gptq, marlin
from refsim.testing.validate import cases

A16 = np.zeros((16, 256), np.float16)
Q = np.zeros((256, 256), np.uint8)
B, S = marlin.pack(Q + 8, np.ones((1, 256), np.float16), None)
X1 = np.zeros((1, 256), np.float16)
CK = gptq.pack(np.zeros((256, 64), np.uint8), np.ones((2, 64), np.float32), np.full((2, 64), 8, np.uint8), 4,
               group_size=128)
K16 = mma.kind_of("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
R4, R2 = np.zeros((1, 32, 4), np.uint32), np.zeros((1, 32, 2), np.uint32)
ACT = atom.quantize_activations(np.zeros((16, 256 + 128), np.float16), "kernel")
W = atom.quantize_weights(np.zeros((256 + 128, 16), np.float16), "kernel")

CASES = [
    ("marlin-A-float32", lambda: cuda.marlin_gemm(A16.astype(np.float32), B, S), "A"),
    ("marlin-A-list", lambda: cuda.marlin_gemm(A16.tolist(), B, S), "A"),
    ("marlin-sms-0", lambda: cuda.marlin_gemm(A16, B, S, sms=0), "sms"),
    ("marlin-sms-bool", lambda: cuda.marlin_gemm(A16, B, S, sms=True), "sms"),
    ("marlin-arch", lambda: cuda.marlin_gemm(A16, B, S, arch="sm_75"), "arch"),
    ("marlin-backend", lambda: cuda.marlin_gemm(A16, B, S, backend="cpu"), "backend"),
    ("marlin-options", lambda: cuda.marlin_gemm(A16, B, S, options="fast"), "options"),
    ("marlin-B-shape", lambda: cuda.marlin_gemm(A16, B[:, :100], S), "B"),
    ("gptq-x-dtype", lambda: cuda.gptq_gemv(X1.astype(np.float32), CK), "x"),
    ("gptq-x-rows", lambda: cuda.gptq_gemv(np.zeros((9, 256), np.float16), CK), "x"),
    ("gptq-ckpt", lambda: cuda.gptq_gemv(X1, "ckpt"), "ckpt"),
    ("awq-ckpt", lambda: cuda.awq_gemv(X1, CK), "ckpt"),
    ("atom-a", lambda: cuda.atom_group_gemm(np.zeros(3), W), "a"),
    ("atom-fused", lambda: cuda.atom_group_gemm(ACT, W, fused="yes"), "fused"),
    ("mixed-p", lambda: cuda.mixed_gemv(np.zeros(3), np.zeros(256, np.float16)), "p"),
    ("anyprec-bits", lambda: cuda.anyprec_gemv(X1, np.zeros((3, 64, 8), np.int32), np.zeros((64, 8), np.float16), 9), "bit"),
    ("anyprec-x", lambda: cuda.anyprec_gemv(None, np.zeros((3, 64, 8), np.int32), np.zeros((64, 8), np.float16), 3), "x"),
    ("mma-kind", lambda: cuda.mma_probe("m16n8k16", R4, R2, R4), "kind"),
    ("mma-regs-dtype", lambda: cuda.mma_probe(K16, R4.astype(np.int32), R2, R4), "a: must be uint32"),
    ("mma-regs-tiles", lambda: cuda.mma_probe(K16, R4, R2[:0], R4), "tiles"),
    ("marlin-gpu-options", lambda: cuda.marlin_gemm(A16, B, S, backend="gpu", options={"seed": 1}), "options"),
    ("launch-options-key", lambda: cuda.gptq_gemv(X1, CK, options={"sched": "random"}), "options"),
    ("validate-group", lambda: cases(groups=("nope",)), "groups"),
    ("validate-tiles", lambda: cases(tiles=0), "tiles"),
    ("ptx-name", lambda: cuda.ptx("nope"), "nope"),
    ("ptx-arch", lambda: cuda.ptx("marlin", arch="sm_999"), "arch"),
    ("ptx-name-type", lambda: cuda.ptx(3), "name"),
    ("user-kernel-missing-file", lambda: cuda.user_kernel("/no/such/file.cu", kernel="k", launch=print), "file.cu"),
    ("user-kernel-launch", lambda: cuda.user_kernel(__file__, kernel="k", launch="plan"), "launch"),
]


@pytest.mark.parametrize("case,call,fragment", CASES, ids=[c[0] for c in CASES])
def test_wrong_arguments_raise_a_named_refsim_error(case, call, fragment):
    with pytest.raises(RefsimError) as err:
        call()
    assert fragment in str(err.value), str(err.value)
