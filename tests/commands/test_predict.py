"""`refsim predict` human output: units that fit, the share of the plain roofline, notes; --clock forms."""

import argparse
import json
import re

import pytest

from refsim.cli import main
from refsim.commands import clock_arg
from refsim.commands.predict import format_time
from refsim.errors import FormatRuleError
from refsim.gpu_model.specs import get_gpu


@pytest.mark.parametrize("seconds,text", [(12.3e-6, "12.30 us"), (999e-6, "999.00 us"), (2.5e-3, "2.500 ms"),
                                          (0.75, "750.000 ms"), (3.0, "3.000 s"), (125.0, "125.000 s")])
def test_format_time_picks_the_unit(seconds, text):
    assert format_time(seconds) == text


@pytest.mark.parametrize("text,value", [("base", "base"), ("BOOST", "boost"), (" sustained ", "sustained"),
                                        ("1500", 1.5e9), ("1500MHz", 1.5e9), ("1.5GHz", 1.5e9),
                                        ("1500000000hz", 1.5e9), ("1395 MHz", 1.395e9)])
def test_clock_argument_forms(text, value):
    assert clock_arg(text) == value


@pytest.mark.parametrize("text", ["fast", "", "-1500", "50", "20GHz", "1e9", "1,5GHz"])
def test_clock_argument_refuses_other_text(text):
    with pytest.raises(argparse.ArgumentTypeError):
        clock_arg(text)


@pytest.mark.parametrize("hz", [float("nan"), float("inf"), 0.0, -1.5e9, 5e7, 2e10, 5e9, 2.1e9])
def test_explicit_clock_must_lie_in_the_cards_range(hz):
    # 100 MHz .. 1.2 x the A10's 1695 MHz boost
    with pytest.raises(FormatRuleError, match="clock: a10 runs its SMs between 100 and 2034 MHz"):
        get_gpu("a10").clock_hz(hz)
    assert get_gpu("a10").clock_hz(2.0e9) == 2.0e9


def _run(capsys, *argv):
    assert main(["predict", "--gpu", "a10", "--kernel", "marlin", *argv]) == 0
    return capsys.readouterr().out


def test_human_output_names_units_roofline_share_and_notes(capsys):
    out = _run(capsys, "--m", "16", "--n", "11008", "--k", "4096")
    data = json.loads(_run(capsys, "--m", "16", "--n", "11008", "--k", "4096", "--json"))
    assert data["roofline_us"] <= data["latency_us"]          # no model beats the plain roofline
    assert data["fraction_of_roofline"] == pytest.approx(data["roofline_us"] / data["latency_us"], rel=1e-12)
    share = re.search(r"reaches (\d+) % of it", out)
    assert share and int(share.group(1)) == round(100 * data["fraction_of_roofline"])
    assert re.search(r"latency\s+\d+\.\d\d us", out)          # ~50 us: shown in us
    assert "notes        tile " in out                        # why this tile / launch plan


def test_a_whole_model_is_shown_in_milliseconds_at_an_explicit_clock(capsys):
    out = _run(capsys, "--m", "1", "--model", "llama-2-7b", "--clock", "1.2GHz")
    assert "(1200 MHz clock, ECC on, cold L2, kernel timing)" in out
    assert re.search(r"latency\s+\d+\.\d{3} ms", out)


def test_gpu_aliases_and_the_awq_refusal(capsys):
    assert main(["predict", "--gpu", "h100", "--kernel", "marlin-24", "--m", "16", "--n", "4096", "--k", "4096",
                 "--cache", "dirty", "--timing", "events", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpu"] == "h100-sxm" and data["kernel"] == "sparse-marlin" and data["timing"] == "events"
    # awq-w4a16 from M = 2: no answer (so never ranked against Marlin), one line on stderr, exit 2
    for gpu in ("a10", "h100"):
        assert main(["predict", "--gpu", gpu, "--kernel", "awq-w4a16", "--m", "16", "--n", "4096", "--k", "4096"]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1
        assert cap.err.startswith("refsim predict: error: no trustworthy model: kernel awq-w4a16 at M = 16: ")


def _trust_lines(out: str) -> list[str]:
    return [line.split("trust", 1)[1].strip() for line in out.splitlines() if line.startswith("  trust ")]


def test_a_validated_prediction_names_its_table_and_the_error_there(capsys):
    out = _run(capsys, "--gpu", "h100", "--m", "64", "--n", "18432", "--k", "18432", "--cache", "dirty",
               "--timing", "events")
    assert "(sustained clock 1980 MHz (measured), ECC on, dirty L2, events timing)" in out
    lines = _trust_lines(out)
    assert lines[0].startswith("validated on h100_marlin_cublas.csv (h100-sxm, marlin 4-bit, dirty L2, events timing")
    assert re.search(r"\d+ rows\): median \d+\.\d %, max \d+\.\d %; at M = 64: max \d+\.\d % \(3 rows\)", lines[0])
    # the bimodal row at this M is named, not hidden
    assert "bimodal row(s)" in lines[0] and "h100_marlin_cublas.csv:78" in lines[0]
    assert not any(line.startswith("estimated constants") for line in lines)   # H100 SXM: all measured


def test_an_estimated_gpu_says_estimated_and_which_numbers(capsys):
    for gpu in ("l4", "l40s", "h100-pcie"):
        out = _run(capsys, "--gpu", gpu, "--m", "16", "--n", "4096", "--k", "4096")
        assert "sustained clock" in out and "MHz (estimated)" in out.splitlines()[0]
        lines = _trust_lines(out)
        assert lines[0].startswith(f"unvalidated: outside every validated regime (marlin 4-bit on {gpu}")
        assert any(line.startswith("estimated constants") and "sustained_clock_hz" in line for line in lines)
    out = _run(capsys, "--gpu", "h100-pcie", "--m", "16", "--n", "4096", "--k", "4096", "--timing", "events")
    assert "launch_events_s" in [line for line in _trust_lines(out) if line.startswith("estimated")][0]


@pytest.mark.parametrize("args, dev", [
    (["--kernel", "cublas-fp16", "--m", "256", "--n", "8192", "--k", "28672"], "sm90-cublas-fp16-m256"),
    (["--kernel", "marlin", "--m", "128", "--n", "11008", "--k", "4096"], "sm90-marlin-m128"),
    (["--kernel", "anyprec", "--bits", "8", "--m", "1", "--n", "28672", "--k", "8192"], "sm90-anyprec-b7-8-large-n"),
])
def test_a_known_deviation_is_shown(capsys, args, dev):
    out = _run(capsys, "--gpu", "h100", *args)
    assert any(line.startswith(f"known deviation {dev}: ") and "refsim issue 36" in line for line in _trust_lines(out))


def test_json_carries_the_trust_fields(capsys):
    assert main(["predict", "--gpu", "h100", "--kernel", "marlin", "--m", "128", "--n", "11008", "--k", "4096",
                 "--cache", "dirty", "--timing", "events", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["trust"]
    assert t["status"] == "validated" and t["far_off"] is False
    v = t["validated_on"][0]
    assert (v["table"], v["m_min"], v["m_max"], v["local_m"]) == ("h100_marlin_cublas.csv", 1, 128, [128])
    assert 0 < v["median"] <= v["max"] and v["local_max"] <= v["max"]
    assert [d["id"] for d in t["known_deviations"]] == ["sm90-marlin-m128"]
    assert t["estimated_constants"] == {} and t["statement"].startswith("validated on h100_marlin_cublas.csv")
    assert main(["predict", "--gpu", "l4", "--kernel", "marlin", "--m", "1", "--model", "llama-2-7b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trust"]["status"] == "unvalidated" and "sustained_clock_hz" in data["trust"]["estimated_constants"]
    assert all(layer["trust"]["status"] == "unvalidated" for layer in data["layers"])
    assert data["clock_text"] == "sustained clock 2040 MHz (estimated)"


def test_bad_clock_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:      # argparse's usage error path
        main(["predict", "--gpu", "a10", "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096",
              "--clock", "fast"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "--clock" in err
