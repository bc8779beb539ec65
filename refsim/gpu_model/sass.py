"""What ptxas makes of a kernel's inner loop: the per-pipe census and one warp's critical path.

The performance model reads instruction counts of the official kernels it cannot ship (their
licence and size keep them out of refsim): this module turns the text ``nvdisasm -c`` prints for a
cubin into those counts, and the data files in ``refsim/data/timings/`` keep only the counts.

Spec
----
input        ``nvdisasm -c`` text: a function starts at a line ``.text.<mangled name>:``, a label at
             ``.L_x_<n>:``, an instruction at ``/*<hex address>*/  [@[!]P<n>] OPCODE operands ;``
loop         :func:`inner_loop`: the longest body closed by a backward ``BRA`` to a label of the same
             function (the loop the kernel spends its time in; nested loops give the outer one)
pipes        :func:`pipe_of` by mnemonic, per SM sub-partition (SMSP):

                 alu       LOP3 SHF LEA IADD3 ISETP SEL PRMT VIADD MOV PLOP3 ... (16 lanes: 2 clk)
                 imad      IMAD* (the FMA-heavy pipe, 16 lanes: 2 clk)
                 fp16      HFMA2 HADD2 HMUL2 (half2 lanes of the GPU)
                 fp16_mma  HFMA2.MMA (sm_90: the same half2 work issued to the MMA pipe)
                 lds       LDS* (shared memory, wavefronts x bank-conflict degree)
                 ldg       LDG (32-bit: 128 B per warp, one L1 wavefront)
                 ldg128    LDG.128 (512 B per warp, four wavefronts)
                 tensor    HMMA IMMA       ctrl   BRA BSSY BSYNC BAR EXIT ...   other  the rest

chain        :func:`chain_cycles`: cycles of one loop iteration of ONE warp alone on its SMSP:
             in-order issue (one instruction per clock), each instruction waits for the registers
             it reads (read-after-write through the loop: a value from the previous iteration is
             ready) and for its pipe (``intervals``); result latencies from ``latencies`` (the
             hardware-correlated Accel-Sim configurations, :data:`LATENCIES`). A load marked as
             coming from DRAM takes ``dram_cycles``: :func:`chain_terms` runs it at two values and
             returns ``(C0, rounds)`` with chain = C0 + rounds x DRAM latency (the dependent DRAM
             round trips one iteration makes).

    nvdisasm -c ──functions()──► {name: [Sass]} ──inner_loop()──► body ──census()──► counts by pipe
                                                                       └─chain_terms()──► (C0, rounds)
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import NamedTuple

import numpy as np

from refsim._validate import require_choice, require_instance
from refsim.errors import FormatRuleError

__all__ = ["Sass", "parse_line", "functions", "inner_loop", "pipe_of", "census", "chain_cycles", "chain_terms",
           "LATENCIES", "PIPES"]

PIPES = ("alu", "imad", "fp16", "fp16_mma", "lds", "ldg", "ldg128", "tensor", "ctrl", "other")

# cycles until a dependent instruction may issue, per architecture: Accel-Sim's hardware-correlated
# configurations (accel-sim/gpgpu-sim_distribution configs/tested-cfgs: SM75_RTX2060, SM80_A100,
# SM86_RTX3070, SM89_RTX4060_LAPTOP, SM90_H100 gpgpusim.config: ptx_opcode_latency_int/fp,
# gpgpu_smem_latency, gpgpu_l1_latency). sm_87 (Orin) is taken as sm_86 (the same SM generation).
LATENCIES = {
    "sm_75": {"alu": 4, "imad": 4, "fp16": 4, "lds": 30, "l1": 32},
    "sm_80": {"alu": 4, "imad": 4, "fp16": 4, "lds": 28, "l1": 34},
    "sm_86": {"alu": 4, "imad": 4, "fp16": 4, "lds": 29, "l1": 39},
    "sm_87": {"alu": 4, "imad": 4, "fp16": 4, "lds": 29, "l1": 39},
    "sm_89": {"alu": 4, "imad": 4, "fp16": 4, "lds": 29, "l1": 39},
    "sm_90": {"alu": 4, "imad": 4, "fp16": 4, "lds": 29, "l1": 41},
}

_ALU = frozenset(("LOP3", "LOP", "SHF", "SHL", "SHR", "LEA", "IADD3", "IADD", "ISETP", "SEL", "PRMT", "VIADD",
                  "MOV", "PLOP3", "IMNMX", "VIMNMX", "FLO", "POPC", "BMSK", "BREV", "SGXT", "P2R", "R2P", "CS2R",
                  "S2R", "IABS", "LOP32I", "IADD32I", "ISCADD", "I2FP", "F2I", "I2F"))
_CTRL = frozenset(("BRA", "BSSY", "BSYNC", "BAR", "EXIT", "NOP", "CALL", "RET", "WARPSYNC", "BREAK", "YIELD",
                   "DEPBAR", "JMP", "BPT"))
_NO_DST = _CTRL | frozenset(("STG", "STS", "ST", "STL", "RED", "REDG", "MEMBAR", "LDGSTS", "CCTL", "ERRBAR",
                             "CGAERRBAR", "LDGDEPBAR", "ARRIVES", "SYNCS"))


class Sass(NamedTuple):
    """One SASS instruction: the full mnemonic (``LDG.E.128``), the registers it writes and reads
    (``R<n>`` and ``P<n>``; uniform registers and constants are always ready)."""

    opcode: str
    dst: tuple
    src: tuple


_INSN = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_FUNC = re.compile(r"^\.text\.(\S+):")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_REG = re.compile(r"(?<![A-Z0-9_])R(\d+)(\.64|\.128)?")
_PRED = re.compile(r"(?<![A-Z0-9_])P(\d)(?![0-9])")


def _regs(text: str) -> list:
    out = []
    for m in _REG.finditer(text):
        base, width = int(m.group(1)), {".64": 2, ".128": 4}.get(m.group(2) or "", 1)
        out.extend(f"R{base + i}" for i in range(width))
    out.extend(f"P{m.group(1)}" for m in _PRED.finditer(text))
    return out


def parse_line(text: str) -> Sass:
    """One instruction's text (``@!P0 IMAD.WIDE R4, R5, 0x4, R8``, no address, no ``;``) -> Sass.
    The destination is the first operand, except for stores, branches and barriers; a wide load
    (``.64``/``.128``) and ``IMAD.WIDE`` write 2 or 4 consecutive registers; ``ISETP``-like
    compares write the two predicates they name."""
    if not isinstance(text, str) or not text.strip():
        raise FormatRuleError(f"text: must be one SASS instruction; got {text!r:.80}")
    text = text.strip()
    src = []
    guard = re.match(r"^@!?(U?P\w+)\s+(.*)$", text)
    if guard:
        src += _regs(guard.group(1))
        text = guard.group(2)
    opcode, _, rest = text.partition(" ")
    base = opcode.split(".")[0]
    ops = [o.strip() for o in re.split(r",(?![^\[]*\])", rest)] if rest.strip() else []
    dst = []
    if ops and base not in _NO_DST:
        width = 1
        if base in ("LDG", "LDS", "LD", "LDC", "LDL", "LDSM") and (".128" in opcode or ".64" in opcode):
            width = 4 if ".128" in opcode else 2
        elif opcode.startswith("IMAD.WIDE"):
            width = 2
        first = re.match(r"^R(\d+)", ops[0])
        if first:
            dst = [f"R{int(first.group(1)) + i}" for i in range(width)]
        elif re.match(r"^P\d", ops[0]):
            dst = [ops[0][:2]]
        ops = ops[1:]
        if base in ("ISETP", "FSETP", "HSETP2", "PLOP3", "DSETP") and ops and re.match(r"^P\d", ops[0]):
            dst.append(ops[0][:2])
            ops = ops[1:]
    for o in ops:
        src += _regs(o)
    return Sass(opcode, tuple(dst), tuple(src))


def functions(text: str) -> dict:
    """``nvdisasm -c`` output -> {mangled function name: [Sass | label str]} in address order
    (labels kept as strings, for :func:`inner_loop`)."""
    if not isinstance(text, str):
        raise FormatRuleError(f"text: must be nvdisasm output (str); got {type(text).__name__}")
    out: dict = {}
    cur = None
    for line in text.splitlines():
        if m := _FUNC.match(line):
            cur = out.setdefault(m.group(1), [])
        elif cur is None:
            continue
        elif m := _LABEL.match(line):
            cur.append(m.group(1))
        elif m := _INSN.match(line):
            cur.append(m.group(2))
    return out


def inner_loop(items: list) -> list:
    """The longest loop body of one function (items from :func:`functions`): the instructions from
    a label to a later ``BRA`` back to it, as Sass. A function without a loop is a FormatRuleError."""
    require_instance("items", items, (list, tuple))
    if not all(isinstance(i, str) for i in items):
        raise FormatRuleError("items: must be the list of instruction and label strings functions() gives")
    labels = {}
    best = None
    insns = []
    for item in items:
        if item.startswith(".L_x_"):
            labels[item] = len(insns)
            continue
        insns.append(item)
        m = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", item)
        if m and m.group(1) in labels:
            body = insns[labels[m.group(1)]:]
            if best is None or len(body) > len(best):
                best = body
    if best is None:
        raise FormatRuleError("items: the function has no loop (no backward BRA to one of its labels)")
    return [parse_line(t) for t in best]


def pipe_of(opcode: str) -> str:
    """The pipe (one of :data:`PIPES`) a SASS mnemonic issues to (module spec block)."""
    require_instance("opcode", opcode, str)
    base = opcode.split(".")[0]
    if base == "LDG":
        return "ldg128" if ".128" in opcode else "ldg"
    if base in ("LDS", "LDSM"):
        return "lds"
    if base == "IMAD":
        return "imad"
    if opcode.startswith("HFMA2.MMA"):
        return "fp16_mma"
    if base in ("HFMA2", "HADD2", "HMUL2"):
        return "fp16"
    if base in ("HMMA", "IMMA"):
        return "tensor"
    if base in _CTRL:
        return "ctrl"
    if base in _ALU:
        return "alu"
    return "other"


def census(body: list) -> dict:
    """Instruction counts of one loop iteration by pipe (:data:`PIPES`) plus ``issue_slots`` (every
    instruction: each takes one issue slot of its SMSP)."""
    _require_body(body)
    c = Counter(pipe_of(s.opcode) for s in body)
    out = {p: c.get(p, 0) for p in PIPES}
    out["issue_slots"] = len(body)
    return out


def chain_cycles(body: list, intervals: dict, latencies: dict, lds_wavefronts: float = 1.0,
                 dram_cycles: float = 0.0, dram_pipe: str = "ldg") -> float:
    """Cycles of one iteration of ``body`` (Sass list) run by one warp alone: the second of two
    iterations, so loop-carried registers come from the first (module spec). ``intervals``: cycles
    between two warp instructions of a pipe on one SMSP (keys alu, imad, fp16, fp16_mma, mio);
    ``latencies``: keys alu, imad, fp16, lds, l1 (:data:`LATENCIES`); ``lds_wavefronts``: the
    bank-conflict degree of each shared load; loads of ``dram_pipe`` take ``dram_cycles``, the
    other global loads hit L1."""
    _require_body(body)
    intervals = _require_numbers("intervals", intervals, ("alu", "imad", "fp16", "fp16_mma", "mio"))
    latencies = _require_numbers("latencies", latencies, ("alu", "imad", "fp16", "lds", "l1"))
    lds_wavefronts = _require_numbers("lds_wavefronts", {"": lds_wavefronts}, ("",))[""]
    dram_cycles = _require_numbers("dram_cycles", {"": dram_cycles}, ("",))[""]
    require_choice("dram_pipe", dram_pipe, ("ldg", "ldg128", "lds"))
    ready: dict = {}
    free: dict = {}
    t = 0.0
    start_second = 0.0
    for it in range(2):
        if it == 1:
            start_second = t
        for s in body:
            pipe = pipe_of(s.opcode)
            issue = max([t] + [ready.get(r, 0.0) for r in s.src])
            if pipe in ("alu", "imad", "fp16", "fp16_mma"):
                issue = max(issue, free.get(pipe, 0.0))
                free[pipe] = issue + intervals[pipe]
                lat = latencies["imad" if pipe == "imad" else "fp16" if pipe.startswith("fp16") else "alu"]
            elif pipe in ("lds", "ldg", "ldg128"):
                wavefronts = lds_wavefronts if pipe == "lds" else 4.0 if pipe == "ldg128" else 1.0
                issue = max(issue, free.get("mio", 0.0))
                free["mio"] = issue + intervals["mio"] * wavefronts
                lat = dram_cycles if pipe == dram_pipe else latencies["lds"] if pipe == "lds" else latencies["l1"]
            else:
                lat = latencies["alu"] if s.dst else 0.0
            for r in s.dst:
                ready[r] = issue + lat
            t = issue + 1.0
    end = max([t] + list(ready.values()))
    return end - start_second


def _require_body(body) -> None:
    require_instance("body", body, (list, tuple))
    if not all(isinstance(x, Sass) for x in body):
        raise FormatRuleError("body: must be a list of Sass instructions (inner_loop gives one)")


def _require_numbers(name: str, values, keys) -> dict:
    """``values`` a dict holding a finite number >= 0 (Python or NumPy) under each of ``keys``;
    returns those entries as Python floats."""
    ok = isinstance(values, dict) and all(
        isinstance(values.get(k), (int, float, np.integer, np.floating))
        and not isinstance(values.get(k), (bool, np.bool_))
        and math.isfinite(values[k]) and values[k] >= 0 for k in keys)
    if not ok:
        shown = values.get("") if isinstance(values, dict) and keys == ("",) else values
        raise FormatRuleError(f"{name}: must be finite non-negative number(s) for {list(k for k in keys if k)}; "
                              f"got {shown!r:.120}")
    return {k: float(values[k]) for k in keys}


def chain_terms(body: list, intervals: dict, latencies: dict, lds_wavefronts: float = 1.0,
                dram_pipe: str = "ldg") -> tuple[float, float]:
    """``(C0, rounds)``: one iteration of one warp alone takes ``C0 + rounds x L`` cycles when its
    ``dram_pipe`` loads take L cycles (L large enough that they bound the path; evaluated at two
    values, the path is linear in L there)."""
    lo, hi = 20000.0, 40000.0
    c_lo = chain_cycles(body, intervals, latencies, lds_wavefronts, lo, dram_pipe)
    c_hi = chain_cycles(body, intervals, latencies, lds_wavefronts, hi, dram_pipe)
    rounds = (c_hi - c_lo) / (hi - lo)
    return c_lo - rounds * lo, rounds


# ---- the Any-Precision census (refsim/data/timings/sass_census_anyprec.csv) ----------------------
ANYPREC_SOURCE = "SNU-ARC/any-precision-llm @ a3257d02740c, any_precision/modules/kernels/matmul.cuh"
ANYPREC_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90")
ANYPREC_COLUMNS = ("arch", "maxm", "bits", "use_ksplit", "issue_slots", "alu", "imad", "fp16", "fp16_mma", "lds",
                   "ldg", "ldg128", "other", "chain_c0", "chain_rounds")
# the half2 rate each arch's consumer parts run HFMA2 at (lanes per SM per clock; sm_86/sm_89 GeForce
# and workstation parts: FP16 = FP32 rate) -- only for the single-warp chain; the model's throughput
# terms take the GPU's own rates
_HFMA2_LANES = {"sm_75": 128, "sm_80": 128, "sm_86": 64, "sm_87": 128, "sm_89": 64, "sm_90": 128}


def anyprec_instantiations() -> str:
    """A .cu file that includes the official ``matmul.cuh`` and instantiates ``matmul_kbit_32``
    as ``main.cu`` dispatches it: maxm 1..8 for bits 3..8, and the K-split variant (maxm 1)."""
    sig = "(const __half*, const uint32_t*, const uint32_t, const uint32_t, const uint32_t, const __half*, __half*)"
    lines = ['#include "matmul.cuh"']
    for bits in range(3, 9):
        for maxm in range(1, 9):
            lines.append(f"template __global__ void matmul_kbit_32<{maxm}, {bits}, false>{sig};")
        lines.append(f"template __global__ void matmul_kbit_32<1, {bits}, true>{sig};")
    return "\n".join(lines) + "\n"


def anyprec_rows(sass_text: str, arch: str) -> list[dict]:
    """Census rows (:data:`ANYPREC_COLUMNS`) of every ``matmul_kbit_32`` in ``sass_text`` (nvdisasm
    of a cubin built from :func:`anyprec_instantiations` for ``arch``). The plane words (32-bit
    LDG) come from DRAM; the activations (LDG.128) hit L1; a lookup's bank-conflict degree is the
    expected one of random lookups into the kernel's table
    (:func:`refsim.gpu_model.kernels.anyprec.lds_conflict_degree`)."""
    from refsim.gpu_model.kernels import anyprec as ap

    if arch not in LATENCIES:
        raise FormatRuleError(f"arch: must be one of {sorted(LATENCIES)}; got {arch!r}")
    iv = {"alu": 2.0, "imad": 2.0, "fp16": 32 / (_HFMA2_LANES[arch] / 4), "fp16_mma": 32 / (_HFMA2_LANES[arch] / 4),
          "mio": 4.0}
    rows = []
    for name, items in functions(sass_text).items():
        m = re.match(r"_Z14matmul_kbit_32ILi(\d)ELi(\d)ELb([01])E", name)
        if not m:
            continue
        maxm, bits, ks = (int(g) for g in m.groups())
        body = inner_loop(items)
        c = census(body)
        _, _, words = ap.lookup_plan(bits, maxm)
        c0, rounds = chain_terms(body, iv, LATENCIES[arch], ap.lds_conflict_degree(words))
        rows.append({"arch": arch, "maxm": maxm, "bits": bits, "use_ksplit": ks, **{k: c[k] for k in ANYPREC_COLUMNS[4:13]},
                     "chain_c0": round(c0), "chain_rounds": round(rounds)})
    return sorted(rows, key=lambda r: (r["arch"], r["maxm"], r["bits"], r["use_ksplit"]))


def regenerate_anyprec(kernels_dir, out_csv, archs=ANYPREC_ARCHS) -> list[dict]:  # pragma: no cover - needs nvcc
    """Compile the official kernel (``kernels_dir`` holds matmul.cuh and dequant.cuh of
    :data:`ANYPREC_SOURCE`) for each arch with the ``cuda`` extra's nvcc (-O3), disassemble with
    nvdisasm and write the census CSV. Returns the rows."""
    import csv
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    from refsim.ptx.toolchain import find_tool

    nvcc, nvdisasm = find_tool("nvcc"), find_tool("nvdisasm")
    if nvcc is None or nvdisasm is None:
        raise FormatRuleError("nvcc and nvdisasm are needed: pip install 'refsim[cuda]'")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in ("matmul.cuh", "dequant.cuh"):
            shutil.copy(Path(kernels_dir) / f, Path(tmp) / f)
        src = Path(tmp) / "inst.cu"
        src.write_text(anyprec_instantiations(), encoding="utf-8")
        for arch in archs:
            cubin = Path(tmp) / f"{arch}.cubin"
            subprocess.run([str(nvcc), "-O3", f"-arch={arch}", "-cubin", str(src), "-o", str(cubin)], check=True,
                           capture_output=True)
            text = subprocess.run([str(nvdisasm), "-c", str(cubin)], check=True, capture_output=True,
                                  text=True).stdout
            rows += anyprec_rows(text, arch)
    with open(out_csv, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=ANYPREC_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return rows


if __name__ == "__main__":  # pragma: no cover - manual tool
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python -m refsim.gpu_model.sass KERNELS_DIR OUT_CSV   "
                 "(KERNELS_DIR: any-precision-llm/any_precision/modules/kernels)")
    print(f"{len(regenerate_anyprec(sys.argv[1], sys.argv[2]))} rows")
