"""The per-SMSP issue model (refsim.gpu_model.loop) and the mechanisms built on it (issue 15)."""

import pytest

from refsim.gpu_model import cycle
from refsim.gpu_model.kernels import anyprec, marlin, predict
from refsim.gpu_model.loop import Instr, Loop, intervals, warp_step_cycles
from refsim.gpu_model.specs import get_gpu

IV_89 = intervals(64, 128, 128)          # CC 8.9: int 2 cycles, fp16 1, fp32 1 per warp instruction


def test_intervals_by_hand():
    assert IV_89 == {"int": 2.0, "fp16": 1.0, "fp32": 1.0, "mio": 4.0, "issue": 1.0}


def test_dependent_chain_waits_for_latency():
    # a (int, 4) -> b (int, dep a) -> c (fp16, dep b): issue at 0, 4, 8 -> span 9 cycles
    lp = Loop((Instr("int", 4), Instr("int", 4, deps=(0,)), Instr("fp16", 5, deps=(1,))), prefetch=False)
    assert warp_step_cycles(lp, IV_89) == 9.0


def test_independent_ints_wait_for_the_pipe_only():
    # 3 independent ints, the int pipe takes one every 2 cycles: issue at 0, 2, 4 -> span 5
    lp = Loop((Instr("int", 4),) * 3, prefetch=True)
    assert warp_step_cycles(lp, IV_89) == 5.0


def test_dram_loads_count_as_arriving_at_once():
    # the DRAM latency is the chain term's, not C1's: load then dependent int -> issue 0, 1 -> span 2
    lp = Loop((Instr("dram", 0, dram_bytes=128.0), Instr("int", 4, deps=(0,))), prefetch=False)
    assert warp_step_cycles(lp, IV_89) == 2.0


def test_anyprec_loop_has_no_prefetch_and_marlin_has():
    assert anyprec.loop(4, 1).prefetch is False
    assert marlin.loop(1).prefetch is True
    # the rows of one chunk step: 4 rows x 3 plane loads at the top for M >= 2
    body = anyprec.loop(3, 2).body
    assert [i.pipe for i in body[:12]] == ["dram"] * 12 and body[12].pipe != "dram"


def test_marlin_handoff_cycles_by_hand():
    # A10: 3 L2 round trips (200 cycles) + read and write of a 16 x 128 fp16 tile (4 KiB) at 32 B/clk
    assert marlin.handoff_cycles(get_gpu("a10"), 1, 128) == 3 * 200 + 2 * 4096 / 32
    assert marlin.handoff_cycles(get_gpu("a10"), 4, 256) == 3 * 200 + 2 * (64 * 256 * 2) / 32


def test_marlin_registers_bind_one_cta_and_two_warps_per_smsp():
    assert marlin.registers("8.9", 1, 128, 128, True) == 130
    assert marlin.registers("9.0", 4, 256, 64, False) == 255


@pytest.mark.parametrize("gpu", ["orin-agx-64gb", "rtx4090", "a100-80gb", "h100-sxm"])
def test_anyprec_4bit_4096_latency_never_drops_with_batch(gpu):
    # issue 15: M = 2 was predicted faster than M = 1 (Orin, A100, H100) because one fitted issue
    # efficiency over-charged the high-occupancy M = 1 case; the kernel does strictly more work per
    # weight at larger M (more activations, more HFMA2, fewer resident warps)
    lat = [predict(gpu, "anyprec", m, 4096, 4096, bits=4).latency_s for m in (1, 2, 4, 8)]
    assert lat == sorted(lat)


def test_reconcile_reads_the_same_loop_structure():
    r = cycle.reconcile("rtx4070-laptop", "anyprec", 1, 4096, 4096, bits=3, clock="base")
    assert r["prefetch"] is False and r["warps_per_smsp"] == 12
    assert 0.75 < r["ratio"] < 1.25
