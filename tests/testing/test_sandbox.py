"""refsim.testing.sandbox: a kernel called through KernelProcess behaves as the runner expects of a
kernel (its output, its exception by name, its sys.exit code, the inputs it wrote, a deadline), and
its process group dies with close(). The attacks on refsim check: tests/commands/test_check_hostile.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.testing.runner import KernelCallError, KernelTimeout
from refsim.testing.sandbox import KernelLoadError, KernelProcess

KERNEL = '''
import sys
import numpy as np

def kernel(a, b, *, scale=2):
    """a[0] picks the behaviour"""
    code = int(a[0])
    if code == 0:
        return a + b
    if code == 1:
        raise ValueError("boom")
    if code == 2:
        sys.exit(3)
    if code == 3:
        b[1] = 7
        return a + b
    if code == 4:
        return [1, 2]
    if code == 5:
        return np.array(["x"])
    while True:
        pass
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_a_kernel_in_its_process_answers_as_the_runner_expects(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    b = np.array([10, 20], np.int32)
    with KernelProcess({"kernel": f"{tmp_path / 'k.py'}:kernel", "launch": None, "arch": "sm_80"}, 2.0) as proc:
        assert str(proc.__signature__) == "(a, b, *, scale=None)"           # names and kinds, not defaults
        out = proc(np.array([0, 1], np.int32), b)
        assert out.dtype == np.int32 and out.tolist() == [10, 21]
        with pytest.raises(Exception, match="^boom$") as err:
            proc(np.array([1, 0], np.int32), b)
        assert type(err.value).__name__ == "ValueError"
        with pytest.raises(SystemExit) as err:
            proc(np.array([2, 0], np.int32), b)
        assert err.value.code == 3
        mine = b.copy()
        assert proc(np.array([3, 0], np.int32), mine).tolist() == [13, 7]
        assert mine.tolist() == [10, 7]                # the write is reported back into the caller's copy
        with pytest.raises(KernelCallError, match="returned list; expected a numpy.ndarray"):
            proc(np.array([4, 0], np.int32), b)
        with pytest.raises(KernelCallError, match="returned a numpy.ndarray of dtype <U1 shape"):
            proc(np.array([5, 0], np.int32), b)
        first = proc.child.pid
        with pytest.raises(KernelTimeout, match=r"did not return within deadline=2.0 s \(during a kernel call\); its "
                                                r"process was killed"):
            proc(np.array([6, 0], np.int32), b)
        assert not _alive(first)
        assert proc(np.array([0, 0], np.int32), b).tolist() == [10, 20]   # a fresh process after a kill
        second = proc.child.pid
    assert second != first and not _alive(second)


@pytest.mark.slow
def test_a_kernel_that_cannot_load_is_refused_or_no_verdict(tmp_path):
    with pytest.raises(FormatRuleError, match="kernel: cannot import 'no_such_module_xyz'"):
        KernelProcess({"kernel": "no_such_module_xyz:f", "launch": None, "arch": "sm_80"}, 10.0)
    (tmp_path / "exits.py").write_text("import os\nos._exit(0)\n")
    with pytest.raises(KernelLoadError, match="the kernel's process exited with status 0 while importing"):
        KernelProcess({"kernel": f"{tmp_path / 'exits.py'}:k", "launch": None, "arch": "sm_80"}, 10.0)


@pytest.mark.slow
def test_without_a_deadline_a_call_waits_for_its_answer(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    with KernelProcess({"kernel": f"{tmp_path / 'k.py'}:kernel", "launch": None, "arch": "sm_80"}, None) as proc:
        big = np.zeros(1 << 20, np.int32)          # 4 MiB each way: more than a pipe holds at once
        assert proc(big, big + 1).sum() == 1 << 20
