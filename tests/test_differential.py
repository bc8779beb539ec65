"""Differential tests: each emulator against the kernels it claims to equal, over the shape space a user meets.

For Marlin and Atom, refsim's emulator is compared bit for bit with (a) the OFFICIAL kernel, its recorded PTX
(``refsim/cuda/official/``) launched on new inputs at new shapes through refsim.ptx
(:func:`refsim.cuda.official.marlin_gemm` / :func:`~refsim.cuda.official.atom_gemm`), and (b) refsim's own
``.cu`` kernel (``refsim.cuda``); for gptq/awq and mixed_2_4_16 (no official code) with (b). Every output
is ALSO judged against the exact product: it must lie within the forward-error bound of the accumulation
the kernel performs (:func:`refsim.testing.accuracy.judge` on the format's exact linear form, whose
derivation is in :mod:`refsim.testing.accuracy`: Higham's ``gamma_d`` over the roundings a term passes,
plus the fp16 roundings before and after the sum), so a bug shared by emulator and kernel is caught too.
The accumulation each kernel performs (:data:`ACCUMULATION`): Marlin carries a column's slices through C
in fp16 (fp16, any order), Atom adds fp32 FFMAs group by group (fp32, sequential), the GEMVs add fp16
hfma2 chains (fp16, any order).

Each system's strategy draws the shapes of its plan's branches (``BRANCHES`` / ``plan_branches`` of the
plan's module); its pinned shapes (``*_PINNED``, run as ``@example``) take every branch, which
``test_pinned_cases_take_every_branch`` asserts with the same ``plan_branches``: a new branch with no case
fails it. Layer sizes run under ``@pytest.mark.slow``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import refsim.cuda as rc
from refsim.cuda import launch, official
from refsim.emulator import atom_kernel, gptq_awq_kernel, marlin_kernel, mixed_2_4_16_kernel
from refsim.formats import atom, atom_gemm, awq, gptq, marlin, mixed_2_4_16, stripes
from refsim.testing import assert_bitexact, examples
from refsim.testing.accuracy import Accumulation, judge
from refsim.testing.cases import FORMATS

#: the accumulation each kernel performs (the bound its outputs must keep around the exact product)
ACCUMULATION = {"marlin": Accumulation("fp16", "any"), "atom": Accumulation("fp32", "sequential"),
                "gptq": Accumulation("fp16", "any"), "gptq_v2": Accumulation("fp16", "any"),
                "awq": Accumulation("fp16", "any"), "mixed_2_4_16": Accumulation("fp16", "any")}

_SLOW = settings(max_examples=examples(4), deadline=None, suppress_health_check=list(HealthCheck))


def _within_bound(fmt: str, case: dict, inputs: tuple, out: np.ndarray) -> None:
    j = judge(ACCUMULATION[fmt], FORMATS[fmt].linear(case, inputs), out)
    bad = np.argwhere(j.outside)
    assert bad.size == 0, (f"{fmt} {case}: {len(bad)} outputs outside the {ACCUMULATION[fmt]} bound of the exact "
                           f"product, first at {tuple(bad[0])} (error {j.error[tuple(bad[0])]:.3g}, bound "
                           f"{j.bound[tuple(bad[0])]:.3g})")


# ============================================================================================== Marlin
def _marlin_inputs(c: dict) -> tuple:
    rng = np.random.default_rng(c["seed"])
    g = c["group_size"]
    q = rng.integers(0, 16, (c["k"], c["n"])).astype(np.uint8)
    s = (rng.random((1 if g is None else c["k"] // g, c["n"])) * 0.01 + 0.001).astype(np.float16)
    A = (rng.standard_normal((c["m"], c["k"])) * 2.0 ** rng.integers(-3, 3, (c["m"], c["k"]))).astype(np.float16)
    return (A,) + marlin.pack(q, s, g)


def _marlin_kw(c: dict) -> dict:
    return {"sms": c["sms"], "max_par": c["max_par"], "thread_k": c["tile"][0] if c["tile"] else None,
            "thread_n": c["tile"][1] if c["tile"] else None}


def _marlin_branches(c: dict) -> frozenset:
    kw = _marlin_kw(c)
    return stripes.plan_branches(c["m"], c["n"], c["k"], kw.pop("sms"), c["group_size"], **kw)


def _marlin_case(m, k, n, group_size, sms, max_par=16, tile=None, seed=0) -> dict:
    return {"m": m, "k": k, "n": n, "group_size": group_size, "sms": sms, "max_par": max_par, "tile": tile,
            "seed": seed}


#: the recorded official instantiations hold the 64 x 256 tile with 1 or 4 m-blocks grouped
#: (Marlin<256,1|4,16,4,4,8>) and 2 m-blocks per-channel (Marlin<256,2,16,4,4,-1>): the official strategy
#: draws the shapes whose every launch uses one of them (grouped with K > 128: K = 128 with group 128 is one
#: scale row, per-channel)
_M_OFFICIAL_GROUPED = st.one_of(st.integers(49, 64), st.builds(lambda p, r: 64 * p + r, st.integers(1, 3),
                                                               st.integers(0, 16)))
marlin_official_cases = st.one_of(
    st.builds(_marlin_case, m=st.integers(1, 16), k=st.sampled_from([256, 512]), n=st.sampled_from([256, 512]),
              group_size=st.just(128), sms=st.integers(1, 132), max_par=st.sampled_from([1, 2, 3, 16]),
              tile=st.just((64, 256)), seed=st.integers(0, 2**31 - 1)),            # forced tile, 1 m-block
    st.builds(_marlin_case, m=_M_OFFICIAL_GROUPED, k=st.sampled_from([256, 384]), n=st.sampled_from([256, 512]),
              group_size=st.just(128), sms=st.integers(1, 132), max_par=st.sampled_from([1, 2, 3, 16]),
              seed=st.integers(0, 2**31 - 1)),                                     # 4 m-blocks, M loop, parallel
    st.builds(_marlin_case, m=st.integers(17, 32), k=st.sampled_from([128, 256, 512, 768]),
              n=st.sampled_from([256, 512]), group_size=st.just(None), sms=st.integers(1, 132),
              seed=st.integers(0, 2**31 - 1)))                                     # per-channel, 2 m-blocks

#: pinned official shapes: every branch the recorded instantiations can take
MARLIN_OFFICIAL_PINNED = (
    _marlin_case(8, 512, 256, 128, 5, tile=(64, 256)),         # forced tile, 4 slices per column, idle SMs
    _marlin_case(80, 256, 256, 128, 2),                         # the M loop: 64 rows then 16 (tmb 4, 1)
    _marlin_case(130, 256, 256, 128, 7, max_par=1),             # max_par 1: three launches, partial m-block
    _marlin_case(192, 256, 512, 128, 3),                        # 3 parallel problems, stripes cross columns
    _marlin_case(24, 512, 256, None, 2),                        # per-channel, padded M, 2 slices per column
    _marlin_case(20, 768, 512, None, 5),                        # per-channel, partial last stripe
    _marlin_case(64, 384, 256, 128, 132),                       # 6 tiles on 132 SMs: idle, grouped rounding
)


def _marlin_size(k_max, n_max):
    return st.tuples(st.sampled_from([k for k in (128, 256, 384, 512, 768, 1024) if k <= k_max]),
                     st.sampled_from([n for n in (128, 256, 512, 768) if n <= n_max]))


@st.composite
def marlin_own_cases(draw, m_max=200, k_max=768, n_max=512):
    """Shapes refsim's marlin.cu and the emulator run: every tile config (auto or forced), M 1..m_max,
    group -1/128, SM counts 1..132, max_par 1..3 and 16."""
    m = draw(st.integers(1, m_max))
    k, n = draw(_marlin_size(k_max, n_max))
    tile = draw(st.sampled_from([None, (64, 256), (128, 128)]))
    if tile == (128, 128) and m > 16:
        tile = None                                             # Marlin<.,2..4,8,8,..> is not compiled
    if (tile or ((128, 128) if m <= 16 else (64, 256)))[1] == 256 and n % 256:
        n = 256                                                 # thread_n 256 needs N % 256
    return _marlin_case(m, k, n, draw(st.sampled_from([128, None])), draw(st.integers(1, 132)),
                        draw(st.sampled_from([1, 2, 3, 16])), tile, draw(st.integers(0, 2**31 - 1)))


#: pinned shapes for refsim's own kernel: with the official ones, every branch of the plan
MARLIN_OWN_PINNED = (
    _marlin_case(1, 128, 128, None, 1),                         # the 128 x 128 tile, N = 128
    _marlin_case(16, 256, 128, 128, 3),                         # 16 rows, grouped, 128 x 128
    _marlin_case(40, 256, 256, None, 4),                        # 3 m-blocks
    _marlin_case(200, 256, 256, 128, 20, max_par=2),            # max_par 2 caps 3 problems: M split
    _marlin_case(9, 1024, 256, None, 3, tile=(64, 256)),        # forced tile, per-channel, 16 k-tiles on 3 SMs
    _marlin_case(33, 512, 512, 128, 1),                         # one block does everything
)


@settings(max_examples=examples(2), deadline=None, suppress_health_check=list(HealthCheck))
@given(c=marlin_official_cases)
@example(c=MARLIN_OFFICIAL_PINNED[0])
@example(c=MARLIN_OFFICIAL_PINNED[1])
@example(c=MARLIN_OFFICIAL_PINNED[2])
@example(c=MARLIN_OFFICIAL_PINNED[3])
@example(c=MARLIN_OFFICIAL_PINNED[4])
@example(c=MARLIN_OFFICIAL_PINNED[5])
@example(c=MARLIN_OFFICIAL_PINNED[6])
def test_marlin_emulator_equals_the_official_kernel_and_keeps_the_bound(c):
    A, B, s = inputs = _marlin_inputs(c)
    want = marlin_kernel.marlin_gemm(A, B, s, **_marlin_kw(c))
    assert_bitexact(official.marlin_gemm(A, B, s, **_marlin_kw(c)), want, name=f"official Marlin {c}")
    _within_bound("marlin", c, inputs, want)


@settings(max_examples=examples(2), deadline=None, suppress_health_check=list(HealthCheck))
@given(c=marlin_own_cases(m_max=130, k_max=512))
@example(c=MARLIN_OWN_PINNED[0])
@example(c=MARLIN_OWN_PINNED[1])
@example(c=MARLIN_OWN_PINNED[2])
@example(c=MARLIN_OWN_PINNED[3])
@example(c=MARLIN_OWN_PINNED[4])
@example(c=MARLIN_OWN_PINNED[5])
def test_marlin_emulator_equals_refsims_marlin_cu_and_keeps_the_bound(c):
    A, B, s = inputs = _marlin_inputs(c)
    want = marlin_kernel.marlin_gemm(A, B, s, **_marlin_kw(c))
    assert_bitexact(rc.marlin_gemm(A, B, s, **_marlin_kw(c)), want, name=f"marlin.cu {c}")
    _within_bound("marlin", c, inputs, want)


def test_marlin_random_block_schedules_change_no_bit():
    """The global reduction's order is fixed by the locks, not by which block runs first."""
    c = MARLIN_OFFICIAL_PINNED[0]
    A, B, s = _marlin_inputs(c)
    want = marlin_kernel.marlin_gemm(A, B, s, **_marlin_kw(c))
    for seed in (1, 2):
        opts = {"schedule": "random", "seed": seed}
        assert_bitexact(official.marlin_gemm(A, B, s, options=opts, **_marlin_kw(c)), want, name=f"official {seed}")
        assert_bitexact(rc.marlin_gemm(A, B, s, options=opts, **_marlin_kw(c)), want, name=f"marlin.cu {seed}")


@pytest.mark.slow
@_SLOW
@given(c=marlin_own_cases(m_max=1100, k_max=1024, n_max=768))
@example(c=_marlin_case(1100, 256, 256, None, 108))           # max_par 16 caps 17 problems: the M split
def test_marlin_emulator_equals_marlin_cu_at_layer_sizes(c):
    A, B, s = inputs = _marlin_inputs(c)
    want = marlin_kernel.marlin_gemm(A, B, s, **_marlin_kw(c))
    assert_bitexact(rc.marlin_gemm(A, B, s, **_marlin_kw(c)), want, name=f"marlin.cu {c}")
    _within_bound("marlin", c, inputs, want)


# ============================================================================================== Atom
def _atom_case(m, k4, n, keeper=128, seed=0, pair_equal=True) -> dict:
    return {"m": m, "k4": k4, "n": n, "keeper": keeper, "seed": seed, "pair_equal": pair_equal}


def _atom_inputs(c: dict) -> tuple:
    """The format's 8 arrays (AtomActivations then AtomWeights fields), quantized in kernel mode;
    ``pair_equal=False`` draws independent weight scales per column (the kernel's half2 pair selection)."""
    rng = np.random.default_rng(c["seed"])
    k = c["k4"] + c["keeper"]
    x = (rng.standard_normal((c["m"], k)) * 2.0 ** rng.integers(-2, 3, (c["m"], k))).astype(np.float32)
    w = (rng.standard_normal((k, c["n"])) * 0.05).astype(np.float32)
    a = atom.quantize_activations(x, "kernel", keeper=c["keeper"])
    wq = atom.quantize_weights(w, "kernel", keeper=c["keeper"])
    s4 = wq.scale4 if c["pair_equal"] else (rng.random(wq.scale4.shape) * 0.01 + 0.001).astype(np.float16)
    return (a.q4, a.scale4, a.q8, a.scale8, wq.q4, s4, wq.q8, wq.scale8)


def _atom_ops(inputs):
    return atom.AtomActivations(*inputs[:4]), atom.AtomWeights(*inputs[4:])


def _atom_branches(c: dict) -> frozenset:
    return atom_gemm.plan_branches(c["m"], c["n"], c["k4"], c["keeper"])


#: the official kernel's domain: keeper 128, N % 128, K - 128 >= 384 (the refusal boundary is 384)
atom_official_cases = st.builds(_atom_case, m=st.integers(1, 260), k4=st.sampled_from([384, 512, 640, 1024]),
                                n=st.sampled_from([128, 256]), seed=st.integers(0, 2**31 - 1),
                                pair_equal=st.booleans())
ATOM_OFFICIAL_PINNED = (
    _atom_case(16, 384, 256),                                   # the boundary body: the prologue is all of it
    _atom_case(9, 512, 128, pair_equal=False),                  # partial m16 tile, main-loop refills
    _atom_case(136, 384, 128),                                  # two block rows, the second partial
)
#: refsim's atom.cu: any keeper that is a multiple of 32, any N multiple of 8
atom_own_cases = st.builds(_atom_case, m=st.integers(1, 200), k4=st.sampled_from([384, 512, 640]),
                           n=st.sampled_from([8, 24, 64, 136, 256]), keeper=st.sampled_from([0, 32, 128]),
                           seed=st.integers(0, 2**31 - 1), pair_equal=st.booleans())
ATOM_OWN_PINNED = (
    _atom_case(20, 384, 24, keeper=0),                          # no keeper, partial n block
    _atom_case(33, 640, 136, keeper=32, pair_equal=False),      # keeper 32, several blocks in N
)


@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(c=atom_official_cases)
@example(c=ATOM_OFFICIAL_PINNED[0])
@example(c=ATOM_OFFICIAL_PINNED[1])
@example(c=ATOM_OFFICIAL_PINNED[2])
def test_atom_emulator_equals_the_official_kernel_and_atom_cu_and_keeps_the_bound(c):
    inputs = _atom_inputs(c)
    a, w = _atom_ops(inputs)
    want = atom_kernel.atom_group_gemm(a, w)
    assert_bitexact(official.atom_gemm(a, w), want, name=f"official Atom {c}")
    assert_bitexact(rc.atom_group_gemm(a, w), want, name=f"atom.cu {c}")
    if c["pair_equal"]:                       # the format's linear form reads one scale per column
        _within_bound("atom", c, inputs, want)


@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(c=atom_own_cases)
@example(c=ATOM_OWN_PINNED[0])
@example(c=ATOM_OWN_PINNED[1])
def test_atom_emulator_equals_atom_cu_and_keeps_the_bound(c):
    inputs = _atom_inputs(c)
    a, w = _atom_ops(inputs)
    want = atom_kernel.atom_group_gemm(a, w)
    assert_bitexact(rc.atom_group_gemm(a, w), want, name=f"atom.cu {c}")
    if c["pair_equal"]:
        _within_bound("atom", c, inputs, want)


@pytest.mark.parametrize("k4", [128, 256])
def test_the_official_atom_kernel_reads_out_of_bounds_below_the_refusal_boundary(k4):
    """The refusal is the kernel's own: its prologue's scale loads of k-tiles 0..2 leave the buffers."""
    from refsim.ptx.errors import PtxMemoryError

    a, w = _atom_ops(_atom_inputs(_atom_case(16, k4, 128)))
    la, args, _ = official._atom_arguments(a, w)
    with pytest.raises(PtxMemoryError, match="out-of-bounds 16-byte .global access"):
        launch.run(official.load("off_atom_m16n256k512").ptx, [(la, args)], backend="ptx")


@pytest.mark.slow
@_SLOW
@given(c=st.builds(_atom_case, m=st.integers(1, 300), k4=st.sampled_from([3968, 4096]), n=st.sampled_from([256, 512]),
                   seed=st.integers(0, 2**31 - 1), pair_equal=st.booleans()))
def test_atom_emulator_equals_the_official_kernel_at_layer_sizes(c):
    a, w = _atom_ops(_atom_inputs(c))
    assert_bitexact(official.atom_gemm(a, w), atom_kernel.atom_group_gemm(a, w), name=f"official Atom {c}")


# ============================================================================================== GEMVs
#: (format, shape fields) pinned for refsim's gptq_awq.cu and mixed_2_4_16.cu: every plan branch
GEMV_PINNED = {
    "gptq": ({"m": 1, "k": 64, "n": 32, "group_size": None, "act_order": False},
             {"m": 3, "k": 128, "n": 160, "group_size": 32, "act_order": True},
             {"m": 8, "k": 256, "n": 256, "group_size": 64, "act_order": False}),
    "gptq_v2": ({"m": 2, "k": 128, "n": 160, "group_size": 32, "act_order": True},),
    "awq": ({"m": 1, "k": 64, "n": 16, "group_size": None, "act_order": False},
            {"m": 4, "k": 256, "n": 136, "group_size": 32, "act_order": False}),
    "mixed_2_4_16": ({"k": 128, "n": 16, "alpha": 0.0, "outlier_ratio": 0.0},
                     {"k": 640, "n": 32, "alpha": 0.25, "outlier_ratio": 0.005},
                     {"k": 192, "n": 16, "alpha": 1.0, "outlier_ratio": 0.005},
                     {"k": 16, "n": 16, "alpha": 0.0, "outlier_ratio": 0.0},
                     {"k": 4096, "n": 16, "alpha": 0.0, "outlier_ratio": 0.005}),
}


def _gemv_run(fmt: str, inputs: tuple) -> np.ndarray:
    """refsim's own kernel on the format's inputs (the check_kernel argument order)."""
    if fmt in ("gptq", "gptq_v2"):
        x, qw, qz, s, g = inputs
        return rc.gptq_gemv(x, gptq.GPTQCheckpoint(qw, qz, s, g, 4, fmt))
    if fmt == "awq":
        x, qw, qz, s = inputs
        return rc.awq_gemv(x, awq.AWQCheckpoint(qw, qz, s, x.shape[1] // s.shape[0]))
    return rc.mixed_gemv(mixed_2_4_16.Packed2416(*inputs[1:]), inputs[0])


def _gemv_branches(fmt: str, case: dict, inputs: tuple) -> frozenset:
    if fmt == "mixed_2_4_16":
        return mixed_2_4_16_kernel.plan_branches(inputs[7], case["n"], np.diff(inputs[8].astype(np.int64)))
    return gptq_awq_kernel.plan_branches(case["m"], case["n"], case["k"], case["group_size"], case["act_order"])


def _gemv_case(fmt: str, shape: dict, kind="normal", seed=0) -> dict:
    return {**shape, "kind": kind, "seed": seed}


def _gemv_check(fmt: str, case: dict) -> None:
    spec = FORMATS[fmt]
    inputs = spec.make(case)
    want = spec.emulate(inputs, "sm_80", 108)
    assert_bitexact(_gemv_run(fmt, inputs), want, name=f"{fmt} kernel {case}")
    _within_bound(fmt, case, inputs, want)


@pytest.mark.parametrize("fmt, shape", [(f, s) for f in sorted(GEMV_PINNED) for s in GEMV_PINNED[f]])
def test_gemv_emulators_equal_refsims_kernels_on_the_pinned_shapes(fmt, shape):
    _gemv_check(fmt, _gemv_case(fmt, shape))


@pytest.mark.parametrize("fmt", sorted(GEMV_PINNED))
@settings(max_examples=examples(3), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_gemv_emulators_equal_refsims_kernels_and_keep_the_bound(fmt, data):
    from refsim.testing import harness

    _gemv_check(fmt, data.draw(harness.strategy(fmt, max_size=1 << 16)))


# ============================================================================================== branch coverage
def _gemv_union(fmt: str) -> set:
    out: set = set()
    for shape in GEMV_PINNED[fmt]:
        case = _gemv_case(fmt, shape)
        out |= _gemv_branches(fmt, case, FORMATS[fmt].make(case))
    return out


@pytest.mark.parametrize("system, branches, union", [
    ("marlin", stripes.BRANCHES,
     lambda: set().union(*map(_marlin_branches, MARLIN_OFFICIAL_PINNED + MARLIN_OWN_PINNED))),
    ("atom", atom_gemm.BRANCHES, lambda: set().union(*map(_atom_branches, ATOM_OFFICIAL_PINNED + ATOM_OWN_PINNED))),
    ("gptq_awq", gptq_awq_kernel.BRANCHES, lambda: _gemv_union("gptq") | _gemv_union("gptq_v2") | _gemv_union("awq")),
    ("mixed_2_4_16", mixed_2_4_16_kernel.BRANCHES, lambda: _gemv_union("mixed_2_4_16")),
])
def test_pinned_cases_take_every_branch(system, branches, union):
    """The pinned differential shapes take every declared branch of the system's plan: a branch added to
    ``BRANCHES`` with no case fails here (``plan_branches`` decides, the same function the plan documents)."""
    missing = set(branches) - union()
    assert not missing, f"{system}: no pinned differential case takes {sorted(missing)}"


def test_the_official_pinned_marlin_shapes_use_recorded_instantiations_only():
    """Every pinned official shape's launches are instantiations the recorded PTX holds (else the
    official launcher refuses), and together they take every launch kind those instantiations allow."""
    have = official.marlin_instantiations()
    assert sorted(have) == [(1, 16, 4, 8), (2, 16, 4, -1), (4, 16, 4, 8)]
    seen = set()
    for c in MARLIN_OFFICIAL_PINNED:
        kw = _marlin_kw(c)
        plan = stripes.stripes(c["m"], c["n"], c["k"], kw.pop("sms"), c["group_size"], **kw)
        g = -1 if plan.config.group_blocks is None else plan.config.group_blocks
        seen |= {(la.thread_m_blocks, plan.config.thread_n_blocks, plan.config.thread_k_blocks, g)
                 for la in plan.launches}
    assert seen == set(have)
