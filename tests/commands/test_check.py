"""``refsim check MODULE:FUNCTION``: exit 0 on a matching kernel, 1 with the report on a wrong one,
2 with one stderr line for bad arguments."""

from __future__ import annotations

from refsim.cli import main

KERNELS = '''
import numpy as np
from refsim.arith import tensor_core as tc

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


LAUNCH = '''
import numpy as np
from refsim.cuda import LaunchPlan
from refsim.formats import anyprec_kernel as ak

def plan(x, qweight, lut):
    m, n, k, bits = ak.check_inputs(x, qweight, lut, qweight.shape[0])
    out = np.zeros((m, n), np.float16)
    args = (x, qweight, lut, out, np.int32(m), np.int32(n), np.int32(k), np.int32(bits),
            np.int32(ak.plan(m, n, k, bits).chunks))
    return LaunchPlan(grid=-(-n // 4), block=128, args=args, out=out, shared_bytes=4 * (1 << bits) * 2)
'''


def test_a_ptx_entry_runs_through_refsim_ptx_with_its_launch(tmp_path, capsys):
    from pathlib import Path

    import refsim

    ptx_file = Path(refsim.__file__).parent / "cuda" / "ptx" / "anyprec.sm_80.ptx"
    launch = tmp_path / "launch.py"
    launch.write_text(LAUNCH)
    # the committed PTX of refsim's own anyprec.cu: no compiler needed
    assert main(["check", f"{ptx_file}:anyprec_gemv", "--launch", f"{launch}:plan", "--fmt", "anyprec",
                 "--seed", "0", "--max-examples", "0"]) == 0
    assert "cases match" in capsys.readouterr().out
    assert main(["check", f"{ptx_file}:anyprec_gemv", "--fmt", "anyprec"]) == 2
    assert "--launch" in capsys.readouterr().err


def test_refsim_ptx_check_is_the_same_check(tmp_path, capsys):
    from pathlib import Path

    import refsim

    ptx_file = Path(refsim.__file__).parent / "cuda" / "ptx" / "anyprec.sm_80.ptx"
    launch = tmp_path / "launch.py"
    launch.write_text(LAUNCH.replace("lut, out,", "(lut * np.float16(2)).astype(np.float16), out,"))
    # a launch that doubles the table: the entry runs and the check reports the mismatch (exit 1)
    assert main(["ptx", "check", str(ptx_file), "--kernel", "anyprec_gemv", "--launch", f"{launch}:plan",
                 "--fmt", "anyprec", "--seed", "0", "--max-examples", "0", "--no-shrink"]) == 1
    assert "anyprec kernel differs" in capsys.readouterr().out


def test_the_cli_lists_every_harness_format_and_conversion_target():
    # the parser spells the choices out (no heavy imports to build it); they must stay the real ones
    from refsim.commands import check, convert, quantize
    from refsim.testing.cases import FORMATS
    from refsim.io.convert import TARGETS
    from refsim.io.quantize import METHODS
    assert check.FORMAT_NAMES == tuple(sorted(FORMATS))
    assert convert.TARGETS == TARGETS
    assert quantize.METHODS == METHODS
