"""``check_kernel``: a bit-exact hypothesis harness for kernel authors outside refsim.

You bring a kernel (any callable taking and returning NumPy arrays: a CUDA kernel behind
CuPy/PyTorch, a simulator, a port); the harness draws legal cases for a format, packs them, calls
the kernel, and compares its output bit for bit with refsim's emulator of that kernel on a given
architecture and SM count. On a mismatch it raises :class:`KernelMismatch` naming the first
mismatching element, where it came from in the kernel (warp, lane, register, k-tiles, reduction
order), both bit patterns and the ULP distance; hypothesis shrinks the case first, so the report is
about a minimal shape and the simplest data kind that still fails.

    from refsim.emulator.harness import check_kernel

    def my_marlin(A, B, s):                # A (M, K) f16, B int32 (K/16, 2N), s f16 (G, N)
        return run_my_cuda_kernel(A, B, s)  # -> C (M, N) float16

    check_kernel(my_marlin, "marlin", arch="sm_80", sms=108, max_examples=25)

Formats (``FORMATS``):

=================  ===========================================  ================================
name               kernel(...) signature                        emulator
=================  ===========================================  ================================
``marlin``         ``(A f16 (M,K), B i32 (K/16,2N), s f16        :func:`marlin_kernel.marlin_gemm`
                   (G,N)) -> C f16 (M,N)``
``mma_m16n8k16``   ``(A f16 (16,16), B f16 (16,8), C f32        :func:`tensor_core.mma_m16n8k16`
                   (16,8)) -> D f32 (16,8)``
``mma_m16n8k16_f16`` the same with C and D float16              idem, fp16 accumulate
``mma_s4``         ``(A int8 (16,64) in [-8,7], B int8 (64,8),   :func:`tensor_core.mma_int`
                   C i32 (16,8)) -> D i32 (16,8)``
``anyprec``        ``(x f16 (M,K), qweight i32 (bits,N,K/32),   :func:`anyprec_kernel.anyprec_gemv`
                   lut f16 (N,2**bits)) -> O f16 (M,N)``
``mixed_2_4_16``   ``(x f16 (K,), w_main u32 (N,U,4), w_side     :func:`mixed_2_4_16_kernel.mixed_gemv`
                   u32 (N,n4), meta2 u16 (N,T), meta4 u8
                   (N,n4), s2 f16 (G,N/16), z2 u16 (G,N/16),
                   group_bits u8 (G,), row_ptr i32 (N+1,),
                   col u16 (nnz,), val f16 (nnz,)) -> y f16
                   (N,)`` (the fields of ``Packed2416``)
=================  ===========================================  ================================

The kernel receives copies of the inputs (an in-place kernel cannot corrupt the comparison).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from refsim._validate import require_choice
from refsim.emulator import fragments as fr
from refsim.emulator import marlin_kernel as mk
from refsim.emulator import tensor_core as tc
from refsim.formats import marlin
from refsim.testing import ulp_distance

__all__ = ["check_kernel", "KernelMismatch", "FORMATS", "DATA_KINDS"]

#: data kinds, simplest first (hypothesis shrinks toward the front)
DATA_KINDS = ("zeros", "ones", "small_integers", "normal", "wide_exponents")


class KernelMismatch(AssertionError):
    """The kernel's output differs from the emulator's; the message is the full report."""


@dataclass(frozen=True)
class _Format:
    name: str
    strategy: Callable          # () -> hypothesis strategy of case dicts
    make: Callable              # case -> tuple of input arrays
    emulate: Callable           # (inputs, arch, sms) -> expected array
    locate: Callable            # (case, inputs, (i, j), arch, sms) -> str


def _values(rng, kind, shape, scale=1.0):
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "ones":
        return np.ones(shape)
    if kind == "small_integers":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "normal":
        return rng.standard_normal(shape) * scale
    return rng.standard_normal(shape) * 2.0 ** rng.integers(-14, 8, shape)  # wide_exponents


# ----------------------------------------------------------------------------------------------
# marlin


def _marlin_strategy():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "m": st.sampled_from([1, 2, 3, 8, 16, 17, 32, 64]),
        "k": st.sampled_from([128, 256, 512]),
        "n": st.sampled_from([256, 512]),
        "group_size": st.sampled_from([128, None]),
        "kind": st.sampled_from(DATA_KINDS),
        "seed": st.integers(0, 2**16),
    })


def _marlin_make(case):
    rng = np.random.default_rng(case["seed"])
    k, n, gs = case["k"], case["n"], case["group_size"]
    g = 1 if gs is None else k // gs
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    scales = (rng.random((g, n)) * 0.02 + 2.0**-10).astype(np.float16)
    B, s = marlin.pack(q, scales, gs)
    A = _values(rng, case["kind"], (case["m"], k)).astype(np.float16)
    return A, B, s


def _marlin_emulate(inputs, arch, sms):
    return mk.marlin_gemm(*inputs, arch=arch, sms=sms)


def _marlin_locate(case, inputs, idx, arch, sms):
    p = mk.provenance(case["m"], case["n"], case["k"], idx[0], idx[1], group_size=case["group_size"], sms=sms)
    return str(p)


# ----------------------------------------------------------------------------------------------
# single mma instructions


def _mma_strategy():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"kind": st.sampled_from(DATA_KINDS), "seed": st.integers(0, 2**16)})


def _mma_make(acc_dtype):
    def make(case):
        rng = np.random.default_rng(case["seed"])
        A = _values(rng, case["kind"], (16, 16)).astype(np.float16)
        B = _values(rng, case["kind"], (16, 8)).astype(np.float16)
        C = _values(rng, case["kind"], (16, 8)).astype(acc_dtype)
        return A, B, C
    return make


def _mma_emulate(inputs, arch, sms):
    return tc.mma_m16n8k16(arch, *inputs)


def _mma_locate(case, inputs, idx, arch, sms):
    lane, reg = fr.mma_m16n8k16_c().owner(*idx)
    L = tc.model(arch).block
    blocks = ", ".join(f"k {k0}..{k0 + L - 1}" for k0 in range(0, 16, L))
    return (f"D[{idx[0]}, {idx[1]}] is register c{reg} of lane {lane} (warp 0); chained {arch} blocks in order: "
            f"{blocks}; A row {idx[0]} comes from lanes {sorted({l for l, _ in _a_owners(idx[0])})}")


def _a_owners(row):
    lay = fr.mma_m16n8k16_a()
    return [lay.owner(row, c) for c in range(16)]


def _s4_strategy():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"kind": st.sampled_from(("zeros", "ones", "small_integers", "extremes")),
                                  "seed": st.integers(0, 2**16), "c_large": st.booleans()})


def _s4_make(case):
    rng = np.random.default_rng(case["seed"])
    kind = case["kind"]
    if kind == "zeros":
        A, B = np.zeros((16, 64), np.int8), np.zeros((64, 8), np.int8)
    elif kind == "ones":
        A, B = np.ones((16, 64), np.int8), np.ones((64, 8), np.int8)
    elif kind == "extremes":
        A = rng.choice(np.array([-8, 7], np.int8), (16, 64))
        B = rng.choice(np.array([-8, 7], np.int8), (64, 8))
    else:
        A, B = rng.integers(-8, 8, (16, 64)).astype(np.int8), rng.integers(-8, 8, (64, 8)).astype(np.int8)
    lo, hi = (2**31 - 4096, 2**31) if case["c_large"] else (-1000, 1000)
    C = rng.integers(lo, hi, (16, 8)).astype(np.int64).astype(np.int32)
    return A, B, C


def _s4_emulate(inputs, arch, sms):
    return tc.mma_int(*inputs)


def _s4_locate(case, inputs, idx, arch, sms):
    lane, reg = fr.mma_m16n8k64_c().owner(*idx)
    return f"D[{idx[0]}, {idx[1]}] is register c{reg} of lane {lane}; exact int32 sum over k 0..63, wrapping"


# ----------------------------------------------------------------------------------------------
# any-precision GEMV


def _anyprec_strategy():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "m": st.sampled_from([1, 2, 4, 8]),
        "k": st.sampled_from([64, 1024, 1056, 2048]),
        "n": st.sampled_from([16, 32]),
        "bits": st.sampled_from([3, 4, 5, 6, 7, 8]),
        "kind": st.sampled_from(DATA_KINDS),
        "seed": st.integers(0, 2**16),
    })


def _anyprec_make(case):
    from refsim.formats import bitplane

    rng = np.random.default_rng(case["seed"])
    n, k, bits = case["n"], case["k"], case["bits"]
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = (_values(rng, case["kind"], (n, 2**bits)) * 0.05).astype(np.float16)
    x = _values(rng, case["kind"], (case["m"], k)).astype(np.float16)
    return x, bitplane.pack(codes, bits), lut


def _anyprec_emulate(inputs, arch, sms):
    from refsim.emulator import anyprec_kernel as ek

    x, q, lut = inputs
    return ek.anyprec_gemv(x, q, lut, q.shape[0])


def _anyprec_locate(case, inputs, idx, arch, sms):
    multi_row = 1 if case["m"] == 1 else 4
    l, r = idx
    block, within = divmod(r, 4 * multi_row)
    return (f"O[{l}, {r}]: block {block}, warp y={within % 4} (row slot h={within // 4}), lane 0 after the "
            f"shfl_down tree; 32 lanes x {-(-case['k'] // 1024)} chunks of two 16-step hfma2 chains")


# ----------------------------------------------------------------------------------------------
# 2/4/16-bit GEMV with its outlier SpMV (refsim's documented kernel design, no official code)


def _mixed_strategy():
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "k": st.sampled_from([16, 128, 192, 640]),
        "n": st.sampled_from([16, 32]),
        "alpha": st.sampled_from([0.0, 0.25, 1.0]),
        "outlier_ratio": st.sampled_from([0.0, 0.005]),
        "kind": st.sampled_from(DATA_KINDS),
        "seed": st.integers(0, 2**16),
    })


def _mixed_make(case):
    import dataclasses

    from refsim.formats import mixed_2_4_16 as mixed

    rng = np.random.default_rng(case["seed"])
    k, n = case["k"], case["n"]
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = mixed.pack(mixed.quantize(W, X.T @ X / k, alpha=case["alpha"], outlier_ratio=case["outlier_ratio"]))
    x = _values(rng, case["kind"], (k,)).astype(np.float16)
    return (x,) + tuple(getattr(p, f.name) for f in dataclasses.fields(p))


def _mixed_emulate(inputs, arch, sms):
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.formats import mixed_2_4_16 as mixed

    return mx.mixed_gemv(mixed.Packed2416(*inputs[1:]), inputs[0])


def _mixed_locate(case, inputs, idx, arch, sms):
    from refsim.emulator import mixed_2_4_16_kernel as mx

    r = idx[0]
    units = mx.unit_groups(inputs[7])
    row_ptr = inputs[8]
    busy = sorted({u % 32 for u in range(len(units))})
    return (f"y[{r}]: warp {r} (one warp per output channel); lanes {busy[0]}..{busy[-1]} own the row's "
            f"{len(units)} 128-bit units round-robin (fp16 hfma2 chains per group of 16, fp32 lane sums), "
            f"fp32 shfl_down tree to lane 0, then lane 0 adds the row's {int(row_ptr[r + 1] - row_ptr[r])} "
            f"outliers in stored order and writes fp16(acc)")


FORMATS: dict[str, _Format] = {
    "anyprec": _Format("anyprec", _anyprec_strategy, _anyprec_make, _anyprec_emulate, _anyprec_locate),
    "marlin": _Format("marlin", _marlin_strategy, _marlin_make, _marlin_emulate, _marlin_locate),
    "mma_m16n8k16": _Format("mma_m16n8k16", _mma_strategy, _mma_make(np.float32), _mma_emulate, _mma_locate),
    "mma_m16n8k16_f16": _Format("mma_m16n8k16_f16", _mma_strategy, _mma_make(np.float16), _mma_emulate, _mma_locate),
    "mma_s4": _Format("mma_s4", _s4_strategy, _s4_make, _s4_emulate, _s4_locate),
    "mixed_2_4_16": _Format("mixed_2_4_16", _mixed_strategy, _mixed_make, _mixed_emulate, _mixed_locate),
}


# ----------------------------------------------------------------------------------------------


def _report(fmt, case, inputs, actual, expected, arch, sms) -> str:
    head = f"{fmt.name} kernel differs from the refsim emulator ({arch}, sms={sms}); case {case}"
    if not isinstance(actual, np.ndarray):
        return f"{head}\n  kernel returned {type(actual).__name__}, expected a numpy.ndarray"
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return (f"{head}\n  kernel returned dtype {actual.dtype} shape {actual.shape}; "
                f"expected dtype {expected.dtype} shape {expected.shape}")
    width = expected.dtype.itemsize
    utype = {2: np.uint16, 4: np.uint32}[width]
    a_bits, e_bits = actual.view(utype), expected.view(utype)
    bad = a_bits != e_bits
    if not bad.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    av, ev = actual[first], expected[first]
    if np.issubdtype(expected.dtype, np.floating):
        ulps = int(ulp_distance(np.asarray(av), np.asarray(ev)))
        dist = f"{ulps} ULP"
    else:
        dist = f"difference {int(av) - int(ev)}"
    lines = [
        head,
        f"  {int(bad.sum())} of {bad.size} output elements differ; first at {first}:",
        f"    kernel   0x{int(a_bits[first]):0{2 * width}x} ({av!r})",
        f"    emulator 0x{int(e_bits[first]):0{2 * width}x} ({ev!r}), {dist}",
        f"  produced by: {fmt.locate(case, inputs, first, arch, sms)}",
    ]
    return "\n".join(lines)


def check_kernel(kernel: Callable[..., np.ndarray], fmt: str = "marlin", *, arch: str = "sm_80", sms: int = 108,
                 max_examples: int | None = None, shrink: bool = True) -> None:
    """Check ``kernel`` bit for bit against refsim's emulator on hypothesis-drawn legal cases.

    kernel: callable taking the format's input arrays (see the module table) and returning the
    output array. fmt: one of :data:`FORMATS`. arch: tensor-core model ('sm_80' ... 'sm_90').
    sms: SM count = grid size (Marlin's partition and reduction order depend on it).
    max_examples: cases to draw (default: the loaded hypothesis profile's). shrink: let hypothesis
    minimise a failing case first (smaller shapes, simpler data kind; costs extra kernel calls).
    Returns None when every case matches; raises :class:`KernelMismatch` with the report of the
    (shrunk) failing case.
    """
    from hypothesis import Phase, given, settings

    spec = FORMATS[require_choice("fmt", fmt, tuple(FORMATS))]
    tc.model(arch)
    extra = {} if max_examples is None else {"max_examples": int(max_examples)}
    if not shrink:
        extra["phases"] = (Phase.explicit, Phase.reuse, Phase.generate)

    @settings(deadline=None, database=None, **extra)
    @given(spec.strategy())
    def _one_case(case):
        inputs = spec.make(case)
        expected = spec.emulate(inputs, arch, sms)
        actual = kernel(*(x.copy() for x in inputs))
        report = _report(spec, case, inputs, actual, expected, arch, sms)
        if report:
            raise KernelMismatch(report)

    _one_case()
