"""refsim.testing.cases.anyprec: the Any-Precision cases check_kernel runs — pinned cases that take every
branch of the plan, and the official kernel (run through refsim.ptx) passing them, K-split included."""

from __future__ import annotations

from refsim.cuda import official_anyprec
from refsim.formats import anyprec_plan as ak
from refsim.testing import check_kernel, harness


def test_the_pinned_cases_take_every_branch_of_the_plan():
    pinned = [c for c, _ in harness.pinned_cases("anyprec")]
    taken = set().union(*(ak.plan_branches(c["m"], c["n"], c["k"], c["bits"]) for c in pinned))
    assert taken == set(ak.BRANCHES), f"no pinned case takes {sorted(set(ak.BRANCHES) - taken)}"
    assert any(c["k"] > 4096 and ak.plan(c["m"], c["n"], c["k"], c["bits"]).ksplit == 1 for c in pinned)


def test_the_official_kernel_passes_its_own_format():
    # main.cu's dispatch of matmul_kbit_32 through refsim.ptx: the kernel refsim's emulator must equal;
    # a wrong emulator (one that drops K past 4096 without a K-split) fails this on a pinned case
    res = check_kernel(lambda x, qweight, lut: official_anyprec.anyprec_gemv(x, qweight, lut, qweight.shape[0]),
                       "anyprec", seed=0, max_examples=3, progress=False)
    assert res.pinned == 6 and res.drawn == 3
