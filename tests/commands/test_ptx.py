"""``refsim ptx stats``: per-kernel static instruction mix of a PTX file; errors as one line, exit 2."""

from __future__ import annotations

import re
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
