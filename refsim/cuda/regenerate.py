"""Regenerate refsim/cuda's generated data: the committed PTX, its manifest, and resources.json.

    python -m refsim.cuda.regenerate            # PTX of every registered .cu for its committed archs + manifest
                                                # + resources.json (needs nvcc, ptxas; nvdisasm for the SASS mix)
    python -m refsim.cuda.regenerate --ptx-only
    python -m refsim.cuda.regenerate --check    # compile every file and compare with the committed PTX
                                                # (exit 1 on a difference; what .ci/run's cuda step runs)

Run it after editing a kernel (``tests/cuda/test_build.py`` fails until you do) with the compiler of the
``cuda`` extra (``pip install -e '.[cuda]'``), so that everyone's committed PTX comes from one pinned nvcc.
"""

from __future__ import annotations

import argparse
import json

from refsim.cuda import build, census, registry
from refsim.ptx import toolchain

__all__ = ["regenerate_ptx", "regenerate_resources", "stale_ptx", "main"]

RESOURCES = build.CUDA_DIR / "resources.json"


def regenerate_ptx() -> dict:
    """Compile every registered file for every committed arch, write the .ptx files and the manifest;
    returns the manifest."""
    nvcc = toolchain.find_tool("nvcc")
    compiler = census.tool_version(nvcc) if nvcc else "unknown"
    build.PTX_DIR.mkdir(exist_ok=True)
    manifest = {}
    for name in registry.SOURCES:
        for arch in build.committed_archs(name):
            text = build.compile_ptx(name, arch)
            fname = f"{name}.{arch}.ptx"
            (build.PTX_DIR / fname).write_text(text)
            manifest[fname] = {"source_sha256": build.source_hash(build.source_text(name)),
                               "options": list(build.OPTIONS), "compiler": compiler}
    build.MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    build.ptx.cache_clear()
    return manifest


def regenerate_resources(arch: str = "sm_80") -> dict:
    """Write ``refsim/cuda/resources.json`` (:func:`refsim.cuda.census.resources_table`); returns it."""
    table = census.resources_table(arch)
    RESOURCES.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return table


def stale_ptx() -> list[str]:
    """Compile every registered file for every committed arch now; return the committed PTX files that
    differ from the fresh compile (or are missing). Needs a compiler."""
    stale = []
    for name in registry.SOURCES:
        for arch in build.committed_archs(name):
            path = build.PTX_DIR / f"{name}.{arch}.ptx"
            if not path.exists() or path.read_text() != build.compile_ptx(name, arch):
                stale.append(path.name)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refsim.cuda.regenerate", description=__doc__.splitlines()[0])
    parser.add_argument("--ptx-only", action="store_true", help="skip resources.json")
    parser.add_argument("--check", action="store_true", help="compile and compare with the committed PTX only")
    args = parser.parse_args(argv)
    if args.check:
        nvcc = toolchain.find_tool("nvcc")
        stale = stale_ptx()
        print(f"compiled {sum(len(build.committed_archs(n)) for n in registry.SOURCES)} kernel files with "
              f"{census.tool_version(nvcc) if nvcc else 'nvcc'}: " + (f"STALE {stale}" if stale else "committed PTX identical"))
        return 1 if stale else 0
    for fname in regenerate_ptx():
        print(f"wrote refsim/cuda/ptx/{fname}")
    if not args.ptx_only:
        regenerate_resources()
        print(f"wrote refsim/cuda/{RESOURCES.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
