"""refsim.ptx.sass: nvdisasm listings parsed per kernel (recorded output: tests/ptx/data/sass/README.md),
and the named error when the tools are missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from refsim.errors import ToolchainError
from refsim.ptx import sass

DATA = Path(__file__).parent / "data" / "sass"
MARLIN = "_Z6MarlinILi256ELi1ELi8ELi8ELi4ELi8EEvPK4int4S2_PS0_S2_iiiPi"


def test_the_marlin_listing_holds_the_ldgsts_the_h100_faulted_on():
    listing = sass.parse_nvdisasm((DATA / "marlin_256_1_8_8_4_8.sm_90.sass").read_text())
    assert list(listing) == [MARLIN]
    code = listing[MARLIN]
    assert len(code) == 1928 and [i.offset for i in code] == [16 * j for j in range(1928)]
    at = {i.offset: i for i in code}[0x1170]
    assert at.opcode == "LDGSTS.E.BYPASS.LTC128B.128"
    assert str(at) == "/*1170*/  LDGSTS.E.BYPASS.LTC128B.128 [R9+UR0+0x4000], desc[UR1][R94.64] ;"


def test_an_m16n8k8_mma_is_one_hmma_1688_on_sm_90_and_predicates_are_not_opcodes():
    listing = sass.parse_nvdisasm((DATA / "mma_k8_f32.sm_90.sass").read_text())
    ops = [i.opcode for i in listing["mma_k8_f32"]]
    assert ops.count("HMMA.1688.F32") == 1 and ops[0] == "LDC" and "EXIT" in ops
    text = "//--------------------- .text.k --------------------------\n" \
           "        /*0000*/              @!P0 BRA `(.L_x_1) ;\n        /*0010*/                   EXIT ;\n"
    assert [i.opcode for i in sass.parse_nvdisasm(text)["k"]] == ["BRA", "EXIT"]


def test_missing_tools_are_a_named_error(monkeypatch):
    monkeypatch.setattr(sass, "find_tool", lambda tool: None)
    with pytest.raises(ToolchainError, match=r"SASS needs ptxas and nvdisasm.*refsim\[cuda\]"):
        sass.sass(".version 8.0\n.target sm_80\n.address_size 64\n", "sm_90")
