"""refsim.cuda's build: the registry, the committed PTX and its staleness check, the spec blocks."""

from __future__ import annotations

import re

import pytest

import refsim.cuda as rc
from refsim.cuda import build, census, registry
from refsim.errors import FormatRuleError, ToolchainError
from refsim.ptx import toolchain

PINNED = {"anyprec_gemv", "atom_group_gemm", "mixed_gemv", "gptq_gemv", "awq_gemv"}


def test_kernels_lists_every_pinned_entry_point_with_its_oracle():
    listed = {k.name: k for k in rc.kernels()}
    assert PINNED <= set(listed)
    for name, entry in listed.items():
        assert callable(getattr(rc, name)), name
        module, func = entry.oracle.rsplit(".", 1)
        assert callable(getattr(__import__(module, fromlist=[func]), func)), entry.oracle
        assert build.source_path(entry.source).is_file()


@pytest.mark.parametrize("name", registry.SOURCES)
def test_every_kernel_file_opens_with_a_spec_block_naming_its_oracle(name):
    head = build.source_text(name)[:4000]
    assert head.startswith(f"// {name}.cu")
    for field in ("computes", "equals", "launch"):
        assert re.search(rf"^// {field}\b", head, re.M), f"{name}.cu: spec block lacks '{field}'"
    oracles = [k.oracle for k in rc.kernels() if k.source == name]
    assert all(o.rsplit(".", 1)[0] in head for o in oracles)


@pytest.mark.parametrize("name", registry.SOURCES)
def test_committed_ptx_was_generated_from_the_current_source(name):
    # fails when a .cu changed without `python -m refsim.cuda.regenerate` (no compiler needed)
    for arch in build.committed_archs(name):
        entry = build.manifest().get(f"{name}.{arch}.ptx")
        assert entry is not None, f"{name}.{arch}.ptx is not committed: run python -m refsim.cuda.regenerate"
        assert entry["source_sha256"] == build.source_hash(build.source_text(name)), (
            f"{name}.cu changed since its PTX was generated: run python -m refsim.cuda.regenerate")
        text = build.committed_ptx(name, arch)
        assert text is not None and ".entry" in text


def _compiler_or_skip():
    nvcc = toolchain.find_tool("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc ($NVCC, the cuda extra, PATH): the committed PTX is used")
    version = census.tool_version(nvcc)
    recorded = {e["compiler"] for e in build.manifest().values()}
    if recorded != {version}:
        pytest.skip(f"the committed PTX comes from {sorted(recorded)}; this nvcc is {version!r}")
    return nvcc


@pytest.mark.slow
@pytest.mark.nvcc
@pytest.mark.parametrize("name", registry.SOURCES)
def test_committed_ptx_equals_a_fresh_compile(name):
    _compiler_or_skip()
    for arch in build.committed_archs(name):
        assert build.compile_ptx(name, arch) == (build.PTX_DIR / f"{name}.{arch}.ptx").read_text(), (
            f"{name}.{arch}.ptx differs from nvcc's output: run python -m refsim.cuda.regenerate")


def test_ptx_lookup_refuses_unknown_names_and_archs():
    with pytest.raises(FormatRuleError, match="name"):
        build.ptx("not_a_kernel")
    with pytest.raises(FormatRuleError, match="arch"):
        build.ptx("anyprec", "ampere")


def test_an_uncommitted_arch_needs_a_compiler(monkeypatch):
    from refsim import ptx

    def no_compiler(*a, **k):
        raise ToolchainError("no CUDA compiler (nvcc) found")

    monkeypatch.setattr(ptx, "compile", no_compiler)
    build.ptx.cache_clear()
    assert build.committed_ptx("anyprec", "sm_90") is None
    with pytest.raises(ToolchainError, match="nvcc"):
        build.ptx("anyprec", "sm_90")
    assert ".entry anyprec_gemv" in build.ptx("anyprec", "sm_80")  # committed: no compiler needed
    build.ptx.cache_clear()
