"""``refsim check`` against kernels that attack their grader: each is a real kernel file run through
the real CLI in a fresh process, and none may end the check with status 0 unless its output is right.

The kernel runs in a process of its own (refsim.testing.sandbox): it can forge bytes on every fd it
holds, patch refsim and NumPy in its own process, write its inputs late, hang its import, signal or
kill refsim check, fork, close its fds. The verdict is decided in a process it never ran in, and
its process group dies with refsim check (docs/harness.md, "Threat model").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

HOSTILE = '''
import json, os, signal, struct, sys, threading, time
import numpy as np
from refsim.arith.integer_mma import mma_int

FAKE = "mma_s4: 2 pinned + 0 drawn cases match on sm_80, sms=108 (seed 0, 0.0 s)"

def _every_fd(data):
    for name in os.listdir("/proc/self/fd"):
        try:
            os.write(int(name), data)
        except OSError:
            pass

def _pid_file(name):
    with open(name + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(name + ".tmp", name)

def good(A, B, C):
    return mma_int(A, B, C)

def forges_a_verdict_and_exits(A, B, C):
    # the old design's attack: a pass verdict on the result pipe named in sys.argv, then exit
    _every_fd(b'{"verdict": "pass", "exit": 0, "text": "ok"}\\nPASS\\n')
    try:
        os.write(int(sys.argv[1]), b'{"verdict": "pass", "exit": 0}\\n')
    except (OSError, ValueError, IndexError):
        pass
    os._exit(0)

def _frame(arrays, **header):
    head = json.dumps({**header, "arrays": arrays}).encode()
    return b"RSK1" + struct.pack("<I", len(head)) + head

def forges_a_well_formed_reply(A, B, C):
    # the reply the child would send, read off its own stack, with a wrong output: it is just an output
    seq = sys._getframe(1).f_locals["header"]["seq"]
    out = np.zeros((16, 8), np.int32)
    _every_fd(_frame([["<i4", [16, 8]]], kind="reply", seq=seq, late=[], changed=[], status="ok") + out.tobytes())
    os._exit(0)

def declares_a_huge_output(A, B, C):
    seq = sys._getframe(1).f_locals["header"]["seq"]
    _every_fd(_frame([["|u1", [2**40]]], kind="reply", seq=seq, late=[], changed=[], status="ok"))
    os._exit(0)

def replaces_raw_bits(A, B, C):
    import refsim.testing.runner as runner
    runner.raw_bits = lambda x: np.zeros(np.shape(x), np.uint8)
    return mma_int(A, B, C) + np.int32(1)

def monkeypatches_numpy(A, B, C):
    np.array_equal = lambda *a, **k: True
    np.not_equal = lambda a, b, *r, **k: np.zeros(np.broadcast(a, b).shape, bool)
    return mma_int(A, B, C) + np.int32(1)

def rewrites_A_from_a_thread(A, B, C):
    D = mma_int(A, B, C)
    def later():
        time.sleep(0.02)
        np.bitwise_not(A, out=A)
    threading.Thread(target=later).start()
    return D

def prints_a_fake_verdict(A, B, C):
    print(FAKE)
    print(FAKE, file=sys.stderr)
    os.write(1, (FAKE + "\\n").encode())
    return mma_int(A, B, C) + np.int32(1)

def closes_its_fds(A, B, C):
    D = mma_int(A, B, C)
    os.closerange(3, 4096)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    return D

def terminates_refsim_check(A, B, C):
    os.kill(os.getppid(), signal.SIGTERM)
    while True:
        pass

def kills_refsim_check(A, B, C):
    _pid_file("kernel.pid")
    os.kill(os.getppid(), signal.SIGKILL)
    while True:
        pass

def spins(A, B, C):
    _pid_file("kernel.pid")
    while True:
        pass

def leaves_a_grandchild(A, B, C):
    if not os.path.exists("grandchild.pid") and os.fork() == 0:
        _pid_file("grandchild.pid")
        while True:
            time.sleep(1)
    return mma_int(A, B, C)
'''

#: (kernel, words on stdout) for kernels that must end `refsim check` with status 1
REFUSED = [
    ("forges_a_well_formed_reply", "mma_s4 kernel differs from the refsim emulator"),
    ("declares_a_huge_output", "sent a malformed reply (during a kernel call): arrays must hold at most"),
    ("replaces_raw_bits", "mma_s4 kernel differs from the refsim emulator"),
    ("monkeypatches_numpy", "mma_s4 kernel differs from the refsim emulator"),
    ("closes_its_fds", "mma_s4 kernel ended its process during a kernel call"),
]

ARGS = ("--fmt", "mma_s4", "--seed", "0", "--max-examples", "0", "--deadline", "5")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, or no such process, is not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _dies(pid: int, within: float = 30.0) -> bool:
    """Whether ``pid`` stops running within ``within`` seconds (SIGKILL takes effect asynchronously)."""
    end = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _pid(path, within: float = 60.0) -> int:
    end = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < end, f"{path.name} was not written within {within} s"
        time.sleep(0.05)
    return int(path.read_text())


def test_a_forged_pass_verdict_on_every_fd_is_a_malformed_reply(refsim_check):
    rc, out, err = refsim_check(HOSTILE, "@forges_a_verdict_and_exits", *ARGS)
    assert rc == 1, (out, err)
    assert "mma_s4 kernel sent a malformed reply (during a kernel call): frame must start with b'RSK1'" in out
    assert "cases match" not in out


def test_an_input_written_by_a_thread_after_the_call_returned_fails(refsim_check):
    # the output is right; the thread inverts A 20 ms later, in the kernel's own copy: refsim check's
    # arrays are untouched, and the write is reported (the child waits for the kernel's threads)
    rc, out, err = refsim_check(HOSTILE, "@rewrites_A_from_a_thread", *ARGS)
    assert rc == 1, (out, err)
    assert "modified input 1 of 3 after kernel call" in out and "a late write" in out
    assert "cases match" not in out


@pytest.mark.slow
def test_a_correct_kernel_still_passes(refsim_check):
    rc, out, err = refsim_check(HOSTILE, "@good", *ARGS)
    assert rc == 0, (out, err)
    assert out.startswith("mma_s4: 2 pinned + 0 drawn cases match")


@pytest.mark.slow
@pytest.mark.parametrize("kernel, words", REFUSED, ids=[k for k, _ in REFUSED])
def test_no_attack_on_the_grader_passes(refsim_check, kernel, words):
    rc, out, err = refsim_check(HOSTILE, f"@{kernel}", *ARGS)
    assert rc == 1, (out, err)
    assert words in out, (out, err)
    assert "cases match" not in out and "Traceback" not in err


@pytest.mark.slow
def test_a_fake_verdict_printed_by_the_kernel_never_reaches_stdout(refsim_check):
    rc, out, err = refsim_check(HOSTILE, "@prints_a_fake_verdict", *ARGS)
    assert rc == 1 and "mma_s4 kernel differs" in out
    # the kernel's prints, even to fd 1, go to stderr: stdout holds refsim check's report only
    fake = "mma_s4: 2 pinned + 0 drawn cases match on sm_80, sms=108 (seed 0, 0.0 s)\n"
    assert fake not in out and "cases match" not in out and fake * 3 in err


@pytest.mark.slow
def test_a_module_whose_import_never_returns_ends_at_the_deadline(refsim_check):
    rc, out, err = refsim_check("import time\nwhile True:\n    time.sleep(0.1)\n", "@k", "--fmt", "mma_s4",
                                "--deadline", "1")
    assert rc == 1
    assert "refsim check: no verdict: hung on import: the kernel's module did not finish importing within " \
           "--deadline 1 s" in err


@pytest.mark.slow
def test_a_kernel_that_terminates_refsim_check_gets_no_verdict(refsim_check):
    rc, out, err = refsim_check(HOSTILE, "@terminates_refsim_check", *ARGS)
    assert rc == 1
    assert "refsim check: no verdict: received SIGTERM; the kernel's process group was killed" in err
    assert "cases match" not in out


@pytest.mark.slow
def test_a_kernel_that_kills_refsim_check_dies_with_it(refsim_check, tmp_path):
    rc, out, err = refsim_check(HOSTILE, "@kills_refsim_check", *ARGS)
    assert rc == -signal.SIGKILL and "cases match" not in out
    # refsim check had no chance to clean up: the kernel dies by its parent-death signal
    assert _dies(_pid(tmp_path / "kernel.pid"))


@pytest.mark.slow
def test_a_grandchild_the_kernel_leaves_running_is_killed_with_its_group(refsim_check, tmp_path):
    rc, out, err = refsim_check(HOSTILE, "@leaves_a_grandchild", *ARGS)
    assert rc == 0, (out, err)                     # its outputs are right; what it leaves behind is killed
    assert _dies(_pid(tmp_path / "grandchild.pid"))


@pytest.mark.slow
def test_sigterm_to_refsim_check_kills_the_spinning_kernel(tmp_path):
    path = tmp_path / "user_kernels.py"
    path.write_text(HOSTILE)
    proc = subprocess.Popen([sys.executable, "-m", "refsim", "check", f"{path}:spins", *ARGS[:-1], "600"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        kernel = _pid(tmp_path / "kernel.pid")
        assert _alive(kernel)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1
    assert "refsim check: no verdict: received SIGTERM; the kernel's process group was killed" in err
    assert _dies(kernel, within=5.0)
