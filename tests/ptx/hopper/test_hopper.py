"""refsim.ptx.hopper: its engine entries are the dispatch table's, and the compiled executor runs them
through its Python callback (no C restatement)."""

from __future__ import annotations

from pathlib import Path

from conftest_compiled import template
from refsim import ptx
from refsim.ptx import dispatch, hopper
from refsim.ptx.compiled import translation

KERNELS = Path(__file__).parents[1] / "kernels"


def test_every_entry_is_the_dispatch_tables():
    for op, build in hopper.ENTRIES.items():
        entry = dispatch.OPCODES[op]
        assert entry.build is build and entry.advances and not entry.handler
        assert op in dispatch.ENGINE_OPCODES


def test_the_compiled_executor_calls_back_for_every_hopper_instruction():
    m = ptx.Module((KERNELS / "wgmma.ptx").read_text())
    k = m._kernel("wgmma_groups")
    tr = translation(m, "wgmma_groups")
    assert tr.reason is None
    ours = {i for i, ins in enumerate(k.instructions) if ins.opcode in hopper.ENTRIES}
    assert len(ours) == 7            # fence, 2 mma_async, 2 commit_group, 2 wait_group
    assert ours <= tr.callbacks
    for i in ours:                   # no C body restates them: the step goes to Python
        assert template(tr, i).strip().endswith("return RT_CALLBACK;")
