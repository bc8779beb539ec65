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


def test_gpu_aliases_and_the_awq_warning(capsys):
    assert main(["predict", "--gpu", "h100", "--kernel", "marlin-24", "--m", "16", "--n", "4096", "--k", "4096",
                 "--cache", "dirty", "--timing", "events", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpu"] == "h100-sxm" and data["kernel"] == "sparse-marlin" and data["timing"] == "events"
    assert main(["predict", "--gpu", "a10", "--kernel", "awq-w4a16", "--m", "16", "--n", "4096", "--k", "4096"]) == 0
    assert "warning      known far off on published rows" in capsys.readouterr().out


def test_bad_clock_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:      # argparse's usage error path
        main(["predict", "--gpu", "a10", "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096",
              "--clock", "fast"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "--clock" in err
