"""``refsim ptx stats``: per-kernel static instruction mix of a PTX file; errors as one line, exit 2.
``refsim ptx check``: vLLM's AWQ GEMM (tests/ptx/data/vllm_awq) against the awq emulator under its shape rule."""

from __future__ import annotations

import gzip
import hashlib
import re
import subprocess
import sys
from pathlib import Path

from refsim.cli import main

KERNELS = Path(__file__).resolve().parents[1] / "ptx" / "kernels"


def test_stats_counts_the_instructions_of_each_kernel(capsys):
    path = KERNELS / "reduce.ptx"
    assert main(["ptx", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    body = path.read_text().split(".entry block_sum(")[1].split(".entry")[0]
    bars = len(re.findall(r"^\s*bar\.sync", body, flags=re.M))
    assert re.search(rf"^  bar\s+{bars}\s", out.split("kernel shuffles")[0].split("kernel block_sum")[1], re.M)
    assert "kernel shuffles" in out and "refsim.ptx can execute this module: yes" in out


def test_stats_full_names_and_bad_file(capsys, tmp_path):
    assert main(["ptx", "stats", "--full", str(KERNELS / "mma.ptx")]) == 0
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in capsys.readouterr().out
    assert main(["ptx", "stats", str(tmp_path / "missing.ptx")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be an existing .cu or .ptx file" in err


def test_stats_names_the_kernels_refsim_cannot_run(capsys, tmp_path):
    path = tmp_path / "two.ptx"
    path.write_text(".version 8.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry bad()\n{\n.reg .f32 %f<4>;\ndiv.approx.f32 %f1, %f2, %f3;\n}\n"
                    ".visible .entry good()\n{\nret;\n}\n")
    assert main(["ptx", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "refsim.ptx runs it: no: kernel bad, PTX line 7" in out
    assert "refsim.ptx runs it: yes" in out.split("kernel good")[1]
    assert "refsim.ptx can execute this module: 1 of 2 kernels" in out


def test_stats_sass_lists_each_kernels_sass(capsys, monkeypatch):
    from refsim.ptx import sass

    recorded = sass.parse_nvdisasm((KERNELS.parent / "data" / "sass" / "mma_k8_f32.sm_90.sass").read_text())
    monkeypatch.setattr(sass, "sass", lambda text, arch: recorded)
    path = next((KERNELS.parent / "data" / "h100_replay" / "tc_k8_f32_sm80model").glob("*.ptx"))
    assert main(["ptx", "stats", str(path), "--arch", "sm_90", "--sass"]) == 0
    out = capsys.readouterr().out
    assert "SASS (sm_90, ptxas + nvdisasm): 32 instructions" in out
    assert "    /*0110*/  HMMA.1688.F32 R12, R2, R4, R12 ;" in out


def test_stats_sass_without_the_tools_is_one_error_line(capsys, monkeypatch):
    from refsim.ptx import sass

    monkeypatch.setattr(sass, "find_tool", lambda tool: None)
    assert main(["ptx", "stats", str(KERNELS / "mma.ptx"), "--sass"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SASS needs ptxas and nvdisasm" in err


def test_stats_of_a_cu_file_nvcc_rejects_prints_its_diagnostics_line_by_line(failing_nvcc, capsys, tmp_path):
    src = tmp_path / "bad.cu"
    src.write_text('extern "C" __global__ void k() {}\n')
    assert main(["ptx", "stats", str(src)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"refsim ptx: error: nvcc failed on {src} (-arch=sm_80):",
        f'{src}(3): error: identifier "undefined_name" is undefined',
        f'{src}(7): warning: variable "t" was declared but never referenced',
        f'1 error detected in the compilation of "{src}".']


VLLM_AWQ = KERNELS.parent / "data" / "vllm_awq"
VLLM_AWQ_ENTRY = "gemm_forward_4bit_cuda_m16nXk32"


def _vllm_awq_check(tmp_path, *options):
    """``refsim ptx check`` of vLLM's AWQ GEMM (tests/ptx/data/vllm_awq/README.md) with its launch and
    shape rule: (exit status, stdout, stderr)."""
    ptx_file = tmp_path / "awq_gemm_sm80.ptx"
    ptx_file.write_bytes(gzip.decompress((VLLM_AWQ / "awq_gemm_sm80.ptx.gz").read_bytes()))
    res = subprocess.run([sys.executable, "-m", "refsim", "ptx", "check", str(ptx_file), "--kernel", VLLM_AWQ_ENTRY,
                          "--launch", f"{VLLM_AWQ / 'launch.py'}:plan", "--fmt", "awq", "--legal", "n%128==0",
                          *options], capture_output=True, text=True, timeout=600)
    return res.returncode, res.stdout, res.stderr


def test_the_vllm_awq_ptx_is_the_one_its_readme_describes():
    text = gzip.decompress((VLLM_AWQ / "awq_gemm_sm80.ptx.gz").read_bytes())
    assert hashlib.sha256(text).hexdigest() == "bedcbdcba2c8f37ad2f9ac5eb6af6486a58deb835240919a09fbeef6031481ae"
    assert hashlib.sha256(text).hexdigest() in (VLLM_AWQ / "README.md").read_text()
    assert re.findall(r"^\.visible \.entry (\S+)\(", text.decode(), re.M) == [
        "_ZN4vllm3awq31gemm_forward_4bit_cuda_m16nXk32ILi128EEEviiP6__halfPiS3_S4_iiiS3_"]


def test_vllm_awq_bit_exact_fails_on_the_accumulation_with_the_rule_skipping_pinned_cases(tmp_path):
    # N % 128 == 0 leaves one of the four pinned awq cases (m 4, k 512, n 256, g32); unshrunk, the report
    # reads the kernel on its own terms: exact weights, a different accumulation (mma's fp32 sums)
    rc, out, err = _vllm_awq_check(tmp_path, "--max-examples", "0", "--no-shrink")
    assert rc == 1
    assert "the kernel's shape rule 'n%128==0': 3 pinned cases skipped, 1 pinned" in err
    assert "'m': 4, 'k': 512, 'n': 256, 'group_size': 32" in out
    assert "the weights the kernel used are right" in out
    assert "verdict: the weights are right; the difference is in the accumulation (its precision or its order)" in out
    assert "size: max |difference| 0.00391 vs max |output| 5.96: rounding-sized" in out


def test_vllm_awq_bit_exact_shrunk_case_is_one_fp32_chain(tmp_path):
    # shrunk to k 32, n 128 (two mma.m16n8k16 per output) the kernel's bits are refsim's fp32 FMA chain
    rc, out, err = _vllm_awq_check(tmp_path, "--max-examples", "0")
    assert rc == 1 and "3 pinned cases skipped" in err
    assert "case: {'m': 1, 'k': 32, 'n': 128, 'group_size': None" in out
    assert ("verdict: another legitimate order (check it with mode='accuracy'): the kernel's output equals "
            "refsim's emulation with one fp32 FMA chain over k ascending") in out


def test_vllm_awq_accuracy_with_fp32_accumulation_in_any_order_exits_0(tmp_path):
    rc, out, err = _vllm_awq_check(tmp_path, "--accuracy", "--accumulation", "fp32", "--order", "any")
    assert rc == 0, out + err
    assert ("1 pinned + 5 adversarial + 20 drawn cases within the bound of fp32 accumulation in any order "
            "everywhere") in out
    assert "the kernel's shape rule 'n%128==0' (3 pinned cases skipped)" in out
    assert re.search(r"bit-exact with refsim's order: no, \d+ of \d+ outputs differ", out)
