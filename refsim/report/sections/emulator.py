"""Report section: the numerically exact emulator (fp primitives, tensor-core models, Marlin dataflow)."""

from __future__ import annotations


import numpy as np

from refsim.arith import fp
from refsim.arith import hw_samples as hw
from refsim.emulator import marlin_kernel as mk
from refsim.arith import tensor_core as tc
from refsim.formats import marlin
from refsim.report import Check, SkipCheck
from refsim.testing import assert_bitexact

TITLE = "Exact emulator (fp, tensor cores, kernels)"
ORDER = 60


def _hardware_rows() -> str:
    path = hw.available_path()
    if path is None:
        raise SkipCheck(f"no hardware data at {hw.subset_path()} (present in a source checkout only)")
    parts = []
    rows = hw.load(path)
    for gpu, arch in hw.GPUS:
        a, b, c, d32, d16 = rows[gpu]
        assert_bitexact(tc.fdpa(arch, a, b, c, np.float32), d32, name=f"{gpu} fp32-out")
        assert_bitexact(tc.fdpa(arch, a, b, c.astype(np.float16), np.float16), d16, name=f"{gpu} fp16-out")
        parts.append(f"{gpu} {len(c)}/{len(c)}")
    return f"bit-exact on measured rows ({path.name}): " + ", ".join(parts)


def _fma_counterexample() -> str:
    a = np.array([1 + 2.0**-23], np.float32)
    b = np.array([1 - 2.0**-24], np.float32)
    c = np.array([2.0**-47 * (1 + 2.0**-23)], np.float32)
    assert_bitexact(fp.f32_fma(a, b, c, fused=True), np.array([1 + 2.0**-23], np.float32), name="fmaf")
    return "fmaf(1+2^-23, 1-2^-24, 2^-47(1+2^-23)) = 1+2^-23 (a float64 evaluation gives 1.0)"


def _split_order() -> str:
    A = np.zeros((16, 16), np.float16)
    B = np.zeros((16, 8), np.float16)
    A[0, 0], A[0, 1], A[0, 8] = 1.0, 2.0**-12, 2.0**-12
    B[0, 0], B[1, 0], B[8, 0] = 1.0, 2.0**-12, 2.0**-12
    C = np.zeros((16, 8), np.float32)
    assert_bitexact(tc.mma_m16n8k16("sm_80", A, B, C)[0, :1], np.array([1.0], np.float32), name="sm_80 D[0, 0]")
    assert_bitexact(tc.mma_m16n8k16("sm_90", A, B, C)[0, :1], np.array([1 + 2.0**-23], np.float32),
                    name="sm_90 D[0, 0]")
    return "m16n8k16 split vector: sm_80 1.0 (two k8 blocks), sm_90 1+2^-23 (one k16 block)"


def _marlin_small() -> str:
    rng = np.random.default_rng(0)
    k, n = 256, 256
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    sc = (rng.random((2, n)) * 0.02 + 0.001).astype(np.float16)
    B, s = marlin.pack(q, sc, 128)
    A = rng.standard_normal((1, k)).astype(np.float16)
    C = mk.marlin_gemm(A, B, s, sms=3)
    cols = [0, 77, 200]
    ref = mk.marlin_gemm_reference(A, B, s, sms=3, cols=cols)
    assert_bitexact(C[:, cols], ref, name="Marlin emulation (vectorised vs plain loop)")
    return "M=1 K=N=256 g128, 3 SMs (fp16-carried global reduce): vectorised == plain loop"


def _anyprec_small() -> str:
    from refsim.emulator import anyprec_kernel as ek
    from refsim.formats import bitplane

    rng = np.random.default_rng(1)
    n, k, bits = 4, 1056, 4
    q = bitplane.pack(rng.integers(0, 16, (n, k)).astype(np.uint8), bits)
    lut = (rng.standard_normal((n, 16)) * 0.05).astype(np.float16)
    x = rng.standard_normal((1, k)).astype(np.float16)
    got, ref = ek.anyprec_gemv(x, q, lut, bits), ek.anyprec_gemv_reference(x, q, lut, bits)
    assert_bitexact(got, ref, name="Any-Precision emulation (vectorised vs plain loop)")
    return "M=1 N=4 K=1056 (one full chunk + a 1-lane tail), 4-bit: vectorised == exact-fma plain loop"


def _atom_small() -> str:
    from refsim.emulator import atom_kernel as ek
    from refsim.formats import atom

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 512)).astype(np.float16)
    w = (rng.standard_normal((512, 64)) * 0.05).astype(np.float16)
    a, wq = atom.quantize_activations(x, "kernel"), atom.quantize_weights(w, "kernel")
    got, ref = ek.atom_group_gemm(a, wq), atom.atom_gemm(a, wq)
    assert_bitexact(got, ref, name="Atom emulation vs refsim.formats.atom.atom_gemm")
    return "M=4 K=512 N=64 (3 INT4 groups + INT8 tail): mma slabs + FFMA epilogue == format oracle"


def checks() -> list[Check]:
    return [
        Check("tensor-core models vs hardware measurements", _hardware_rows),
        Check("fp32 FMA double-rounding counterexample", _fma_counterexample),
        Check("m16n8k16 k-split order", _split_order),
        Check("Marlin warp-level emulation vs plain loop", _marlin_small),
        Check("Any-Precision GEMV emulation vs plain loop", _anyprec_small),
        Check("Atom group GEMM emulation vs format oracle", _atom_small),
    ]


def markdown(out_dir) -> str:
    lines = ["| arch | block L | F | e_zero f32/f16 | verified | note |", "|---|---|---|---|---|---|"]
    for m in tc.MODELS.values():
        lines.append(f"| {m.arch} | {m.block} | {m.frac_bits} | {m.e_zero_f32}/{m.e_zero_f16} | "
                     f"{'yes' if m.verified else '**no**'} | {m.note} |")
    return "\n".join(lines)
