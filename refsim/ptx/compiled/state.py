"""The C runtime's launch state (``struct rt_state`` of refsim/native/ptx_runtime.h) as a ctypes
structure, read from the header itself so that the two can never disagree; and the libraries.

Every field is an integer or a pointer; the header declares them one C declaration per statement
(``int64_t T, NW;``, ``uint32_t *tid[3];``). The runtime reports ``sizeof(rt_state)`` and the
mirror's size must equal it (checked when the runtime is loaded)."""

from __future__ import annotations

import ctypes
import functools
import re

from refsim.ptx.compiled.translate import HEADER, RUNTIME

__all__ = ["KERNEL_OPT", "State", "runtime", "kernel_library"]

_SCALARS = {"int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "int32_t": ctypes.c_int32,
            "uint32_t": ctypes.c_uint32, "uint8_t": ctypes.c_uint8}


def _fields(header: str) -> list[tuple]:
    body = re.search(r"struct rt_state \{(.*?)\n\};", header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        m = re.match(r"(?:const\s+)?(\w+)\s+(.*)$", decl, re.S)
        base, rest = m.groups()
        for item in rest.split(","):
            item = item.strip()
            pointer = item.startswith("*") or base in ("rt_exec_fn",)
            name = item.lstrip("*").strip()
            count = 1
            am = re.match(r"(\w+)\[(\d+)\]$", name)
            if am:
                name, count = am.group(1), int(am.group(2))
            ctype = ctypes.c_void_p if pointer else _SCALARS[base]
            fields.append((name, ctype * count if count > 1 else ctype))
    return fields


class State(ctypes.Structure):
    """``struct rt_state`` (see refsim/native/ptx_runtime.h)."""

    _fields_ = _fields(HEADER)


@functools.lru_cache(maxsize=1)
def runtime():
    """(runtime library or None, reason). Built once per machine, loaded once per process."""
    from refsim import native

    state = ctypes.POINTER(State)
    lib, reason = native.load(RUNTIME, "PTX runtime", (
        ("refsim_rt_sizeof_state", ctypes.c_int64, ()), ("refsim_rt_sizeof_fifo", ctypes.c_int64, ()),
        ("refsim_rt_api", ctypes.c_void_p, ()), ("refsim_rt_run", ctypes.c_int, (state,)),
        ("refsim_rt_start", None, (state,)), ("refsim_rt_free", None, (state,)),
        ("refsim_rt_start_block", None, (state, ctypes.c_int64)),
        ("refsim_rt_land_async", None, (state, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64))))
    if lib is None:
        return None, reason
    if lib.refsim_rt_sizeof_state() != ctypes.sizeof(State):
        return None, "the runtime's rt_state does not match its Python mirror"
    return lib, None


#: gcc level for a kernel's generated C (refsim.native.build.OPT_LEVELS; the runtime library keeps -O2):
#: a test run builds ~300 kernels that each run briefly, and -O1 (with -fstrict-aliasing) builds them in
#: ~35 % less gcc time while the generated functions execute 1-10 % more instructions (callgrind: the
#: test kernels at 108 x 256 threads +1-7 %, Marlin 16x4096x4096 +1.0 %, DeepGEMM 128x4096x4096 +10 %
#: there but +0.8 % of its whole launch, whose time is the runtime's and the Python Hopper steps')
KERNEL_OPT = "-O1"


@functools.lru_cache(maxsize=64)
def kernel_library(source: str):
    """(address of the kernel's ``refsim_exec``, library) or (None, reason) for generated C."""
    from refsim import native

    lib, reason = native.load(source, "PTX kernel", opt=KERNEL_OPT)
    if lib is None:
        return None, reason
    return ctypes.cast(lib.refsim_exec, ctypes.c_void_p).value, lib
