"""FP8 weight presets: the e4m3 bytes and scales llm-compressor 0.14.0.1 saved for FP8, FP8_DYNAMIC and
FP8_BLOCK (data/llmcompressor_fp8.npz) reproduced bit for bit, the checkpoint layout inverted, refusals."""

import json
from pathlib import Path

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import fp8 as ffp8
from refsim.quant import fp8
from refsim.testing import assert_bitexact

GOLDENS = np.load(Path(__file__).parent / "data" / "llmcompressor_fp8.npz")
LAYERS = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj")


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("preset", list(fp8.PRESETS))
def test_checkpoint_tensors_equal_what_llm_compressor_saved(preset, layer):
    W = np.ascontiguousarray(GOLDENS[f"{layer}.w"].T)                   # torch (N, K) -> refsim (K, N)
    t = fp8.checkpoint_tensors(fp8.quantize_weight(W, preset))
    assert_bitexact(t["weight"], GOLDENS[f"{preset}.{layer}.weight"], name="weight")
    assert_bitexact(t["weight_scale"], GOLDENS[f"{preset}.{layer}.weight_scale"], name="weight_scale")


def test_the_goldens_hold_the_cases_that_separate_the_rules():
    q = GOLDENS["model.layers.0.self_attn.q_proj.w"]
    assert np.abs(q).max() / 448 < np.finfo(np.float32).eps                 # a scale below eps, kept as is
    down = GOLDENS["model.layers.0.mlp.down_proj.w"]
    assert not down[:, 128:].any() and np.signbit(down[0, :8]).all()       # a zero partial tile; -0.0
    assert GOLDENS["FP8_BLOCK.model.layers.0.mlp.down_proj.weight_scale"].shape == (1, 2)
    assert json.loads(str(GOLDENS["versions"]))["llmcompressor"] == "0.14.0.1"


@pytest.mark.parametrize("preset", list(fp8.PRESETS))
def test_from_checkpoint_tensors_inverts_checkpoint_tensors(preset):
    W = np.ascontiguousarray(GOLDENS["model.layers.0.mlp.down_proj.w"].T)
    q = fp8.quantize_weight(W, preset)
    back = fp8.from_checkpoint_tensors(**fp8.checkpoint_tensors(q), preset=preset)
    assert_bitexact(back.codes, q.codes, name="codes")
    assert_bitexact(back.scales, q.scales, name="scales")
    assert back.scheme == q.scheme


def test_bad_arguments_are_refused_with_named_errors():
    W = np.ones((4, 4), np.float32)
    with pytest.raises(FormatRuleError, match="preset"):
        fp8.quantize_weight(W, "FP8_BLOCKWISE")
    with pytest.raises(NonFiniteError):
        fp8.quantize_weight(np.full((2, 2), np.nan, np.float32), "FP8")
    with pytest.raises(DtypeError):
        fp8.quantize_weight(W.astype(np.float16), "FP8_DYNAMIC")
    with pytest.raises(FormatRuleError, match="presets store"):
        fp8.checkpoint_tensors(ffp8.quantize(W, "deepgemm_block128"))
    with pytest.raises(DtypeError):
        fp8.checkpoint_tensors(W)
    with pytest.raises(ShapeError, match=r"\(1,\)"):
        fp8.from_checkpoint_tensors(np.zeros((4, 4), np.uint8), np.ones((4, 1), np.float32), "FP8")
    with pytest.raises(ShapeError):
        fp8.from_checkpoint_tensors(np.zeros((4, 4), np.uint8), np.ones((1, 4), np.float32), "FP8_DYNAMIC")
