"""The formats report section: its shipped goldens are exactly the slices of the format tests' goldens
(rebuilt here by tests/report/data/make_format_goldens.py's build), every check passes, and a golden
changed by one bit fails its check with the bit report."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.report import _run_check
from refsim.report.sections import formats

_SPEC = importlib.util.spec_from_file_location("make_format_goldens",
                                               Path(__file__).parents[1] / "data" / "make_format_goldens.py")
make = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make)


def test_the_shipped_goldens_are_the_slices_of_the_test_goldens():
    want = make.build()
    with np.load(formats._DATA) as got:
        assert sorted(got.files) == sorted(want)
        for k, v in want.items():
            assert got[k].dtype == v.dtype and got[k].shape == v.shape and got[k].tobytes() == v.tobytes(), k


def test_every_check_passes_and_names_the_library_and_version():
    details = {c.name: c.run() for c in formats.checks()}
    assert "ml-dtypes 0.6.0" in details["FP8 e4m3/e5m2 casts and scaling"]
    assert "torchao 0.18.0" in details["MXFP4, MXFP6, MXFP8"] and "torchao 0.18.0" in details["NVFP4"]
    assert "bitsandbytes 0.50.2" in details["NF4/FP4 (bitsandbytes)"]
    assert "gguf 0.19.0" in details["GGUF block types"]


@pytest.mark.parametrize("key,check", [("bnb4/fp4_partial.packed", "NF4/FP4 (bitsandbytes)"),
                                       ("fp8_mx/nvfp4_codes", "NVFP4"), ("gguf/Q4_K.y", "GGUF block types"),
                                       ("fp8_mx/fp8_block128_codes", "FP8 e4m3/e5m2 casts and scaling")])
def test_a_golden_off_by_one_bit_fails_its_check(monkeypatch, key, check):
    g = dict(formats._goldens())
    bad = g[key].copy()
    bad.view(np.uint8).reshape(-1)[0] ^= 1
    g[key] = bad
    monkeypatch.setattr(formats, "_goldens", lambda: g)
    (c,) = [c for c in formats.checks() if c.name == check]
    res = _run_check(c)
    assert not res.passed and "1 of" in res.detail, res.detail
