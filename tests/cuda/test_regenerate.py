"""refsim.cuda.regenerate: what it writes and what ``--check`` reports, with the compiler stood in for.

The compile (``build.compile_ptx``), the compiler's version and ptxas's resource table are replaced by
stand-ins, and every output path points into a temporary folder (the committed PTX is never touched), so
the driver's own work is what is tested: one PTX file per registered kernel and committed arch, a manifest
entry holding the source's SHA-256, the options and the compiler, ``stale_ptx`` naming exactly the files
that differ from a fresh compile or are missing, and ``main``'s lines and exit codes.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from refsim.cuda import build, census, regenerate, registry
from refsim.ptx import toolchain


def _fake_ptx(name: str, arch: str = "sm_80") -> str:
    return f"// ptx of {name} for {arch}\n"


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "PTX_DIR", tmp_path / "ptx")
    monkeypatch.setattr(build, "MANIFEST", tmp_path / "ptx" / "manifest.json")
    monkeypatch.setattr(regenerate, "RESOURCES", tmp_path / "resources.json")
    monkeypatch.setattr(build, "compile_ptx", _fake_ptx)
    monkeypatch.setattr(toolchain, "find_tool", lambda tool: f"/opt/{tool}")
    monkeypatch.setattr(census, "tool_version", lambda path: f"{path} 13.0")
    monkeypatch.setattr(census, "resources_table", lambda arch: {"arch": arch, "kernels": {}})
    return tmp_path


def _expected_files() -> list[str]:
    return sorted(f"{n}.{a}.ptx" for n in registry.SOURCES for a in build.committed_archs(n))


def test_regenerate_ptx_writes_one_file_per_kernel_and_arch_and_the_manifest(out):
    manifest = regenerate.regenerate_ptx()
    assert sorted(manifest) == _expected_files() and len(manifest) >= len(registry.SOURCES)
    assert sorted(p.name for p in (out / "ptx").glob("*.ptx")) == _expected_files()
    name = registry.SOURCES[0]
    fname = f"{name}.{build.committed_archs(name)[0]}.ptx"
    assert (out / "ptx" / fname).read_text() == _fake_ptx(name, build.committed_archs(name)[0])
    source = (build.CUDA_DIR / f"{name}.cu").read_text()
    assert manifest[fname] == {"source_sha256": hashlib.sha256(source.encode()).hexdigest(), "options": [],
                               "compiler": "/opt/nvcc 13.0"}
    assert json.loads((out / "ptx" / "manifest.json").read_text()) == manifest


def test_stale_ptx_names_the_files_that_differ_or_are_missing(out):
    regenerate.regenerate_ptx()
    assert regenerate.stale_ptx() == []
    first, second = _expected_files()[:2]
    (out / "ptx" / first).write_text("// edited by hand\n")
    (out / "ptx" / second).unlink()
    assert sorted(regenerate.stale_ptx()) == sorted([first, second])


def test_main_check_exits_1_on_stale_ptx_and_0_when_identical(out, capsys):
    regenerate.regenerate_ptx()
    count = len(_expected_files())
    assert regenerate.main(["--check"]) == 0
    assert capsys.readouterr().out == f"compiled {count} kernel files with /opt/nvcc 13.0: committed PTX identical\n"
    stale = _expected_files()[0]
    (out / "ptx" / stale).write_text("")
    assert regenerate.main(["--check"]) == 1
    assert capsys.readouterr().out.endswith(f": STALE ['{stale}']\n")


def test_main_writes_the_ptx_then_resources_unless_ptx_only(out, capsys):
    assert regenerate.main(["--ptx-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"wrote refsim/cuda/ptx/{f}" for f in regenerate.regenerate_ptx()]
    assert not (out / "resources.json").exists()
    capsys.readouterr()
    assert regenerate.main([]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "wrote refsim/cuda/resources.json"
    assert json.loads((out / "resources.json").read_text()) == {"arch": "sm_80", "kernels": {}}
