"""refsim.commands' argparse types: positive integers and numbers, and --clock (a named clock, or a
frequency with its unit, a bare number being MHz), each refusal stating the rule and the text received."""

import argparse

import pytest

from refsim.commands import clock_arg, positive_float, positive_int


@pytest.mark.parametrize("text,want", [("1", 1), ("128", 128)])
def test_positive_int_accepts_integers_from_one(text, want):
    assert positive_int(text) == want


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "ten", ""])
def test_positive_int_refuses_the_rest(text):
    with pytest.raises(argparse.ArgumentTypeError, match=rf"must be an integer >= 1; got {text!r}"):
        positive_int(text)


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "x"])
def test_positive_float_refuses_non_finite_and_non_positive(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number > 0"):
        positive_float(text)


def test_positive_float_accepts_a_finite_positive_number():
    assert positive_float("2.5") == 2.5


@pytest.mark.parametrize("text,want", [
    ("base", "base"), ("Boost", "boost"), (" SUSTAINED ", "sustained"),
    ("1500", 1.5e9), ("1500MHz", 1.5e9), ("1.5GHz", 1.5e9), ("1500000000Hz", 1.5e9), ("100", 1e8), ("10ghz", 1e10),
])
def test_clock_is_a_name_or_a_frequency_in_hz(text, want):
    assert clock_arg(text) == want


@pytest.mark.parametrize("text,rule", [
    ("fast", "must be base, boost, sustained or a frequency"), ("1.5 THz", "must be base, boost"),
    ("99", "between 100 MHz and 10 GHz"), ("10.5GHz", "between 100 MHz and 10 GHz"),
])
def test_clock_refusals_state_the_rule(text, rule):
    with pytest.raises(argparse.ArgumentTypeError, match=rule):
        clock_arg(text)
