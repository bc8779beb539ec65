"""refsim.native: REFSIM_NATIVE switches the compiled paths off by choice (no warning, the reason returned),
and load() checks its arguments before building anything."""

import warnings

import pytest

from refsim import native
from refsim.errors import RefsimError


@pytest.mark.parametrize("value,off", [("0", True), ("false", True), (" NO ", True), ("off", True),
                                       ("1", False), ("yes", False), ("", False)])
def test_refsim_native_values_that_disable_the_compiled_paths(monkeypatch, value, off):
    monkeypatch.setenv("REFSIM_NATIVE", value)
    assert native.disabled() is off


def test_unset_means_enabled(monkeypatch):
    monkeypatch.delenv("REFSIM_NATIVE", raising=False)
    assert native.disabled() is False


def test_disabled_load_returns_the_reason_without_a_warning(monkeypatch):
    monkeypatch.setenv("REFSIM_NATIVE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.load("int f(void) { return 1; }", "a test kernel") == (None, "REFSIM_NATIVE=0")


@pytest.mark.parametrize("source,what", [(b"int f;", "k"), ("int f;", 3)])
def test_load_refuses_arguments_of_the_wrong_type(source, what):
    with pytest.raises(RefsimError):
        native.load(source, what)
