"""``refsim validate``: the ptx backend on CPU (small selections), the gpu backend against the fake cuda.core
of tests/cuda/fake_cuda.py (verdicts, matched arch models, difference reports by input category), the
exit statuses and the argument errors."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from refsim.cli import main
from refsim.cuda import gpu
from refsim.cuda import validate as v

_spec = importlib.util.spec_from_file_location("fake_cuda", Path(__file__).parents[1] / "cuda" / "fake_cuda.py")
fake_cuda = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fake_cuda", fake_cuda)
_spec.loader.exec_module(fake_cuda)

K16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
K8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"


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
        "[kernel] gptq_gemv M=1 K=64 N=32 g32 gptq: bit-identical (refsim.ptx at sm_80 = refsim.emulator)",
        "[official] off_anyprec_m1k1024n64_b3: bit-identical (refsim.ptx at sm_90 = the H100's bytes)",
        f"[mma] {K16}: bit-identical (refsim.ptx at sm_80 = refsim.arith.tensor_core)"]
    assert out.splitlines()[-1] == "summary: 3 bit-identical, 0 differ, 0 errors, 0 without a model on sm_80 (exit 0)"


def test_ptx_backend_lists_only_the_forms_modelled_at_its_arch(capsys):
    code, out, _ = _run(capsys, "--backend", "ptx", "--arch", "sm_90", "--group", "mma", "--only", "*f16.f16.f32")
    assert code == 0 and K16 in out and K8 not in out      # refsim has no sm_90 model of m16n8k8


def test_gpu_backend_names_the_matching_model_and_reports_differences_by_category(monkeypatch, capsys):
    # an "sm_90" device whose tensor cores compute like sm_80: the sm_90 model must be reported as differing
    _fake(monkeypatch, arch="sm_90", exec_arch="sm_80")
    code, out, _ = _run(capsys, "--only", K16, "--only", K8, "--only", "awq*", "--json")
    doc = json.loads(out)
    assert (doc["backend"], doc["arch"], doc["device"]["name"]) == ("gpu", "sm_90", "Fake H100")
    by = {c["name"]: c for c in doc["cases"]}
    assert by["awq_gemv M=2 K=48 N=24 g16"]["verdict"] == "bit-identical"
    k16 = by[K16]
    assert k16["verdict"] == "differs" and k16["matched"] == ["sm_80", "sm_86", "sm_87", "sm_89"]
    assert k16["compared"] == list(v.TENSOR_CORE_ARCHS) and "by input category: random" in k16["detail"]
    k8 = by[K8]
    assert k8["verdict"] == "no-model" and k8["matched"] == ["sm_80", "sm_86", "sm_87", "sm_89"]
    assert doc["summary"] == {"bit-identical": 1, "differs": 1, "error": 0, "no-model": 1}
    assert code == doc["exit_status"] == 1


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


def test_exit_status_rules():
    r = lambda verdict: v.Result("c", "kernel", "", verdict, "sm_90")          # noqa: E731
    assert v.exit_status([r("bit-identical"), r("bit-identical")]) == 0
    assert v.exit_status([r("bit-identical"), r("differs")]) == 1
    assert v.exit_status([r("bit-identical"), r("no-model")]) == 1
    assert v.exit_status([r("bit-identical"), r("error")]) == 1
    assert v.exit_status([r("error")]) == v.exit_status([]) == 2


def test_every_modelled_form_and_every_kernel_is_a_case():
    names = {c.name for c in v.cases(groups=("kernel", "mma"))}
    from refsim.cuda import kernels
    from refsim.cuda import mma as rmma

    assert {k.instruction for k in rmma.modelled()} <= names
    assert {k.name for k in kernels()} - {"mma_probe"} <= {n.split()[0] for n in names}


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


def test_a_listed_form_without_an_arith_route_has_no_verdict_on_the_ptx_backend(monkeypatch):
    from refsim.arith import tensor_core

    monkeypatch.setattr(tensor_core, "MODELLED", (("m16n8k16", "bf16", "f32", ("sm_80", "sm_90")),), raising=False)
    (r,) = v.validate(backend="ptx", arch="sm_80", groups=("mma",))
    assert r.name == "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    assert r.verdict == "no-model" and v.exit_status([r]) == 1
