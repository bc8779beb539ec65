"""Tests for refsim.formats.stripes (Marlin striped partitioning); property: for drawn tile grids, parallel
problems and SM counts the stripes cover every tile once, bottom to top."""

import pytest
from hypothesis import given
from hypothesis import strategies as hst

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import stripes as st

# SM counts of the worked examples: A10, A100, RTX 4090, Orin, H100 (SXM)
GPUS = {"A10": 72, "A100": 108, "RTX4090": 128, "Orin": 16, "H100": 132}


def _check_launch(launch):
    """Coverage and ordering invariants of one launch."""
    seen = {}
    for b, stripe in enumerate(launch.blocks):
        for s in stripe:
            assert s.block == b
            for kt in s.k_tiles:
                key = (s.col_par, kt)
                assert key not in seen, f"tile {key} covered twice"
                seen[key] = b
    assert len(seen) == launch.k_tiles * launch.n_tiles * launch.parallel
    for col in range(launch.n_tiles * launch.parallel):
        pieces = sorted((s for stripe in launch.blocks for s in stripe if s.col_par == col),
                        key=lambda s: -s.k_tile_start)
        assert [s.slice_idx for s in pieces] == list(range(len(pieces)))  # bottom to top
        assert all(s.slice_count == len(pieces) for s in pieces)
        assert pieces[-1].k_tile_start == 0 and pieces[-1].writes_output
    lengths = [n for n in launch.iterations_per_block if n]
    assert all(n == launch.iters for n in lengths[:-1]) and 0 < lengths[-1] <= launch.iters


def test_kernel_source_example_3x3_tiles_on_5_sms():
    # the comment in Marlin(): 0 1 3 / 0 2 3 / 1 2 4
    iters, blocks = st.launch_partition(3, 3, 1, 5, 1)
    grid = [[None] * 3 for _ in range(3)]
    for stripe in blocks:
        for s in stripe:
            for kt in s.k_tiles:
                grid[kt][s.n_tile] = s.block
    assert iters == 2
    assert grid == [[0, 1, 3], [0, 2, 3], [1, 2, 4]]


@pytest.mark.parametrize("k_tiles", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("n_tiles", [1, 2, 4, 7])
@pytest.mark.parametrize("parallel", [1, 3])
@pytest.mark.parametrize("group_tiles", [1, 2])
def test_partition_covers_each_tile_once_and_matches_reference_for_all_sm_counts(k_tiles, n_tiles, parallel, group_tiles):
    for sms in range(1, 40):
        iters, blocks = st.launch_partition(k_tiles, n_tiles, parallel, sms, group_tiles)
        launch = st.Launch(0, 16, 1, parallel, k_tiles, n_tiles, iters, sms, blocks)
        _check_launch(launch)
        ref = st.stripes_reference(k_tiles, n_tiles, parallel, sms, group_tiles)
        got = {(s.block, s.col_par): (s.k_tile_start, s.k_tile_count, s.slice_idx, s.slice_count)
               for stripe in blocks for s in stripe}
        assert got == ref


def test_a100_small_batch_example_from_reference_notes():
    plan = st.stripes(1, 4096, 4096, 108, 128)
    (launch,) = plan.launches
    assert (plan.config.thread_k, plan.config.thread_n) == (128, 128)
    assert launch.iters == 10 and launch.busy_blocks == 103 and launch.idle_sms == 5

    def fmt(b):
        return [(s.n_tile, s.k_tile_start, s.k_tile_start + s.k_tile_count - 1, s.slice_idx, s.slice_count)
                for s in launch.blocks[b]]

    assert fmt(0) == [(0, 0, 9, 3, 4)]
    assert fmt(3) == [(0, 30, 31, 0, 4), (1, 0, 7, 3, 4)]
    assert fmt(6) == [(1, 28, 31, 0, 4), (2, 0, 5, 3, 4)]
    assert fmt(102) == [(31, 28, 31, 0, 4)]
    assert launch.reduction_order(0, 0) == (3, 2, 1, 0)
    assert launch.reduction_order(0, 1) == (6, 5, 4, 3)


def test_a10_batch64_group128_rounds_iters_to_whole_groups():
    plan = st.stripes(64, 4096, 4096, 72, 128)
    (launch,) = plan.launches
    assert (plan.config.thread_k, plan.config.thread_n, launch.thread_m_blocks) == (64, 256, 4)
    assert launch.iters == 16 and launch.busy_blocks == 64 and launch.idle_sms == 8
    assert launch.reduction_order(0, 5) == (23, 22, 21, 20)
    per_channel = st.stripes(64, 4096, 4096, 72, None).launches[0]
    assert per_channel.iters == 15 and per_channel.busy_blocks == 69
    assert per_channel.reduction_order(0, 0) == (4, 3, 2, 1, 0)


def test_large_batch_runs_parallel_problems_in_one_launch():
    plan = st.stripes(1024, 4096, 4096, 108, 128)
    (launch,) = plan.launches
    assert launch.parallel == 16 and launch.prob_m == 1024
    assert launch.iters == 152
    _check_launch(launch)


@pytest.mark.parametrize("m", [1, 16, 17, 64, 70, 130, 200])
@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_worked_examples_on_named_gpus_cover_every_tile(m, gpu):
    plan = st.stripes(m, 1024, 2048, GPUS[gpu], 128)
    rows = 0
    for launch in plan.launches:
        assert launch.row_start == rows
        rows += launch.prob_m
        _check_launch(launch)
    assert rows == m


def test_m_splitting_follows_the_host_loop():
    plan = st.stripes(70, 512, 512, 108, None)  # 5 m-blocks, pad 10 -> 64 rows, then 6 rows
    assert [(l.row_start, l.prob_m, l.thread_m_blocks, l.parallel) for l in plan.launches] == [(0, 64, 4, 1), (64, 6, 1, 1)]
    plan = st.stripes(200, 512, 512, 108, None)  # 13 blocks, pad 8 -> par 3 (192 rows), then 8 rows
    assert [(l.row_start, l.prob_m, l.thread_m_blocks, l.parallel) for l in plan.launches] == [(0, 192, 4, 3), (192, 8, 1, 1)]


def test_illegal_shapes_and_configs_raise_named_errors():
    with pytest.raises(ShapeError, match="N: must be a multiple of thread_n=256"):
        st.stripes(32, 128, 4096, 108, 128)
    with pytest.raises(ShapeError, match="K: must be a multiple of thread_k=128"):
        st.stripes(1, 256, 192, 108, None)
    with pytest.raises(FormatRuleError, match="no compiled kernel"):
        st.stripes(32, 256, 256, 108, None, thread_k=128, thread_n=128)
    with pytest.raises(FormatRuleError, match=r"supports only 128 or None \(per-channel\); got 64"):
        st.marlin_tile_config(1, 256, 256, 64)


# --------------------------------------------------------------------------- properties (hypothesis)
@given(
    hst.integers(1, 9), hst.integers(1, 9), hst.integers(1, 4), hst.integers(1, 150), hst.sampled_from([1, 2])
)
def test_stripes_cover_every_tile_once_in_bottom_to_top_order(k_tiles, n_tiles, parallel, sms, group_tiles):
    _, blocks = st.launch_partition(k_tiles, n_tiles, parallel, sms, group_tiles)
    got = {(s.block, s.col_par): (s.k_tile_start, s.k_tile_count, s.slice_idx, s.slice_count)
           for stripe in blocks for s in stripe}
    assert got == st.stripes_reference(k_tiles, n_tiles, parallel, sms, group_tiles)
    covered = sorted((s.col_par, kt) for stripe in blocks for s in stripe for kt in s.k_tiles)
    assert covered == [(c, kt) for c in range(n_tiles * parallel) for kt in range(k_tiles)]


# --------------------------------------------------------------------------- plan branches
@pytest.mark.parametrize("args, kw, want", [
    # the spec block's 3x3, 5-SM example: k-tiles of 64 (M > 16), N = 3 x 256, iters 2
    ((64, 768, 192, 5, None), {}, {"tile_k64_n256", "group_per_channel", "m_blocks_4", "slices_gt1",
                                   "stripe_crosses_columns", "partial_stripe"}),
    # one 128 x 128 tile, one block, one row
    ((1, 128, 128, 1, 128), {}, {"tile_k128_n128", "group_128", "m_blocks_1", "m_partial_block",
                                 "one_slice_per_column"}),
    # M = 200, max_par 1: launches of 64, 64, 64 rows (par capped at 1) and 8 rows
    ((200, 256, 64, 1, None), {"max_par": 1}, {"tile_k64_n256", "group_per_channel", "m_blocks_4", "m_blocks_1",
                                               "m_partial_block", "m_split", "max_par_capped",
                                               "one_slice_per_column"}),
    # M = 128: one launch of two parallel problems; 4 k-tiles x 2 problems on 3 SMs: iters 3, grouped -> 4
    ((128, 256, 256, 3, 128), {}, {"tile_k64_n256", "group_128", "m_blocks_4", "parallel_problems",
                                   "iters_group_rounded", "one_slice_per_column", "idle_sms"}),
    # M = 8 forced onto the 64 x 256 tile: 16 k-tiles on 5 SMs, iters 4: 4 slices, one idle block
    ((8, 256, 1024, 5, None), {"thread_k": 64, "thread_n": 256},
     {"tile_k64_n256", "tile_forced", "group_per_channel", "m_blocks_1", "m_partial_block", "slices_gt1",
      "slices_gt2", "idle_sms"}),
])
def test_plan_branches_name_the_paths_of_worked_plans(args, kw, want):
    got = st.plan_branches(*args, **kw)
    assert got == want
    assert got <= set(st.BRANCHES)


def test_plan_branches_keeps_the_plans_rules():
    with pytest.raises(ShapeError, match="thread_n=256"):
        st.plan_branches(17, 128, 128, 4, None)
