"""Tests mirror the package, written once as data.

The rule: ``refsim/<path>/<name>.py`` is tested in ``tests/<path>/test_<name>.py``; a package's own
code, ``refsim/<path>/<pkg>/__init__.py``, in ``tests/<path>/<pkg>/test_<pkg>.py``. A module that
has no such file is in :data:`EXCEPTIONS` with its reason, and each kind of reason is checked here,
not trusted:

``"re-exports only"``      no code of its own: the docstring, imports and ``__all__``, nothing else;
``"tested in <file>: ..."`` its tests live in a file named for something else (a file about several
                           modules, or the module that drives it); the file must exist and import the
                           module (directly, through a refsim module it imports, or through the
                           modules of the module's own package that it drives), or reach it by name
                           (a subcommand, a kernel model or a check_kernel format is looked up in a
                           registry: its name, spelled with ``_`` or ``-``, as a string);
``"a report section: ..."`` self-checks that ``refsim report`` runs (CI's first job, which must exit
                           0): the module has the section protocol (``TITLE``, ``checks``);
``"a script run by hand: ..."`` it made committed data; its docstring says how and that it runs by hand.

A module with neither its file nor an entry fails; so does an entry for a module that has its file
or no longer exists (delete it). Cross-module tests (the README examples, the architecture rules,
the fuzz) sit at tests/ top level and are not checked here.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "refsim"

REEXPORTS = "re-exports only"
TESTED_IN = "tested in "
SECTION = "a report section"
SCRIPT = "a script run by hand"

_SECTION = SECTION + ": its checks pass in every `refsim report` run; tests/report/ tests the runner"
_CASES = ("tested in tests/testing/test_harness.py: a check_kernel case module is tested through the harness "
          "running refsim's own emulator and bug kernels on its cases")

EXCEPTIONS: dict[str, str] = {
    # packages that only gather their modules' names
    "refsim.data": REEXPORTS,
    "refsim.emulator": REEXPORTS,
    "refsim.formats": REEXPORTS,
    "refsim.gpu_model": REEXPORTS,
    "refsim.gpu_model.kernels": REEXPORTS,
    "refsim.io": REEXPORTS,
    "refsim.models": REEXPORTS,
    "refsim.ptx": REEXPORTS,
    "refsim.qigen": REEXPORTS,
    "refsim.quant": REEXPORTS,
    "refsim.report.sections": REEXPORTS,
    "refsim.testing": REEXPORTS,
    "refsim.cuda": "tested in tests/cuda/test_build.py: kernels() lists every kernel with its committed PTX",
    # entry points and helpers that a named test drives
    "refsim.__main__": "tested in tests/test_cli.py: runs `python -m refsim` and compares it with the console script",
    # data
    "refsim.data.models.pydoc_llama.make_model": SCRIPT + ": it trained the bundled decoder, which "
                                                 "tests/io/test_quality.py uses",
    # report
    "refsim.report.sections.anyprec": _SECTION,
    "refsim.report.sections.atom": _SECTION,
    "refsim.report.sections.foundation": _SECTION,
    "refsim.report.sections.marlin": _SECTION,
    "refsim.report.sections.mixed_2_4_16": _SECTION,
    # testing
    "refsim.testing.cases": _CASES,
    "refsim.testing.cases.atom": _CASES,
    "refsim.testing.cases.base": "tested in tests/testing/test_accuracy.py: the exact linear form (Linear) of accuracy mode",
    "refsim.testing.cases.hopper_w4a16": "tested in tests/emulator/test_hopper_w4a16.py: check_kernel passes the "
                                         "emulator on its pinned cases and names the partial-sum bug",
    "refsim.testing.cases.marlin": _CASES,
    "refsim.testing.cases.mixed_2_4_16": "tested in tests/emulator/test_mixed_2_4_16_kernel.py: the 2/4/16 cases the harness draws",
    "refsim.testing.cases.mma": "tested in tests/cuda/test_mma.py: the mma.sync probes checked by check_kernel",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def mirror_of(path: Path) -> Path:
    """Where the rule puts the tests of ``path`` (a .py file under refsim/)."""
    rel = path.relative_to(PACKAGE)
    if rel.name == "__init__.py":
        pkg = rel.parent
        return ROOT / "tests" / pkg / f"test_{pkg.name or 'refsim'}.py"
    return ROOT / "tests" / rel.parent / f"test_{rel.stem}.py"


#: packages whose modules are looked up by name: a test reaches them by passing that name
REGISTRIES = ("refsim.commands", "refsim.gpu_model.kernels", "refsim.testing.cases")

MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def imports_of(path: Path) -> frozenset[str]:
    """The refsim modules a file imports (``from a import b`` counts as a and a.b)."""
    out = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(m for m in out if m.split(".")[0] == "refsim")


def _has_code(path: Path) -> list[str]:
    """The statements of a module other than its docstring, imports and ``__all__``."""
    tree = _tree(path)
    extra = []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        extra.append(f"line {node.lineno}: {type(node).__name__}")
    return extra


def test_every_module_has_its_test_file_or_a_reason():
    missing = sorted(name for name, path in MODULES.items()
                     if not mirror_of(path).exists() and name not in EXCEPTIONS)
    assert not missing, ("add tests/<same path>/test_<module>.py, or an EXCEPTIONS entry with the reason, for: "
                         + ", ".join(missing))


def test_no_exception_is_stale():
    gone = sorted(set(EXCEPTIONS) - set(MODULES))
    assert not gone, f"EXCEPTIONS names modules that no longer exist: {gone}"
    mirrored = sorted(name for name in EXCEPTIONS if mirror_of(MODULES[name]).exists())
    assert not mirrored, f"these modules have their test file now; delete their EXCEPTIONS entry: {mirrored}"


def test_every_reason_is_one_of_the_checked_kinds():
    kinds = (SECTION + ": ", SCRIPT + ": ")
    odd = {name: why for name, why in EXCEPTIONS.items()
           if not (why.startswith(kinds) or why == REEXPORTS or re.match(rf"{TESTED_IN}tests/\S+\.py(:|$)", why))}
    assert not odd, f"a reason must be one of the kinds in this module's docstring: {odd}"


def test_a_report_section_has_the_section_protocol_and_a_script_says_it_is_run_by_hand():
    bad = []
    for name, why in EXCEPTIONS.items():
        tree = _tree(MODULES[name])
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        if why.startswith(SECTION) and not {"TITLE", "checks"} <= defined:
            bad.append(f"{name} has no TITLE or checks()")
        if why.startswith(SCRIPT) and "by hand" not in (ast.get_docstring(tree) or ""):
            bad.append(f"{name}'s docstring does not say it is run by hand")
    assert not bad, bad


def test_a_reexporting_package_has_no_code_of_its_own():
    extra = {name: _has_code(MODULES[name]) for name, why in EXCEPTIONS.items() if why == REEXPORTS}
    extra = {name: lines for name, lines in extra.items() if lines}
    assert not extra, f"these have code of their own; give them tests/.../test_<name>.py: {extra}"


def _names(name: str, path: Path) -> bool:
    """Whether the test file ``path`` imports module ``name``, directly or through a refsim module it
    imports, or names it (``python -m`` for a ``__main__``)."""
    direct = imports_of(path)
    through = {m for d in direct if d in MODULES for m in imports_of(MODULES[d])}
    parent, _, leaf = name.rpartition(".")
    todo = [m for m in direct | through if m.startswith(parent + ".") and m in MODULES]
    while todo:  # inside the module's own package, follow imports all the way
        m = todo.pop()
        new = {n for n in imports_of(MODULES[m]) if n.startswith(parent + ".") and n in MODULES} - through
        through |= new
        todo.extend(new)
    text = path.read_text(encoding="utf-8")
    if name.endswith(".__main__"):
        return f'"-m", "{name.rsplit(".", 1)[0]}"' in text
    strings = {n.value for n in ast.walk(_tree(path)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    by_name = parent in REGISTRIES and bool({leaf, leaf.replace("_", "-")} & strings)
    return name in direct or name in through or re.search(rf"\b{re.escape(name)}\b", text) is not None or by_name


def test_a_test_file_named_as_the_reason_exists_and_imports_the_module():
    bad = []
    for name, why in EXCEPTIONS.items():
        if why.startswith(TESTED_IN):
            rel = re.match(rf"{TESTED_IN}(tests/\S+?\.py)", why).group(1)
            if not (ROOT / rel).is_file():
                bad.append(f"{name}: {rel} does not exist")
            elif not _names(name, ROOT / rel):
                bad.append(f"{name}: {rel} neither imports it nor imports a refsim module that does")
    assert not bad, "\n".join(bad)


def test_the_rule_maps_a_module_and_a_package_to_their_files():
    assert mirror_of(PACKAGE / "formats" / "marlin.py") == ROOT / "tests" / "formats" / "test_marlin.py"
    assert mirror_of(PACKAGE / "report" / "__init__.py") == ROOT / "tests" / "report" / "test_report.py"
    assert mirror_of(PACKAGE / "__init__.py") == ROOT / "tests" / "test_refsim.py"
    assert mirror_of(PACKAGE / "errors.py") == ROOT / "tests" / "test_errors.py"
