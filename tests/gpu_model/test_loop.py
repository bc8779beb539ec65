"""The per-SMSP issue model (refsim.gpu_model.loop) and the mechanisms built on it."""

import pytest

from refsim.gpu_model import cycle
from refsim.gpu_model.kernels import _common, anyprec, marlin, predict, resources
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
    # one chunk step at M = 2: row 0's 3 plane loads, the 4·M = 8 activation loads, then row 1's
    # 3 plane loads ahead of row 0's math (the SASS order); 4 rows x 3 plane loads in all
    pipes = [i.pipe for i in anyprec.loop(3, 2).body]
    assert pipes[:14] == ["dram"] * 3 + ["mio"] * 8 + ["dram"] * 3 and pipes[14] == "int"
    assert pipes.count("dram") == 12


def test_marlin_handoff_cycles_by_hand():
    # A10: 5 L2 round trips (200 cycles) + read and write of a 16 x 128 fp16 tile (4 KiB) at 32 B/clk
    assert marlin.handoff_cycles(get_gpu("a10"), 1, 128) == 5 * 200 + 2 * 4096 / 32
    assert marlin.handoff_cycles(get_gpu("a10"), 4, 256) == 5 * 200 + 2 * (64 * 256 * 2) / 32
    # H100: the lock and the partial tile may be homed in the far half of the partitioned L2 (475 cycles)
    g = get_gpu("h100-sxm")
    assert marlin.handoff_cycles(g, 1, 128) == 5 * 475 + 2 * 4096 / g.l2_bytes_per_clk_per_sm


def test_marlin_registers_bind_one_cta_and_two_warps_per_smsp():
    assert marlin.registers("8.9", 1, 128, 128, True) == 130
    assert marlin.registers("9.0", 4, 256, 64, False) == 255


@pytest.mark.parametrize("gpu", ["orin-agx-64gb", "rtx4090", "a100-80gb", "h100-sxm"])
def test_anyprec_4bit_4096_batched_rows_never_beat_one_row(gpu):
    # a regression once seen: M = 2 was predicted 10-20 % faster than M = 1 (Orin, A100, H100) because one
    # fitted issue efficiency over-charged the high-occupancy M = 1 case. Every M >= 2 streams the
    # same plane words and does more work per weight (four rows per warp, more activations and
    # HFMA2, fewer resident warps), so none beats M = 1 beyond the rounding of the last round of
    # CTAs (a stream-bound GPU like Orin runs them all at the stream's time). Between M = 2 and 8
    # the kernel is not monotone: ptxas places the row loads differently per maxm (sm_89 4-bit
    # census: 4 dependent DRAM round trips per step at M = 2, 2 at M = 3), and the RTX 4070 Laptop
    # table shows it (3-bit 4096 x 4096: 33.72 us at M = 2, 32.65 at M = 4).
    lat = {m: predict(gpu, "anyprec", m, 4096, 4096, bits=4).latency_s for m in range(1, 9)}
    assert all(lat[m] > 0.97 * lat[1] for m in range(2, 9)), lat

def test_reconcile_reads_the_same_loop_structure():
    r = cycle.reconcile("rtx4070-laptop", "anyprec", 1, 4096, 4096, bits=3, clock="base")
    assert r["prefetch"] is False and r["warps_per_smsp"] == 12
    assert 0.75 < r["ratio"] < 1.25


# ---- mechanisms that replaced fitted constants ---------------------------------------------------------------------
def test_ga102_and_ad102_run_non_tensor_fp16_at_the_fp32_rate():
    # GA102 / Ada whitepapers: RTX 3090 35.6 TFLOPS FP16 (non-tensor) = FP32; RTX 4090 82.6 = 82.6.
    # One half2 lane = 2 fp16 results, so half2 lanes = FP32 lanes / 2; GA100-class Orin keeps 2x.
    for name in ("rtx3090", "rtx4090", "a10", "rtx4070-laptop"):
        g = get_gpu(name)
        assert 2 * g.hfma2_lanes_per_clk_per_sm == g.fp32_fma_lanes_per_clk_per_sm == 128
    assert get_gpu("orin-agx-64gb").hfma2_lanes_per_clk_per_sm == 128
    # 4090 at boost: 128 SMs x 128 results x 2 flop x 2.52 GHz = 82.6 TFLOPS
    g = get_gpu("rtx4090")
    assert 128 * 2 * g.hfma2_lanes_per_clk_per_sm * 2 * 2.52e9 == pytest.approx(82.6e12, rel=0.001)


def test_h100_l2_bandwidth_is_its_own_measurement():
    # warm reads of 0.25-16 MiB on the H100 SXM (refsim/data/timings/h100_microbenchmarks.json)
    import json
    from pathlib import Path
    from refsim.gpu_model import microbench
    g = get_gpu("h100-sxm")
    path = Path(microbench.__file__).resolve().parents[1] / "data" / "timings" / "h100_microbenchmarks.json"
    fit = microbench.fit(json.loads(path.read_text()), g.l2_bytes)
    assert g.l2_bytes_per_clk_per_sm == pytest.approx(fit.l2_bytes_per_s / (132 * 1.98e9), rel=2e-3)


def test_hopper_mma_sync_runs_at_the_published_fraction_of_the_wgmma_rate():
    # Marlin stripe at M = 16, 4096 x 4096 on 132 SMs: iters = ceil(1024 / 132) = 8 tiles of
    # 128 x 128; H100 table rate 4096 FLOP/clk/SM (wgmma) x 0.63 for mma.sync (ThunderKittens' and
    # Luo et al.'s measured ceiling, kernels/_common.py); an A100 runs its table rate
    bd = predict("h100-sxm", "marlin", 16, 4096, 4096, clock=1.0e9)
    assert bd.terms["tensor"] == pytest.approx(8 * 2 * 16 * 128 * 128 / (0.63 * 4096 * 1.0e9))
    assert _common.mma_sync_rate(get_gpu("a100-80gb"), 2048.0) == 2048.0


def test_gemm_tile_chooser_counts_l2_rereads():
    # 64x64 tiles have the least tensor time for M = 1024, N = 14592 on H100, but every 64-wide N
    # tile re-reads A from L2; by full cost the chooser keeps 128-wide tiles and 256 more columns
    # cost about 256/14592 more, not half
    a = predict("h100-sxm", "cublas-fp16", 1024, 14592, 8192).latency_s
    b = predict("h100-sxm", "cublas-fp16", 1024, 14848, 8192).latency_s
    assert 0.95 < b / a < 1.1


def test_atom_registers_bind_one_cta_per_sm_even_on_a100():
    # 221 registers x 32 = 7072 -> 7168 per warp; 16384 // 7168 = 2 warps per SMSP = 8 warps per SM
    # = one 256-thread CTA. A100's 164 KiB of shared memory would hold two 69 KiB CTAs.
    from refsim.gpu_model.kernels import atom_w4a4
    from refsim.gpu_model.occupancy import occupancy
    occ = occupancy(get_gpu("a100-80gb"), 256, resources.atom("8.0"), atom_w4a4.DYNAMIC_SMEM)
    assert (occ.ctas_per_sm, occ.limiter, occ.limits["smem"]) == (1, "regs", 2)
    assert "1 CTA/SM" in predict("a100-80gb", "atom-w4a4", 512, 4096, 4096).notes


def test_atom_needs_sm80():
    from refsim.errors import FormatRuleError
    with pytest.raises(FormatRuleError, match="compute capability >= 8.0"):
        predict("rtx2080", "atom-w4a4", 128, 4096, 4096)


def test_gemv_occupancy_reads_ptxas_registers():
    # resources.json (ptxas, sm_80): awq_gemv 48 and mixed_gemv 39 registers per thread.
    # A10 (CC 8.6, 48 warps/SM): 48 regs -> 1536 per warp -> 10 warps per SMSP -> 10 CTAs of 4 warps;
    # 39 regs -> 1280 per warp -> 12 per SMSP = 48 warps -> 12 CTAs (warps bind too)
    from refsim.gpu_model.kernels._common import compiled_registers
    from refsim.gpu_model.occupancy import occupancy
    assert compiled_registers("awq_gemv") == 48 and compiled_registers("mixed_gemv") == 39
    a10 = get_gpu("a10")
    assert occupancy(a10, 128, 48).ctas_per_sm == 10
    assert occupancy(a10, 128, 39).ctas_per_sm == 12
