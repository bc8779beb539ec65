"""Occupancy limits, expected values derived by hand from the CUDA guide's per-CC numbers."""

import dataclasses

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.kernels.resources import anyprec as resources
from refsim.gpu_model.occupancy import occupancy
from refsim.gpu_model.specs import get_gpu

L4070 = get_gpu("rtx4070-laptop")   # CC 8.9: 65536 regs, 48 warps, 24 CTAs, 100 KiB smem


@pytest.mark.parametrize("regs, ctas, limiter", [
    # 128 threads = 4 warps. regs/warp = ceil(r*32/256)*256; warps/SMSP = 16384 // regs/warp
    (40, 12, "regs"),     # 1280 -> 12/SMSP = 48 warps = 12 CTAs; warps also allow 12: a tie names regs first
    (80, 6, "regs"),      # 2560 -> 6/SMSP -> 24 warps -> 6 CTAs
    (128, 4, "regs"),     # 4096 -> 4/SMSP -> 16 warps -> 4
    (168, 3, "regs"),     # 5376 -> 3/SMSP -> 12 warps -> 3
    (255, 2, "regs"),     # 8160 -> 8192 -> 2/SMSP -> 8 warps -> 2
])
def test_register_limit_by_hand(regs, ctas, limiter):
    occ = occupancy(L4070, 128, regs)
    assert (occ.ctas_per_sm, occ.limiter) == (ctas, limiter)


def test_more_registers_never_more_ctas():
    counts = [occupancy(L4070, 128, r).ctas_per_sm for r in range(1, 256)]
    assert all(a >= b for a, b in zip(counts, counts[1:])) and counts[0] > counts[-1]


def test_shared_memory_limit_counts_reserved_and_unit():
    # 16384 B + 1024 reserved = 17408 (a multiple of 128); 102400 // 17408 = 5
    occ = occupancy(L4070, 128, 32, 16384)
    assert (occ.ctas_per_sm, occ.limiter) == (5, "smem")
    # CC 7.5: unit 256, nothing reserved: 16385 -> 16640; 65536 // 16640 = 3
    assert occupancy(get_gpu("rtx2080"), 32, 16, 16385).ctas_per_sm == 3


def test_grid_smaller_than_a_wave_binds():
    occ = occupancy(L4070, 128, 40, grid_ctas=40)      # 40 CTAs on 36 SMs: at most 2 per SM
    assert (occ.ctas_per_sm, occ.limiter) == (2, "grid")


@pytest.mark.parametrize("args", [(1025, 32, 0), (128, 256, 0), (128, 32, 101377), (0, 32, 0)])
def test_impossible_launches_are_refused(args):
    with pytest.raises(FormatRuleError):
        occupancy(L4070, *args)


def test_anyprec_table_matches_the_measured_register_steps():
    # nvcc 13 -Xptxas -v on matmul_kbit_32 for sm_89 (refsim/data/timings/resources_anyprec.csv): the steps the issue lists
    assert [resources("8.9", m, 4, False)[0] for m in range(1, 9)] == [40, 80, 121, 128, 168, 168, 255, 255]
    assert resources("8.9", 8, 3, False)[0] == 255 and resources("8.9", 7, 3, False)[0] == 248


def test_anyprec_reports_register_limited_occupancy():
    bd = predict("rtx4070-laptop", "anyprec", 8, 4096, 4096, bits=4)
    assert "regs=255" in bd.notes and "ctas/SM=2 (regs)" in bd.notes


def test_latency_bound_gemv_stops_speeding_up_with_more_sms():
    # M = 8, N = 64 on 4 bits: 64 / 16 = 4 CTAs, one wave on any SM count >= 4. Each warp loads its
    # LUT (one DRAM latency) and walks ceil(8192/1024) = 8 chunks, each waiting one DRAM latency
    # (500 ns; the 4 rows' plane loads go out together) and then issuing its 4 rows' instructions
    # (at least 4 rows x 16 x 8 HFMA2 = 512 issue cycles at the 2175 MHz default clock).
    lat = {}
    for sms in (36, 72, 144):
        g = dataclasses.replace(L4070, sm_count=sms)
        bd = predict(g, "anyprec", 8, 64, 8192, bits=4)
        assert bd.terms["latency"] >= 9 * 500e-9 + 8 * 512 / 2175e6
        lat[sms] = bd.latency_s
    assert lat[36] == lat[72] == lat[144]


def test_huge_m_answers_at_once():
    # M = 10^8 goes to dequant + cuBLAS; the answer is finite and grows with M (no per-row loop)
    a = predict("a100-80gb", "anyprec", 10**8, 4096, 4096, bits=4)
    b = predict("a100-80gb", "anyprec", 10**4, 4096, 4096, bits=4)
    assert a.latency_s > b.latency_s > 0 and a.latency_s < float("inf")


def test_marlin_refused_before_sm80():
    with pytest.raises(FormatRuleError, match="compute capability >= 8.0"):
        predict("rtx2080", "marlin", 1, 4096, 4096)
    with pytest.raises(FormatRuleError, match="compute capability >= 8.0"):
        predict("rtx2080", "sparse-marlin", 1, 4096, 4096)


@pytest.mark.parametrize("alias, name", [("a100", "a100-80gb"), ("H100", "h100-sxm"), ("Orin", "orin-agx-64gb"),
                                         ("RTX4090", "rtx4090")])
def test_gpu_aliases_are_case_insensitive(alias, name):
    assert get_gpu(alias).name == name


def test_unknown_gpu_still_refused():
    with pytest.raises(FormatRuleError):
        get_gpu("a1000")
