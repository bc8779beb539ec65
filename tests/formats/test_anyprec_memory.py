"""Table 1 from first principles agrees with the paper to within 0.1 GB."""

from __future__ import annotations

import pytest

from refsim.errors import FormatRuleError
from refsim.formats import anyprec_memory as mem


def test_llama2_7b_parameter_counts_add_up_to_the_published_6_74b():
    # 6,738,415,616 parameters: the Llama-2-7B count on its model card / config (untied lm_head)
    m = mem.LLAMA2_7B
    assert mem.quantized_weight_count(m) + mem.fp16_param_count(m) == 6_738_415_616


@pytest.mark.parametrize("bits", list(mem.PAPER_TABLE1))
def test_table1_within_0_1_gb_of_the_paper(bits):
    anyp, sep, saving = mem.PAPER_TABLE1[bits]
    row = mem.memory_table(bit_sets=[bits])[0]
    assert abs(row.anyprec_bytes / 1e9 - anyp) <= 0.1
    assert abs(row.separate_bytes / 1e9 - sep) <= 0.05
    assert abs(row.saving - saving) <= 0.015


def test_hand_computed_row_3_to_8():
    m = mem.LLAMA2_7B
    weights = 6_476_005_376  # 8 planes of 1 bit
    tables = 1_359_872 * 2 * (8 + 16 + 32 + 64 + 128 + 256)
    rest = 262_410_240 * 2
    assert mem.anyprec_bytes(m, range(3, 9)) == weights + tables + rest


def test_separate_models_with_tables_overshoot_the_paper():
    row = mem.memory_table(bit_sets=[(3, 6)], separate_with_tables=True)[0]
    assert row.separate_bytes / 1e9 - mem.PAPER_TABLE1[(3, 6)][1] > 0.15


def test_bad_bits():
    with pytest.raises(FormatRuleError, match="1..8"):
        mem.anyprec_bytes(mem.LLAMA2_7B, [3, 9])
    with pytest.raises(FormatRuleError):
        mem.anyprec_bytes(mem.LLAMA2_7B, [])
