"""refsim.ptx.compiled.runner: the launch geometry it places as the interpreter does (threads, padded
threads, blocks, resident slots), and the launch-state limit checked before any build; the launches
themselves are in test_kernels.py."""

from __future__ import annotations

import pytest

from refsim.ptx import engine
from refsim.ptx.compiled.runner import geometry
from refsim.ptx.errors import PtxLimitError
from refsim.ptx.parse import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _kernel(decls: str):
    return parse(HEAD + f".visible .entry k()\n{{\n{decls}\nret;\n}}\n").kernels["k"]


def test_geometry_pads_blocks_to_whole_warps_and_fills_the_resident_slots(monkeypatch):
    k = _kernel(".reg .b32 %r<4>;")
    assert geometry(k, (3, 2, 1), (10, 2, 2), 0) == (40, 64, 6, 6)
    monkeypatch.setattr(engine, "RESIDENT_THREADS", 128)             # two 64-thread slots
    assert geometry(k, (3, 2, 1), (10, 2, 2), 0) == (40, 64, 6, 2)
    monkeypatch.setattr(engine, "RESIDENT_THREADS", 16)              # fewer than a block: still one slot
    assert geometry(k, (5, 1, 1), (33, 1, 1), 0) == (33, 64, 5, 1)


def test_a_launch_state_above_the_limit_is_refused_before_anything_is_built():
    # 2^17 b64 registers = 1 MiB per thread; 65,536 resident threads: 64 GiB > 8 GiB
    k = _kernel(".reg .b64 %rd<131072>;")
    with pytest.raises(PtxLimitError, match=r"kernel k: launch state bytes .*: at most 8,589,934,592; "
                       r"got 68,719,476,736"):
        geometry(k, (64, 1, 1), (1024, 1, 1), 0)
