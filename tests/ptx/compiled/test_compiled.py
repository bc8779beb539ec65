"""refsim.ptx.compiled, the package: its executor names, one cached translation per module and
kernel, and the refusal rule (executor="compiled" raises naming the kernel and why; the default
warns once per kernel and reason and leaves the launch to the interpreter)."""

from __future__ import annotations

import warnings

import pytest

from refsim import ptx
from refsim.ptx import compiled
from refsim.ptx.errors import PtxUnsupportedError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
TEXT = HEAD + ".visible .entry k(.param .u32 n)\n{\n.reg .b32 %r<3>;\nld.param.u32 %r1, [n];\nret;\n}\n"


def test_the_executors_are_default_compiled_and_interpreter():
    assert compiled.EXECUTORS == (None, "compiled", "interpreter")
    why = compiled.unavailable()
    assert why is None or (isinstance(why, str) and why)


def test_a_kernel_is_translated_once_per_module():
    m = ptx.Module(TEXT)
    tr = compiled.translation(m, "k")
    assert compiled.translation(m, "k") is tr
    assert compiled.translation(ptx.Module(TEXT), "k") is not tr          # another module, its own
    assert tr.kernel == "k" and tr.reason is None and "refsim_exec" in tr.source


def test_a_refusal_raises_when_compiled_is_required_and_warns_once_otherwise():
    m = ptx.Module(TEXT)
    with pytest.raises(PtxUnsupportedError, match="kernel k: executor='compiled' cannot run it: no reason"):
        compiled._refuse(m, "k", "no reason", required=True)
    with pytest.warns(RuntimeWarning, match=r"refsim.ptx: kernel k runs on the interpreter \(not compiled: no reason\)"):
        assert compiled._refuse(m, "k", "no reason", required=False) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compiled._refuse(m, "k", "no reason", required=False) is None    # said once already
