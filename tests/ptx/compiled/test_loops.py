"""Pure loops through both executors (refsim/ptx/loops.py; the C side in refsim/native/ptx_runtime.c):
the same deadlock, word for word, for a spin and a rotating loop; the same memory and statistics for
a spin on a volatile flag another block sets and for a counted loop (the kernels of
tests/ptx/test_loops.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from refsim import ptx
from conftest_compiled import needs_compiled, run_both

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_loops import COUNTED, FLAG, GUARDED_SPIN, ROTATE, SPIN, text  # noqa: E402  (tests/ptx/test_loops.py)

pytestmark = needs_compiled


def deadlock(body: str, grid: int, block: int, args: list, **options) -> str:
    _, _, err = run_both(ptx.Module(text(body)), "k", grid, block, args, expect_error=True, **options)
    assert isinstance(err, ptx.PtxDeadlockError), repr(err)
    return str(err)


def test_a_pure_spin_raises_the_same_deadlock_in_both_executors():
    assert deadlock(SPIN, 2, 64, [np.zeros(1)]).endswith(
        "block (0, 0, 0) warp 0; block (0, 0, 0) warp 1; block (1, 0, 0) warp 0; block (1, 0, 0) warp 1")
    assert "PTX line 11 `bra $L_spin`" in deadlock(SPIN, 3, 96, [np.zeros(1)], schedule="random", seed=5)
    assert "PTX line 14 `@%p1 bra $L_wait`" in deadlock(GUARDED_SPIN, 1, 32, [np.zeros(1, np.int32)])
    assert "PTX lines 13-17" in deadlock(ROTATE, 2, 40, [np.zeros(1)])


def test_the_third_visit_raises_in_both_executors():
    m = ptx.Module(text(SPIN))
    _, _, err = run_both(m, "k", 32, 64, [np.zeros(1)], expect_error=True, max_warp_instructions=64 + 2 * 64)
    assert isinstance(err, ptx.PtxLimitError)
    _, _, err = run_both(m, "k", 32, 64, [np.zeros(1)], expect_error=True, max_warp_instructions=64 + 3 * 64)
    assert isinstance(err, ptx.PtxDeadlockError)


def test_a_volatile_flag_spin_and_a_counted_loop_complete_alike():
    _, (buf,), _ = run_both(ptx.Module(text(FLAG)), "k", 2, 32, [np.zeros(2, np.int32)])
    assert buf.tolist() == [40, 40]
    _, (buf,), _ = run_both(ptx.Module(text(FLAG)), "k", 2, 32, [np.zeros(2, np.int32)], schedule="random", seed=3)
    assert buf.tolist() == [40, 40]
    _, (buf,), _ = run_both(ptx.Module(text(COUNTED)), "k", 1, 32, [np.zeros(1, np.int32)])
    assert buf.tolist() == [1000]
    run_both(ptx.Module(text(GUARDED_SPIN)), "k", 1, 32, [np.ones(1, np.int32)])
