"""`refsim calibrate` and GPU spec files: the analysis on a recorded run (the H100 SXM's microbenchmarks),
the file the commands read back, and refusals."""

import json
from pathlib import Path

import pytest

from refsim.cli import main
from refsim.errors import FormatRuleError, ToolchainError
from refsim.gpu_model import gpufile, microbench
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.specs import get_gpu

RECORDED = Path(microbench.__file__).resolve().parents[1] / "data" / "timings" / "h100_microbenchmarks.json"


def _calibrate(tmp_path, *extra) -> Path:
    out = tmp_path / "h100.json"
    assert main(["calibrate", "--results", str(RECORDED), "--base", "h100", "--clock", "1980", "--out", str(out),
                 *extra]) == 0
    return out


def test_recorded_run_gives_the_shipped_h100_constants(tmp_path, capsys):
    spec = gpufile.load_gpu_file(_calibrate(tmp_path))
    assert spec.name == "h100-sxm-calibrated" and "L0 391 ns" in capsys.readouterr().out
    table = get_gpu("h100-sxm")
    for field in ("dram_latency_s", "dram_achievable_fraction", "launch_events_s", "l2_dirty_fraction",
                  "dram_curve_sharpness"):
        assert getattr(spec, field) == pytest.approx(getattr(table, field), rel=3e-3), field
    for kernel, m in (("marlin", 16), ("cublas-fp16", 1), ("atom-w4a4", 512)):
        kw = dict(cache="dirty", timing="events")
        a = predict(spec, kernel, m, 4096, 4096, **kw).latency_s
        b = predict("h100-sxm", kernel, m, 4096, 4096, **kw).latency_s
        assert a == pytest.approx(b, rel=5e-3), kernel
    assert spec.provenance["dram_latency_s"][0] == "microbenchmark"


def test_predict_and_the_file_round_trip(tmp_path, capsys):
    out = _calibrate(tmp_path, "--name", "lab-h100")
    capsys.readouterr()
    assert main(["predict", "--gpu-file", str(out), "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096",
                 "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["gpu"] == "lab-h100" and obj["latency_us"] > 0
    doc = json.loads(out.read_text())
    assert doc["format"] == gpufile.FORMAT and doc["base"] == "h100-sxm" and doc["measured"]["sms"] == 132


def test_an_existing_out_is_refused_before_any_work(tmp_path, capsys):
    out = _calibrate(tmp_path)
    capsys.readouterr()
    assert main(["calibrate", "--results", str(RECORDED), "--base", "h100", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must not exist" in err[0]


@pytest.mark.parametrize("content, match", [("{", "JSON"), ('{"sms": 132}', "must have the key"),
                                            ("[1, 2]", "results")])
def test_a_malformed_results_file_exits_2_with_one_line(tmp_path, capsys, content, match):
    bad = tmp_path / "r.json"
    bad.write_text(content)
    assert main(["calibrate", "--results", str(bad), "--base", "a10", "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.__setitem__("format", "other"), "format"),
    (lambda d: d["fields"].__setitem__("dram_peak_bytes_per_s", 0.0), "dram_peak_bytes_per_s"),
    (lambda d: d["fields"].__setitem__("sm_count", [1, 2]), "sm_count"),
    (lambda d: d["fields"].__setitem__("warp_size", 32), "unknown or fixed"),
    (lambda d: d["fields"].__setitem__("name", "x"), "unknown or fixed"),
    (lambda d: d.__setitem__("base", "no-such-gpu"), "gpu: must be one of"),
    (lambda d: d.pop("fields"), "must have the key"),
    (lambda d: d.__setitem__("provenance", {"x": 3}), "provenance"),
])
def test_spec_file_rules(tmp_path, edit, match):
    doc = gpufile.gpu_file_dict("a10", "my-a10", {"dram_latency_s": 4.5e-7}, {"dram_latency_s": ["estimate", "x"]})
    edit(doc)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatRuleError, match=match):
        gpufile.load_gpu_file(path)


def test_measure_without_a_gpu_stack_is_a_toolchain_error():
    try:
        import cuda.core  # noqa: F401
    except ImportError:
        from refsim.gpu_model.measure import measure
        with pytest.raises(ToolchainError, match="refsim\\[gpu\\]"):
            measure()
    else:
        pytest.skip("cuda.core is installed: the GPU test below covers measure()")


def _has_gpu() -> bool:
    try:
        import cuda.core as cc
        cc.Device()
        return True
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs cuda.core and a CUDA GPU")
def test_measure_on_a_gpu_fits_within_ten_percent():
    from refsim.gpu_model.measure import measure
    results = measure()
    fit = microbench.fit(results, results["device"]["l2_bytes"])
    assert fit.max_abs_log_error < 0.1 and fit.dram_bw_max > 1e11
