"""SMSP cycle model: hand-computable loop bodies, and agreement with the analytical model where
both should be memory-bound."""

import pytest

from refsim.gpu_model.cycle import Instr, anyprec_body, marlin_body, reconcile, simulate
from refsim.gpu_model.specs import get_gpu

G = get_gpu("rtx4090")
F = G.sustained_clock_hz


def test_independent_int_instructions_are_pipe_throughput_bound():
    # int pipe: 32 lanes / (64/4 lanes per SMSP) = 2 cycles per warp instruction
    body = [Instr("int", 4) for _ in range(20)]
    assert simulate(body, 1, G, F, iterations=4) == pytest.approx(40, abs=1)


def test_a_dependent_chain_is_latency_bound_for_one_warp_and_hidden_by_more_warps():
    body = [Instr("int", 4, deps=((i - 1,) if i else ())) for i in range(20)]
    one = simulate(body, 1, G, F, iterations=4)
    assert one == pytest.approx(80, abs=2)                 # 20 × 4-cycle latency
    four = simulate(body, 4, G, F, iterations=4)
    # 4 warps share the pipe: 4 × 20 × 2 = 160 cycles per round, each warp finishes once per round
    assert four == pytest.approx(160, abs=4)


def test_dram_only_body_runs_at_this_smsps_share_of_bandwidth():
    bpc = G.dram_eff_bytes_per_s / (4 * G.sm_count) / F
    body = [Instr("dram", 0, dram_bytes=1024.0)]
    assert simulate(body, 2, G, F, iterations=4) == pytest.approx(2 * 1024 / bpc, rel=0.02)


def test_bodies_have_the_kernel_instruction_counts():
    body = anyprec_body(3, 1)
    assert sum(i.pipe == "dram" for i in body) == 3          # one 128-byte word per plane
    assert sum(i.pipe == "fp16" for i in body) == 16         # 16 HFMA2 per batch row
    assert sum(i.pipe == "tensor" for i in marlin_body(2)) == 16


@pytest.mark.parametrize("gpu, kernel, m, n, k, bits", [
    ("rtx4090", "marlin", 1, 4096, 4096, None),
    ("rtx4070-laptop", "anyprec", 1, 4096, 4096, 8),
])
def test_cycle_model_agrees_with_the_analytical_model_when_memory_bound(gpu, kernel, m, n, k, bits):
    r = reconcile(gpu, kernel, m, n, k, bits)
    assert r["analytical_bottleneck"] == "dram"
    assert 0.8 < r["ratio"] < 1.2
