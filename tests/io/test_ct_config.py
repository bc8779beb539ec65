"""compressed-tensors' quantization_config: every field honoured as the library reads it or refused with a
CheckpointError naming the field and the value (refsim/io/ct_config.py), on copies of a checkpoint
llm-compressor wrote (tests/io/data/ct_w4a16_sym: one group targeting ``Linear``, ``lm_head`` ignored)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from refsim.errors import CheckpointError
from refsim.io import open_checkpoint

DATA = Path(__file__).parent / "data"
L0 = "model.layers.0.mlp.down_proj"
L5 = "model.layers.0.self_attn.q_proj"


def _folder(tmp_path, edit, folder="ct_w4a16_sym") -> Path:
    """A copy of ``folder`` whose quantization_config went through ``edit(qc)``."""
    dst = tmp_path / folder
    shutil.copytree(DATA / folder, dst)
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg["quantization_config"])
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _weights(qc):
    return qc["config_groups"]["group_0"]["weights"]


def _read(dst, name=L0):
    return open_checkpoint(dst).read_layer(name)


def _set(path, value):
    """An edit setting ``qc[path[0]][path[1]]...`` (``weights`` stands for group_0's weights)."""
    def edit(qc):
        d = _weights(qc) if path[0] == "weights" else qc
        for key in path[1 if path[0] == "weights" else 0:-1]:
            d = d[key]
        d[path[-1]] = value
    return edit


# ---------------------------------------------------------------- refused, naming the field and value
@pytest.mark.parametrize("path, value, match", [
    (("format",), "naive-quantized", r"format must be one of \['pack-quantized', 'float-quantized', "
                                      r"'nvfp4-pack-quantized', 'mxfp4-pack-quantized'\].*got 'naive-quantized'"),
    (("format",), "float-quantized", r"format must equal the checkpoint's format 'float-quantized'.*got "
                                      r"'pack-quantized'"),
    (("config_groups", "group_0", "format"), "float-quantized", r"format must equal the checkpoint's format "
                                                                 r"'pack-quantized'.*got 'float-quantized'"),
    (("sparsity_config",), {"format": "sparse-24-bitmask", "targets": ["Linear"]}, r"sparsity_config must be null"),
    (("transform_config",), {"config_groups": {"u": {}}}, r"transform_config must be null"),
    (("kv_cache_scheme",), {"num_bits": 8}, r"kv_cache_scheme must be null"),
    (("quantization_status",), "frozen", r"quantization_status must be 'compressed'.*got 'frozen'"),
    (("weights", "actorder"), "bogus", r"actorder must be null, true, false or one of .*got 'bogus'"),
    (("weights", "actorder"), 3, r"actorder must be .*got 3"),
    (("weights", "type"), "float", r"type must be 'int'.*got 'float'"),
    (("weights", "strategy"), "tensor", r"strategy must be 'group' or 'channel'.*got 'tensor'"),
    (("weights", "dynamic"), True, r"dynamic must be false"),
    (("weights", "block_structure"), [128, 128], r"block_structure must be null"),
    (("weights", "num_bits"), 2**40, r"num_bits must be one of \[2, 3, 4, 8\]; got 1099511627776"),
    (("weights", "num_bits"), -1, r"num_bits must be one of .*got -1"),
    (("weights", "group_size"), 0, r"group_size must be a positive integer for strategy 'group'; got 0"),
    (("weights", "shuffle"), True, r"key 'shuffle' is not a QuantizationArgs field"),
    (("config_groups", "group_0", "extra"), 1, r"key 'extra' is not a config-group field"),
    (("config_groups", "group_0", "targets"), ["re:(unclosed"], r"targets entry must be a valid regular "
                                                                 r"expression .*got 're:\(unclosed'"),
    (("config_groups", "group_0", "targets"), ["Embedding"], r"targets class names other than 'Linear' cannot "
                                                             r"be resolved.*got 'Embedding'"),
    (("ignore",), ["re:[z-a]"], r"ignore entry must be a valid regular expression"),
    (("ignore",), "lm_head", r"ignore must be a list"),
])
def test_a_config_field_refsim_cannot_honour_is_refused_by_name(tmp_path, path, value, match):
    dst = _folder(tmp_path, _set(path, value))
    with pytest.raises(CheckpointError, match=match):
        _read(dst)


def test_group_actorder_without_weight_g_idx_is_refused(tmp_path):
    dst = _folder(tmp_path, _set(("weights", "actorder"), "group"))
    with pytest.raises(CheckpointError, match=r"weight_g_idx' must be present for actorder 'group'"):
        _read(dst)


def test_group_actorder_needs_the_group_strategy(tmp_path):
    def edit(qc):
        _weights(qc).update(strategy="channel", group_size=None, actorder=True)
    with pytest.raises(CheckpointError, match=r"actorder 'group' needs strategy 'group'; got True"):
        _read(_folder(tmp_path, edit, "ct_w8a16_channel"))


def test_a_g_idx_without_group_actorder_is_refused(tmp_path):
    dst = _folder(tmp_path, lambda qc: None)
    t = load_file(str(dst / "model.safetensors"))
    k = int(t[f"{L0}.weight_shape"][1])
    t[f"{L0}.weight_g_idx"] = (np.arange(k) // 128).astype(np.int32)
    save_file(t, str(dst / "model.safetensors"), {"format": "pt"})
    with pytest.raises(CheckpointError, match=r"weight_g_idx'.*must be absent for actorder None"):
        _read(dst)


def test_a_packed_layer_listed_in_ignore_is_refused(tmp_path):
    dst = _folder(tmp_path, lambda qc: qc["ignore"].append(L0))
    with pytest.raises(CheckpointError, match=rf"ignore lists '{L0}', which matches layer '{L0}'"):
        _read(dst)
    dst2 = _folder(tmp_path / "b", lambda qc: qc["ignore"].append("re:.*self_attn"))
    _read(dst2)                                                  # the mlp layers stay readable
    with pytest.raises(CheckpointError, match=r"ignore lists 're:\.\*self_attn'"):
        _read(dst2, L5)


def test_two_groups_targeting_one_layer_are_refused(tmp_path):
    def edit(qc):
        grp = json.loads(json.dumps(qc["config_groups"]["group_0"]))
        grp["targets"] = [L0]
        qc["config_groups"]["group_1"] = grp
    dst = _folder(tmp_path, edit)
    with pytest.raises(CheckpointError, match=rf"layer '{L0}' must match one config group's targets; got 2"):
        _read(dst)
    _read(dst, L5)                                               # matched by group_0 alone


# ---------------------------------------------------------------- honoured as the library does
def test_targets_by_exact_name_and_regex_pick_their_groups_scheme(tmp_path):
    def edit(qc):
        g0 = qc["config_groups"]["group_0"]
        g1 = json.loads(json.dumps(g0))
        g0["targets"] = ["re:.*mlp\\..*"]
        g1["targets"] = [L5, "re:.*self_attn\\.[kvo]_proj$"]
        qc["config_groups"]["group_1"] = g1
    ck = open_checkpoint(_folder(tmp_path, edit))
    assert ck.scheme_of(L0) is ck.groups["group_0"]
    assert ck.scheme_of(L5) is ck.groups["group_1"]
    assert ck.scheme_of("model.layers.0.self_attn.o_proj") is ck.groups["group_1"]


@pytest.mark.parametrize("value, expect", [(None, None), (False, None), ("weight", "weight"),
                                           ("STATIC", "weight"), ("Weight", "weight")])
def test_actorder_spellings_read_as_the_library_reads_them(tmp_path, value, expect):
    dst = _folder(tmp_path, _set(("weights", "actorder"), value))
    assert _read(dst).actorder == expect


def test_a_missing_strategy_is_inferred_from_group_size(tmp_path):
    dst = _folder(tmp_path, lambda qc: _weights(qc).pop("strategy"))
    lay = _read(dst)
    assert (lay.strategy, lay.group_size) == ("group", 128)
    dst = _folder(tmp_path / "c", lambda qc: _weights(qc).update(group_size=-1, strategy=None),
                  "ct_w8a16_channel")
    assert _read(dst).strategy == "channel"
    dst = _folder(tmp_path / "t", lambda qc: _weights(qc).update(group_size=None, strategy=None),
                  "ct_w8a16_channel")
    with pytest.raises(CheckpointError, match=r"strategy must be 'group' or 'channel'.*got 'tensor'"):
        _read(dst)


def test_an_empty_sparsity_config_means_none(tmp_path):
    for value in ({}, None):
        dst = _folder(tmp_path / str(value), _set(("sparsity_config",), value))
        assert _read(dst).bits == 4
