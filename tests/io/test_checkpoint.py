"""refsim.io.checkpoint: the parts every reader shares. A checkpoint folder's tensors live each in one
file, a truncated shard is named, JSON configs and their fields are checked with the file named, and
layer names sort naturally."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import CheckpointError, FormatRuleError
from refsim.io import open_checkpoint
from refsim.io.checkpoint import Checkpoint, config_field, natural_key, read_json
from refsim.io.tensors import TensorFile, save_tensors

from conftest_io import L0


def test_tensor_in_two_shards_and_truncated_shard_are_refused(tmp_path, gptq_dir):
    with TensorFile(gptq_dir / "model.safetensors") as tf:
        save_tensors(gptq_dir / "model-2.safetensors", {f"{L0}.scales": tf.read(f"{L0}.scales")})
    with pytest.raises(CheckpointError, match="must live in one file only"):
        open_checkpoint(gptq_dir)
    (gptq_dir / "model-2.safetensors").unlink()
    blob = (gptq_dir / "model.safetensors").read_bytes()
    (gptq_dir / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: must be a valid safetensors file"):
        open_checkpoint(gptq_dir)


def test_natural_key_puts_layer_10_after_layer_9():
    names = ["model.layers.10.mlp", "model.layers.9.mlp", "model.layers.1.mlp", "model.layers.2.attn"]
    assert sorted(names, key=natural_key) == ["model.layers.1.mlp", "model.layers.2.attn", "model.layers.9.mlp",
                                              "model.layers.10.mlp"]
    assert natural_key("a12b") == ("a", 12, "b")
    with pytest.raises(FormatRuleError, match="name"):
        natural_key(12)


def test_read_json_names_the_file_and_what_is_wrong(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"bits": 4}')
    assert read_json(p) == {"bits": 4}
    p.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match=r"c\.json: must hold a JSON object; got list"):
        read_json(p)
    p.write_bytes(b"\xff\xfe{")
    with pytest.raises(CheckpointError, match=r"c\.json: must be a readable UTF-8 JSON file"):
        read_json(p)
    with pytest.raises(CheckpointError, match=r"missing\.json: must be a readable UTF-8 JSON file"):
        read_json(tmp_path / "missing.json")


def test_config_field_checks_presence_kind_and_choices(tmp_path):
    cfg = {"bits": 4, "sym": True, "fmt": "gptq"}
    p = tmp_path / "q.json"
    assert config_field(cfg, "bits", p, (int,)) == 4
    assert config_field(cfg, "group_size", p, (int,), default=None) is None
    with pytest.raises(CheckpointError, match=r"q\.json: field 'group_size' must be present; got no such field"):
        config_field(cfg, "group_size", p, (int,))
    # a JSON true is not an int
    with pytest.raises(CheckpointError, match=r"field 'sym' must be int; got True"):
        config_field(cfg, "sym", p, (int,))
    assert config_field(cfg, "sym", p, (bool,)) is True
    with pytest.raises(CheckpointError, match=r"field 'bits' must be str/null; got 4"):
        config_field(cfg, "bits", p, (str, type(None)))
    with pytest.raises(CheckpointError, match=r"field 'fmt' must be one of \['awq'\]; got 'gptq'"):
        config_field(cfg, "fmt", p, (str,), choices=("awq",))


def test_the_base_class_reads_no_format_and_a_folder_needs_safetensors(tmp_path):
    with pytest.raises(CheckpointError, match="the base class reads no format"):
        Checkpoint(tmp_path)
    save_tensors(tmp_path / "x.safetensors", {"fc.weight": np.zeros((2, 3), np.float16)})
    with open_checkpoint(tmp_path) as ck:           # plain safetensors: the FP reader, a Checkpoint
        assert isinstance(ck, Checkpoint)
        assert ck.tensor_names() == ["fc.weight"] and ck.has("fc.weight") and not ck.has("v")
        assert ck.shape("fc.weight") == (2, 3) and ck.layer_names() == ["fc"]
        with pytest.raises(CheckpointError, match=r"tensor 'v' must be present; got no such tensor"):
            ck.tensor("v")
