"""Kernel models: hand-computed bytes and partitions, the rules each kernel enforces, paper anchors."""

import math

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import stripes
from refsim.gpu_model.kernels import kernel_names, predict
from refsim.gpu_model.kernels import anyprec, marlin
from refsim.gpu_model.specs import get_gpu


# ---- Any-Precision ---------------------------------------------------------------------------
def test_anyprec_reads_only_the_top_b_planes_plus_the_b_bit_lut():
    bd = predict("rtx4090", "anyprec", 1, 4096, 4096, bits=3)
    expected = 3 * 4096 * 4096 / 8 + 4096 * 8 * 2 + 2 * 4096 + 2 * 4096
    assert bd.bytes_dram == expected


@pytest.mark.parametrize("words, expected", [(1, 1.0), (8, 1.0), (32, 1.0)])
def test_lut_lookups_without_two_words_in_a_bank_take_one_wavefront(words, expected):
    # <= 32 words: every bank holds at most one word, so any pattern is one wavefront (broadcast)
    assert anyprec.lds_conflict_degree(words) == expected


def test_pair_table_lookups_conflict():
    d = anyprec.lds_conflict_degree(256)     # 4-bit pair table: 8 words per bank
    assert 2.0 < d < 8.0


def test_anyprec_uses_the_pair_table_plan_of_the_kernel():
    assert anyprec.lookup_plan(3, 1)[0] == 16 and anyprec.lookup_plan(4, 1)[0] == 32
    assert anyprec.lookup_plan(4, 2)[0] == 16 and anyprec.lookup_plan(8, 4)[0] == 32


def test_anyprec_above_eight_tokens_is_dequant_plus_cublas():
    bd = predict("rtx4090", "anyprec", 16, 4096, 4096, bits=4)
    assert bd.launches == 2
    fp = predict("rtx4090", "cublas-fp16", 16, 4096, 4096)
    assert bd.latency_s > fp.latency_s


# ---- Marlin ----------------------------------------------------------------------------------
@pytest.mark.parametrize("m, expected", [
    (1, [(1, 1, 1)]), (16, [(1, 1, 16)]), (64, [(4, 1, 64)]), (128, [(4, 2, 128)]),
    (80, [(4, 1, 64), (1, 1, 16)]), (1024, [(4, 16, 1024)]), (1100, [(4, 16, 1024), (4, 1, 64), (1, 1, 12)]),
])
def test_marlin_host_m_splitting(m, expected):
    # (m_blocks, parallel, rows) of each launch, as the model receives them from refsim.formats.stripes
    assert [(p.m_blocks, p.parallel, p.rows) for p in marlin.partition(m, 4096, 4096, 72, None)] == expected


def _stripe_brute_force(k_tiles, n_tiles, par, sms, f):
    total = k_tiles * n_tiles * par
    iters = math.ceil(total / sms)
    iters = f * math.ceil(iters / f)
    owner = [L // iters for L in range(total)]             # tile L -> block
    active = len(set(owner))
    slices = max(len(set(owner[c * k_tiles:(c + 1) * k_tiles])) for c in range(n_tiles * par))
    return iters, active, slices


@pytest.mark.parametrize("args", [(32, 32, 1, 72, 1), (32, 32, 1, 108, 1), (64, 16, 1, 72, 2),
                                  (64, 16, 1, 72, 1), (64, 16, 16, 72, 2), (8, 4, 1, 36, 1)])
def test_marlin_launch_summary_matches_tile_by_tile_assignment(args):
    k_tiles, n_tiles, par, sms, f = args
    iters, blocks = stripes.launch_partition(*args)
    launch = stripes.Launch(0, 64 * par, 4, par, k_tiles, n_tiles, iters, sms, blocks)
    lc = marlin.summarize_launch(launch)
    assert (lc.iters, lc.busy_blocks, lc.max_slices) == _stripe_brute_force(*args)


def test_marlin_paper_anchor_on_a10_large_matrix():
    # Marlin paper: ~3.87x over FP16 up to batch 16-32 on the A10, 72k x 18k, group 128
    for m in (1, 16, 32):
        fp = predict("a10", "cublas-fp16", m, 72 * 1024, 18 * 1024)
        q = predict("a10", "marlin", m, 72 * 1024, 18 * 1024, group_size=128)
        assert 3.5 < fp.latency_s / q.latency_s < 3.95, m
    fp = predict("a10", "cublas-fp16", 128, 72 * 1024, 18 * 1024)
    q = predict("a10", "marlin", 128, 72 * 1024, 18 * 1024, group_size=128)
    assert q.bottleneck == "tensor" and 1.2 < fp.latency_s / q.latency_s < 2.1


def test_marlin_24_is_faster_than_dense_marlin_when_memory_bound():
    d = predict("a10", "marlin", 16, 8192, 8192)
    s = predict("a10", "sparse-marlin", 16, 8192, 8192)
    assert s.bytes_dram < d.bytes_dram and s.latency_s < d.latency_s


# ---- Atom (validation against its own NVBench table, not fitted) ------------------------------
@pytest.mark.parametrize("m, measured_us", [(16, 26.7), (256, 27.5), (1024, 54.5), (4096, 177.8)])
def test_atom_matches_the_4090_nvbench_table_within_20_percent(m, measured_us):
    bd = predict("rtx4090", "atom-w4a4", m, 4096, 4096)
    assert abs(bd.latency_us - measured_us) / measured_us < 0.20


def test_atom_is_flat_while_one_wave_of_tiles():
    a = predict("rtx4090", "atom-w4a4", 16, 4096, 4096).latency_s
    b = predict("rtx4090", "atom-w4a4", 128, 4096, 4096).latency_s
    assert a == pytest.approx(b, rel=0.02)


# ---- rules -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, kwargs, err, text", [
    ("marlin", dict(m=1, n=4096, k=4096, bits=3), FormatRuleError, "bit-widths"),
    ("marlin", dict(m=1, n=4000, k=4096), ShapeError, "thread_n"),
    ("marlin", dict(m=32, n=4096 + 128, k=4096), ShapeError, "thread_n = 256"),
    ("marlin", dict(m=1, n=4096, k=4096, group_size=64), FormatRuleError, "group_size"),
    ("anyprec", dict(m=1, n=4096, k=4096, bits=2), FormatRuleError, "bit-widths"),
    ("anyprec", dict(m=1, n=4096, k=4100), ShapeError, "32 weights"),
    ("anyprec", dict(m=2, n=4100, k=4096), ShapeError, "multi_row"),
    ("atom-w4a4", dict(m=1, n=4096, k=128), FormatRuleError, "K >= 256"),
    ("atom-w4a4", dict(m=1, n=4000, k=4096), ShapeError, "128"),
    ("int8-w8a8", dict(m=1, n=4096, k=4096, bits=4), FormatRuleError, "bit-widths"),
    ("mixed-2-4-16", dict(m=1, n=4096, k=4096, bits=3), FormatRuleError, "bit-widths"),
    ("awq-w4a16", dict(m=1, n=4096, k=4096, group_size=32), FormatRuleError, "group_size"),
    ("cublas-fp16", dict(m=0, n=4096, k=4096), FormatRuleError, ">= 1"),
])
def test_unsupported_shapes_and_bits_name_the_kernel_rule(kernel, kwargs, err, text):
    with pytest.raises(err, match=text):
        predict("a10", kernel, **kwargs)


def test_atom_on_hopper_takes_the_emulated_int4_path_and_says_so():
    bd = predict("h100-sxm", "atom-w4a4", 16, 4096, 4096)
    assert "no INT4 tensor path" in bd.notes and "IMMA.16832" in bd.notes
    # slower than the native path of a GPU with far fewer SMs (an A10 runs mma s4 in hardware)
    assert bd.latency_s > 3 * predict("a10", "atom-w4a4", 16, 4096, 4096).latency_s


def test_atom_refuses_an_arch_without_int4_tensor_cores_or_a_census():
    from dataclasses import replace
    from refsim.gpu_model.specs import get_gpu
    no_int4 = replace(get_gpu("rtx4090"), name="no-int4", tc_int4_op_per_clk_per_sm=0)
    with pytest.raises(FormatRuleError, match="no INT4 tensor-core path"):
        predict(no_int4, "atom-w4a4", 16, 4096, 4096)


def test_unknown_kernel_lists_valid_ones():
    with pytest.raises(FormatRuleError, match="sparse-marlin"):
        predict("a10", "exllama", 1, 4096, 4096)


@pytest.mark.parametrize("kernel", kernel_names())
def test_every_kernel_returns_a_breakdown_with_a_named_bottleneck(kernel):
    bd = predict("orin-agx-64gb", kernel, 1, 4096, 4096)
    assert bd.latency_s > 0 and bd.bottleneck in {"dram", "l2", "tensor", "alu", "smem", "launch", "serial"}
    assert bd.terms["launch"] > 0
    d = bd.as_dict()
    assert d["latency_us"] == pytest.approx(bd.latency_s * 1e6)


# ---- hand-computed terms -----------------------------------------------------------------------
def test_anyprec_alu_and_smem_terms_by_hand():
    g, f = get_gpu("rtx4090"), 1.0e9
    bd = predict(g, "anyprec", 1, 4096, 4096, bits=4, clock=f)
    # SASS census of matmul_kbit_32<1, 4, false> on sm_89 (refsim/data/timings/sass_census_anyprec.csv):
    # per warp and chunk step 212 instructions, 99 ALU, 53 IMAD, 18 HFMA2/HADD2, 32 LDS.U16 into a
    # 16-entry table (8 words: conflict-free), 4 plane LDG, 4 activation LDG.128
    issue, alu, imad, fp16 = 212, 99 * 2, 53 * 2, 18 * 32 / (64 / 4)   # 16 INT32 / HFMA2 lanes per SMSP
    mio = (32 * 1.0 + 4 + 4 * 4) * 4                                    # 128 B wavefront per clock per SM
    # 1024 CTAs of 4 warps on 128 SMs: 8 per SM, one warp each per SMSP, all resident; 4 chunk steps
    steps, warps = 4, 8
    assert bd.terms["alu"] == pytest.approx(steps * warps * max(issue, alu, imad, fp16) / f)
    assert bd.terms["smem"] == pytest.approx(steps * warps * mio / f)


def test_marlin_tensor_term_by_hand():
    bd = predict("a10", "marlin", 16, 4096, 4096, clock=1.0e9)
    # A10 stripe: iters = ceil(1024 / 72) = 15 tiles of 128x128 for the busiest block,
    # 2*16*128*128 FLOP per tile at 1024 FLOP/clk/SM (A10 runs FP32 accumulate at full rate)
    assert bd.terms["tensor"] == pytest.approx(15 * 2 * 16 * 128 * 128 / (1024 * 1.0e9))


def test_geforce_fp32_accumulate_halves_the_tensor_rate():
    a10 = predict("a10", "marlin", 16, 4096, 4096, clock=1.0e9).terms["tensor"]
    # RTX 3090 (GA102 GeForce, 82 SMs): 512 FLOP/clk/SM with FP32 accumulate, iters = ceil(1024/82) = 13
    g3090 = predict("rtx3090", "marlin", 16, 4096, 4096, clock=1.0e9).terms["tensor"]
    assert g3090 == pytest.approx(13 * 2 * 16 * 128 * 128 / (512 * 1.0e9))
    assert g3090 / a10 == pytest.approx(2 * 13 / 15)


@pytest.mark.parametrize("words", [1, 4, 16, 32, 33, 64, 256, 4096, 65536])
def test_lds_conflict_degree_equals_its_plain_loop(words):
    from refsim.gpu_model.kernels import anyprec as ap
    assert ap.lds_conflict_degree.__wrapped__(words, trials=500) == ap.lds_conflict_degree_reference(words, trials=500)
    assert ap.lds_conflict_degree(words) == ap.lds_conflict_degree_reference(words)


def test_anyprec_step_by_hand_in_order_and_batched():
    # H100 SXM at 1980 MHz, M = 1, 3 bits, 4096 x 4096: 1024 CTAs of 4 warps, 8 per SM, so 8 warps
    # per SMSP, all resident, 4 chunk steps each. sm_90 census of matmul_kbit_32<1, 3, false>: 151
    # instructions, 91 ALU (2 clk), 15 IMAD (2 clk), 10 + 8 HFMA2 (1 clk), 16 LDS into the 64-word
    # pair table, 3 plane LDG, 4 LDG.128; one warp's path 416 cycles + one DRAM latency
    g, f = get_gpu("h100-sxm"), 1.98e9
    conflict = anyprec.lds_conflict_degree(64)
    p_w = max(151, 91 * 2, 15 * 2, 10, 8, (16 * conflict + 3 + 4 * 4) * 4)
    w, steps = 8, 4
    path = 416 + g.dram_latency_s * f
    plane = 3 * 4096 * 4096 / 8
    for cache, writeback in (("cold", 0.0), ("dirty", 0.393)):
        bd = predict(g, "anyprec", 1, 4096, 4096, bits=3, clock=f, cache=cache)
        stream = 4096 * (plane / 4096 / 4) * (1 + writeback) / g.dram_eff_bytes_per_s * f
        if cache == "cold":           # in order: stream, the SMSP's work or one warp's cycle
            step = max(stream, w * p_w, path + stream / w)
        else:                         # batched behind the write drain: the batch, then the work
            step = stream + max(w * p_w, path + p_w)
        fixed = bd.terms["launch"] + bd.terms["tail"]
        assert bd.latency_s - fixed == pytest.approx(steps * step / f, rel=1e-12), cache
        assert ("batched" in bd.notes) == (cache == "dirty")
