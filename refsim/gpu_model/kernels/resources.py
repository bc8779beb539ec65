"""Registers and shared memory of the official kernels, as ptxas reports them (measured tables).

refsim does not ship these kernels, so their resources are measured, not guessed: the CSV files in
``refsim/data/timings/`` (``resources_*.csv``; how each was measured is in that folder's README)::

    resources_anyprec.csv   arch, maxm, bits, use_ksplit, registers, static_smem_bytes
                            matmul_kbit_32<maxm, bits, use_ksplit> (SNU-ARC/any-precision-llm @ a3257d0)
    resources_marlin.csv    arch, thread_m_blocks, thread_n_blocks, thread_k_blocks, group_blocks, registers
                            Marlin<256, ...> (IST-DASLab/marlin @ 2f6d7c1; group_blocks -1 = per channel)
    resources_atom.csv      arch, registers
                            DenseLayerGEMM_i4_kernel<half> (efeslab/Atom @ 7e3618b)
    sass_census_anyprec.csv arch, maxm, bits, use_ksplit, then per chunk step of one warp: issue_slots,
                            alu, imad, fp16, fp16_mma, lds, ldg, ldg128, other, chain_c0, chain_rounds
                            (the SASS of matmul_kbit_32 per arch; refsim.gpu_model.sass)

An arch missing from a table is read from the one it compiles like (:data:`SAME_AS`: sm_87 and sm_89
give the numbers of sm_86 for Any-Precision and Marlin). A lookup outside a table is a
FormatRuleError naming the kernel, the arch and the configuration.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

import numpy as np

from refsim._validate import plain_scalar
from refsim.errors import FormatRuleError

__all__ = ["anyprec", "anyprec_census", "marlin", "atom", "SAME_AS", "table_path"]

# arches whose ptxas output equals another's for these kernels (measured: sm_86, sm_87 and sm_89 give
# the same registers for Any-Precision and Marlin; sm_87 was not compiled and is taken as sm_86)
SAME_AS = {"anyprec": {"sm_87": "sm_86", "sm_89": "sm_86"}, "marlin": {"sm_86": "sm_80", "sm_87": "sm_80",
                                                                    "sm_89": "sm_80"}, "atom": {},
           "sass_census_anyprec": {}}


def table_path(kernel: str) -> Path:
    """The CSV file of ``kernel``'s measured resources (``sass_census_anyprec``: the census file)."""
    if not isinstance(kernel, str) or kernel not in SAME_AS:
        raise FormatRuleError(f"kernel: must be one of {sorted(SAME_AS)}; got {kernel!r:.80}")
    kernel = str(kernel)
    name = kernel if kernel.startswith("sass_") else f"resources_{kernel}"
    return Path(__file__).resolve().parents[2] / "data" / "timings" / f"{name}.csv"


@lru_cache(maxsize=None)
def _table(kernel: str) -> dict:
    """{(arch, *config): values} from the kernel's CSV (all cells integers except the arch)."""
    path = table_path(kernel)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, out = rows[0], {}
    width = {"anyprec": 4, "marlin": 5, "atom": 1, "sass_census_anyprec": 4}[kernel]
    for line, cells in enumerate(rows[1:], 2):
        if len(cells) != len(header):
            raise FormatRuleError(f"{path}:{line}: row must have {len(header)} cells; got {len(cells)}")
        try:
            values = [int(c) for c in cells[1:]]
        except ValueError:
            raise FormatRuleError(f"{path}:{line}: cells after the arch must be integers; got {cells}") from None
        out[(cells[0], *values[:width - 1])] = tuple(values[width - 1:])
    return out


def _lookup(kernel: str, compute_capability: str, *config) -> tuple:
    if not isinstance(compute_capability, str):
        raise FormatRuleError(f"compute_capability: must be a string like '8.9'; got {compute_capability!r:.80}")
    arch = "sm_" + str(compute_capability).replace(".", "")
    arch = SAME_AS[kernel].get(arch, arch)
    try:
        hit = _table(kernel).get((arch, *config))
    except TypeError:           # an unhashable configuration value: no such row
        hit = None
    if hit is None:
        raise FormatRuleError(f"{kernel}: no measured resources for {arch} {config} in {table_path(kernel).name}")
    return hit


def anyprec(compute_capability: str, maxm: int, bits: int, use_ksplit: bool) -> tuple[int, int]:
    """(registers per thread, static shared bytes per CTA) of ``matmul_kbit_32<maxm, bits, use_ksplit>``
    on ``compute_capability`` ("8.9" reads the sm_86 rows)."""
    use_ksplit = plain_scalar(use_ksplit)
    if type(use_ksplit) is not bool:
        raise FormatRuleError(f"use_ksplit: must be a bool; got {use_ksplit!r:.80}")
    return _lookup("anyprec", compute_capability, maxm, bits, int(use_ksplit))


CENSUS_FIELDS = ("issue_slots", "alu", "imad", "fp16", "fp16_mma", "lds", "ldg", "ldg128", "other", "chain_c0",
                 "chain_rounds")


def anyprec_census(compute_capability: str, maxm: int, bits: int, use_ksplit: bool) -> dict:
    """Warp instructions of one chunk step of ``matmul_kbit_32<maxm, bits, use_ksplit>`` by pipe, and
    one warp's path through it (``chain_c0`` cycles + ``chain_rounds`` DRAM latencies), from the SASS
    ptxas makes for ``compute_capability`` (:data:`CENSUS_FIELDS`; refsim.gpu_model.sass)."""
    if not isinstance(use_ksplit, (bool, np.bool_)):
        raise FormatRuleError(f"use_ksplit: must be a bool; got {use_ksplit!r:.80}")
    return dict(zip(CENSUS_FIELDS, _lookup("sass_census_anyprec", compute_capability, maxm, bits, int(use_ksplit))))


def marlin(compute_capability: str, m_blocks: int, n_blocks: int, k_blocks: int, group_blocks: int) -> int:
    """Registers per thread of ``Marlin<256, m_blocks, n_blocks, k_blocks, 4, group_blocks>``."""
    return _lookup("marlin", compute_capability, m_blocks, n_blocks, k_blocks, group_blocks)[0]


def atom(compute_capability: str) -> int:
    """Registers per thread of Atom's ``DenseLayerGEMM_i4_kernel<half>``."""
    return _lookup("atom", compute_capability)[0]
