"""What the QIGen model needs to know about this CPU: L1d/L2 sizes, vector ISA, registers.

Sources, in order, each field tagged with where it came from (``provenance``):

* cache sizes: ``/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`` ("sysfs"), else
  ``os.sysconf('SC_LEVEL1_DCACHE_SIZE')`` ("sysconf"), else a fallback ("fallback": L1d 32 KiB,
  L2 1 MiB - the common x86-64 core since Skylake/Zen2);
* ISA: the ``flags`` line of ``/proc/cpuinfo`` ("cpuinfo"); without it nothing is assumed
  (scalar) - a kernel compiled for AVX2 on a CPU without it would die with SIGILL;
* vector registers: architectural, derived from the ISA: 16 ymm for AVX2, 32 zmm for AVX-512F,
  16 xmm for SSE-only x86-64 (the paper's eta);
* clock: ``cpu MHz`` in ``/proc/cpuinfo`` (the current, not the boost, clock), fallback 2.5 GHz.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from refsim._validate import require_fields, require_instance, require_int, require_path
from refsim.errors import FormatRuleError

__all__ = ["MachineInfo", "machine_info", "detect_isa", "isa_for", "parse_size"]

_FALLBACK_L1D = 32 * 1024
_FALLBACK_L2 = 1024 * 1024
_FALLBACK_HZ = 2.5e9


@dataclass(frozen=True)
class MachineInfo:
    """One CPU core as the QIGen model sees it (units in field names)."""

    l1d_bytes: int
    l2_bytes: int
    avx2: bool
    fma: bool
    avx512f: bool
    vector_registers: int
    clock_hz: float
    cores: int
    provenance: dict

    def __post_init__(self):
        require_fields(self)
        for name in ("l1d_bytes", "l2_bytes", "vector_registers", "cores"):
            require_int(name, getattr(self, name), minimum=1)
        if self.clock_hz <= 0:
            raise FormatRuleError(f"clock_hz: must be > 0; got {self.clock_hz}")
        require_instance("provenance", self.provenance, dict)

    @property
    def gamma_bits(self) -> int:
        """The paper's gamma: L1 data cache size in bits."""
        return self.l1d_bytes * 8

    @property
    def eta(self) -> int:
        """The paper's eta: vector registers usable by the generated (AVX2) kernel."""
        return 16 if self.avx2 else self.vector_registers


def parse_size(text: str) -> int:
    """'32K' / '1024K' / '32 MiB' / '1M' -> bytes (a positive integer; anything else is a
    FormatRuleError naming the text)."""
    if not isinstance(text, str):
        raise FormatRuleError(f"text: a cache size must be a str like '32K'; got {type(text).__name__}")
    t = text.strip().upper().replace("IB", "").replace(" ", "")
    mult = 1
    if t.endswith("K"):
        mult, t = 1024, t[:-1]
    elif t.endswith("M"):
        mult, t = 1024 * 1024, t[:-1]
    elif t.endswith("G"):
        mult, t = 1024 ** 3, t[:-1]
    if not t.isdigit() or int(t) == 0:
        raise FormatRuleError(f"text: a cache size must be a positive integer with K/M/G; got {text!r}")
    return int(t) * mult


def _sysfs_caches(root: Path) -> dict:
    sizes = {}
    try:
        entries = sorted(root.glob("index*"))
    except OSError:  # an unreadable or impossible path (too long, ...): no sysfs, use the fallbacks
        return sizes
    for idx in entries:
        try:
            level = int((idx / "level").read_text())
            kind = (idx / "type").read_text().strip()
            size = parse_size((idx / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            sizes.setdefault(level, size)
    return sizes


def _cpuinfo(path: Path) -> tuple[set, float | None]:
    try:
        text = path.read_text()
    except OSError:
        return set(), None
    flags, mhz = set(), None
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(val.split())
        elif key == "cpu MHz" and mhz is None:
            try:
                mhz = float(val)
            except ValueError:
                pass
    return flags, mhz


def machine_info(cpuinfo: str | Path = "/proc/cpuinfo",
                 cache_root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> MachineInfo:
    """Read this machine (paths overridable for tests); every field has a documented fallback."""
    cpuinfo, cache_root = require_path("cpuinfo", cpuinfo), require_path("cache_root", cache_root)
    prov = {}
    sizes = _sysfs_caches(Path(cache_root))
    l1 = sizes.get(1)
    l2 = sizes.get(2)
    if l1:
        prov["l1d_bytes"] = "sysfs"
    else:
        try:
            l1 = os.sysconf("SC_LEVEL1_DCACHE_SIZE") or None
            prov["l1d_bytes"] = "sysconf" if l1 else "fallback"
        except (ValueError, OSError, AttributeError):
            l1 = None
        if not l1:
            l1, prov["l1d_bytes"] = _FALLBACK_L1D, "fallback"
    if l2:
        prov["l2_bytes"] = "sysfs"
    else:
        l2, prov["l2_bytes"] = _FALLBACK_L2, "fallback"
    flags, mhz = _cpuinfo(Path(cpuinfo))
    prov["isa"] = "cpuinfo" if flags else "fallback (none assumed)"
    avx2, fma, avx512f = "avx2" in flags, "fma" in flags, "avx512f" in flags
    if avx512f:
        regs = 32
    elif platform.machine() in ("x86_64", "AMD64") or avx2:
        regs = 16
    else:
        regs = 32  # aarch64 NEON: 32 vector registers (not used by the generated AVX2 code)
    prov["vector_registers"] = "architectural (from ISA)"
    if mhz:
        hz, prov["clock_hz"] = mhz * 1e6, "cpuinfo (current clock)"
    else:
        hz, prov["clock_hz"] = _FALLBACK_HZ, "fallback"
    return MachineInfo(int(l1), int(l2), avx2, fma, avx512f, regs, hz, os.cpu_count() or 1, prov)


def isa_for(info: MachineInfo, arch: str | None = None) -> str:
    """"avx2" if ``info`` has AVX2 and FMA and the architecture is x86-64, else "scalar"."""
    require_instance("info", info, MachineInfo)
    if arch is not None and not isinstance(arch, str):
        raise FormatRuleError(f"arch: must be a machine name like 'x86_64' or None; got {type(arch).__name__}")
    arch = platform.machine() if arch is None else arch
    if info.avx2 and info.fma and arch in ("x86_64", "AMD64"):
        return "avx2"
    return "scalar"


@functools.lru_cache(maxsize=1)
def detect_isa() -> str:
    """The ISA of the generated kernels on this machine: "avx2" or the portable "scalar"."""
    return isa_for(machine_info())
