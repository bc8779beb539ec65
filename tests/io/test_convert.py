"""refsim.io.convert: GPTQ -> Marlin (pinned layout, act-order, refusals, --requantize), GPTQ v1 <-> v2,
GPTQ -> QIGen, with bit-identical round trips and all-or-nothing output folders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.formats import gptq as gptq_format
from refsim.formats import marlin as marlin_format
from refsim.formats import qigen as qigen_format
from refsim.io import open_checkpoint
from refsim.io.convert import convert
from refsim.io.gptq import write_gptq
from refsim.io.tensors import TensorFile
from refsim.testing import assert_bitexact

from conftest_io import L0, L1, gptq_layer


def _src(tmp_path, **kw):
    rng = np.random.default_rng(11)
    layers = [gptq_layer(n, rng, **kw) for n in (L0, L1)]
    d = tmp_path / "src"
    d.mkdir()
    write_gptq(d, layers)
    return d, layers


@pytest.mark.parametrize("act_order, gs", [(False, 128), (True, 128), (False, None)])
def test_gptq_to_marlin_writes_the_pinned_layout(tmp_path, act_order, gs):
    src, layers = _src(tmp_path, sym=True, act_order=act_order, gs=gs)
    out = tmp_path / "out"
    convert(src, "marlin", out)
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors", "refsim_checkpoint.json"]
    cfg = json.loads((out / "refsim_checkpoint.json").read_text())
    assert cfg["format"] == "marlin" and set(cfg["layers"]) == {L0, L1}
    with TensorFile(out / "model.safetensors") as tf:
        for lay in layers:
            q, scales, _, g_idx = gptq_format.unpack(lay.ckpt)
            perm = np.argsort(g_idx, kind="stable") if act_order else np.arange(lay.k)
            B, s = marlin_format.pack(q[perm], scales, gs)  # the pinned expectation
            assert_bitexact(tf.read(f"{lay.name}.B", dtype=np.int32, shape=(lay.k // 16, 2 * lay.n)), B, name="B")
            assert_bitexact(tf.read(f"{lay.name}.s", dtype=np.float16, shape=scales.shape), s, name="s")
            assert (f"{lay.name}.perm" in tf.names()) is act_order
            assert_bitexact(tf.read(f"{lay.name}.bias"), lay.bias, name="bias passed through")
    # reading back gives the GPTQ weights exactly (same fp16 products, source row order)
    ck = open_checkpoint(out)
    for lay in layers:
        assert_bitexact(ck.read_layer(lay.name).dequantize(), lay.dequantize(), name="weights")


def _assert_refused_and_empty(tmp_path, src, out, pattern, **kw):
    with pytest.raises(FormatRuleError, match=pattern):
        convert(src, "marlin", out, **kw)
    assert not out.exists() or not any(out.iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_asymmetric_source_is_refused_with_the_reason_and_out_stays_empty(tmp_path):
    src, _ = _src(tmp_path, sym=False)
    _assert_refused_and_empty(tmp_path, src, tmp_path / "new", r"asymmetric zero points .*Marlin's format is symmetric, .q - 8. \* s"
                              r"\) \(use --requantize to re-quantize symmetrically")
    (tmp_path / "empty").mkdir()
    _assert_refused_and_empty(tmp_path, src, tmp_path / "empty", "cannot repack to Marlin")


def test_shape_and_bits_refusals(tmp_path):
    src, _ = _src(tmp_path, sym=True, n=128)
    _assert_refused_and_empty(tmp_path, src, tmp_path / "o1", "N=128 is not a multiple of 256$")  # no --requantize hint
    with pytest.raises(FormatRuleError, match="even by re-quantizing"):   # (it would not help)
        convert(src, "marlin", tmp_path / "o3", requantize=True)
    src2 = tmp_path / "src2"
    src2.mkdir()
    write_gptq(src2, [gptq_layer(L0, np.random.default_rng(0), bits=3, gs=64, sym=True)])
    _assert_refused_and_empty(tmp_path, src2, tmp_path / "o2", r"bits=3 .Marlin is 4-bit.; group_size=64")


def test_requantize_converts_asymmetric_layers_and_reports_the_added_error(tmp_path):
    src, layers = _src(tmp_path, sym=False)
    out = tmp_path / "out"
    summary = convert(src, "marlin", out, requantize=True)
    ck = open_checkpoint(out)
    for lay in layers:
        rep = summary["layers"][lay.name]
        assert rep["requantized"] and "asymmetric" in rep["reason"]
        W = lay.dequantize().astype(np.float64)
        W_new = ck.read_layer(lay.name).dequantize().astype(np.float64)
        assert rep["max_abs"] == float(np.abs(W_new - W).max()) > 0
        # symmetric absmax re-quantization of 4-bit data: error within half a step plus fp16 rounding
        assert rep["rel_fro"] < 0.2


def test_gptq_v1_v2_round_trip_is_bit_identical(tmp_path):
    src, layers = _src(tmp_path, sym=False, fmt="gptq")
    convert(src, "gptq-v2", tmp_path / "v2")
    convert(tmp_path / "v2", "gptq-v1", tmp_path / "v1")
    with TensorFile(src / "model.safetensors") as a, TensorFile(tmp_path / "v1" / "model.safetensors") as b, \
            TensorFile(tmp_path / "v2" / "model.safetensors") as c:
        assert a.names() == b.names()
        for n in a.names():
            assert_bitexact(b.read(n), a.read(n), name=n)
        z1 = gptq_format.unpack_qzeros(a.read(f"{L0}.qzeros"), 4, 256, "gptq")
        z2 = gptq_format.unpack_qzeros(c.read(f"{L0}.qzeros"), 4, 256, "gptq_v2")
        assert_bitexact(z2, z1, name="zeros survive the convention change")
    assert json.loads((tmp_path / "v2" / "quantize_config.json").read_text())["checkpoint_format"] == "gptq_v2"


def test_v1_cannot_hold_a_zero_of_zero_and_overflowed_v1_cannot_become_v2(tmp_path):
    rng = np.random.default_rng(2)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    zeros = rng.integers(1, 16, (2, 256))
    zeros[1, 3] = 0
    from refsim.io.gptq import GPTQLayer

    d = tmp_path / "v2src"
    d.mkdir()
    ck = gptq_format.pack(q, np.ones((2, 256), np.float16), zeros, 4, group_size=128, checkpoint_format="gptq_v2")
    write_gptq(d, [GPTQLayer(L0, ck, 128, False, False)])
    with pytest.raises(FormatRuleError, match=r"1 zero point\(s\) are 0, which v1's 'zero - 1' cannot store"):
        convert(d, "gptq-v1", tmp_path / "o")
    d1 = tmp_path / "v1src"
    d1.mkdir()
    with pytest.warns(gptq_format.ZeroPointOverflowWarning):
        ck1 = gptq_format.pack(q, np.ones((2, 256), np.float16), zeros, 4, group_size=128, checkpoint_format="gptq")
    write_gptq(d1, [GPTQLayer(L0, ck1, 128, False, False)])
    with pytest.raises(FormatRuleError, match="v1 zero field.s. overflowed"):
        convert(d1, "gptq-v2", tmp_path / "o2")
    from refsim.io.inspect import inspect_checkpoint

    rep = inspect_checkpoint(d1)
    assert rep["v1_zero_overflows"] == 5  # column 3 and the 4 higher fields of its qzeros word (8 per word)


def test_gptq_to_qigen_round_trips_qweight(tmp_path):
    src, layers = _src(tmp_path, bits=3, gs=64)
    out = tmp_path / "q"
    convert(src, "qigen", out, mb=64, tb=32)
    ck = open_checkpoint(out)
    assert ck.format == "qigen"
    for lay in layers:
        got = ck.read_layer(lay.name)
        assert_bitexact(got.packed, qigen_format.pack(lay.ckpt.qweight, qigen_format.QIGenLayout(3, 256, 256, 64, 32)),
                        name="packed")
        assert_bitexact(got.gptq().qweight, lay.ckpt.qweight, name="qweight round trip")
        assert_bitexact(got.dequantize(), lay.dequantize(), name="weights")
    (tmp_path / "x").mkdir()
    src_act, _ = _src(tmp_path / "x", act_order=True)
    with pytest.raises(FormatRuleError, match="act-order"):
        convert(src_act, "qigen", tmp_path / "q2")


def test_converting_a_non_gptq_source_is_refused(tmp_path):
    src, _ = _src(tmp_path, sym=True)
    convert(src, "marlin", tmp_path / "m")
    with pytest.raises(FormatRuleError, match="needs a gptq source; got a marlin checkpoint"):
        convert(tmp_path / "m", "qigen", tmp_path / "o")
    with pytest.raises(FormatRuleError, match="out: must be a new or empty folder"):
        convert(src, "marlin", tmp_path / "m")


def test_fp_safetensors_to_anyprec(tmp_path):
    from refsim.io.tensors import save_tensors

    rng = np.random.default_rng(12)
    fp = tmp_path / "fp"
    fp.mkdir()
    w = {f"blocks.{i}.proj.weight": rng.standard_normal((16, 64)).astype(np.float16) for i in range(2)}  # (N, K)
    save_tensors(fp / "model.safetensors", {**w, "blocks.0.proj.bias": np.zeros(16, np.float16)})
    convert(fp, "anyprec", tmp_path / "ap")
    ck = open_checkpoint(tmp_path / "ap")
    assert ck.format == "anyprec" and ck.layer_names() == ["blocks.0.proj", "blocks.1.proj"]
    for name in ck.layer_names():
        lay = ck.read_layer(name)
        assert (lay.k, lay.n, lay.bits, sorted(lay.luts)) == (64, 16, 4, [3, 4])
        W = w[name + ".weight"].T.astype(np.float64)
        for b in (3, 4):  # every row's codes index its own table; more bits, less error
            err = np.linalg.norm(lay.dequantize(b) - W) / np.linalg.norm(W)
            assert err < (0.25 if b == 3 else 0.15)
    assert "blocks.0.proj.bias" in TensorFile(tmp_path / "ap" / "model.safetensors").names()
