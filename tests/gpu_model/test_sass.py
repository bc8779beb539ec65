"""The SASS census tool (refsim/gpu_model/sass.py) on a hand-written nvdisasm listing, and the
Any-Precision census it produced (refsim/data/timings/sass_census_anyprec.csv) against the kernel's
own structure."""

import csv
from pathlib import Path

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model import sass
from refsim.gpu_model.kernels import anyprec, resources

# the shape nvdisasm -c prints: a function, a label, instructions with addresses, a back branch
# (hand-written; the fuzz seeds of refsim.gpu_model.sass read the same file)
LISTING = (Path(__file__).parent / "data" / "nvdisasm_loop.txt").read_text()
IV = {"alu": 2.0, "imad": 2.0, "fp16": 1.0, "fp16_mma": 1.0, "mio": 4.0}
LAT = {"alu": 4, "imad": 4, "fp16": 4, "lds": 29, "l1": 39}


def test_parse_line_reads_destinations_and_sources():
    assert sass.parse_line("IMAD.WIDE R4, R0, 0x4, R4") == sass.Sass("IMAD.WIDE", ("R4", "R5"), ("R0", "R4"))
    assert sass.parse_line("LDG.E.128 R8, desc[UR4][R6.64]") == \
        sass.Sass("LDG.E.128", ("R8", "R9", "R10", "R11"), ("R6", "R7"))
    assert sass.parse_line("ISETP.NE.AND P0, PT, R4, RZ, PT").dst == ("P0",)
    assert sass.parse_line("@!P1 STS [R3], R6") == sass.Sass("STS", (), ("P1", "R3", "R6"))
    assert sass.parse_line("HFMA2 R13, R12.H0_H0, R8, R13").src == ("R12", "R8", "R13")
    with pytest.raises(FormatRuleError, match="one SASS instruction"):
        sass.parse_line("   ")


def test_inner_loop_is_the_body_closed_by_the_back_branch():
    items = sass.functions(LISTING)["_Z14matmul_kbit_32ILi1ELi3ELb0EEvPK6__halfPKjjjjS2_PS0_"]
    body = sass.inner_loop(items)
    assert [s.opcode for s in body] == ["LDG.E", "LDG.E.128", "LOP3.LUT", "LDS", "HFMA2", "IMAD.WIDE",
                                        "ISETP.NE.AND", "BRA"]
    with pytest.raises(FormatRuleError, match="no loop"):
        sass.inner_loop(["MOV R1, R2", "EXIT"])


def test_census_counts_by_pipe():
    c = sass.census(sass.inner_loop(sass.functions(LISTING).popitem()[1]))
    assert c["issue_slots"] == 8
    assert (c["ldg"], c["ldg128"], c["lds"], c["alu"], c["imad"], c["fp16"], c["ctrl"]) == (1, 1, 1, 2, 1, 1, 1)


def test_chain_cycles_by_hand():
    body = sass.inner_loop(sass.functions(LISTING).popitem()[1])
    # second iteration, issue clock by clock (the first ends at 59 with R4 ready at 54):
    # 59 LDG (R4) | 63 LDG.128 (MIO busy 4 after the LDG) -> R8 at 102 | 64 LOP3 (R2 at 59) -> R3 68 |
    # 79 LDS (MIO busy 16 after the LDG.128) -> R12 108 | 108 HFMA2 | 109 IMAD.WIDE -> R4 113 |
    # 113 ISETP -> P0 117 | 117 BRA: 118 - 59 = 59 cycles
    assert sass.chain_cycles(body, IV, LAT) == 59.0
    c0, rounds = sass.chain_terms(body, IV, LAT)
    assert rounds == 1.0 and 0 < c0 < 59.0 + 39         # one dependent DRAM round trip per iteration
    with pytest.raises(FormatRuleError, match="intervals"):
        sass.chain_cycles(body, {"alu": 2.0}, LAT)


def test_anyprec_rows_read_the_template_arguments_from_the_mangled_name():
    [row] = sass.anyprec_rows(LISTING, "sm_90")
    assert (row["arch"], row["maxm"], row["bits"], row["use_ksplit"], row["issue_slots"], row["ldg"]) == \
        ("sm_90", 1, 3, 0, 8, 1)
    with pytest.raises(FormatRuleError, match="arch"):
        sass.anyprec_rows(LISTING, "sm_70")


def _census_rows():
    path = Path(sass.__file__).resolve().parents[1] / "data" / "timings" / "sass_census_anyprec.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_anyprec_census_covers_every_instantiation_main_cu_dispatches():
    rows = _census_rows()
    keys = {(r["arch"], int(r["maxm"]), int(r["bits"]), int(r["use_ksplit"])) for r in rows}
    for arch in sass.ANYPREC_ARCHS:
        for bits in range(3, 9):
            assert (arch, 1, bits, 1) in keys
            assert all((arch, m, bits, 0) in keys for m in range(1, 9))
    assert len(rows) == len(keys) == 6 * 6 * 9


def test_anyprec_census_loads_match_the_kernel_source():
    # matmul.cuh: per chunk step a warp loads `bits` plane words for each of its multi_row rows
    # (LDG.E), four float4 activations per batch row (LDG.128, hoisted out of the row loop), and
    # looks up each row's table 16 (half2 pair table: 3-bit, 4-bit at M > 1) or 32 times
    for r in _census_rows():
        maxm, bits = int(r["maxm"]), int(r["bits"])
        multi_row = 1 if maxm == 1 else 4
        lookups, _, _ = anyprec.lookup_plan(bits, maxm)
        assert int(r["ldg"]) == bits * multi_row, r
        assert int(r["ldg128"]) == 4 * maxm, r
        assert int(r["lds"]) == lookups * multi_row, r
        assert int(r["issue_slots"]) >= sum(int(r[k]) for k in ("alu", "imad", "fp16", "fp16_mma", "lds", "ldg",
                                                                "ldg128"))


def test_census_lookup_by_compute_capability():
    c = resources.anyprec_census("9.0", 1, 3, False)
    assert (c["issue_slots"], c["ldg"], c["chain_rounds"]) == (151, 3, 1)
    assert resources.anyprec_census("8.9", 8, 3, False)["fp16_mma"] == 0       # HFMA2.MMA is sm_90's
    with pytest.raises(FormatRuleError, match="sm_70"):
        resources.anyprec_census("7.0", 1, 3, False)
