"""Report section: QIGen CPU kernels (layout, FMA oracle, generated kernels vs oracle, model)."""

from __future__ import annotations


import numpy as np

from refsim.formats import qigen as layout
from refsim.qigen import model, oracle
from refsim.native.machine import detect_isa, machine_info
from refsim.report import Check, SkipCheck
from refsim.testing import assert_bitexact

TITLE = "QIGen (CPU qGEMV kernels)"
ORDER = 60


def _layout() -> str:
    rng = np.random.default_rng(0)
    for bits in (2, 3, 4):
        for order in layout.ORDERS:
            lay = layout.QIGenLayout(bits, 256, 64, 64, 32, order)
            qw = rng.integers(-(2**31), 2**31, (256 * bits // 32, 64), dtype=np.int64).astype(np.int32)
            assert_bitexact(layout.unpack(layout.pack(qw, lay), lay), qw, name=f"unpack(pack), {bits}-bit {order}")
    return "unpack(pack(qweight)) == qweight for 2/3/4-bit, panel and Z-curve orders"


def _fma() -> str:
    a, c = np.float32(1 + 2**-12), np.float32(2**-70)
    assert_bitexact(np.float32(oracle.fma32(a, a, c)), np.float32(1 + 2**-11 + 2**-23), name="fma32 double-rounding case")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 200)).astype(np.float32)
    assert_bitexact(np.array([oracle.fma32(*t) for t in x.T], np.float32),
                    np.array([oracle.fma32_reference(*t) for t in x.T], np.float32),
                    name="200 random fma32 vs exact rational rounding")
    return "fma32 correctly rounded (double-rounding trap + 200 random vs exact rationals)"


def _kernels() -> str:
    from refsim.errors import ToolchainError
    from refsim.formats import gptq
    from refsim.qigen import codegen, kernel
    from refsim.native import build

    try:
        build.find_compiler()
    except ToolchainError as err:  # refsim works without a compiler; say so instead of failing
        raise SkipCheck(f"generated kernels not built ({err})") from None

    rng = np.random.default_rng(2)
    isas = ["scalar"] + (["avx2"] if detect_isa() == "avx2" else [])
    n_cases = n_problems = 0
    for bits in (2, 3, 4):
        for gs in (None, 64):
            # one problem and one oracle result (the costly part: an exact fma per K step) per
            # (bits, group); every ISA's generated kernel is compared with it
            k, n = 128, 64
            g = k // (gs or k)
            q = rng.integers(0, 2**bits, (k, n), dtype=np.uint8)
            s = (rng.random((g, n)) * 0.1).astype(np.float32)
            z = rng.integers(0, 2**bits, (g, n)).astype(np.float32)
            x = rng.standard_normal((2, k)).astype(np.float32)
            mat = kernel.prepare(gptq.pack_qweight(q, bits), s, z, bits=bits, group_size=gs, mb=64, tb=32,
                                 order="zcurve" if gs else "panel")
            want = oracle.qgemv_oracle(x, q, s, z, None, bits, gs)
            n_problems += 1
            for isa in isas:
                y = kernel.qgemv(x, mat, codegen.KernelSpec(bits, tu=32, isa=isa))
                assert_bitexact(y, want, name=f"{isa} {bits}-bit gs={gs}: kernel vs oracle")
                n_cases += 1
    return (f"generated kernels ({', '.join(isas)}) == oracle bit for bit in {n_cases} cases "
            f"({n_problems} problems x {len(isas)} ISA{'s' if len(isas) > 1 else ''})")


def _milp() -> str:
    info = machine_info()
    for k, n, bits, gs in ((4096, 4096, 4, 128), (11008, 4096, 3, None), (4096, 11008, 2, 64)):
        got = model.cache_milp(k, n, bits, 1, info.gamma_bits, 32, 1, gs)
        want = model.cache_bruteforce(k, n, bits, 1, info.gamma_bits, 32, 1, gs)
        if got != want:
            raise AssertionError(f"MILP {got} != enumeration {want} for {k}x{n} {bits}-bit")
    return f"MILP optimum == enumeration on 3 LLaMA shapes (gamma = {info.gamma_bits} bits)"


def checks() -> list[Check]:
    return [
        Check("packed layout round trip (panel, Z-curve)", _layout),
        Check("fp32 FMA emulation", _fma),
        Check("generated kernels vs oracle", _kernels),
        Check("cache model MILP vs enumeration", _milp),
    ]


def markdown(out_dir) -> str:
    info = machine_info()
    lines = [
        f"Machine: L1d {info.l1d_bytes // 1024} KiB ({info.provenance['l1d_bytes']}), "
        f"L2 {info.l2_bytes // 1024} KiB, ISA for generated code: {detect_isa()}, "
        f"eta = {info.eta} vector registers.",
        "",
        "| K x N | bits | group | m_u | t_u (cols) | mb | tb | L1 use | model time (ms, 10 GB/s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k, n in ((4096, 4096), (4096, 11008), (11008, 4096)):
        for bits in (4, 3):
            p = model.plan(k, n, bits, info, group_size=128)
            est = model.predict_time(k, n, bits, 1, p.tu_cols, 128, 10e9, info.clock_hz,
                                     accumulators=p.accumulators, compact_meta=True)
            lines.append(f"| {k} x {n} | {bits} | 128 | {p.mu} | {p.tu_cols} | {p.mb} | {p.tb} | "
                         f"{100 * p.l1_used_bits / p.gamma_bits:.0f}% | {est.seconds * 1e3:.2f} ({est.bound}) |")
    lines += ["", "Measured numbers: `python bench/bench_qigen.py` (see docs/qigen.md)."]
    return "\n".join(lines)
