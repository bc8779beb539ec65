"""refsim.cuda.registry: the list of kernel files and host modules, each host module beside its .cu
file and naming it, every entry point's oracle an emulator function that exists, bad names refused."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from refsim.cuda import registry
from refsim.errors import FormatRuleError

CUDA = Path(registry.__file__).parent


def test_every_registered_module_sits_beside_its_cu_file_and_names_it():
    assert registry.SOURCES == ("anyprec", "mixed_2_4_16", "gptq_awq", "atom", "marlin", "mma", "hopper_w4a16", "wgmma")
    for source in registry.SOURCES:
        mod = registry.host_module(source)
        assert mod.__name__ == f"refsim.cuda.{source}" and mod.SOURCE == source
        assert (CUDA / f"{source}.cu").is_file() and (CUDA / f"{source}.py").is_file()


def test_entries_list_every_entry_point_in_registry_order_with_an_existing_oracle():
    entries = registry.entries()
    assert [e.source for e in entries] == sorted((e.source for e in entries), key=registry.SOURCES.index)
    assert len({e.name for e in entries}) == len(entries)
    assert entries[0] == registry.KernelEntry("anyprec_gemv", "anyprec", "refsim.emulator.anyprec_kernel.anyprec_gemv")
    for e in entries:
        assert e.name in registry.host_module(e.source).ENTRY_POINTS
        module, _, fn = e.oracle.rpartition(".")
        assert callable(getattr(importlib.import_module(module), fn)), e.oracle


def test_an_unregistered_name_and_a_non_str_field_are_refused():
    with pytest.raises(FormatRuleError, match=r"source: must be one of \['anyprec', .*\]; got 'nope'"):
        registry.host_module("nope")
    assert registry.KernelEntry(np.str_("a"), "b", "c").name.__class__ is str
    with pytest.raises(FormatRuleError, match="KernelEntry.name: must be a str; got int"):
        registry.KernelEntry(1, "b", "c")
