"""Kernel models: hand-computed bytes and partitions, the rules each kernel enforces, paper anchors."""

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels import predict


# ---- Atom (validation against its own NVBench table, not fitted) ------------------------------
@pytest.mark.parametrize("m, measured_us", [(16, 26.7), (256, 27.5), (1024, 54.5), (4096, 177.8)])
def test_atom_matches_the_4090_nvbench_table_within_20_percent(m, measured_us):
    bd = predict("rtx4090", "atom-w4a4", m, 4096, 4096)
    assert abs(bd.latency_us - measured_us) / measured_us < 0.20


def test_atom_is_flat_while_one_wave_of_tiles():
    a = predict("rtx4090", "atom-w4a4", 16, 4096, 4096).latency_s
    b = predict("rtx4090", "atom-w4a4", 128, 4096, 4096).latency_s
    assert a == pytest.approx(b, rel=0.02)


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
