"""Atom's W8A8 baseline (torch-int's CUTLASS 256x128x64, 3-stage INT8 GEMM): its terms worked by hand from
the tile facts at one shape, the fixed tile's waves, the one-CTA-per-SM register bound, and its rules."""

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.specs import get_gpu


def test_the_4090_terms_at_512x4096x4096_by_hand():
    # RTX 4090: 128 SMs, 2520 MHz sustained, INT8 mma 2048 op/clk/SM, 128 FP32 lanes/clk/SM, 1008 GB/s x 0.91
    bd = predict("rtx4090", "atom-w8a8", 512, 4096, 4096)
    # CTAs: ceil(512/256) x ceil(4096/128) = 2 x 32 = 64, one per SM -> one wave on 64 of the 128 SMs
    assert bd.ctas == 64 and bd.waves == 0.5 and bd.launches == 2
    # per CTA: 2*256*128*4096 ops / 2048 = 131072 cycles of mma, then 256*128 outputs x 7 lanes / 128 = 1792
    assert bd.terms["tensor"] == pytest.approx((131072 + 1792) / 2.52e9, rel=1e-12)
    # bias.repeat: 4096 bytes read + 512*4096 written, streamed at 1008e9 * 0.91 B/s before the GEMM
    assert bd.terms["serial"] == pytest.approx((4096 + 512 * 4096) / (1008e9 * 0.91), rel=1e-12)
    # int8 bytes: A 512*4096 + W 4096*4096 + C read + D written 2*512*4096; the repeat's 4096 + 512*4096
    assert bd.bytes_dram == 512 * 4096 + 4096 * 4096 + 2 * 512 * 4096 + 4096 + 512 * 4096
    # L2 operand reads: A once per N tile (32), W once per M tile (2)
    assert bd.terms["l2"] == pytest.approx((512 * 4096 * 32 + 4096 * 4096 * 2) / (32 * 128 * 2.52e9), rel=1e-12)
    assert bd.bottleneck == "tensor"


def test_the_fixed_tile_pads_m_to_256_and_waves_step_at_128_ctas_on_a_4090():
    t = {m: predict("rtx4090", "atom-w8a8", m, 4096, 4096).terms["tensor"] for m in (1, 256, 512, 1024, 2048)}
    assert t[1] == t[256] == t[512] == t[1024]          # 32, 32, 64, 128 CTAs: one wave
    assert t[2048] == 2 * t[1024]                       # 256 CTAs: two waves


def test_one_cta_per_sm_even_where_shared_memory_holds_two():
    # A100: 164 KiB of shared memory holds two 72 KiB CTAs, but 2 x 256 threads x >= 160 registers
    # (128 s32 accumulators + 32 for one k32 step's fragments) > 65536
    from refsim.gpu_model.kernels.atom_w8a8 import ctas_per_sm
    assert ctas_per_sm(get_gpu("a100-80gb")) == 1
    assert predict("a100-80gb", "atom-w8a8", 512, 4096, 4096).ctas == 64


@pytest.mark.parametrize("gpu,kw,err,rule", [
    ("rtx4090", dict(n=4096, k=4104), ShapeError, "128-bit int8 loads"),
    ("rtx4090", dict(n=4104, k=4096), ShapeError, "128-bit int8 accesses"),
    ("rtx4090", dict(n=4096, k=4096, bits=4), FormatRuleError, "bit-widths"),
    ("rtx2080", dict(n=4096, k=4096), FormatRuleError, r"compute capability >= 8\.0"),
])
def test_the_kernels_rules_are_named(gpu, kw, err, rule):
    with pytest.raises(err, match=rule):
        predict(gpu, "atom-w8a8", 512, **kw)
