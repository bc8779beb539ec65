"""refsim.data.models: the bundled decoder's folder holds what a Hugging Face loader reads, with its README."""

import json

from refsim.data.models import pydoc_llama_path


def test_the_bundled_decoder_folder_has_its_config_weights_tokenizer_and_readme():
    path = pydoc_llama_path()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "README.md"):
        assert (path / name).is_file(), name
    config = json.loads((path / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == 256   # the docstring's decoder
