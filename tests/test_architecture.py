"""The package's structure, drawn from its imports: no circles, and every arrow runs down the layers.

Layers, bottom to top. A module may import from its own layer and the layers below; the longest
matching prefix of its dotted name decides its layer::

    0  refsim.errors, refsim._validate,         the error family, the argument checks and the
       refsim.archs                             table of GPU architectures and their facts
    1  refsim.native                            refsim's C: build cache, compiled twins, host facts
    2  refsim.arith                             exact rounding, fp instructions, tensor-core models
    3  refsim.formats                           layouts: pack, unpack, dequantize, permute
    4  refsim.quant, refsim.emulator,           algorithms, kernel emulators, model forwards,
       refsim.models, refsim.qigen              QIGen's generated CPU kernels
    5  refsim.data                              data with provenance (weights, corpus, calibration)
    6  refsim.io, refsim.gpu_model, refsim.ptx  checkpoints, the performance model, nvcc's PTX on a CPU
    7  refsim.cuda                              CUDA kernels through refsim.ptx or on a GPU
    8  refsim.testing                           bit assertions and check_kernel
    9  refsim.report, refsim.commands,          the report and the command line
       refsim.cli, refsim.__main__, refsim

Imports inside functions count too: an arrow is an arrow wherever it is written.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import refsim

ROOT = Path(refsim.__file__).parent

LAYERS = {
    "refsim.errors": 0, "refsim._validate": 0, "refsim.archs": 0,
    "refsim.native": 1,
    "refsim.arith": 2,
    "refsim.formats": 3,
    "refsim.quant": 4, "refsim.emulator": 4, "refsim.models": 4, "refsim.qigen": 4,
    "refsim.data": 5,
    "refsim.io": 6, "refsim.gpu_model": 6, "refsim.ptx": 6,
    "refsim.cuda": 7,
    "refsim.testing": 8,
    "refsim.report": 9, "refsim.commands": 9, "refsim.cli": 9, "refsim.__main__": 9, "refsim": 9,
}

def modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The refsim modules ``name`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("refsim")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("refsim"):
                for a in node.names:
                    found.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    return found - {name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def layer(name: str) -> int:
    best = max((p for p in LAYERS if name == p or name.startswith(p + ".")), key=len)
    return LAYERS[best]


def upward(g: dict[str, set[str]]) -> list[str]:
    """Every arrow from a module to one in a higher layer; none is allowed."""
    return sorted(f"{a} (layer {layer(a)}) -> {b} (layer {layer(b)})"
                  for a, targets in g.items() for b in targets if layer(b) > layer(a))


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


@pytest.mark.slow
def test_no_import_circles():
    assert cycles(graph()) == []


@pytest.mark.slow
def test_every_import_runs_down_the_layers():
    assert upward(graph()) == []


def test_every_module_has_a_layer():
    assert all(layer(name) >= 0 for name in modules())


def test_the_checks_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("refsim.cuda.marlin") > layer("refsim.ptx.engine") > layer("refsim.arith.fp")
    assert upward({"refsim.formats.marlin": {"refsim.arith.fp", "refsim.ptx.engine"}}) \
        == ["refsim.formats.marlin (layer 3) -> refsim.ptx.engine (layer 6)"]
