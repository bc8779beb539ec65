"""``refsim validate``: the ptx backend on CPU (small selections), the gpu backend against the fake cuda.core
of tests/cuda/fake_cuda.py (verdicts, matched arch models, difference reports by input category), the
exit statuses and the argument errors."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from refsim.arith import tensor_core_types
from refsim.cli import main
from refsim.cuda import gpu
from refsim.cuda import mma as rmma
from refsim.testing import validate as v
from refsim.testing import wgmma_probes

_spec = importlib.util.spec_from_file_location("fake_cuda", Path(__file__).parents[1] / "cuda" / "fake_cuda.py")
fake_cuda = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fake_cuda", fake_cuda)
_spec.loader.exec_module(fake_cuda)

K16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
K8_F16 = "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16"
BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
E4M3_E5M2 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"


def _run(capsys, *argv):
    try:
        code = main(["validate", *argv])
    except SystemExit as exit_:                 # argparse's own usage errors
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def _fake(monkeypatch, **kw):
    fake = fake_cuda.FakeCuda(**kw)
    monkeypatch.setattr(gpu, "_driver", lambda: fake)
    return fake


def test_ptx_backend_runs_each_group_against_refsims_own_answer(capsys):
    code, out, _ = _run(capsys, "--backend", "ptx", "--only", "gptq_gemv M=1*", "--only", "off_anyprec_m1*",
                        "--only", K16)
    assert code == 0
    lines = [re.sub(r"  \[[0-9.]+ s\]$", "", ln) for ln in out.splitlines() if ln.startswith("[")]
    assert lines == [
        "[kernel] gptq_gemv M=1 K=64 N=32 g32 gptq: bit-identical (refsim.ptx = refsim.emulator at sm_80)",
        "[official] off_anyprec_m1k1024n64_b3: bit-identical (refsim.ptx = the H100's bytes at sm_90)",
        f"[mma] {K16}: bit-identical (refsim.ptx = refsim.arith at sm_80, sm_86, sm_87, sm_89, sm_90); "
        "model not measured on hardware at sm_87"]
    assert out.splitlines()[-1] == ("summary: 3 bit-identical, 0 differ, 0 errors, 0 not run (refsim.ptx refuses an "
                                    "instruction), 0 without a model on their archs (exit 0)")


def test_ptx_backend_with_an_arch_runs_only_the_forms_modelled_there(capsys):
    code, out, _ = _run(capsys, "--backend", "ptx", "--arch", "sm_80", "--group", "mma", "--only", "*e4m3*")
    assert code == 2 and "no case matches the selection" in out           # fp8 mma needs sm_89
    code, out, _ = _run(capsys, "--backend", "ptx", "--arch", "sm_89", "--group", "mma", "--only", "*e4m3.e5m2*")
    assert code == 0
    assert (f"[mma] {E4M3_E5M2}: bit-identical (refsim.ptx = refsim.arith at sm_89); model not measured on "
            "hardware at sm_89") in out


def test_ptx_backend_names_the_arch_whose_answer_differs(monkeypatch):
    real = rmma.mma_reference

    def off_by_one_at_sm90(kind, arch, *regs, **kw):
        d = real(kind, arch, *regs, **kw)
        if arch == "sm_90":
            d[0, 0, 0] ^= np.uint32(1)
        return d
    monkeypatch.setattr(rmma, "mma_reference", off_by_one_at_sm90)
    (r,) = v.validate(backend="ptx", arch=None, groups=("mma",), only=(BF16,))
    assert (r.verdict, r.arch, r.compared) == ("differs", None, ["sm_80", "sm_86", "sm_87", "sm_89", "sm_90"])
    assert r.matched == ["sm_80", "sm_86", "sm_87", "sm_89"] and r.detail.startswith("at sm_90:\n")
    line = v.format_result(r, "ptx").splitlines()[0]
    assert line.startswith(f"[mma] {BF16}: DIFFERS at sm_90 (bit-identical at sm_80, sm_86, sm_87, sm_89); model "
                           "not measured on hardware at sm_80, sm_86, sm_87, sm_89")
    assert "by input category: random" in r.detail


def test_gpu_backend_names_the_matching_model_and_reports_differences_by_category(monkeypatch, capsys):
    # an "sm_90" device whose tensor cores compute like sm_80: the sm_90 model must be reported as differing
    _fake(monkeypatch, arch="sm_90", exec_arch="sm_80")
    code, out, _ = _run(capsys, "--only", K16, "--only", "awq*", "--json")
    doc = json.loads(out)
    assert (doc["backend"], doc["arch"], doc["device"]["name"]) == ("gpu", "sm_90", "Fake H100")
    by = {c["name"]: c for c in doc["cases"]}
    assert by["awq_gemv M=2 K=48 N=24 g16"]["verdict"] == "bit-identical"
    k16 = by[K16]
    assert k16["verdict"] == "differs" and k16["matched"] == ["sm_80", "sm_86", "sm_87", "sm_89"]
    assert k16["compared"] == list(v.TENSOR_CORE_ARCHS) and "by input category: random" in k16["detail"]
    assert doc["summary"] == {"bit-identical": 1, "differs": 1, "error": 0, "not-run": 0, "no-model": 0}
    assert doc["kinds"] == {K16: {"differs": 1}}
    assert code == doc["exit_status"] == 1


def test_gpu_backend_on_an_arch_refsim_does_not_model_gives_no_verdict_and_the_matching_models(monkeypatch, capsys):
    _fake(monkeypatch, arch="sm_100", exec_arch="sm_90", name="Fake B200")
    code, out, _ = _run(capsys, "--only", K16, "--only", "awq*", "--json")
    by = {c["name"]: c for c in json.loads(out)["cases"]}
    assert by["awq_gemv M=2 K=48 N=24 g16"]["verdict"] == "bit-identical"      # arch-independent
    assert by[K16]["verdict"] == "no-model" and by[K16]["matched"] == ["sm_90"]
    assert code == 1


def test_gpu_backend_is_the_default_when_a_gpu_is_usable_and_agrees_with_refsim(monkeypatch, capsys):
    fake = _fake(monkeypatch, arch="sm_90")
    code, out, _ = _run(capsys, "--only", "marlin_gemm M=20*", "--only", K16, "--only", "off_anyprec_m4*")
    assert out.splitlines()[0] == "refsim validate: backend gpu, Fake H100 (sm_90), seed 0"
    assert "[kernel] marlin_gemm M=20 K=256 N=256 g128 sms=3: bit-identical (sm_90 model)" in out
    assert f"[mma] {K16}: bit-identical (sm_90 model)" in out
    assert "[official] off_anyprec_m4k1024n64_b4: bit-identical (sm_90 model)" in out
    assert code == 0
    assert any(c[0] == "set_attribute" for c in fake.calls)           # marlin M=20 needs 51,200 B


def test_a_gpu_fault_is_that_cases_error_and_all_errors_exit_2(monkeypatch, capsys):
    _fake(monkeypatch, fail={"sync": "CUDA_ERROR_ILLEGAL_INSTRUCTION"})
    code, out, _ = _run(capsys, "--only", "awq*", "--only", "gptq_gemv M=1*")
    assert out.count("ERROR: GpuError: backend='gpu': launch 0 of 1") == 2
    assert "CUDA_ERROR_ILLEGAL_INSTRUCTION" in out and code == 2


def test_every_modelled_form_and_every_kernel_is_a_case():
    names = {c.name for c in v.cases(groups=("kernel", "mma"))}
    from refsim.cuda import kernels

    assert {rmma.instruction(k, sat) for k, sat in rmma.forms()} <= names
    assert {k.ptx for k in tensor_core_types.modelled()} <= names
    assert {k.name for k in kernels()} - {"mma_probe", "wgmma_probe"} <= {n.split()[0] for n in names}
    assert {p.name for p in wgmma_probes.probes()} <= names


def test_gpu_backend_runs_the_bf16_tf32_and_fp8_probes(monkeypatch, capsys):
    fake = _fake(monkeypatch, arch="sm_90")
    code, out, _ = _run(capsys, "--group", "mma", "--only", "mma.sync*bf16*", "--only", "rule*bf16*", "--only",
                        "mma.sync*tf32*", "--only", E4M3_E5M2,
                        "--only", K8_F16, "--tiles", "1")
    lines = [re.sub(r"  \[[0-9.]+ s\]$", "", ln) for ln in out.splitlines() if ln.startswith("[")]
    assert lines == [f"[mma] {K8_F16}: bit-identical (sm_90 model); model not measured on hardware at sm_90",
                     f"[mma] {BF16}: bit-identical (sm_90 model)",
                     "[mma] mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32: bit-identical (sm_90 model)",
                     "[mma] mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: bit-identical (sm_90 model)",
                     f"[mma] {E4M3_E5M2}: bit-identical (sm_90 model)",
                     # the bf16 zero-rule tile: the fake device computes refsim's sm_90 model, which the tile
                     # cannot tell from sm_80's; no GPU has answered the rule, so sm_90 stays unmeasured
                     "[mma] rule zero-product-exp [m16n8k16.row.col.f32.bf16.bf16.f32]: bit-identical (sm_90 model; "
                     "also matches sm_80, sm_86, sm_87, sm_89); model not measured on hardware at sm_90"]
    assert code == 0
    assert ("get_kernel", "probe_m16n8k32_f32_e4m3_e5m2_f32") in {c[:2] for c in fake.calls}


def test_an_older_gpu_does_not_run_the_fp8_probes_and_says_so(monkeypatch, capsys):
    _fake(monkeypatch, arch="sm_80", name="Fake A100")
    code, out, _ = _run(capsys, "--group", "mma", "--only", "mma.sync*e4m3*", "--only", K16, "--tiles", "1")
    assert "not run: 3 cases whose PTX needs a newer arch than sm_80" in out
    assert f"[mma] {K16}: bit-identical (sm_80 model; also matches sm_86, sm_87, sm_89)" in out
    assert code == 0


@pytest.mark.parametrize("argv,fragment", [
    (["--backend", "ptx", "--arch", "sm_75"], "--arch: must be one of"),
    (["--backend", "ptx", "--seed", "-1"], "seed"),
    (["--tiles", "0"], "--tiles"),
    (["--group", "nope"], "--group"),
])
def test_bad_arguments_exit_2_with_one_line(capsys, argv, fragment):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1


def test_arch_with_the_gpu_backend_and_a_missing_gpu_exit_2(monkeypatch, capsys):
    _fake(monkeypatch)
    code, _, err = _run(capsys, "--backend", "gpu", "--arch", "sm_80")
    assert code == 2 and "--arch" in err

    def missing():
        raise gpu.ToolchainError("backend='gpu' needs cuda.core: pip install 'refsim[gpu]'")
    monkeypatch.setattr(gpu, "_driver", missing)
    code, _, err = _run(capsys, "--backend", "gpu")
    assert code == 2 and "refsim[gpu]" in err
    code, out, _ = _run(capsys, "--only", "awq*")                  # no --backend: falls back to ptx
    assert code == 0 and "backend ptx" in out


def test_json_lists_the_unmeasured_rules_the_pending_kinds_and_the_wgmma_kinds(capsys):
    code, out, _ = _run(capsys, "--backend", "ptx", "--group", "mma", "--only", "rule negzero*", "--json")
    doc = json.loads(out)
    assert code == 0 and [c["name"] for c in doc["cases"]] == ["rule negzero-sum [m16n8k16.row.col.f32.f16.f16.f32]"]
    assert doc["cases"][0]["unverified"] == ["sm_80", "sm_86", "sm_87", "sm_89", "sm_90"]
    assert [(r["name"], r["status"], r["refsim_d"], r["mma_sim_d"]) for r in doc["unmeasured_rules"]] == [
        ("negzero-sum", "unverified", "0x80000000", "0x0"), ("zero-product-exp", "unverified", "0x35810002", "0x35800000"),
        ("f16-zero-floor", "unverified", "0x0", "0x1")]
    assert doc["pending"] == []
    # (the entries of tests/cuda/test_wgmma.py's executor test: their compiled translations are cached once)
    code, out, _ = _run(capsys, "--backend", "ptx", "--group", "mma", "--tiles", "1", "--json", "--only",
                        "*m64n8k16.f32.f16.f16 noC", "--only", "*m64n8k16.f32.f16.f16 negated, A from registers")
    doc = json.loads(out)
    assert [c["name"] for c in doc["cases"]] == ["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 negated, A from registers",
                                                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 noC"]
    assert code == 0 and doc["kinds"] == {"wgmma f32.f16.f16": {"bit-identical": 2}}
    code, out, _ = _run(capsys, "--backend", "ptx", "--group", "mma", "--only", "rule f16*", "--only", "block-scaled*")
    assert "rules refsim states but no GPU has measured: negzero-sum, zero-product-exp, f16-zero-floor" in out
    assert "pending: 81 block-scaled kinds defined as data, not run (no block-scaled mma kernel yet)" in out and code == 0
    code, out, _ = _run(capsys, "--list", "--group", "mma", "--only", "*m64n8k16.f16* noC", "--only", "*mma.sync*mxf4.*")
    assert out == ("[mma] wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 noC  (4 tiles x noC (scale-d 0, imm-scale 1); "
                   "A and B from no-swizzle K-major shared memory; sm_90)\n"
                   "[mma] block-scaled mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1"
                   ".f32.ue8m0  (pending: defined as data, no kernel runs it yet)\n")


def test_gpu_backend_runs_the_wgmma_probes_on_sm_90_only(monkeypatch, capsys):
    fake = _fake(monkeypatch, arch="sm_90")
    code, out, _ = _run(capsys, "--group", "mma", "--tiles", "1", "--json", "--only", "*m64n8k16.f32.f16.f16 spread")
    doc = json.loads(out)
    (case,) = doc["cases"]
    assert (case["verdict"], case["compared"], case["matched"], case["unverified"]) == (
        "bit-identical", ["sm_90"], ["sm_90"], ["sm_90"])
    assert doc["kinds"] == {"wgmma f32.f16.f16": {"bit-identical": 1}} and code == 0
    assert ("get_kernel", "probe_m64n8k16_f32_f16_f16") in {c[:2] for c in fake.calls}
    _fake(monkeypatch, arch="sm_100", name="Fake B200")
    code, out, _ = _run(capsys, "--group", "mma", "--tiles", "1", "--only", "*m64n8k16.f32.f16.f16 spread")
    assert ("not run: 1 cases whose PTX needs a newer arch than sm_100 or is arch-specific to another SM (sm_90a: "
            "sm_90 only)") in out and code == 2
