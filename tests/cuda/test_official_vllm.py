"""refsim.cuda.official_vllm: vLLM's Marlin kernel on FP8 and NVFP4 weights (compiled PTX, one
instantiation each) through refsim.ptx, bit for bit against refsim.emulator.vllm_marlin_fp_kernel.

M = 20 takes both launches of the host loop (16 rows, then the 4-row tail through A and C row views);
K = 256 chains two k-tiles per k-warp; the inputs cancel across k-warps (see _inputs), so a model with
the official Marlin's strided k-warp order, or with a sequential block reduction, differs from the kernel
in hundreds of the 2,560 outputs, and this emulator in none. With 3 blocks on 2 column tiles the
kernel's striped partition splits K: those cases differ from the unsplit model in 35-45% of their
outputs and from the other carry precision (fp16 C vs fp32 C_tmp) in about 20%."""

from __future__ import annotations

import gzip
import hashlib

import numpy as np
import pytest

from refsim.cuda import launch, official
from refsim.cuda import official_vllm as ov
from refsim.emulator import vllm_marlin_fp_kernel as ek
from refsim.errors import ShapeError
from refsim.formats import marlin_fp as mf
from refsim.testing import assert_bitexact

#: sha256 of the uncompressed PTX (refsim/cuda/official/README.md)
PTX_SHA256 = "ad25aa2b3388a0cf5eabaa711794d236ae960c537da0c740a53aecb791090563"


def test_committed_ptx_is_the_recorded_one_and_holds_both_entries():
    text = gzip.decompress((official.DATA_DIR / ov.PTX_FILE).read_bytes())
    assert hashlib.sha256(text).hexdigest() == PTX_SHA256
    assert launch.entries(text.decode()) == (ov.ENTRIES["fp8"], ov.ENTRIES["nvfp4"])


def _inputs(kind, m, k, n, seed):
    """Near-cancelling halves of every 128-row k-tile (A's rows 64..127 of a tile = -(rows 0..63) + small,
    the same weight rows and scales): k-warps w and w + 2 hold the two halves, so their large fp32 partials
    cancel in the block reduction and the outputs are small beside them; the chain and reduction order
    then show in the fp16 bits."""
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-6, 7, (m, k))).astype(np.float16)
    A3 = A.reshape(m, k // 128, 2, 64)                                  # (M, k-tiles, half, 64) view
    A3[:, :, 1] = -A3[:, :, 0] + (rng.standard_normal((m, k // 128, 64)) * 0.01).astype(np.float16)

    def mirrored(codes):                                                # (K or K/16, N): tile halves equal
        c3 = codes.reshape(k // 128, 2, -1, n)
        c3[:, 1] = c3[:, 0]
        return codes

    if kind == "fp8":
        q = rng.integers(0, 256, (k, n)).astype(np.uint8)
        q[(q & 0x7F) == 0x7F] = 0x38                                   # no NaN codes
        return (A, *mf.prepare_fp8(mirrored(q), (rng.random((1, n)) * 0.1 + 0.01).astype(np.float16)), None)
    q = mirrored(rng.integers(0, 16, (k, n)).astype(np.uint8))
    s8 = mirrored(rng.integers(0x08, 0x7F, (k // 16, n)).astype(np.uint8))
    return (A, *mf.prepare_nvfp4(q, s8, 0.37))


# (kind, M, K, N, sms, fp32_reduce): one block per tile (one slice each); then 3 blocks on 2 tiles of 4
# k-tiles (slices of 3 + 1 k-tiles, global reductions carried in fp16 C, or in fp32 C_tmp)
CASES = [("fp8", 20, 256, 128, None, False), ("nvfp4", 20, 256, 128, None, False),
         ("fp8", 20, 512, 256, 3, False), ("nvfp4", 20, 512, 256, 3, True)]


@pytest.mark.parametrize("kind, m, k, n, sms, fp32_reduce", CASES)
def test_vllm_kernel_through_refsim_ptx_equals_the_emulator(kind, m, k, n, sms, fp32_reduce):
    A, B, s, g = _inputs(kind, m, k, n, seed=7)
    C = ov.vllm_marlin_fp_gemm(kind, A, B, s, g, sms=sms, fp32_reduce=fp32_reduce)
    assert_bitexact(C, ek.vllm_marlin_fp_gemm(kind, A, B, s, g, sms=sms, fp32_reduce=fp32_reduce))
    if sms is not None:                                       # the split is visible: the unsplit model differs
        assert (C != ek.vllm_marlin_fp_gemm(kind, A, B, s, g)).mean() > 0.2
    assert (C != 0).mean() > 0.9                              # real outputs, not an untouched zero C


def test_launcher_refuses_what_the_instantiation_cannot_run():
    A, B, s, g = _inputs("fp8", 1, 128, 128, seed=0)
    with pytest.raises(ShapeError, match="128x128"):
        ov.vllm_marlin_fp_gemm("fp8", A, B[:, :256], s[:, :64])
