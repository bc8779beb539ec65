"""ptx.compile: nvcc discovery ($NVCC first), the cache keyed by source/arch/options/version, and the
ToolchainError that says how to install a compiler."""

from __future__ import annotations

import os
import stat

import pytest

from refsim import ptx
from refsim.errors import ToolchainError
from refsim.ptx import toolchain

FAKE_NVCC = """#!/bin/sh
# a stand-in nvcc: --version prints a version, a compile writes PTX naming its -arch and counts calls
if [ "$1" = "--version" ]; then echo "fake nvcc 0.1"; exit 0; fi
echo x >> "{calls}"
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
printf '.version 8.0\\n.target %s\\n' "$1" > "$out"
"""


@pytest.fixture
def fake_nvcc(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    exe = tmp_path / "nvcc"
    exe.write_text(FAKE_NVCC.replace("{calls}", str(calls)))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("NVCC", str(exe))
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path / "cache"))
    return exe, calls


def test_nvcc_env_wins_and_results_are_cached(fake_nvcc):
    exe, calls = fake_nvcc
    assert toolchain.find_nvcc() == exe
    text = ptx.compile("__global__ void k() {}", arch="sm_86")
    assert "-arch=sm_86" in text
    assert ptx.compile("__global__ void k() {}", arch="sm_86") == text
    assert calls.read_text().count("x") == 1                          # the second call hit the cache
    ptx.compile("__global__ void k() {}", arch="sm_80")               # another arch: compiled again
    ptx.compile("__global__ void k() {}", arch="sm_80", options=("-O1",))
    assert calls.read_text().count("x") == 3
    assert len(list((toolchain.cache_dir()).glob("*.ptx"))) == 3


def test_missing_compiler_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(toolchain, "_wheel_tool", lambda tool: None)
    with pytest.raises(ToolchainError, match=r'pip install "refsim\[cuda\]"'):
        ptx.compile("__global__ void k() {}")
    monkeypatch.setenv("NVCC", str(tmp_path / "no-such-nvcc"))
    with pytest.raises(ToolchainError, match="not an executable"):
        toolchain.find_nvcc()


def test_wheel_nvcc_is_found_under_site_packages_nvidia(monkeypatch, tmp_path):
    exe = tmp_path / "nvidia" / "cuda_nvcc" / "bin" / "nvcc"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.setattr(toolchain.sys, "path", [str(tmp_path)])
    monkeypatch.setattr(toolchain.sysconfig, "get_paths", lambda: {"purelib": str(tmp_path), "platlib": str(tmp_path)})
    assert toolchain.find_nvcc() == exe
    assert os.access(exe, os.X_OK)


@pytest.mark.nvcc
@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc is not installed")
def test_readme_example_runs(capsys):
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Run a CUDA kernel without a GPU")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("[1.  1.5 2. ] ")          # y = 1 + 0.5 * x for x = 0, 1, 2 (then the count)



def test_nvcc_diagnostics_keep_their_lines_and_name_the_callers_file(failing_nvcc):
    from refsim.errors import CompileError

    with pytest.raises(CompileError) as exc:
        ptx.compile("__global__ void k() {}", arch="sm_86", options=("-O3",), source_name="kernels/my.cu")
    assert str(exc.value).splitlines() == [
        "nvcc failed on kernels/my.cu (-arch=sm_86 -O3):",
        'kernels/my.cu(3): error: identifier "undefined_name" is undefined',
        'kernels/my.cu(7): warning: variable "t" was declared but never referenced',
        '1 error detected in the compilation of "kernels/my.cu".']
    assert isinstance(exc.value, ToolchainError)


def test_a_source_from_no_file_keeps_the_compiled_copys_path(failing_nvcc):
    with pytest.raises(ToolchainError) as exc:
        ptx.compile("__global__ void k() {}")
    head, first = str(exc.value).splitlines()[:2]
    copy = head.removeprefix("nvcc failed on ").removesuffix(" (-arch=sm_80):")
    assert copy.endswith("/kernel.cu") and "refsim-ptx-" in copy
    assert first == f'{copy}(3): error: identifier "undefined_name" is undefined'
