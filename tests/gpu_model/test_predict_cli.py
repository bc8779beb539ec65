"""`refsim predict` as the issue pins it."""

import json
import math

from refsim.cli import main


def test_json_prints_exactly_one_object_with_latency_and_bottleneck(capsys):
    assert main(["predict", "--gpu", "a10", "--kernel", "marlin", "--m", "16", "--n", "4096",
                 "--k", "4096", "--bits", "4", "--group-size", "128", "--json"]) == 0
    out = capsys.readouterr().out
    obj = json.loads(out)                       # fails on anything but a single JSON document
    assert isinstance(obj["latency_us"], float) and obj["latency_us"] > 0
    assert isinstance(obj["bottleneck"], str)
    assert obj["speedup_vs_cublas_fp16"] > 1


def test_human_output_has_latency_speedup_and_breakdown(capsys):
    assert main(["predict", "--gpu", "rtx4090", "--kernel", "anyprec", "--bits", "3", "--m", "1",
                 "--n", "11008", "--k", "4096"]) == 0
    out = capsys.readouterr().out
    assert " us" in out and "speedup" in out and "dram" in out and "bottleneck" in out


def test_model_sums_llama_2_7b_linear_layers(capsys):
    assert main(["predict", "--gpu", "rtx4090", "--kernel", "marlin", "--m", "1",
                 "--model", "llama-2-7b", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert len(obj["layers"]) == 7 and all(row["count"] == 32 for row in obj["layers"])
    # seconds summed then scaled vs µs rows summed: equal up to float rounding of the two orders
    assert math.isclose(obj["latency_us"], sum(row["latency_us"] * row["count"] for row in obj["layers"]), rel_tol=1e-12)


def test_unknown_gpu_and_kernel_list_valid_names(capsys):
    assert main(["predict", "--gpu", "rtx9090", "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096"]) == 2
    err = capsys.readouterr().err
    assert "orin-agx-64gb" in err and "rtx9090" in err
    assert main(["predict", "--gpu", "a10", "--kernel", "gguf", "--m", "1", "--n", "4096", "--k", "4096"]) == 2
    err = capsys.readouterr().err
    assert "anyprec" in err and "mixed-2-4-16" in err


def test_unsupported_bits_is_an_error_naming_the_rule(capsys):
    assert main(["predict", "--gpu", "a10", "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096",
                 "--bits", "8"]) == 2
    assert "bit-widths [4]" in capsys.readouterr().err
