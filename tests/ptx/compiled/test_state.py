"""refsim.ptx.compiled.state: the ctypes mirror of ``struct rt_state`` read from the C header, checked
on a small header worked by hand and against the real header's declarations."""

from __future__ import annotations

import ctypes
import re

from refsim.ptx.compiled.state import State, _fields
from refsim.ptx.compiled.translate import HEADER

SMALL = """typedef int (*rt_exec_fn)(void);
struct rt_state {
    const rt_api *api;      /* a pointer, const */
    int64_t T, NW;
    uint32_t *tid[3];
    uint8_t poison;
    /* a comment; with a semicolon */
    int32_t shape[2];
    rt_exec_fn exec;
};
"""


def test_fields_read_one_declaration_per_statement_with_lists_arrays_and_pointers():
    assert _fields(SMALL) == [
        ("api", ctypes.c_void_p), ("T", ctypes.c_int64), ("NW", ctypes.c_int64),
        ("tid", ctypes.c_void_p * 3), ("poison", ctypes.c_uint8), ("shape", ctypes.c_int32 * 2),
        ("exec", ctypes.c_void_p)]


def test_the_mirror_has_every_field_the_header_declares_in_order():
    body = re.search(r"struct rt_state \{(.*?)\n\};", HEADER, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    declared = [re.sub(r"\[\d+\]$", "", item.strip().lstrip("*").strip())
                for decl in body.split(";") if decl.strip()
                for item in re.match(r"(?:const\s+)?\w+\s+(.*)$", decl.strip(), re.S).group(1).split(",")]
    assert [name for name, _ in State._fields_] == declared
    assert declared[0] == "api" and "tid" in declared and len(declared) > 20
    assert ctypes.sizeof(State) % 8 == 0


def test_a_kernels_c_is_built_at_the_kernel_level_and_the_runtime_at_o2(monkeypatch):
    from refsim import native
    from refsim.ptx.compiled import state

    asked = []
    monkeypatch.setattr(native, "load", lambda source, what, signatures=(), opt="-O2": (asked.append((what, opt)), (None, "x"))[1])
    assert state.kernel_library.__wrapped__("int refsim_exec;") == (None, "x")
    assert state.runtime.__wrapped__() == (None, "x")
    assert asked == [("PTX kernel", "-O1"), ("PTX runtime", "-O2")] and state.KERNEL_OPT == "-O1"
