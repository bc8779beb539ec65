"""DeepGEMM's configuration heuristics have one definition, read by the performance model and the kernel's
host side; the large-M choice uses a 2-CTA cluster (the committed instantiations are pinned in
tests/cuda/test_official_deepgemm.py)."""

import pytest

from refsim.cuda import official_deepgemm
from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels import deepgemm_config


def test_the_host_side_reads_the_same_definition():
    assert official_deepgemm.config is deepgemm_config.config and official_deepgemm.Config is deepgemm_config.Config


def test_large_m_picks_the_widest_tile_and_a_cluster_small_m_the_16_row_block():
    c = deepgemm_config.config(4096, 4096, 4096, 132)
    assert (c.block_m, c.block_n, c.cluster_m, c.cluster_n, c.stages, c.math_threads) == (256, 128, 1, 2, 3, 256)
    c = deepgemm_config.config(1, 4096, 4096, 132)
    assert (c.block_m, c.block_n, c.stages, c.threads) == (16, 32, 16, 256)


def test_an_odd_sm_count_is_refused():
    with pytest.raises(FormatRuleError, match="even SM count"):
        deepgemm_config.config(64, 256, 512, 131)
