"""refsim.ptx.limits: the table of sizes (each number against its source, written out here) and
check(), the one function every row goes through: the value back as a Python int up to the limit, a
PtxLimitError naming the limit, where and the number above it, a FormatRuleError for a non-integer."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.errors import FormatRuleError
from refsim.ptx import limits
from refsim.ptx.errors import PtxLimitError


def test_the_table_holds_the_documented_numbers():
    assert limits.MAX_PARAM_BYTES == 32_764                      # 32 KiB less 4 (PTX ISA 8.1, CUDA 12.1)
    assert limits.MAX_LOCAL_BYTES == 524_288                     # 512 KiB
    assert limits.MAX_CONST_BYTES == 65_536                      # 64 KiB
    assert limits.MAX_INSTRUCTIONS == 536_870_912                # 512 Mi
    assert limits.MAX_REGISTERS == 262_144                       # 2^18
    assert limits.MAX_GLOBAL_VARIABLE_BYTES == 1_073_741_824     # 1 GiB
    assert limits.MAX_LAUNCH_STATE_BYTES == 8_589_934_592        # 8 GiB


def test_check_returns_the_value_up_to_the_limit_as_a_python_int():
    assert limits.check("x", 1000, 1000) == 1000
    got = limits.check("x", np.uint16(7), np.int64(8))
    assert got == 7 and type(got) is int


def test_check_names_the_limit_where_and_the_value_above_it():
    with pytest.raises(PtxLimitError, match=r"^kernel k, PTX line 9: registers per kernel: at most 262,144; "
                       r"got 262,145$"):
        limits.check("registers per kernel", limits.MAX_REGISTERS + 1, limits.MAX_REGISTERS, "kernel k, PTX line 9")
    with pytest.raises(PtxLimitError, match=r"^parameter bytes: at most 32,764; got 1,099,511,627,776$"):
        limits.check("parameter bytes", 2**40, limits.MAX_PARAM_BYTES)
    assert issubclass(PtxLimitError, ptx.PtxError)


@pytest.mark.parametrize("value, limit, match", [
    (1.5, 3, "x: must be an integer; got 1.5"),
    (True, 3, "x: must be an integer; got True"),
    ("3", 3, "x: must be an integer; got '3'"),
    (3, 2.0, "limit: must be an integer; got 2.0"),
])
def test_check_refuses_a_non_integer(value, limit, match):
    with pytest.raises(FormatRuleError, match=match):
        limits.check("x", value, limit)
