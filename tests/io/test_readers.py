"""refsim.io.readers: which reader opens a folder. detect() names the format from the files, in the
documented order, and names the path when nothing matches; open_checkpoint() opens it with READERS."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.errors import CheckpointError
from refsim.io.gptq import GPTQReader
from refsim.io.readers import DETECTION_ORDER, READERS, detect, open_checkpoint
from refsim.io.tensors import save_tensors


def test_unreadable_configs_and_missing_files_are_named(tmp_path, gptq_dir):
    (gptq_dir / "quantize_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"quantize_config\.json: must hold valid JSON"):
        open_checkpoint(gptq_dir)
    with pytest.raises(CheckpointError, match="no such path"):
        detect(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"must hold \*\.safetensors files"):
        detect(tmp_path / "empty")
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "hqq"}}))
    with pytest.raises(CheckpointError, match="quant_method must be 'gptq', 'awq', 'compressed-tensors', 'fp8' or 'bitsandbytes'.*got 'hqq'"):
        detect(tmp_path / "u")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "refsim_checkpoint.json").write_text(json.dumps({"format": "exl2"}))
    with pytest.raises(CheckpointError, match="field 'format' must be one of"):
        detect(tmp_path / "r")


def test_detect_follows_the_documented_order(tmp_path):
    save_tensors(tmp_path / "model.safetensors", {"w": np.zeros((2, 2), np.float16)})
    assert detect(tmp_path) == "fp"                                  # plain safetensors
    assert detect(tmp_path / "model.safetensors") == "fp"            # one file
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "awq"}}))
    assert detect(tmp_path) == "awq"
    (tmp_path / "config.json").write_text(json.dumps({"anyprec": {}, "quantization_config": {"quant_method": "awq"}}))
    assert detect(tmp_path) == "anyprec"                             # anyprec is read before quantization_config
    (tmp_path / "quant_config.json").write_text("{}")
    assert detect(tmp_path) == "awq"                                 # AutoAWQ's older config before config.json
    (tmp_path / "quantize_config.json").write_text("{}")
    assert detect(tmp_path) == "gptq"                                # GPTQ's before AutoAWQ's
    (tmp_path / "refsim_checkpoint.json").write_text(json.dumps({"format": "qigen"}))
    assert detect(tmp_path) == "qigen"                               # refsim's own container first
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "bitsandbytes"}}))
    (tmp_path / "quant_config.json").unlink()
    (tmp_path / "quantize_config.json").unlink()
    (tmp_path / "refsim_checkpoint.json").unlink()
    assert detect(tmp_path) == "bitsandbytes"                        # transformers' bitsandbytes 4-bit folder
    assert DETECTION_ORDER == ("gguf", "refsim", "gptq", "awq", "anyprec", "compressed-tensors", "bitsandbytes", "fp")
    (tmp_path / "model.gguf").write_bytes(b"GGUF")                  # a .gguf file, by its name alone
    assert detect(tmp_path / "model.gguf") == "gguf"


def test_a_quantization_config_that_is_not_an_object_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": "gptq"}))
    with pytest.raises(CheckpointError, match=r"config\.json: field 'quantization_config' must be an object; got 'gptq'"):
        detect(tmp_path)


def test_open_checkpoint_uses_the_reader_of_the_detected_format(gptq_dir):
    assert set(READERS) == {"gptq", "awq", "marlin", "anyprec", "compressed-tensors", "qigen", "atom",
                            "mixed_2_4_16", "fp", "gguf", "fp8", "bitsandbytes"}
    with open_checkpoint(gptq_dir) as ck:
        assert type(ck) is GPTQReader
