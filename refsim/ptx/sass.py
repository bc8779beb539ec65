"""What ptxas makes of a kernel: the SASS listing of each ``.entry``, read from ``ptxas`` + ``nvdisasm``.

refsim.ptx executes PTX; the GPU executes the SASS ptxas generates from it. Where the two part ways
(ptxas's code generation: instruction selection, cache-hint descriptors, FMA contraction), only the
SASS shows it. Example: the official Marlin ``Marlin<256,1,8,8,4,8>`` stops with an illegal instruction
on an H100 (CUDA 13.0 ptxas) at ``+0x1170``, which the listing shows as::

    /*1170*/  LDGSTS.E.BYPASS.LTC128B.128 [R9+UR0+0x4000], desc[UR1][R94.64] ;

    PTX --ptxas -arch=sm_XX--> cubin --nvdisasm -c--> text --parse_nvdisasm--> {kernel: (SassInstruction, ...)}

The tools come from the ``cuda`` extra (``pip install "refsim[cuda]"``: ptxas beside nvcc, nvdisasm from
``nvidia-cuda-nvdisasm``) or PATH (:func:`refsim.ptx.toolchain.find_tool`); without them
:func:`sass` raises :class:`refsim.errors.ToolchainError` saying which is missing.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from refsim.errors import ToolchainError
from refsim.ptx.arch import arch_facts
from refsim.ptx.toolchain import find_tool

__all__ = ["SassInstruction", "parse_nvdisasm", "sass"]

_SECTION = re.compile(r"^//-+ \.text\.(\S+)\s+-+\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*(?:/\*.*\*/)?\s*$")
_OPCODE = re.compile(r"^(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


@dataclass(frozen=True)
class SassInstruction:
    """One SASS instruction: byte offset in its kernel, the text (``LDGSTS.E... [R9+...], ...``
    without the trailing ``;``) and the opcode with its modifiers (``LDGSTS.E.BYPASS.LTC128B.128``)."""

    offset: int
    text: str
    opcode: str

    def __str__(self) -> str:
        return f"/*{self.offset:04x}*/  {self.text} ;"


def parse_nvdisasm(text: str) -> dict[str, tuple[SassInstruction, ...]]:
    """``nvdisasm -c`` output -> {kernel name (mangled): its instructions in address order}."""
    out: dict[str, list[SassInstruction]] = {}
    current = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        if line.startswith("//--"):           # SYMBOLS and other non-code sections
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if m and current is not None:
            body = m.group(2)
            current.append(SassInstruction(int(m.group(1), 16), body, _OPCODE.match(body).group(1)))
    return {k: tuple(v) for k, v in out.items()}


def sass(ptx_text: str, arch: str = "sm_80") -> dict[str, tuple[SassInstruction, ...]]:
    """The SASS ptxas generates for every kernel of ``ptx_text`` on ``arch`` (one of refsim.ptx.ARCHS).
    Raises ToolchainError when ptxas or nvdisasm is missing or fails."""
    arch_facts(arch)
    tools = {t: find_tool(t) for t in ("ptxas", "nvdisasm")}
    missing = [t for t, p in tools.items() if p is None]
    if missing:
        raise ToolchainError(f"SASS needs {' and '.join(missing)}, not found beside nvcc, in the cuda extra's "
                             f"wheels or on PATH: pip install \"refsim[cuda]\"")
    with tempfile.TemporaryDirectory(prefix="refsim-sass-") as tmp:
        src, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx_text)
        for cmd in ([str(tools["ptxas"]), f"-arch={arch}", str(src), "-o", str(cubin)],
                    [str(tools["nvdisasm"]), "-c", str(cubin)]):
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if res.returncode != 0:
                raise ToolchainError(f"{Path(cmd[0]).name} failed: {res.stderr.strip().splitlines()[-1:]}")
    return parse_nvdisasm(res.stdout)
