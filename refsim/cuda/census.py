"""What ptxas makes of each kernel: registers, shared memory, spills and the SASS instruction mix.

Spec
----
tools         ``nvcc`` (the same one :func:`refsim.ptx.compile` uses: ``$NVCC``, the ``cuda`` extra's wheel
              ``site-packages/nvidia/cu13/bin``, then PATH) with ``-cubin -Xptxas -v``, and ``nvdisasm -c``
              from the same directory, the wheels or PATH (PyPI ``nvidia-cuda-nvdisasm``), both found by
              :func:`refsim.ptx.toolchain.find_tool`, which returns None when a tool is absent; the census
              tests then skip with that reason.
resources     per ``.entry``: registers per thread, static shared bytes per block, stack frame, spill
              store/load bytes, barriers (ptxas ``-v``). Dynamic shared memory is a launch parameter: the
              host modules state it (e.g. anyprec: ``4 * 2**bits * 2`` bytes).
mix           per ``.entry``: SASS opcode counts (the mnemonic before the first dot, predicates dropped:
              ``@P0 HFMA2.MMA R1, ...`` counts as ``HFMA2``), and the PTX opcode counts of the same entry
              (``fma.rn.f16x2`` -> ``fma.rn.f16x2``: the opcode with its modifiers, types included).
table         :func:`resources_table` builds ``refsim/cuda/resources.json`` for every registered file
              committed for its arch (sm_80; hopper_w4a16.cu, sm_90a only, is not in it)
              (``python -m refsim.cuda.regenerate`` writes it; the performance model reads it).

    .cu ──nvcc -cubin -Xptxas -v──► cubin ──nvdisasm -c──► SASS text ──► {entry: {"HFMA2": 64, ...}}
                     └── ptxas info lines ──► {entry: {"registers": 78, "spill_store_bytes": 0, ...}}
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from refsim._validate import require_fields, require_instance
from refsim.errors import ToolchainError
from refsim.ptx.toolchain import find_tool

__all__ = ["tool_version", "EntryResources", "compile_cubin", "sass_mix", "ptx_mix", "resources_table"]


def tool_version(path: Path) -> str:
    """The tool's release line, e.g. ``Cuda compilation tools, release 13.0, V13.0.88``."""
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False).stdout
    lines = [ln for ln in out.splitlines() if "release" in ln]
    return lines[-1].strip() if lines else out.strip()


@dataclass(frozen=True)
class EntryResources:
    """ptxas ``-v`` figures of one ``.entry``."""

    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int

    def __post_init__(self):
        require_fields(self)  # Python ints, whatever NumPy scalars came in


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BAR = re.compile(r"used (\d+) barriers")


def _parse_ptxas(log: str) -> dict[str, EntryResources]:
    out, entry, frame = {}, None, (0, 0, 0)
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry, frame = m.group(1), (0, 0, 0)
        elif (m := _FRAME.search(line)) and entry:
            frame = tuple(int(g) for g in m.groups())
        elif (m := _USED.search(line)) and entry:
            smem = _SMEM.search(line)
            bar = _BAR.search(line)
            out[entry] = EntryResources(int(m.group(1)), int(smem.group(1)) if smem else 0, frame[0], frame[1],
                                        frame[2], int(bar.group(1)) if bar else 0)
            entry = None
    return out


def compile_cubin(source: Path, arch: str = "sm_80") -> tuple[bytes, dict[str, EntryResources]]:
    """Compile a ``.cu`` file to a cubin with ptxas ``-v``: (cubin bytes, resources per entry).
    Raises ToolchainError when nvcc is absent or fails."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise ToolchainError("nvcc not found: pip install 'refsim[cuda]' (or set $NVCC)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        r = subprocess.run([str(nvcc), f"-arch={arch}", "-cubin", "-Xptxas", "-v", str(source), "-o", str(cubin)],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            raise ToolchainError(f"nvcc -cubin failed for {source.name}:\n{r.stderr}")
        return cubin.read_bytes(), _parse_ptxas(r.stdout + r.stderr)


_SASS_FN = re.compile(r"^\.text\.(\S+):")
_SASS_INSN = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def sass_mix(cubin: bytes) -> dict[str, Counter]:
    """SASS opcode counts per entry of a cubin (``nvdisasm -c``). Raises ToolchainError without nvdisasm."""
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm is None:
        raise ToolchainError("nvdisasm not found: pip install 'refsim[cuda]'")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        r = subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True, text=True, check=False)
        if r.returncode:
            raise ToolchainError(f"nvdisasm failed:\n{r.stderr}")
    out: dict[str, Counter] = {}
    fn = None
    for line in r.stdout.splitlines():
        if m := _SASS_FN.match(line):
            fn = m.group(1)
            out[fn] = Counter()
        elif fn and (m := _SASS_INSN.match(line)):
            out[fn][m.group(1)] += 1
    return out


_PTX_ENTRY = re.compile(r"\.entry\s+(\S+?)\s*\(")
_PTX_INSN = re.compile(r"^\s*\{?\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)*)[\s;]")


def ptx_mix(ptx_text: str) -> dict[str, Counter]:
    """Static PTX instruction counts per ``.entry`` (opcode with modifiers, e.g. ``fma.rn.f16x2``;
    directives and labels excluded; inline-asm ``{ ... }`` blocks counted instruction by instruction)."""
    require_instance("ptx_text", ptx_text, str)
    out: dict[str, Counter] = {}
    fn = None
    for line in ptx_text.splitlines():
        if m := _PTX_ENTRY.search(line):
            fn = m.group(1)
            out[fn] = Counter()
            continue
        if fn is None:
            continue
        for part in line.split(";"):
            if m := _PTX_INSN.match(part + " "):
                out[fn][m.group(1)] += 1
    return out


def resources_table(arch: str = "sm_80") -> dict:
    """The content of ``refsim/cuda/resources.json`` for every registered kernel file committed for
    ``arch`` (:func:`refsim.cuda.build.committed_archs`: an sm_90a-only file is not in the sm_80 table):
    per entry its source, ptxas resources and (when nvdisasm exists) its SASS opcode counts."""
    from refsim.cuda import build, registry

    kernels = {}
    for name in (n for n in registry.SOURCES if arch in build.committed_archs(n)):
        cubin, res = compile_cubin(build.source_path(name), arch)
        sass = sass_mix(cubin) if find_tool("nvdisasm") else {}
        for entry, r in sorted(res.items()):
            kernels[entry] = {"source": f"{name}.cu", "registers_per_thread": r.registers,
                              "static_shared_bytes_per_block": r.shared_bytes, "stack_bytes": r.stack_bytes,
                              "spill_store_bytes": r.spill_store_bytes, "spill_load_bytes": r.spill_load_bytes,
                              "barriers": r.barriers,
                              "sass_mix": dict(sorted(sass.get(entry, Counter()).items()))}
    return {"arch": arch, "compiler": tool_version(find_tool("nvcc")), "kernels": kernels}
