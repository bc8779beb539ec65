"""refsim.testing.validate: the pure parts of ``refsim validate`` on cases built here (no GPU, no PTX).

A :class:`Case` is two callables, ``run`` and ``reference``, returning ``{name: array}``; ``run_case`` turns
their bits into a verdict (bit-identical / differs / not-run / error / no-model) with the archs compared and matched;
``format_result`` gives its one line; ``exit_status`` the command's code; ``applicable`` which cases a
backend runs at an arch. Expected lines are written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.cuda import mma as rmma
from refsim.errors import FormatRuleError
from refsim.testing import validate as v

ONE = {"y": np.array([1.0, 2.0], np.float16)}


def _case(run, reference, **kw) -> v.Case:
    return v.Case(kw.pop("name", "toy M=1"), kw.pop("group", "kernel"), "a toy", run, reference, **kw)


def _arch_answers(answers: dict):
    """A reference that answers per arch (``answers[arch]``: the value of y[1]; absent: no model)."""
    def reference(backend, arch):
        if arch not in answers:
            raise rmma.NoModel(f"no model at {arch}")
        return {"y": np.array([1.0, answers[arch]], np.float16)}
    return reference


def test_exit_status_rules():
    r = lambda verdict: v.Result("c", "kernel", "", verdict, "sm_90")          # noqa: E731
    assert v.exit_status([r("bit-identical"), r("bit-identical")]) == 0
    assert v.exit_status([r("bit-identical"), r("differs")]) == 1
    assert v.exit_status([r("bit-identical"), r("no-model")]) == 1
    assert v.exit_status([r("bit-identical"), r("error")]) == 1
    assert v.exit_status([r("error")]) == v.exit_status([]) == 2
    with pytest.raises(FormatRuleError, match="results"):
        v.exit_status([{"verdict": "bit-identical"}])


def test_ptx_backend_compares_at_each_arch_and_names_the_differing_ones():
    case = _case(lambda backend, arch: {"y": np.array([1.0, 2.0], np.float16)}, _arch_answers({"sm_80": 2.0, "sm_90": 3.0}),
                 archs=("sm_80", "sm_90"), ptx_archs=("sm_80", "sm_90"), verified=("sm_80",))
    res = v.run_case(case, "ptx", None)
    assert (res.verdict, res.arch, res.compared, res.matched, res.unverified) == (
        "differs", None, ["sm_80", "sm_90"], ["sm_80"], ["sm_90"])
    assert res.detail.startswith("at sm_90:\n")
    line = v.format_result(res, "ptx")
    assert line.splitlines()[0] == ("[kernel] toy M=1: DIFFERS at sm_90 (bit-identical at sm_80); model not measured "
                                    "on hardware at sm_90")
    assert all(x.startswith("    ") for x in line.splitlines()[1:]) and len(line.splitlines()) > 1
    # one arch chosen: only that one
    res = v.run_case(case, "ptx", "sm_80")
    assert (res.verdict, res.arch, res.compared) == ("bit-identical", "sm_80", ["sm_80"])
    assert v.format_result(res, "ptx") == "[kernel] toy M=1: bit-identical (refsim.ptx = refsim.emulator at sm_80)"


def test_a_differing_case_reports_by_input_category_when_it_has_labels():
    case = _case(lambda b, a: {"y": np.array([1.0, 5.0], np.float16)}, lambda b, a: ONE, group="mma",
                 labels=lambda coord: "subnormal" if coord == (1,) else "random")
    res = v.run_case(case, "ptx", None)
    assert res.verdict == "differs" and res.detail.endswith("by input category: subnormal 1")


def test_gpu_backend_names_the_models_that_match_and_gives_no_verdict_without_one():
    gpu = lambda backend, arch: {"y": np.array([1.0, 3.0], np.float16)}       # noqa: E731
    case = _case(gpu, _arch_answers({"sm_80": 2.0, "sm_89": 3.0, "sm_90": 3.0}), group="mma",
                 archs=("sm_80", "sm_89", "sm_90"))
    res = v.run_case(case, "gpu", "sm_90")
    assert (res.verdict, res.compared, res.matched) == ("bit-identical", ["sm_80", "sm_89", "sm_90"], ["sm_89", "sm_90"])
    assert v.format_result(res, "gpu") == "[mma] toy M=1: bit-identical (sm_90 model; also matches sm_89)"
    res = v.run_case(case, "gpu", "sm_80")
    assert v.format_result(res, "gpu").startswith("[mma] toy M=1: DIFFERS from the sm_80 model (matches sm_89, sm_90)\n")
    # the device is sm_86, which refsim has no model of here: no verdict, the matching models listed
    res = v.run_case(case, "gpu", "sm_86")
    assert res.verdict == "no-model"
    assert v.format_result(res, "gpu") == ("[mma] toy M=1: no verdict: refsim has no model of this on sm_86; "
                                           "matches sm_89, sm_90 models")


def test_a_side_that_raises_is_that_cases_error_on_one_line():
    def run(backend, arch):
        raise RuntimeError("illegal\n   instruction")

    res = v.run_case(_case(run, lambda b, a: ONE), "ptx", None)
    assert (res.verdict, res.detail) == ("error", "RuntimeError: illegal instruction")
    assert v.format_result(res, "ptx") == "[kernel] toy M=1: ERROR: RuntimeError: illegal instruction"
    assert v.exit_status([res]) == 2


def test_the_official_cases_compare_at_their_fixed_arch_with_the_h100_bytes():
    case = _case(lambda b, a: ONE, lambda b, a: ONE, group="official", archs=("sm_90",), fixed_arch="sm_90")
    res = v.run_case(case, "ptx", "sm_80")
    assert res.compared == ["sm_90"]
    assert v.format_result(res, "ptx") == "[official] toy M=1: bit-identical (refsim.ptx = the H100's bytes at sm_90)"
    assert v.applicable(case, "ptx", "sm_80")


def test_applicable_follows_the_device_arch_on_gpu_and_the_models_on_ptx():
    fp8 = _case(lambda b, a: ONE, lambda b, a: ONE, archs=("sm_89", "sm_90"), min_arch="sm_89")
    assert not v.applicable(fp8, "gpu", "sm_86") and v.applicable(fp8, "gpu", "sm_89")
    assert v.applicable(fp8, "ptx", None) and v.applicable(fp8, "ptx", "sm_90") and not v.applicable(fp8, "ptx", "sm_80")
    assert v.applicable(_case(lambda b, a: ONE, lambda b, a: ONE), "ptx", "sm_75")   # arch-independent
    with pytest.raises(FormatRuleError, match="case"):
        v.applicable("toy", "ptx", None)


def test_records_and_selection_refuse_what_they_cannot_hold():
    with pytest.raises(FormatRuleError, match="run: must be callable"):
        _case(None, lambda b, a: ONE)
    with pytest.raises(FormatRuleError, match="r.compared: must be a list of arch names"):
        v.format_result(v.Result("c", "kernel", "", "differs", None, compared=[80]), "ptx")
    assert v.Result("c", "kernel", "", "differs", None).as_dict()["compared"] == []
    with pytest.raises(FormatRuleError, match=r"groups: each must be one of \['kernel', 'official', 'mma'\]; got 'x'"):
        v.cases(groups=("x",))
    with pytest.raises(FormatRuleError, match=r"tiles: must be an int in \[1, 1024\]; got 2000"):
        v.cases(tiles=2000)
    with pytest.raises(FormatRuleError, match="arch: the gpu backend needs the device's arch; got None"):
        v.validate(backend="gpu", arch=None)


def test_a_slow_result_shows_its_seconds():
    res = v.Result("c", "kernel", "", "bit-identical", "sm_80", compared=["sm_80"], seconds=1.25)
    assert v.format_result(res, "ptx") == "[kernel] c: bit-identical (refsim.ptx = refsim.emulator at sm_80)  [1.2 s]"


# --------------------------------------------------------------------------- the zero-rule tiles and wgmma probes


def test_every_unmeasured_rule_is_an_mma_case_with_no_measured_arch():
    from refsim.arith import tensor_core_rules as rules

    by_name = {c.name: c for c in v.cases(groups=("mma",))}
    assert [r["name"] for r in v.unmeasured_rules()] == ["negzero-sum", "zero-product-exp", "f16-zero-floor"]
    for r in v.unmeasured_rules():
        case = by_name[r["case"]]
        assert case.verified == () and case.ptx_archs == tuple(r["archs"]) and r["status"] == "unverified"
        assert rules.rule(r["name"]).instruction.removeprefix("mma.sync.aligned.") in case.name
    case = by_name["rule f16-zero-floor [m16n8k16.row.col.f16.f16.f16.f16]"]
    assert "refsim 0x0, MMA-Sim 0x1" in case.what


def test_a_rule_tile_that_a_device_answers_mma_sims_way_differs(monkeypatch):
    # a device that writes +0 where refsim writes -0 (MMA-Sim's sign rule): the negzero-sum case differs at
    # exactly the even columns of its one tile (64 elements), and names the rule in the category report
    case = {c.name: c for c in v.cases(groups=("mma",))}["rule negzero-sum [m16n8k16.row.col.f32.f16.f16.f32]"]

    def mma_sim_device(kind, a, b, c, **kw):
        d = rmma.mma_reference(kind, "sm_90", a, b, c)
        return np.where(d == np.uint32(0x80000000), np.uint32(0), d).astype(np.uint32)
    monkeypatch.setattr(rmma, "mma_probe", mma_sim_device)
    res = v.run_case(case, "gpu", "sm_90")
    assert (res.verdict, res.matched, res.unverified) == ("differs", [], ["sm_90"])
    assert res.detail.endswith("by input category: rule negzero-sum 64")


def test_the_wgmma_probes_are_cases_and_only_the_block_scaled_kinds_stay_pending():
    names = v.pending()
    # block-scaled: mma.sync f8f6f4 and mxf8f6f4 5 x 5 types each, mxf4 1, mxf4nvf4 2; tcgen05.mma mxf8f6f4 25,
    # mxf4 1, mxf4nvf4 2 -> 53 + 28 = 81; no wgmma probe is pending any more
    assert len(names) == len(set(names)) == 81 and all(n.startswith("block-scaled ") for n in names)
    assert v.pending(only=("*m64n8k16*",)) == [] and v.pending(groups=("kernel",)) == []
    wg = [c for c in v.cases(groups=("mma",), tiles=1) if c.name.startswith("wgmma.")]
    # 242 probes, the 16 of f32.f16.f16 once more with A from registers
    assert len(wg) == len({c.name for c in wg}) == 242 + 16
    assert [c.name for c in v.cases(groups=("mma",), only=("*m64n256k32.satfinite.s32.u8.s8*",))] == [
        f"wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.u8.s8 {c}" for c in ("random", "extremes", "hugeC")]
    (rs,) = v.cases(groups=("mma",), only=("*m64n8k16.f32.f16.f16 noC, A from registers",))
    assert (rs.kind, rs.archs, rs.ptx_archs, rs.verified, rs.min_arch) == (
        "wgmma f32.f16.f16", ("sm_90",), ("sm_90",), (), "sm_90a")
    assert rs.what == "4 tiles x noC (scale-d 0, imm-scale 1); A from registers"
    # sm_90a PTX loads on an sm_90 device only; the ptx backend models it at sm_90 only
    assert v.applicable(rs, "gpu", "sm_90") and not v.applicable(rs, "gpu", "sm_89")
    assert not v.applicable(rs, "gpu", "sm_100") and not v.applicable(rs, "ptx", "sm_80")


def test_a_wgmma_case_runs_the_kernel_and_reports_its_kind():
    (case,) = v.cases(groups=("mma",), tiles=1, only=("*m64n8k16.f32.f16.f16 cancel",))
    res = v.run_case(case, "ptx", None)
    assert (res.verdict, res.compared, res.matched) == ("bit-identical", ["sm_90"], ["sm_90"])
    assert res.unverified == ["sm_90"]                          # no GPU has answered the f16 wgmma model
    assert res.as_dict()["kind"] == "wgmma f32.f16.f16"
    other = v.Result("c", "mma", "", "differs", "sm_90", kind="wgmma f32.f16.f16")
    assert v.kinds([res, other, v.Result("k", "kernel", "", "bit-identical", "sm_80")]) == {
        "wgmma f32.f16.f16": {"bit-identical": 1, "differs": 1}}
    with pytest.raises(FormatRuleError, match="results"):
        v.kinds(res)


def test_a_kernel_refsim_ptx_refuses_is_not_run_with_the_reason_not_a_pass():
    from refsim.ptx import PtxUnsupportedError

    def run(backend, arch):
        raise PtxUnsupportedError("kernel k, PTX line 9, column 2 `setmaxnreg.dec.sync.aligned.u32 40`: not\n modelled")

    res = v.run_case(_case(run, lambda b, a: ONE), "ptx", None)
    assert (res.verdict, res.compared, res.matched) == ("not-run", [], [])
    assert v.format_result(res, "ptx") == ("[kernel] toy M=1: NOT RUN: PtxUnsupportedError: kernel k, PTX line 9, "
                                           "column 2 `setmaxnreg.dec.sync.aligned.u32 40`: not modelled")
    ok = v.run_case(_case(lambda b, a: ONE, lambda b, a: ONE), "ptx", None)
    assert v.exit_status([res]) == 2 and v.exit_status([ok, res]) == 1


def test_the_hopper_kernels_are_kernel_cases_at_sm_90_only(monkeypatch):
    from refsim.cuda import gpu
    from refsim.errors import ToolchainError

    by = {c.name: c for c in v.cases(groups=("kernel",))}
    hop, dg = by["hopper_w4a16_gemm M=5 K=256 N=64"], by["deepgemm_fp8_gemm M=64 N=256 K=512 sms=4"]
    for c in (hop, dg):
        assert (c.fixed_arch, c.min_arch) == ("sm_90", "sm_90a")
        assert v.applicable(c, "gpu", "sm_90") and not v.applicable(c, "gpu", "sm_80")

    def no_gpu():
        raise ToolchainError("no CUDA driver in this test")
    monkeypatch.setattr(gpu, "_driver", no_gpu)
    for c in (hop, dg):                           # both take the gpu path (tests/cuda: the maps on a fake driver)
        res = v.run_case(c, "gpu", "sm_90")
        assert res.verdict == "error" and "no CUDA driver in this test" in res.detail, res.detail
    res = v.run_case(hop, "ptx", None)           # refsim.ptx runs the Hopper kernel: the emulator's bits
    assert res.verdict == "bit-identical", res.detail
