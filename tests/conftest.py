"""Fixtures shared across tests/ folders: a stand-in nvcc that rejects every source.

Used by the toolchain (tests/ptx/test_toolchain.py), refsim.cuda.user_kernel (tests/cuda/test_user.py) and
``refsim ptx stats`` (tests/commands/test_ptx.py) tests: nvcc's diagnostics must keep their lines and name the
user's file, on a machine without nvcc.
"""

from __future__ import annotations

import stat

import pytest


FAILING_NVCC = """#!/bin/sh
# a stand-in nvcc that rejects every source the way nvcc does: diagnostics on stderr naming the file it got
if [ "$1" = "--version" ]; then echo "fake nvcc 0.2"; exit 0; fi
src=""; prev=""
for a in "$@"; do case "$a" in *.cu) [ "$prev" != "-o" ] && src="$a";; esac; prev="$a"; done
echo "$src(3): error: identifier \\"undefined_name\\" is undefined" >&2
echo "$src(7): warning: variable \\"t\\" was declared but never referenced" >&2
echo "" >&2
echo "1 error detected in the compilation of \\"$src\\"." >&2
exit 1
"""


@pytest.fixture
def failing_nvcc(tmp_path, monkeypatch):
    """$NVCC set to FAILING_NVCC and an empty PTX cache for this test; returns the executable."""
    exe = tmp_path / "nvcc"
    exe.write_text(FAILING_NVCC)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("NVCC", str(exe))
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path / "cache"))
    return exe
