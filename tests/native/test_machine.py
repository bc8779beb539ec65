"""refsim.native.machine: the CPU facts the QIGen model reads (cache sizes from sysfs, ISA flags and
clock from cpuinfo, each with its provenance and documented fallback), on files written here."""

import dataclasses

import pytest

from refsim.errors import FormatRuleError
from refsim.native import machine as MA


def _sysfs_cache(tmp_path, rows):
    """A cpu0/cache folder as Linux lays it out: index<i>/{level,type,size} for each (level, type, size)."""
    cache = tmp_path / "cache"
    for i, (level, kind, size) in enumerate(rows):
        d = cache / f"index{i}"
        d.mkdir(parents=True)
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (d / name).write_text(f"{text}\n")
    return cache


def test_machine_info_reads_sysfs_and_cpuinfo(tmp_path):
    cache = _sysfs_cache(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                                    (3, "Unified", "32768K")])
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\ncpu MHz\t\t: 3000.000\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n")
    info = MA.machine_info(cpuinfo, cache)
    assert (info.l1d_bytes, info.l2_bytes) == (48 * 1024, 2048 * 1024)
    assert info.avx2 and info.fma and info.avx512f and info.vector_registers == 32
    assert info.eta == 16  # the generated code is AVX2: 16 ymm registers
    assert info.clock_hz == 3e9 and info.provenance["l1d_bytes"] == "sysfs"


def test_machine_info_falls_back_when_files_are_missing(tmp_path):
    info = MA.machine_info(tmp_path / "none", tmp_path / "none")
    assert not info.avx2 and info.provenance["isa"].startswith("fallback")
    assert info.l2_bytes == 1 << 20 and info.provenance["l2_bytes"] == "fallback"
    assert info.l1d_bytes > 0 and info.clock_hz == 2.5e9


def test_parse_size():
    assert [MA.parse_size(s) for s in ("32K", "1M", "32 MiB", "512")] == [32768, 1 << 20, 32 << 20, 512]


def test_isa_falls_back_to_scalar_without_avx2_or_fma():
    base = MA.MachineInfo(32 * 1024, 1 << 20, True, True, False, 16, 3e9, 1, {})
    assert MA.isa_for(base, "x86_64") == "avx2"
    assert MA.isa_for(dataclasses.replace(base, fma=False), "x86_64") == "scalar"
    assert MA.isa_for(dataclasses.replace(base, avx2=False), "x86_64") == "scalar"
    assert MA.isa_for(base, "aarch64") == "scalar"


@pytest.mark.parametrize("text", ["", "0K", "32Q", "-4K", "1.5M"])
def test_parse_size_refuses_what_is_not_a_positive_size_naming_it(text):
    with pytest.raises(FormatRuleError, match=f"a cache size must be a positive integer with K/M/G; got {text!r}"):
        MA.parse_size(text)
    with pytest.raises(FormatRuleError, match="a cache size must be a str like '32K'; got int"):
        MA.parse_size(32)


def test_the_first_data_or_unified_cache_of_a_level_counts_and_unreadable_entries_are_skipped(tmp_path):
    cache = _sysfs_cache(tmp_path, [(1, "Instruction", "64K"), (1, "Data", "32K"), (2, "Unified", "bad"),
                                    (2, "Unified", "1M")])
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("Features\t: fp asimd\ncpu MHz\t: fast\n")             # an aarch64 flags line, no clock
    info = MA.machine_info(cpuinfo, cache)
    assert (info.l1d_bytes, info.l2_bytes) == (32 * 1024, 1 << 20)
    assert not info.avx2 and info.provenance["isa"] == "cpuinfo"
    assert info.clock_hz == 2.5e9 and info.provenance["clock_hz"] == "fallback"
    assert info.gamma_bits == 32 * 1024 * 8


def test_machine_info_fields_are_checked():
    good = dict(l1d_bytes=1, l2_bytes=1, avx2=False, fma=False, avx512f=False, vector_registers=16, clock_hz=1e9,
                cores=1, provenance={})
    assert MA.MachineInfo(**good).eta == 16
    with pytest.raises(FormatRuleError, match="l1d_bytes: must be"):
        MA.MachineInfo(**{**good, "l1d_bytes": 0})
    with pytest.raises(FormatRuleError, match="clock_hz: must be > 0; got -1.0"):
        MA.MachineInfo(**{**good, "clock_hz": -1.0})
    with pytest.raises(FormatRuleError, match="arch: must be a machine name like 'x86_64' or None; got int"):
        MA.isa_for(MA.MachineInfo(**good), 64)
    assert MA.detect_isa() in ("avx2", "scalar")
