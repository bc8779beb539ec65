"""Load refsim's small C kernels (built at first use like QIGen's), or say why not.

Used by :mod:`refsim.native.emulators`, :mod:`refsim.native.packers` and refsim.ptx.compiled. The
build goes through :mod:`refsim.native.build` (content-addressed cache, embedded id check, ``-O2
-ffp-contract=off``, ``-O1`` where the caller asks, never ``-ffast-math``; ISA ``avx2`` when the CPU
has it, else plain C99). Without a C compiler, on a failed build, or with ``REFSIM_NATIVE=0`` in the
environment, :func:`load` returns None and the callers run their NumPy paths (same bits); one
:class:`RuntimeWarning` per library says why (not for ``REFSIM_NATIVE=0``, which is a choice).
"""

from __future__ import annotations

import os
import warnings

from refsim._validate import require_instance
from refsim.errors import ToolchainError

__all__ = ["disabled", "load"]


def disabled() -> bool:
    """True when ``REFSIM_NATIVE`` is 0/false/no/off: use the NumPy paths."""
    return os.environ.get("REFSIM_NATIVE", "1").strip().lower() in ("0", "false", "no", "off")


def bind(lib, signatures):
    """Declare C signatures on a loaded ctypes library and return it. ``signatures``: ``(name, restype,
    argtypes)`` triples (restype ``None`` for ``void``), the one place each binding is written."""
    for name, restype, argtypes in signatures:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, list(argtypes)
    return lib


def load(source: str, what: str, signatures=(), opt: str = "-O2"):
    """(ctypes library, None) or (None, reason). ``source``: C text (str); ``what`` (str) names the
    kernels in the warning; ``signatures``: the library's C signatures (:func:`bind`); ``opt``: the
    optimisation level (refsim.native.build.OPT_LEVELS)."""
    require_instance("source", source, str)
    require_instance("what", what, str)
    if disabled():
        return None, "REFSIM_NATIVE=0"
    from refsim.native import build
    from refsim.native.machine import detect_isa

    try:
        build.find_compiler()            # checked before the library cache: a compiler must exist now
        lib = build.load(source, "avx2" if detect_isa() == "avx2" else "scalar", opt=opt)
    except ToolchainError as err:
        reason = str(err).splitlines()[0]
        warnings.warn(f"refsim: compiled {what} unavailable ({reason}); using the NumPy paths "
                      "(same bits, slower)", RuntimeWarning, stacklevel=4)
        return None, reason
    return bind(lib, signatures), None
