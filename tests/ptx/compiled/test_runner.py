"""refsim.ptx.compiled.runner: the launch geometry it places as the interpreter does (threads, padded
threads, blocks, resident slots), and the launch-state limit checked before any build; the launches
themselves are in test_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx import engine
from refsim.ptx.compiled.runner import geometry
from refsim.ptx.errors import PtxLimitError
from refsim.ptx.parse import parse
from conftest_compiled import needs_compiled, run_both

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


@needs_compiled
def test_a_limit_at_or_beyond_2_to_the_63_is_accepted_by_both_executors():
    m = ptx.Module(HEAD + ".visible .entry k(.param .u64 p0)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
                   "ld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\n"
                   "st.global.u32 [%rd2], %r1;\nret;\n}\n")
    for limit in (2**63 - 1, 2**63, 2**64, 2**100):
        stats, (out,), _ = run_both(m, "k", 1, 32, [np.zeros(1, np.int32)], max_warp_instructions=limit)
        assert stats.warp_instructions == 5 and out.tolist() == [31]     # ld cvta mov st ret; lane 31 stores last
