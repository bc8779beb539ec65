"""refsim.io.quantize on real all-MiniLM-L6-v2 layers with real calibration inputs: every method end to end
and read back, AutoAWQ's words, a dask LocalCluster run equal to the serial one bit for bit, and a real
GPTQ layer converted to Marlin and run through the Marlin emulator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from refsim.data import calibration as cal
from refsim.data import minilm
from refsim.errors import CheckpointError, FormatRuleError
from refsim.formats import gptq as gptq_format
from refsim.io import open_checkpoint
from refsim.io.convert import convert
from refsim.io.executor import SerialExecutor, executor_from_spec
from refsim.io.quantize import QuantizeOptions, quantize_model
from refsim.io.tensors import TensorFile
from refsim.testing import assert_bitexact

QUERY = "encoder.layer.0.attention.self.query"          # K = N = 384
INTER = "encoder.layer.0.intermediate.dense"            # K = 384, N = 1536 (Marlin's shape rules hold)


@pytest.fixture(scope="module")
def model():
    return minilm.model_path()


def _run(model, out, method, layers=QUERY, executor=None, calib="corpus:512", **kw):
    opts = QuantizeOptions(method, **kw)
    return quantize_model(model, out, opts, executor=executor or SerialExecutor(), layers=f"^{layers}$", calib=calib,
                          heldout_tokens=512)


def _heldout_inputs(name: str) -> np.ndarray:
    """The layer's inputs on the held-out sequences quantize measures on, from the reference MiniLM forward
    (refsim.data.calibration.forward, one sequence at a time)."""
    from refsim.data import corpus
    from refsim.io.model_folder import load_model, sequences

    ids = sequences(load_model(minilm.model_path()), corpus.text("heldout"), 512)
    return np.concatenate([cal.forward(row)[1][name + ".weight"] for row in ids]).astype(np.float64)


@pytest.mark.slow
@pytest.mark.parametrize("method, fmt, max_err", [
    ("rtn", "gptq", 0.2), ("gptq", "gptq", 0.2), ("awq", "awq", 0.2), ("anyprec", "anyprec", 0.2),
    ("atom", "atom", 0.2), ("mixed_2_4_16", "mixed_2_4_16", 0.4),
])
def test_every_method_quantizes_a_real_layer_and_reads_back(tmp_path, model, method, fmt, max_err):
    out = tmp_path / "out"
    summary = _run(model, out, method)
    assert (out / "quality.json").is_file() and json.loads((out / "quality.json").read_text())["method"] == method
    (row,) = summary["layers"]
    assert row["name"] == QUERY and (row["k"], row["n"]) == (384, 384)
    ck = open_checkpoint(out)
    assert ck.format == fmt and ck.layer_names() == [QUERY]
    W_hat = ck.read_layer(QUERY).dequantize().astype(np.float64)
    W = minilm.weights()[QUERY + ".weight"].T.astype(np.float64)
    X = _heldout_inputs(QUERY)
    err = np.linalg.norm(X @ W - X @ W_hat) / np.linalg.norm(X @ W)
    # the summary measured what is on disk, on held-out text (batched forward vs one sequence at a time:
    # float32 sums in another order)
    assert err == pytest.approx(row["heldout_rel_output_error"], rel=1e-4)
    assert 0 < err < max_err
    # memory of the job is one layer's: W, X and the method's work arrays (the 2/4/16 quantizer's
    # float64 score matrix and sort are the largest, about 25x the float32 W + X)
    assert 0 < row["peak_bytes"] < 40 * (W.size + 512 * 384) * 4
    # one layer quantized: the held-out embeddings barely move
    assert summary["model_quality"]["metric"] == "embedding_cosine" and summary["model_quality"]["min"] > 0.99
    with TensorFile(out / "model.safetensors") as tf:  # every other tensor passed through unchanged
        for name in ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.key.weight", QUERY + ".bias"):
            assert_bitexact(tf.read(name), np.asarray(minilm.weights()[name]), name=name)


def test_awq_method_writes_the_words_autoawq_would(tmp_path, model):
    # AutoAWQ, restated per scalar from awq/quantize/quantizer.py (pseudo_quantize_tensor on the .half()
    # weights) and awq/modules/linear/gemm.py (from_linear): every op on fp16 tensors rounds to fp16
    _run(model, tmp_path / "awq", "awq")
    with TensorFile(tmp_path / "awq" / "model.safetensors") as tf:
        qweight, qzeros, scales = (tf.read(f"{QUERY}.{t}") for t in ("qweight", "qzeros", "scales"))
    W16 = minilm.weights()[QUERY + ".weight"].T.astype(np.float16)  # (K, N)
    h = np.float16
    order = (0, 2, 4, 6, 1, 3, 5, 7)
    for j in (0, 17, 47):  # three output words: columns 8j .. 8j+7
        for g in range(3):
            rows = range(128 * g, 128 * g + 128)
            iw = np.zeros((128, 8), np.int64)
            zs = []
            for c in range(8):
                col = W16[128 * g:128 * g + 128, 8 * j + c]
                mx, mn = col.max(), col.min()
                s = h(max(h(mx - mn), h(1e-5)) / h(15))
                z = min(max(-np.rint(float(h(mn / s))), 0), 15)
                assert scales[g, 8 * j + c] == s
                zs.append(int(z))
                for r, w in enumerate(col):
                    q = min(max(np.rint(float(h(w / s))) + z, 0), 15)
                    wfq = h(h(q - z) * s)
                    iw[r, c] = int(np.rint(float(h(h(wfq + h(h(z) * s)) / s))))
            words = [sum(int(iw[r, order[i]]) << (4 * i) for i in range(8)) for r in range(128)]
            assert [int(v) & 0xFFFFFFFF for v in qweight[list(rows), j]] == words
            assert int(qzeros[g, j]) & 0xFFFFFFFF == sum(zs[order[i]] << (4 * i) for i in range(8))


@pytest.mark.slow
def test_dask_local_cluster_equals_serial_bit_for_bit(tmp_path, model):
    from dask.distributed import LocalCluster

    layers = r"encoder\.layer\.0\.attention\.self\.(query|key)"
    serial = _run(model, tmp_path / "serial", "gptq", layers=layers, measure_memory=False)
    # in-process cluster (threads), reached through its address as `--executor dask://HOST:PORT` does
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        with executor_from_spec("dask://" + cluster.scheduler_address[len("tcp://"):]) as ex:
            dist = _run(model, tmp_path / "dask", "gptq", layers=layers, executor=ex, measure_memory=False)
        assert len(cluster.scheduler_info["workers"]) == 2
    assert [r["name"] for r in dist["layers"]] == [r["name"] for r in serial["layers"]]
    a = (tmp_path / "serial" / "model.safetensors").read_bytes()
    b = (tmp_path / "dask" / "model.safetensors").read_bytes()
    assert a == b


def test_real_gptq_layer_converted_to_marlin_runs_in_the_emulator_within_its_bound(tmp_path, model):
    from refsim.emulator import marlin_kernel as mk
    from refsim.formats import stripes

    _run(model, tmp_path / "g", "gptq", layers=INTER, sym=True, act_order=True)
    convert(tmp_path / "g", "marlin", tmp_path / "m")
    gl = open_checkpoint(tmp_path / "g").read_layer(INTER)
    ml = open_checkpoint(tmp_path / "m").read_layer(INTER)
    assert ml.perm is not None
    W = gl.dequantize().astype(np.float64)                         # GPTQ weights, exact fp16 values
    A = cal.layer_inputs(256)[INTER + ".weight"][:2].astype(np.float16)  # two real tokens (M=2)
    C = mk.marlin_gemm(np.ascontiguousarray(A[:, ml.perm]), ml.B, ml.s, sms=108).astype(np.float64)
    A64 = A.astype(np.float64)
    exact = A64 @ W
    # the emulator test's derived bound: fp16 carries of the global reduction, the final fp16
    # rounding, and < 2^-20 * sum|a w| per 8 k-blocks for the fp32 tensor-core chains
    m, k, n = 2, ml.k, ml.n
    Wm = W[ml.perm]
    plan = stripes.stripes(m, n, k, 108, 128)
    tk, tn = plan.config.thread_k, plan.config.thread_n
    bound = 0.5 * np.spacing(np.abs(exact * (1 + 2.0**-8)).astype(np.float16)).astype(np.float64)
    for nt in range(n // tn):
        order = sorted((sl for st in plan.launches[0].blocks for sl in st if sl.n_tile == nt),
                       key=lambda x: x.slice_idx)
        cols = slice(nt * tn, (nt + 1) * tn)
        carried = np.zeros((m, tn))
        for sl in order[:-1]:
            rows = slice(sl.k_tile_start * tk, (sl.k_tile_start + sl.k_tile_count) * tk)
            carried = carried + A64[:, ml.perm][:, rows] @ Wm[rows, cols]
            bound[:, cols] += 0.5 * np.spacing(np.abs(carried * (1 + 2.0**-8)).astype(np.float16)).astype(np.float64)
    bound += (k // 8) * 2.0**-20 * (np.abs(A64) @ np.abs(W))
    err = np.abs(C - exact)
    assert (err <= bound).all(), f"max err/bound {np.max(err / bound)}"
    assert np.abs(exact).max() > 1  # a real product, not zeros


def test_quantize_refuses_bad_requests_before_writing(tmp_path, model):
    with pytest.raises(FormatRuleError, match="calib: method 'gptq' needs calibration"):
        quantize_model(model, tmp_path / "o", QuantizeOptions("gptq"), executor=SerialExecutor(), calib="none")
    with pytest.raises(FormatRuleError, match="layers: selects no layer"):
        _run(model, tmp_path / "o", "rtn", layers="nothing-matches")
    with pytest.raises(FormatRuleError, match="v1 .'gptq'. checkpoint"):
        _run(model, tmp_path / "o", "rtn", layers="encoder.layer.0.output.dense", checkpoint_format="gptq")
    assert not (tmp_path / "o").exists()
    gdir = tmp_path / "g"
    _run(model, gdir, "rtn")
    with pytest.raises(CheckpointError, match="quantize needs an unquantized"):
        quantize_model(gdir, tmp_path / "o2", QuantizeOptions("rtn"), executor=SerialExecutor())
    with pytest.raises(FormatRuleError, match="executor: must be"):
        with executor_from_spec("gpu:3"):
            pass
    with pytest.raises(FormatRuleError, match="worker count"):
        with executor_from_spec("dask-local:0"):
            pass


def test_v1_checkpoint_of_minilm_layer_with_zero_point_zero_is_reported_by_inspect(tmp_path, model):
    # encoder.layer.0.output.dense has all-positive groups: GPTQ's asymmetric zero is 0 there, which
    # AutoGPTQ's v1 pack corrupts; written as v2 and converted, the refusal names the reason
    _run(model, tmp_path / "v2", "rtn", layers="encoder.layer.0.output.dense")
    z = open_checkpoint(tmp_path / "v2").read_layer("encoder.layer.0.output.dense").zeros()
    assert (z == 0).any()
    with pytest.raises(FormatRuleError, match="cannot store"):
        convert(tmp_path / "v2", "gptq-v1", tmp_path / "v1")
    assert gptq_format.CHECKPOINT_FORMATS == ("gptq", "gptq_v2")
