"""refsim/archs.py: the one table of GPU architectures, its numbers against the CUDA C++ Programming
Guide, and every architecture list in refsim drawn from it."""

from __future__ import annotations

import pytest

from refsim import archs

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", typed from the guide:
# arch -> (max shared memory per block with opt-in KiB, per SM KiB, resident warps per SM, resident blocks per SM);
# sm_120 (12.0) as NVIDIA's libcu++ cuda/__device/arch_traits.h transcribes it: 100 KiB - 1 KiB reserved, 1536
# threads, 24 blocks
GUIDE = {"sm_70": (96, 96, 64, 32), "sm_75": (64, 64, 32, 16), "sm_80": (163, 164, 64, 32),
         "sm_86": (99, 100, 48, 16), "sm_87": (163, 164, 48, 16), "sm_89": (99, 100, 48, 24),
         "sm_90": (227, 228, 64, 32), "sm_120": (99, 100, 48, 24)}


def test_the_table_holds_the_guides_numbers_oldest_first():
    assert list(archs.ARCHS) == list(GUIDE)
    got = {a: (f.max_shared_bytes_per_block / 1024, f.max_shared_bytes_per_sm / 1024, f.max_warps_per_sm,
               f.max_ctas_per_sm) for a, f in archs.ARCHS.items()}
    assert got == GUIDE
    for f in archs.ARCHS.values():
        assert (f.max_threads_per_block, f.max_block_dims, f.max_grid_dims) == (1024, (1024, 1024, 64),
                                                                               (2**31 - 1, 65535, 65535))
        assert f.shared_bytes_without_opt_in == f.max_static_shared_bytes == 48 * 1024


def test_names_parse_to_their_number_and_compute_capability():
    assert [archs.ARCHS[a].compute_capability for a in ("sm_75", "sm_86", "sm_90", "sm_120")] == [
        "7.5", "8.6", "9.0", "12.0"]
    assert [archs.base_arch(a) for a in ("sm_120a", "sm_120", "sm_90a", "sm_100a")] == ["sm_120", "sm_120", "sm_90",
                                                                                       None]
    assert [archs.parse_sm(a) for a in ("sm_80", "sm_90a", "sm_100f", "sm_120")] == [80, 90, 100, 120]
    assert [archs.parse_sm(a) for a in ("sm80", "sm_", "compute_80", "sm_80x", 80, None)] == [None] * 6


def test_refsims_architecture_lists_are_drawn_from_the_table():
    from refsim import ptx
    from refsim.arith import tensor_core, tensor_core_types
    from refsim.cuda import marlin
    from refsim.ptx.semantics import handler
    from refsim.testing import validate

    assert ptx.ARCHS is archs.ARCHS and ptx.ArchFacts is archs.ArchFacts
    assert handler.ARCHS == tuple(archs.ARCHS)
    order = list(archs.ARCHS)
    for name, lst in (("tensor_core.ARCHS", tensor_core.ARCHS), ("tensor_core.MMA_ARCHS", tensor_core.MMA_ARCHS),
                      ("marlin.ARCHS", marlin.ARCHS), ("validate.TENSOR_CORE_ARCHS", validate.TENSOR_CORE_ARCHS)):
        assert set(lst) <= set(order) and list(lst) == sorted(lst, key=order.index), name
    assert set(tensor_core.ARCHS) == set(tensor_core.MODELS)
    assert tensor_core.MMA_ARCHS == ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90")   # Volta: m8n8k4 only
    assert {m.arch for m in tensor_core_types.MODELS.values()} <= set(tensor_core.MMA_ARCHS)
    assert {a for k in tensor_core_types.modelled() for a in k.archs} <= set(tensor_core.MMA_ARCHS)


@pytest.mark.parametrize("gpu", ["a100-80gb", "h100-sxm", "rtx4090", "a10", "rtx2080", "orin-agx-64gb"])
def test_the_performance_model_reads_its_per_sm_limits_from_the_table(gpu):
    from refsim.gpu_model.specs import get_gpu

    g = get_gpu(gpu)
    f = archs.ARCHS["sm_" + g.compute_capability.replace(".", "")]
    assert (g.smem_per_sm_bytes, g.smem_per_block_bytes, g.max_warps_per_sm, g.max_ctas_per_sm) == (
        f.max_shared_bytes_per_sm, f.max_shared_bytes_per_block, f.max_warps_per_sm, f.max_ctas_per_sm)
