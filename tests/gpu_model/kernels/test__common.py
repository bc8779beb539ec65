"""refsim.gpu_model.kernels._common: the helpers every kernel model shares, worked by hand.

The tiled tensor time (CTAs, fractional waves, whole waves run back to back), the mma.sync fraction of
Hopper's wgmma rate, the shape-rule message, the sm_90a refusal, the compute-capability comparison, ptxas's
registers read from resources.json, and the GEMM tile chooser on a shape where split-K obviously wins and one where it
cannot help.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels._common import (best_gemm_config, cc_at_least, compiled_registers, gemm_l2_bytes,
                                              has_wgmma, mma_sync_rate, require_multiple, require_sm90a,
                                              tile_tensor_time)
from refsim.gpu_model.specs import get_gpu

A10, H100 = get_gpu("a10"), get_gpu("h100-sxm")


def test_tile_tensor_time_pads_waves():
    a10 = get_gpu("a10")
    # 73 CTAs of 128x128 on 72 SMs (1 per SM) -> 2 waves of one tile each
    t, ctas, w = tile_tensor_time(a10, 1.0e9, 128, 73 * 128, 1024, 128, 128, 1, 1024)
    per_tile = 2 * 128 * 128 * 1024 / (1024 * 1.0e9)
    assert ctas == 73 and w == pytest.approx(73 / 72) and t == pytest.approx(2 * per_tile)


def test_a_full_wave_is_one_wave_and_ctas_per_sm_share_the_rate():
    # 144 CTAs (M 256 / 128 = 2 rows of 72 tiles) at 2 per SM on 72 SMs: exactly 1 wave; each CTA gets
    # half the SM's 1024 FLOP/clk: 2 * 128 * 128 * 512 / (512 * 1e9) = 16.384 us
    t, ctas, w = tile_tensor_time(A10, 1.0e9, 256, 72 * 128, 512, 128, 128, 2, 1024)
    assert (ctas, w) == (144, 1.0)
    assert t == 2 * 128 * 128 * 512 / (512 * 1.0e9)
    # an N that is not a multiple of the tile still makes a whole CTA: ceil(100 / 64) = 2
    assert tile_tensor_time(A10, 1.0e9, 16, 100, 64, 16, 64, 1, 1024)[1] == 2


def test_mma_sync_reaches_63_percent_of_hoppers_wgmma_rate_and_the_table_rate_elsewhere():
    assert mma_sync_rate(H100, 4096.0) == 4096.0 * 0.63
    assert mma_sync_rate(A10, 512.0) == 512.0


def test_shape_rule_message_names_kernel_value_and_why():
    require_multiple("marlin", "k", 256, 128, "tile K")
    with pytest.raises(ShapeError, match=r"^k: kernel marlin needs k to be a multiple of 128 \(tile K\); got 200$"):
        require_multiple("marlin", "k", 200, 128, "tile K")


def test_compute_capability_compares_as_numbers():
    # 8.6 vs 9.0 and 8.6 vs 8.10 would order wrongly as strings
    assert cc_at_least(A10, 8, 6) and cc_at_least(A10, 8, 0) and not cc_at_least(A10, 8, 9)
    assert cc_at_least(H100, 9, 0) and not cc_at_least(A10, 8, 10)


def test_compiled_registers_are_ptxas_numbers_from_resources_json():
    table = json.loads((Path(__file__).resolve().parents[3] / "refsim" / "cuda" / "resources.json").read_text())
    name, row = next(iter(table["kernels"].items()))
    assert compiled_registers(name) == row["registers_per_thread"]
    with pytest.raises(KeyError):
        compiled_registers("no_such_kernel")


def test_the_tile_chooser_splits_a_long_k_over_a_tiny_output():
    # M = 16, N = 128, K = 65536 on 132 SMs: unsplit, at most 2 CTAs; split-K 16 gives 32 CTAs.
    # 16 x 64 tiles (M rounds the tile down to 16), 3 stages of (16 + 64) x 32 halves = 15360 B
    cfg = best_gemm_config(H100, 1.5e9, 16, 128, 65536, 4096.0)
    assert (cfg["tile_m"], cfg["tile_n"], cfg["split"], cfg["ctas"], cfg["bytes_in_flight"]) == (16, 64, 16, 32, 15360)
    # 15 fp32 partial M x N slices written and read back: 15 * 16 * 128 * 4 * 2 bytes
    assert cfg["red_bytes"] == 245760
    # each CTA: 2 * 16 * 64 * 4096 FLOP at 4096 / 4 FLOP/clk (4 CTAs per SM) and 1.5 GHz; one wave
    assert cfg["t_tc"] == pytest.approx(2 * 16 * 64 * 4096 / (1024 * 1.5e9), rel=1e-12)


def test_a_large_square_gemm_is_not_split():
    cfg = best_gemm_config(H100, 1.5e9, 4096, 4096, 4096, 4096.0)
    # 32 x 32 = 1024 tiles of 128 x 128 already fill 132 SMs: split-K would only add partial sums
    assert (cfg["tile_m"], cfg["tile_n"], cfg["split"], cfg["red_bytes"], cfg["ctas"]) == (128, 128, 1, 0, 1024)


def test_wgmma_exists_on_compute_capability_9_0_only():
    # wgmma.mma_async is an sm_90a instruction: the Hopper rows have it, Ampere/Ada/Turing do not
    assert has_wgmma(H100) and has_wgmma(get_gpu("h100-pcie"))
    assert not any(has_wgmma(get_gpu(g)) for g in ("a100-80gb", "a10", "rtx4090", "rtx2080", "orin-agx-64gb"))


def test_sm90a_refusal_names_kernel_features_gpu_and_its_compute_capability():
    require_sm90a("deepgemm-fp8", H100, "wgmma.mma_async")                    # passes on sm_90a
    with pytest.raises(FormatRuleError, match=r"^gpu: kernel hopper-w4a16 needs sm_90a \(wgmma.mma_async and TMA "
                                              r"exist on compute capability 9.0 only\); a10 is 8.6$"):
        require_sm90a("hopper-w4a16", A10, "wgmma.mma_async and TMA")


def test_l2_reads_of_a_tiled_gemm_with_and_without_multicast():
    # M = 512, N = 8192, K = 28672 in fp16, 128 x 256 tiles: A (512 x 28672 x 2 B = 29,360,128) once per
    # N tile (8192 / 256 = 32), W (8192 x 28672 x 2 B = 469,762,048) once per M tile (512 / 128 = 4)
    assert gemm_l2_bytes(512, 8192, 28672, 2, 128, 256) == 29_360_128 * 32 + 469_762_048 * 4
    # a 2 x 1 cluster multicasts each W tile to its 2 M tiles: W's share halves, A's stays
    assert gemm_l2_bytes(512, 8192, 28672, 2, 128, 256, (2, 1)) == 29_360_128 * 32 + 469_762_048 * 2
    # a 1 x 2 cluster halves A's share instead
    assert gemm_l2_bytes(512, 8192, 28672, 2, 128, 256, (1, 2)) == 29_360_128 * 16 + 469_762_048 * 4


def test_the_wgmma_family_joins_the_chooser_only_when_given_a_rate():
    plain = best_gemm_config(H100, 1.98e9, 512, 8192, 28672, 4096.0 * 0.63)
    assert plain["family"].startswith("mma.sync")
    cfg = best_gemm_config(H100, 1.98e9, 512, 8192, 28672, 4096.0 * 0.63, wgmma_op_per_clk_per_sm=4096.0)
    # 4 x 32 = 128 tiles of 128 x 256 on 132 SMs, one persistent CTA per SM, a 2 x 1 cluster
    assert (cfg["family"], cfg["tile_m"], cfg["tile_n"], cfg["split"], cfg["ctas"], cfg["ctas_per_sm"]) == \
        ("wgmma 128x256 cluster 2x1", 128, 256, 1, 128, 1)
    # one wave: 2 x 128 x 256 x 28672 FLOP per tile at 4096 FLOP/clk/SM and 1.98 GHz
    assert cfg["t_tc"] == pytest.approx(2 * 128 * 256 * 28672 / (4096 * 1.98e9), rel=1e-12)
    assert cfg["l2_bytes"] == 29_360_128 * 32 + 469_762_048 * 2
    # stages of (128 + 256) x 64 halves = 49,152 B: 233,472 B of shared memory hold 4 of them
    assert cfg["bytes_in_flight"] == 4 * 49_152
