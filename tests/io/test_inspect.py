"""refsim.io.inspect: the per-layer facts of a checkpoint, on a one-layer GPTQ checkpoint whose every
figure is worked out by hand (256 x 256, 4-bit, group 128, asymmetric, v1 zeros), and the text table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.io.gptq import write_gptq
from refsim.io.inspect import format_table, inspect_checkpoint

from conftest_io import L0, L1, gptq_layer

# the tensors of one 256 x 256 layer, 4-bit, group 128: qweight (256/8, 256) int32, qzeros (2, 256/8)
# int32, scales (2, 256) fp16, g_idx (256,) int32, bias (256,) fp16
ON_DISK = 32 * 256 * 4 + 2 * 32 * 4 + 2 * 256 * 2 + 256 * 4 + 256 * 2


def test_a_gptq_layer_is_summarised_with_hand_worked_figures(gptq_dir):
    calls = []
    rep = inspect_checkpoint(gptq_dir, progress=lambda done, total, name: calls.append((done, total, name)))
    assert calls == [(1, 1, L0)]
    assert (rep["format"], rep["n_layers"], rep["v1_zero_overflows"]) == ("gptq", 1, 0)
    (lay,) = rep["layers"]
    assert {k: lay[k] for k in ("name", "format", "bits", "group_size", "desc_act", "sym", "k", "n")} == \
        {"name": L0, "format": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": False, "k": 256, "n": 256}
    assert lay["zero_point"] == "v1 (stored zero - 1)"
    assert lay["bytes_fp16"] == 2 * 256 * 256 and lay["bytes_on_disk"] == ON_DISK == rep["bytes_on_disk"]
    assert rep["ratio_to_fp16"] == ON_DISK / (2 * 256 * 256)
    assert lay["marlin"]["ok"] is False and "asymmetric zero points" in lay["marlin"]["reason"]
    assert rep["marlin_incompatible"] == [L0]
    assert lay["qigen"] == {"ok": True, "reason": None}
    json.dumps(rep)                                   # the --json output is plain JSON


def test_qigen_refuses_act_order_and_eight_bits_with_both_reasons(tmp_path):
    rng = np.random.default_rng(1)
    write_gptq(tmp_path, [gptq_layer(n, rng, bits=8, sym=True, act_order=True) for n in (L0, L1)])
    rep = inspect_checkpoint(tmp_path)
    assert [r["name"] for r in rep["layers"]] == [L0, L1]
    for r in rep["layers"]:
        assert r["qigen"]["ok"] is False
        assert r["qigen"]["reason"] == ("bits=8 (QIGen generates 2/3/4-bit kernels); "
                                        "act-order (QIGen reads groups as consecutive rows)")
        assert r["desc_act"] is True and r["sym"] is True


def test_format_table_prints_a_row_per_layer_and_the_marlin_verdict(gptq_dir):
    text = format_table(inspect_checkpoint(gptq_dir)).splitlines()
    assert text[0].startswith(f"{gptq_dir}: gptq, 1 layers, 0.03 MiB of layer tensors vs 0.12 MiB in FP16 (27.1%)")
    row = text[3].split()
    assert row[1:] == ["gptq", "4", "128", "n", "n", "256", "256", "v1", "(stored", "zero", "-", "1)"]
    assert text[4] == "Marlin cannot run 1 of 1 layers as is:"


def test_format_table_spells_a_per_channel_layer_per_channel(tmp_path):
    write_gptq(tmp_path, [gptq_layer(L0, np.random.default_rng(2), gs=None, sym=True)])
    text = format_table(inspect_checkpoint(tmp_path)).splitlines()
    assert text[3].split()[1:4] == ["gptq", "4", "per-channel"]


def test_format_table_refuses_what_inspect_did_not_return():
    with pytest.raises(FormatRuleError, match=r"summary: must be what inspect_checkpoint returns.*got missing keys"):
        format_table({"path": "x", "format": "gptq"})
