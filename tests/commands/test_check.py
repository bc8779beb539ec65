"""``refsim check MODULE:FUNCTION``: exit 0 on a matching kernel, 1 with the report on a wrong one,
2 with one stderr line for bad arguments."""

from __future__ import annotations

from refsim.cli import main

KERNELS = '''
import numpy as np
from refsim.emulator import tensor_core as tc

def good(A, B, C):
    return tc.mma_int(A, B, C)

def off_by_one(A, B, C):
    return tc.mma_int(A, B, C) + np.int32(1)
'''


def _module(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def test_matching_kernel_exits_0(tmp_path, capsys):
    assert main(["check", f"{_module(tmp_path)}:good", "--fmt", "mma_s4", "--seed", "0", "--max-examples", "3"]) == 0
    assert "cases match" in capsys.readouterr().out


def test_wrong_kernel_exits_1_with_the_report(tmp_path, capsys):
    assert main(["check", f"{_module(tmp_path)}:off_by_one", "--fmt", "mma_s4", "--seed", "0"]) == 1
    out = capsys.readouterr().out
    assert "mma_s4 kernel differs" in out and "difference 1" in out and "rebuild_case" in out


def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys):
    assert main(["check", f"{_module(tmp_path)}:good", "--fmt", "mma_s4", "--sms", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sms: must be >= 1; got 0" in err[0]
    assert main(["check", "no_such_module_xyz:f"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err
