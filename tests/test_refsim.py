"""The package itself: its version is the one pyproject.toml publishes, and importing it on a
big-endian host stops with the reason (packed words are defined in little-endian byte order)."""

import sys
import tomllib
from pathlib import Path

import pytest

import refsim

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_the_published_one():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert refsim.__version__ == meta["project"]["version"]


def test_a_big_endian_host_is_refused_at_import(monkeypatch):
    source = (ROOT / "refsim" / "__init__.py").read_text(encoding="utf-8")
    code = compile(source, "refsim/__init__.py", "exec")
    monkeypatch.setattr(sys, "byteorder", "big")
    with pytest.raises(ImportError, match="refsim needs a little-endian host"):
        exec(code, {"__name__": "refsim_on_a_big_endian_host"})
    monkeypatch.setattr(sys, "byteorder", "little")
    namespace = {"__name__": "refsim_on_a_little_endian_host"}
    exec(code, namespace)
    assert namespace["__version__"] == refsim.__version__
