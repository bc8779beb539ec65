"""``refsim check MODULE:FUNCTION``: exit 0 only with a verdict that the kernel matches, 1 with the
report on a wrong one or when no verdict was reached (whatever way the kernel ends its process),
2 with one stderr line for bad arguments. Attacks on the verdict: test_check_hostile.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from refsim.cli import build_parser, main
from refsim.commands import check

KERNELS = '''
import numpy as np
from refsim.arith.integer_mma import mma_int

def good(A, B, C):
    return mma_int(A, B, C)

def off_by_one(A, B, C):
    return mma_int(A, B, C) + np.int32(1)
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


EXITS = '''
import ctypes, os, signal, sys
from refsim.arith.integer_mma import mma_int

def sys_exit(A, B, C):
    sys.exit(0)

def os_exit(A, B, C):
    os._exit(0)

def keyboard_interrupt(A, B, C):
    raise KeyboardInterrupt

def segfault(A, B, C):
    ctypes.string_at(0)

def sigkill(A, B, C):
    os.kill(os.getpid(), signal.SIGKILL)

def spin(A, B, C):
    while True:
        pass

def spin_ignoring_the_interrupt(A, B, C):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        pass

def zeroes_B(A, B, C):
    D = mma_int(A, B, C)
    B[...] = 0
    return D
'''

# (kernel, stream, words the message must contain); every one must end `refsim check` with status 1
EXIT_PATHS = [
    ("sys_exit", "out", "kernel called sys.exit(0)"),
    ("os_exit", "out", "mma_s4 kernel ended its process during a kernel call: it exited with status 0"),
    ("keyboard_interrupt", "out", "mma_s4 kernel raised KeyboardInterrupt"),
    ("segfault", "out", "mma_s4 kernel ended its process during a kernel call: it was killed by SIGSEGV"),
    ("sigkill", "out", "mma_s4 kernel ended its process during a kernel call: it was killed by SIGKILL"),
    ("spin", "out", "did not return within deadline=5.0 s (during a kernel call); its process was killed"),
    ("spin_ignoring_the_interrupt", "out", "did not return within deadline=5.0 s (during a kernel call)"),
    ("zeroes_B", "out", "modified its input 'B' (input 2 of 3"),
]


@pytest.mark.slow
@pytest.mark.parametrize("kernel, stream, words", EXIT_PATHS, ids=[k for k, _, _ in EXIT_PATHS])
def test_no_exit_path_of_the_kernel_ends_check_with_status_0(refsim_check, kernel, stream, words):
    rc, out, err = refsim_check(EXITS, f"@{kernel}", "--fmt", "mma_s4", "--seed", "0", "--deadline", "5")
    assert rc == 1, (out, err)
    assert words in (out if stream == "out" else err), (out, err)
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_module_that_exits_while_loading_is_a_named_error(refsim_check):
    rc, out, err = refsim_check("import sys\nsys.exit(0)\n", "@k", "--fmt", "mma_s4")
    assert rc == 2 and "kernel: importing" in err and "raised SystemExit" in err
    rc, out, err = refsim_check("import os\nos._exit(0)\n", "@k", "--fmt", "mma_s4")
    assert rc == 1 and "no verdict: the kernel's process exited with status 0 while importing the kernel" in err


def test_the_default_deadline_applies_without_the_option():
    args = build_parser().parse_args(["check", "m:f", "--fmt", "mma_s4"])
    assert args.deadline == check.DEFAULT_DEADLINE == 60.0
    assert build_parser().parse_args(["check", "m:f", "--deadline", "none"]).deadline is None


@pytest.mark.slow
def test_without_fmt_the_format_is_inferred_from_the_parameter_names_and_said(refsim_check):
    src = "from refsim.emulator import anyprec_kernel as ek\n" \
          "def gemv(x, qweight, lut):\n    return ek.anyprec_gemv_admissible(x, qweight, lut, qweight.shape[0]).reference\n" \
          "def mma(A, B, C):\n    return None\n"
    rc, out, err = refsim_check(src, "@gemv", "--seed", "0", "--max-examples", "1")
    assert rc == 0 and "checking it as anyprec" in err and out.startswith("anyprec: ")
    rc, out, err = refsim_check(src, "@mma")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "fmt: required" in err and "'mma_m16n8k16', 'mma_m16n8k16_f16', 'mma_s4'" in err


CHAIN = '''
import numpy as np
from refsim.arith import fp
from refsim.formats import gptq

def gemv(x, qweight, qzeros, scales, g_idx):
    # dequantize as the format says, then one fp32 FMA chain over k: another legitimate order
    ck = gptq.GPTQCheckpoint(qweight, qzeros, scales, g_idx, 4, "gptq")
    W = fp.cvt_f16_to_f32(gptq.dequantize(ck))
    acc = np.zeros((x.shape[0], W.shape[1]), np.float32)
    for k in range(W.shape[0]):
        acc = fp.f32_fma(fp.cvt_f16_to_f32(x[:, k:k + 1]), W[k:k + 1], acc, fused=True)
    return fp.cvt_f32_to_f16(acc)
'''


@pytest.mark.slow
def test_accuracy_mode_from_the_command_line(refsim_check):
    rc, out, err = refsim_check(CHAIN, "@gemv", "--fmt", "gptq", "--seed", "0", "--max-examples", "3",
                                 "--no-shrink")
    assert rc == 1 and "verdict: another legitimate order" in out
    rc, out, err = refsim_check(CHAIN, "@gemv", "--fmt", "gptq", "--seed", "0", "--max-examples", "3",
                                 "--accuracy", "--accumulation", "fp32", "--order", "sequential")
    assert rc == 0, (out, err)
    assert "within the bound of fp32 accumulation in sequential order everywhere" in out
    assert "bit-exact with refsim's order: no" in out


_TMP = Path(tempfile.gettempdir()) / "refsim-ptx-k2j1"     # where refsim.ptx.compile writes its copy
NVCC_FAILURE = (f'nvcc failed (/usr/bin/nvcc -arch=sm_80 -ptx {_TMP}/kernel.cu -o {_TMP}/kernel.ptx):\n'
                f'{_TMP}/kernel.cu(3): error: identifier "undefined_name" is undefined\n\n'
                f'1 error detected in the compilation of "{_TMP}/kernel.cu".')


def test_compiler_errors_name_the_users_file_and_line():
    from refsim.testing.harness import compiler_message

    msg = compiler_message(NVCC_FAILURE, "kernels/my_gemv.cu", "sm_80")
    assert msg.startswith("kernels/my_gemv.cu: nvcc cannot compile it for sm_80:\n")
    assert "kernels/my_gemv.cu(3): error: identifier" in msg and "refsim-ptx" not in msg
    assert 'compilation of "kernels/my_gemv.cu"' in msg


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the cuda extra) on PATH")
def test_compiler_errors_name_the_users_file_and_line_with_nvcc(tmp_path):
    (tmp_path / "bad.cu").write_text('extern "C" __global__ void k(float *y) {\n  int i = threadIdx.x;\n'
                                     '  y[i] = undefined_name + 1.0f;\n}\n')
    (tmp_path / "launch.py").write_text("def plan(*inputs):\n    return None\n")
    res = subprocess.run([sys.executable, "-m", "refsim", "check", "bad.cu:k", "--launch", "launch.py:plan", "--fmt",
                          "anyprec"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 2 and res.stderr.startswith("refsim check: error: ")
    assert "\nbad.cu(3): error: identifier" in res.stderr and "refsim-ptx" not in res.stderr


@pytest.mark.slow
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys):
    assert main(["check", f"{_module(tmp_path)}:good", "--fmt", "mma_s4", "--sms", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sms: must be >= 1; got 0" in err[0]
    assert main(["check", "no_such_module_xyz:f"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


LAUNCH = '''
import numpy as np
from refsim.cuda import LaunchPlan
from refsim.formats import anyprec_plan as ak

def plan(x, qweight, lut):
    m, n, k, bits = ak.check_inputs(x, qweight, lut, qweight.shape[0])
    out = np.zeros((m, n), np.float16)
    p = ak.plan(m, n, k, bits)   # a K-split launch (M = 1, K > 4096, 7-8 bits): slices of 4 chunks
    args = (x, qweight, lut, out, np.int32(m), np.int32(n), np.int32(k), np.int32(bits),
            np.int32(4 if p.ksplit > 1 else p.chunks))
    return LaunchPlan(grid=-(-n // 4), block=128, args=args, out=out, shared_bytes=4 * (1 << bits) * 2)
'''


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_the_seed_defaults_to_0_and_the_progress_prints_it(tmp_path, capfd):
    assert main(["check", f"{_module(tmp_path)}:good", "--fmt", "mma_s4", "--max-examples", "1"]) == 0
    assert "seed=0:" in capfd.readouterr().err


def test_seed_random_draws_one_and_the_progress_prints_it(tmp_path, capfd):
    assert main(["check", f"{_module(tmp_path)}:good", "--fmt", "mma_s4", "--max-examples", "1", "--seed",
                 "random"]) == 0
    seeds = re.findall(r"seed=(\d+):", capfd.readouterr().err)
    assert len(seeds) == 1 and 0 <= int(seeds[0]) < 2**31


@pytest.mark.parametrize("bad", ["-1", "1.5", "rand"])
def test_a_bad_seed_is_refused_with_status_2(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as info:
        main(["check", f"{_module(tmp_path)}:good", "--fmt", "mma_s4", "--seed", bad])
    assert info.value.code == 2
    assert f"argument --seed: must be a non-negative integer or 'random'; got {bad!r}" in capsys.readouterr().err


def test_the_help_states_the_seeds_default(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--seed SEED seed of the drawn cases' shapes and data: an integer (default 0" in text
    assert "or 'random' (one drawn and printed)" in text


AWQ_N128 = '''
from refsim.testing.cases import FORMATS

def gemm(x, qweight, qzeros, scales):          # like vLLM's AWQ GEMM: N % 128 == 0 only
    if scales.shape[1] % 128:
        raise ValueError("this kernel needs N % 128 == 0")
    return FORMATS["awq"].emulate((x, qweight, qzeros, scales), "sm_80", 108)
'''


def test_the_kernels_shape_rule_from_the_command_line(refsim_check):
    rc, out, err = refsim_check(AWQ_N128, "@gemm", "--fmt", "awq", "--seed", "0", "--max-examples", "2")
    assert rc == 1 and "N % 128 == 0" in out + err
    rc, out, err = refsim_check(AWQ_N128, "@gemm", "--fmt", "awq", "--seed", "0", "--max-examples", "2",
                                "--legal", "n%128==0")
    assert rc == 0, (out, err)
    assert "the kernel's shape rule 'n%128==0': 3 pinned cases skipped" in err
    rc, out, err = refsim_check(AWQ_N128, "@gemm", "--fmt", "awq", "--legal", "n<3")
    assert rc == 2 and "legal: each clause must read" in err


def test_nvcc_diagnostics_keep_their_lines_and_name_the_users_file(tmp_path, failing_nvcc):
    # the kernel's process compiles the .cu; its CompileError crosses the process boundary with its lines
    (tmp_path / "bad.cu").write_text('extern "C" __global__ void k(float *y) { }\n')
    (tmp_path / "launch.py").write_text("def plan(*inputs):\n    return None\n")
    res = subprocess.run([sys.executable, "-m", "refsim", "check", "bad.cu:k", "--launch", "launch.py:plan", "--fmt",
                          "anyprec"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and lines[0].startswith("refsim check: error: ")
    assert any(ln.endswith('bad.cu(3): error: identifier "undefined_name" is undefined') for ln in lines)
    assert any("bad.cu(7): warning" in ln for ln in lines) and "refsim-ptx" not in res.stderr
