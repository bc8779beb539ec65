"""The Marlin cost models take their partition from refsim.formats.stripes: check that it agrees
with an independent closed form (the arithmetic the model used before stripes.py landed) over a
grid of (m, n, k, sms, group_size), and that the models really read stripes.py.

Closed form (marlin_cuda_kernel.cu, IST-DASLab/marlin @ 2f6d7c1, host ``marlin_cuda`` loop and the
``Marlin`` prologue): tile (128, 128) for M <= 16 else (64, 256); host M loop with
``par = min((16 * remaining - pad) // 64, 16)`` when more than 4 m-blocks remain;
``iters = ceil(k_tiles * n_tiles * par / sms)`` rounded up to ``group_blocks / thread_k_blocks``;
busy blocks ``ceil(total / iters)``; a column ``c`` is cut by ``floor((end - 1) / iters) -
floor(start / iters) + 1`` stripes.
"""

import math

import numpy as np
import pytest

from refsim.formats import stripes
from refsim.formats import stripes as st
from refsim.gpu_model.kernels import clear_caches, marlin, predict


def _tile(m):
    return (128, 128) if m <= 16 else (64, 256)


def _host_launches(m, max_par=16):
    """(m_blocks, parallel, rows) per launch, written from the host loop."""
    tot = -(-m // 16)
    pad = 16 * tot - m
    out, i = [], 0
    while i < tot:
        rem = tot - i
        if rem > 4:
            par = min((16 * rem - pad) // 64, max_par)
            out.append((4, par, 64 * par))
            i += 4 * par
        else:
            out.append((rem, 1, m - 16 * i))
            i = tot
    return out


def _closed_form(k_tiles, n_tiles, par, sms, group_tiles):
    """(iters, busy blocks, longest reduction chain, all reduction steps) without walking blocks."""
    total = k_tiles * n_tiles * par
    iters = group_tiles * math.ceil(math.ceil(total / sms) / group_tiles)
    busy = math.ceil(total / iters)
    counts = [(k_tiles * c + k_tiles - 1) // iters - (k_tiles * c) // iters + 1 for c in range(n_tiles * par)]
    return iters, busy, max(counts), sum(x - 1 for x in counts)


M_GRID = (1, 5, 16, 17, 48, 64, 65, 80, 128, 200, 1024, 1100)
NK_GRID = ((256, 256), (768, 384), (4096, 4096), (11008, 4096), (4096, 11008), (5120, 13824))
SMS_GRID = (1, 7, 16, 46, 72, 108, 128, 132)


def _cases():
    for m in M_GRID:
        tk, tn = _tile(m)
        for n, k in NK_GRID:
            if n % tn or k % tk:
                continue
            for g in (None, 128):
                if g is None or k % g == 0:
                    yield m, n, k, g


@pytest.mark.parametrize("m, n, k, g", list(_cases()))
def test_model_partition_matches_the_closed_form_on_every_gpu_size(m, n, k, g):
    tk, tn = _tile(m)
    assert marlin.tile_shape(m) == (tk, tn)
    group_tiles = 1 if g is None else max(1, (g // 16) // (tk // 16))
    for sms in SMS_GRID:
        parts = marlin.partition(m, n, k, sms, g)
        assert [(p.m_blocks, p.parallel, p.rows) for p in parts] == _host_launches(m)
        for p in parts:
            assert (p.k_tiles, p.n_tiles) == (k // tk, n // tn)
            got = (p.iters, p.busy_blocks, p.max_slices, p.reduction_steps)
            assert got == _closed_form(k // tk, n // tn, p.parallel, sms, group_tiles), (m, n, k, g, sms)


def test_summary_of_the_kernel_source_example():
    # 3x3 tiles on 5 SMs (the comment in Marlin()): iters 2, blocks 0-4 busy, columns cut 2, 2, 2 times
    iters, blocks = st.launch_partition(3, 3, 1, 5, 1)
    launch = st.Launch(0, 1, 1, 1, 3, 3, iters, 5, blocks)
    assert marlin.summarize_launch(launch) == marlin.LaunchCost(1, 1, 1, 3, 3, 2, 5, 2, 3)


def test_a10_partition_from_the_spec_note():
    # the Marlin reference notes' worked example: A10 (72 SMs), M <= 16, 4096x4096 g128 -> iters 15, blocks 0-68 busy;
    # M = 32 -> 64 k-tiles x 16 n-tiles, iters ceil(1024/72) = 15 rounded up to 2 tiles/group -> 16, 64 busy
    (p,) = marlin.partition(16, 4096, 4096, 72, 128)
    assert (p.iters, p.busy_blocks) == (15, 69)
    (p,) = marlin.partition(32, 4096, 4096, 72, 128)
    assert (p.iters, p.busy_blocks) == (16, 64)


def test_the_models_read_their_partition_from_stripes(monkeypatch):
    # replace stripes' host loop and device partition with spies: a prediction for a fresh shape
    # must call them (the model computes no partition of its own)
    kinds, parts = [], []
    real_kinds, real_part = st.launch_kinds, st.launch_summary

    def spy_kinds(*args, **kwargs):
        kinds.append(args)
        return real_kinds(*args, **kwargs)

    def spy_part(*args, **kwargs):
        parts.append(args)
        return real_part(*args, **kwargs)

    monkeypatch.setattr(st, "launch_kinds", spy_kinds)
    monkeypatch.setattr(st, "launch_summary", spy_part)
    clear_caches()
    try:
        predict("a10", "marlin", 16, 4096, 4096, group_size=128)
        predict("a10", "sparse-marlin", 16, 4096, 4096)
    finally:
        clear_caches()
    # (k_tiles, n_tiles, parallel, sms, group_tiles): 32 x 32 tiles of 128 x 128, one problem, 72 SMs;
    # groups of 128 = one k-tile (group_tiles 1) and per-channel scales (-1 -> 1 as well)
    assert kinds and set(kinds) == {(16, 16)}
    assert [p[:4] for p in parts] == [(32, 32, 1, 72), (32, 32, 1, 72)]


@pytest.mark.parametrize("m", [1, 16, 17, 64, 65, 1023, 1024, 1025, 1100, 2047, 4100, 20000])
@pytest.mark.parametrize("group_size", [None, 128])
def test_the_grouped_partition_equals_the_full_plan_launch_by_launch(m, group_size):
    # the model's O(1)-in-M partition (launch kinds with counts) expands to exactly the summaries of
    # stripes()' launches, one by one
    grouped = marlin.partition(m, 4096, 2048, 72, group_size)
    assert len(grouped) <= 3
    plan = st.stripes(m, 4096, 2048, 72, group_size, max_par=16)
    assert [p._replace(count=1) for p in grouped for _ in range(p.count)] == \
        [marlin.summarize_launch(launch) for launch in plan.launches]


@pytest.mark.parametrize("max_par", [1, 2, 3, 16])
def test_launch_kinds_expand_to_the_host_loop(max_par):
    for m in range(1, 2200):
        expanded = [kind[1:] for kind in st.launch_kinds(m, max_par) for _ in range(kind[0])]
        assert expanded == [launch[1:] for launch in st._launches(m, max_par)], m


def test_launch_summary_equals_the_slice_by_slice_partition():
    # closed form vs launch_partition's slices, exhaustively over small sizes and group roundings
    for k_tiles in range(1, 9):
        for n_tiles in range(1, 7):
            for parallel in (1, 2, 3):
                for sms in (1, 2, 3, 5, 7, 16):
                    for group_tiles in (1, 2, 3):
                        iters, blocks = st.launch_partition(k_tiles, n_tiles, parallel, sms, group_tiles)
                        launch = st.Launch(0, 16, 1, parallel, k_tiles, n_tiles, iters, sms, blocks)
                        lc = marlin.summarize_launch(launch)
                        assert st.launch_summary(k_tiles, n_tiles, parallel, sms, group_tiles) == \
                            (iters, lc.busy_blocks, lc.iters, lc.max_slices, lc.reduction_steps), \
                            (k_tiles, n_tiles, parallel, sms, group_tiles)


def test_launch_kinds_are_a_handful_at_any_m():
    # 2^31 - 1 rows: 2,097,151 full launches of 1024 rows, then 960 rows (par 15) and 63 rows
    assert st.launch_kinds((1 << 31) - 1) == ((2097151, 1024, 4, 16), (1, 960, 4, 15), (1, 63, 4, 1))


def test_marlin_24_uses_the_dense_tile_and_partition():
    # Sparse-Marlin's k_tiles = prob_k / 32 / (thread_k / 32) = K / thread_k: same plan as dense Marlin
    d = predict("a10", "marlin", 64, 4096, 4096, group_size=128)
    s = predict("a10", "sparse-marlin", 64, 4096, 4096, group_size=128)
    assert s.notes == d.notes and s.ctas == d.ctas


@pytest.mark.parametrize("k_tiles, n_tiles, parallel, sms, group_tiles", [
    (4, 1 << 18, 16, 72, 1), (1, 1 << 20, 1, 108, 1), (576, 4608, 16, 72, 2), (7, 99991, 3, 132, 1)])
def test_launch_summary_at_layer_and_huge_sizes_matches_a_column_by_column_count(k_tiles, n_tiles, parallel, sms,
                                                                                  group_tiles):
    # the spec block's definitions evaluated over every column here (no period folding)
    total = k_tiles * n_tiles * parallel
    iters = -(-total // sms)
    iters = group_tiles * -(-iters // group_tiles)
    first = np.arange(n_tiles * parallel, dtype=np.int64) * k_tiles
    counts = (first + k_tiles - 1) // iters - first // iters + 1
    expected = (iters, -(-total // iters), min(iters, total), int(counts.max()), int((counts - 1).sum()))
    assert st.launch_summary(k_tiles, n_tiles, parallel, sms, group_tiles) == expected


def test_launch_summary_refuses_more_columns_than_marlin_can_index():
    from refsim.errors import FormatRuleError
    with pytest.raises(FormatRuleError, match="column count"):
        st.launch_summary(1, 1 << 24, 2, 72, 1)


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


def _census_row(arch):
    import csv
    from pathlib import Path
    path = Path(__file__).resolve().parents[3] / "refsim" / "data" / "timings" / "sass_census.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kernel"] == "marlin" and r["arch"] == arch]
    assert len(rows) == 1 and rows[0]["unit"] == "steady_loop_4_tiles_m4_g128"
    return {key: int(rows[0][key]) for key in ("issue_slots", "alu_pipe", "fma_pipe", "tensor_pipe")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_census_of_the_4_m_block_tile_counts_the_tiles_mmas(arch):
    # 4 tiles per pass of the stage loop; per warp and tile 4 m-blocks x 8 n8 fragments x 2 k16 steps
    # (a 64 x 256 tile over 8 warps: 4 column groups of 64 x 2 halves of the 4 k16 steps)
    assert _census_row(arch)["tensor_pipe"] == 4 * (4 * 8 * 2)


def test_the_4_m_block_tile_is_not_issue_bound_on_sm_90():
    # 2 warps per SMSP (one CTA of 8 warps per SM) issue 2 x (census / 4 tiles) slots per tile: well
    # under the per-tile compute the model already charges on an H100 (its dequant -> MMA chain)
    issue_per_smsp_per_tile = 2 * _census_row("sm_90")["issue_slots"] / 4
    assert issue_per_smsp_per_tile == 461.5
    per_tile = marlin._kind_constants(_h100(), 1.98e9, 4096, 4096, 128, 4.0, False, 4, 64, 256)[4]
    assert issue_per_smsp_per_tile < per_tile


def _h100():
    from refsim.gpu_model.specs import get_gpu
    return get_gpu("h100-sxm")
