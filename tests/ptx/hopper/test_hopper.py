"""refsim.ptx.hopper: which instructions the package defines, and that both executors route them there."""

import pytest

from refsim import ptx
from refsim.ptx import dispatch, hopper
from refsim.ptx.compiled import translation
from refsim.ptx.parse import Instruction

_TEXT = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p) {
 .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<2>;
 .shared .align 8 .b8 bar[8];
 mbarrier.init.shared::cta.b64 [bar], 1;
 fence.proxy.async.shared::cta;
 fence.acq_rel.gpu;
 cp.async.commit_group;
 cp.async.bulk.commit_group;
 elect.sync %r1|%p1, 0xffffffff;
 ret;
}
"""


def _ins(opcode, *mods):
    return Instruction(opcode, tuple(mods), (), (), None, 1, 1, "")


@pytest.mark.parametrize("ins, defined", [
    (_ins("mbarrier", "init", "shared::cta"), True),
    (_ins("elect", "sync"), True),
    (_ins("griddepcontrol", "wait"), True),
    (_ins("tensormap", "replace", "tile", "rank", "global", "b1024"), True),
    (_ins("cp", "async", "bulk", "commit_group"), True),
    (_ins("cp", "async", "commit_group"), False),
    (_ins("fence", "proxy", "async", "shared::cta"), True),
    (_ins("fence", "proxy", "tensormap::generic", "release", "gpu"), False),
    (_ins("fence", "acq_rel", "gpu"), False),
    (_ins("add"), False),
])
def test_python_defined(ins, defined):
    assert hopper.python_defined(ins) is defined


def test_every_opcode_is_in_the_dispatch_table():
    assert set(hopper.OPCODES) <= set(dispatch.OPCODES)


def test_compiled_executor_calls_back_for_exactly_the_hopper_instructions():
    m = ptx.Module(_TEXT)
    tr = translation(m, "k")
    assert tr.reason is None
    k = m._kernel("k")
    from refsim.ptx.compiled import instructions

    hop = [i for i, ins in enumerate(k.instructions) if hopper.python_defined(ins)]
    assert hop == [0, 1, 4, 5]
    # and the engine's own Python definitions: cp.async.commit_group (memory_ops.cp), the ret and the
    # closing exit (Launch.exit_threads)
    assert sorted(tr.callbacks) == hop[:2] + [3] + hop[2:] + [6, 7]
    assert all(instructions.python_defined(k.instructions[i]) for i in set(tr.callbacks) - set(hop))


def test_tracks_shared_bytes():
    m = ptx.Module(_TEXT)
    assert hopper.tracks_shared_bytes(m._kernel("k"))
    plain = ptx.Module(_TEXT.replace(" mbarrier.init.shared::cta.b64 [bar], 1;\n", "")
                       .replace(" cp.async.bulk.commit_group;\n", ""))
    assert not hopper.tracks_shared_bytes(plain._kernel("k"))


def test_the_compiled_executor_calls_back_for_every_wgmma_instruction():
    from pathlib import Path

    from conftest_compiled import template

    m = ptx.Module((Path(__file__).parents[1] / "kernels" / "wgmma.ptx").read_text())
    k = m._kernel("wgmma_groups")
    tr = translation(m, "wgmma_groups")
    assert tr.reason is None
    ours = {i for i, ins in enumerate(k.instructions) if ins.opcode == "wgmma"}
    assert len(ours) == 7            # fence, 2 mma_async, 2 commit_group, 2 wait_group
    assert all(hopper.python_defined(k.instructions[i]) for i in ours)
    assert dispatch.OPCODES["wgmma"].build is hopper.wgmma.build
    assert ours <= tr.callbacks
    for i in ours:                   # no C body restates them: the step goes to Python
        assert template(tr, i).strip().endswith("return RT_CALLBACK;")
