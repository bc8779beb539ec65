"""The zero-handling rules refsim states but has not measured: each probe tile gives, under refsim's models,
the D the table states (worked by hand in the module docstring), and the tile tells refsim's answer from
MMA-Sim's at every arch the rule names."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import tensor_core as tc
from refsim.arith import tensor_core_rules as rules
from refsim.arith import tensor_core_types as tct
from refsim.errors import FormatRuleError


def model_d(name: str, arch: str) -> np.ndarray:
    """D (16, 8) raw bits of the rule's tile under refsim's model at ``arch``."""
    A, B, C = rules.probe_tile(name)
    r = rules.rule(name)
    if ".bf16." in r.instruction:
        return tct.mma(arch, "m16n8k16", "bf16", "bf16", A, B, C.view(np.float32)).view(np.uint32)
    out = np.float16 if C.dtype == np.uint16 else np.float32
    D = tc.mma_m16n8k16(arch, A.view(np.float16), B.view(np.float16), C.view(out))
    return D.view(np.uint16 if out == np.float16 else np.uint32)


@pytest.mark.parametrize("r", rules.UNMEASURED, ids=lambda r: r.name)
def test_each_tile_gives_the_stated_bits_at_every_arch_it_names(r):
    assert r.status == "unverified" and r.measured_at == ()
    assert r.refsim_d != r.mma_sim_d
    for arch in r.archs:
        D = model_d(r.name, arch)
        assert int(D[r.element]) == r.refsim_d, arch


def test_the_hand_worked_values():
    # negzero-sum: even columns -0 (0x80000000), odd columns +0 (products +0 there) at every arch
    D = model_d("negzero-sum", "sm_80")
    assert (D[:, 0::2] == 0x80000000).all() and (D[:, 1::2] == 0).all()
    # zero-product-exp: 2^-20 (1 + 2^-7 + 2^-22) = 0x35810002; MMA-Sim's 2^-20 = 0x35800000
    assert rules.rule("zero-product-exp").refsim_d == int(np.float32(2.0**-20 * (1 + 2.0**-7 + 2.0**-22)).view(np.uint32))
    assert rules.rule("zero-product-exp").mma_sim_d == int(np.float32(2.0**-20).view(np.uint32))
    # f16-zero-floor: refsim sm_80 +0, MMA-Sim 2^-24 (f16 0x0001); refsim sm_90 (F = 25) keeps 2^-46: 2^-24 too
    assert int(model_d("f16-zero-floor", "sm_90")[0, 0]) == 0x0001
    assert "sm_90" not in rules.rule("f16-zero-floor").archs
    A, B, _ = rules.probe_tile("f16-zero-floor")
    p = A.view(np.float16).astype(np.float64)[0, :2] * B.view(np.float16).astype(np.float64)[:2, 0]
    assert list(p) == [2.0**-26 + 2.0**-35 + 2.0**-46, 2.0**-26 - 2.0**-35]


def test_json_form_and_refusals():
    d = rules.rule("f16-zero-floor").as_dict()
    assert (d["refsim_d"], d["mma_sim_d"], d["status"], d["archs"]) == ("0x0", "0x1", "unverified",
                                                                       ["sm_80", "sm_86", "sm_87", "sm_89"])
    with pytest.raises(FormatRuleError, match="name: must be one of"):
        rules.probe_tile("sign")
