"""refsim.testing.sandbox: the wire format refsim check reads from a kernel's process, and the process.

Every frame that breaks a rule is refused with the rule named, before anything it declares is
allocated; a kernel called through KernelProcess behaves as the runner expects of a kernel (its
output, its exception by name, its sys.exit code, the inputs it wrote) and its process group dies
with close(). Frames are built by hand here, byte by byte.
"""

from __future__ import annotations

import json
import os
import struct
import time

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.testing.runner import KernelCallError, KernelTimeout
from refsim.testing.sandbox import (MAX_HEADER, KernelLoadError, KernelProcess, MalformedReply, _Ended, read_frame,
                                    write_frame)


def _pipe_with(data: bytes) -> int:
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return r


def _frame(header, payload=b"") -> bytes:
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return b"RSK1" + struct.pack("<I", len(head)) + head + payload


def test_arrays_cross_bit_for_bit_with_their_dtype_and_shape():
    arrays = [np.array([1.0, -0.0, np.nan], np.float16), np.arange(6, dtype=">i4").reshape(2, 3),
              np.array([True, False]), np.zeros((0, 4), np.uint8), np.array(7, np.int64),
              np.arange(8, dtype=np.float32)[::2]]                       # a strided view goes as C order
    r, w = os.pipe()
    write_frame(w, {"kind": "call", "seq": 3}, arrays)
    os.close(w)
    header, got = read_frame(r, time.monotonic() + 10, 1 << 20)
    os.close(r)
    assert header["kind"] == "call" and header["seq"] == 3
    assert [(g.dtype.str, g.shape) for g in got] == [("<f2", (3,)), (">i4", (2, 3)), ("|b1", (2,)), ("|u1", (0, 4)),
                                                    ("<i8", ()), ("<f4", (4,))]
    assert [g.tobytes() for g in got] == [np.ascontiguousarray(a).tobytes() for a in arrays]


BROKEN = [
    (b"PASS\n{}\n", "frame must start with b'RSK1'; got b'PASS\\n{}\\n'"),
    (b"RSK1" + struct.pack("<I", MAX_HEADER + 1), f"header must be at most {MAX_HEADER} bytes; got {MAX_HEADER + 1}"),
    (_frame(b"{'verdict': 'pass'}"), "header is not JSON"),
    (_frame([1, 2]), "header must be a JSON object with an 'arrays' list"),
    (_frame({"verdict": "pass", "exit": 0}), "header must be a JSON object with an 'arrays' list"),
    (_frame({"arrays": [["|O8", [2]]]}), "an array must be declared as [numeric dtype"),
    (_frame({"arrays": [["<c8", [2]]]}), "an array must be declared as [numeric dtype"),
    (_frame({"arrays": [["<U4", [2]]]}), "an array must be declared as [numeric dtype"),
    (_frame({"arrays": [["<f2", [1] * 9]]}), "shape of at most 8"),
    (_frame({"arrays": [["<f2", [-1]]]}), "non-negative ints"),
    (_frame({"arrays": [["<f2", [True]]]}), "non-negative ints"),
    (_frame({"arrays": [["<f2", [2.0]]]}), "non-negative ints"),
    (_frame({"arrays": [["<f2", [2]]]}), "an array must be declared"),     # replaced below: a 3-item entry
    # 2**40 bytes declared, nothing sent: refused on the declaration, nothing allocated
    (_frame({"arrays": [["|u1", [2**40]]]}), "arrays must hold at most 1024 bytes for this call; got at least "
                                             "1099511627776"),
    (_frame({"arrays": [["<f4", [200]], ["<f4", [200]]]}), "at most 1024 bytes for this call; got at least 1600"),
]
BROKEN[12] = (_frame({"arrays": [["<f2", [2], "extra"]]}), "an array must be declared as [numeric dtype")


@pytest.mark.parametrize("data, words", BROKEN, ids=range(len(BROKEN)))
def test_a_frame_that_breaks_a_rule_is_refused_naming_it(data, words):
    r = _pipe_with(data)
    with pytest.raises(MalformedReply) as err:
        read_frame(r, time.monotonic() + 10, 1024)
    os.close(r)
    assert words in str(err.value)


def test_a_frame_cut_short_is_an_ended_writer_and_silence_is_a_timeout():
    r = _pipe_with(_frame({"arrays": [["<f2", [4]]]}, b"\0" * 5))
    with pytest.raises(_Ended, match="end of file after 5 of 8 bytes"):
        read_frame(r, time.monotonic() + 10, 1024)
    os.close(r)
    r, w = os.pipe()
    with pytest.raises(TimeoutError):
        read_frame(r, time.monotonic() + 0.05, 1024)
    os.close(r)
    os.close(w)


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
