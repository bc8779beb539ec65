"""refsim.testing.kernel_process: the wire format refsim check reads from a kernel's process.

Every frame that breaks a rule is refused with the rule named, before anything it declares is
allocated; arrays cross bit for bit with their dtype and shape. Frames are built by hand here.
"""

from __future__ import annotations

import json
import os
import struct
import time

import numpy as np
import pytest

from refsim.testing.kernel_process import MAX_HEADER, Ended, MalformedReply, read_frame, write_frame


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
    with pytest.raises(Ended, match="end of file after 5 of 8 bytes"):
        read_frame(r, time.monotonic() + 10, 1024)
    os.close(r)
    r, w = os.pipe()
    with pytest.raises(TimeoutError):
        read_frame(r, time.monotonic() + 0.05, 1024)
    os.close(r)
    os.close(w)
