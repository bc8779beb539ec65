"""SASS census of the refsim/cuda kernels (where nvcc and nvdisasm exist): the instruction mix each
design depends on, and resources.json up to date with ptxas."""

from __future__ import annotations

import json
import re

import pytest

from refsim.cuda import build, census, registry
from refsim.cuda.regenerate import RESOURCES
from refsim.ptx import toolchain

TENSOR_CORE = {"atom", "marlin"}                                 # files whose design is mma.sync
DEQUANT = {"anyprec", "mixed_2_4_16", "gptq_awq", "marlin", "hopper_w4a16"}     # files that unpack codes with bit operations
_FLOAT_OP = re.compile(r"^(add|sub|mul|fma|mad)((?:\.[a-z0-9]+)*)\.(f32|f16|f16x2|bf16|bf16x2|f64)$")


def _tools_or_skip():
    if toolchain.find_tool("nvcc") is None or toolchain.find_tool("nvdisasm") is None:
        pytest.skip("the SASS census needs nvcc and nvdisasm (pip install 'refsim[cuda]')")


@pytest.fixture(scope="module")
def compiled():
    _tools_or_skip()
    out = {}
    for name in registry.SOURCES:
        arch = build.committed_archs(name)[0]        # sm_80, or sm_90a for hopper_w4a16.cu
        cubin, res = census.compile_cubin(build.source_path(name), arch)
        out[name] = (res, census.sass_mix(cubin), census.ptx_mix(build.ptx(name, arch)))
    return out


def test_ptx_float_arithmetic_always_names_its_rounding(compiled):
    # PTX forbids contracting add/sub/mul that carry an explicit rounding modifier into an fma, so a
    # kernel whose every float op says .rn computes exactly what its PTX says, whatever ptxas does
    for name, (_, _, ptx_mix) in compiled.items():
        for entry, mix in ptx_mix.items():
            loose = [op for op in mix if (m := _FLOAT_OP.match(op)) and not re.search(r"\.(rn|rz|rm|rp)\b", m.group(2))]
            assert not loose, f"{name}.cu {entry}: float ops without a rounding modifier: {loose}"


def test_no_ffma_without_an_fma_in_the_ptx(compiled):
    for name, (_, sass, ptx_mix) in compiled.items():
        for entry, mix in sass.items():
            ptx_fma = sum(v for op, v in ptx_mix[entry].items() if op.startswith("fma.") and op.endswith(".f32"))
            assert mix["FFMA"] == 0 or ptx_fma > 0, f"{name}.cu {entry}: {mix['FFMA']} FFMA from no fma.f32"


def test_tensor_core_instructions_equal_the_ptx_mma_count(compiled):
    for name in TENSOR_CORE:
        res, sass, ptx_mix = compiled[name]
        for entry, mix in sass.items():
            n_mma = sum(v for op, v in ptx_mix[entry].items() if op.startswith("mma."))
            assert n_mma > 0
            assert mix["HMMA"] + mix["IMMA"] == n_mma, f"{name}.cu {entry}: SASS {dict(mix)} vs {n_mma} mma"


def test_no_local_memory(compiled):
    for name, (res, sass, _) in compiled.items():
        for entry, r in res.items():
            assert (r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes) == (0, 0, 0), f"{name}.cu {entry}: {r}"
            assert sass[entry]["LDL"] == sass[entry]["STL"] == 0


def test_dequantisation_uses_lop3(compiled):
    for name in DEQUANT:
        for entry, mix in compiled[name][1].items():
            assert mix["LOP3"] > 0, f"{name}.cu {entry}: no LOP3 in {dict(mix)}"


def test_resources_json_matches_ptxas(compiled):
    committed = json.loads(RESOURCES.read_text())
    version = census.tool_version(toolchain.find_tool("nvcc"))
    if committed["compiler"] != version:
        pytest.skip(f"resources.json comes from {committed['compiler']!r}; this nvcc is {version!r}")
    for name, (res, sass, _) in compiled.items():
        if committed["arch"] not in build.committed_archs(name):
            continue                                  # hopper_w4a16.cu is sm_90a only: not in the sm_80 table
        for entry, r in res.items():
            row = committed["kernels"].get(entry)
            assert row is not None, f"resources.json lacks {entry}: run python -m refsim.cuda.regenerate"
            assert (row["source"], row["registers_per_thread"], row["static_shared_bytes_per_block"],
                    row["spill_store_bytes"]) == (f"{name}.cu", r.registers, r.shared_bytes, r.spill_store_bytes), entry
            assert row["sass_mix"] == dict(sass[entry]), f"{entry}: SASS mix changed: run python -m refsim.cuda.regenerate"
