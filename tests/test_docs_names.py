"""Every refsim name the README, docs/ and refsim's own docstrings and comments show still exists: each
dotted ``refsim.a.b.c`` and each ``from refsim.x import y`` resolves to a module or attribute (file names
such as ``refsim/cuda/marlin.cu`` are paths, not names, and are not checked here)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCES = sorted((ROOT / "refsim").rglob("*.py"))
DOTTED = re.compile(r"\brefsim(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"from (refsim(?:\.\w+)*) import \(?([\w, \n]+?)\)?(?:\s*#|$)", re.M)
FILE_SUFFIXES = (".py", ".cu", ".c", ".h", ".csv", ".json", ".md", ".ptx", ".npz", ".txt")


def resolves(name: str) -> bool:
    """True if ``name`` is an importable module, or attributes reached from the longest one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def names_in(text: str) -> set[str]:
    out = {m.group(0) for m in DOTTED.finditer(text) if not m.group(0).endswith(FILE_SUFFIXES)}
    for m in FROM_IMPORT.finditer(text):
        out |= {f"{m.group(1)}.{a.strip().split(' as ')[0]}" for a in m.group(2).split(",") if a.strip()}
    return out


def test_the_check_finds_a_name_that_does_not_exist():
    assert names_in("see `refsim.formats.marlin.no_such_thing` and\nfrom refsim.arith import fp, nothing_here\n") \
        == {"refsim.formats.marlin.no_such_thing", "refsim.arith", "refsim.arith.fp", "refsim.arith.nothing_here"}
    assert not resolves("refsim.formats.marlin.no_such_thing") and not resolves("refsim.arith.nothing_here")
    assert resolves("refsim.formats.marlin.pack") and resolves("refsim.arith.fp")


@pytest.mark.parametrize("doc", DOCS + SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_refsim_name_a_doc_shows_resolves(doc):
    missing = sorted(n for n in names_in(doc.read_text(encoding="utf-8")) if not resolves(n))
    assert not missing, f"{doc.relative_to(ROOT)} names what refsim no longer has: {missing}"
