"""Which kernel files and host modules ``refsim.cuda`` has: one line per module.

A host module ``refsim/cuda/<name>.py`` sits beside its ``<name>.cu`` and defines

    SOURCE  = "<name>"                      # the .cu file (without suffix)
    ENTRY_POINTS = {"python_name": "refsim.emulator.<module>.<function>", ...}
                                            # each public function and the emulator function it equals

To add a kernel, write both files and add the module's name to :data:`SOURCES`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from refsim._validate import require_choice, require_fields

__all__ = ["SOURCES", "KernelEntry", "entries", "host_module"]

SOURCES: tuple[str, ...] = (
    "anyprec",
    "mixed_2_4_16",
    "gptq_awq",
    "atom",
    "marlin",
    "mma",
    "hopper_w4a16",
    "wgmma",
)


@dataclass(frozen=True)
class KernelEntry:
    """One public kernel function: its name in ``refsim.cuda``, its .cu file, the emulator it equals."""

    name: str
    source: str
    oracle: str

    def __post_init__(self):
        require_fields(self)  # strs (a np.str_ converted)


def host_module(source: str):
    """The host module ``refsim.cuda.<source>`` of a name in :data:`SOURCES` (FormatRuleError otherwise)."""
    return importlib.import_module(f"refsim.cuda.{require_choice('source', source, SOURCES)}")


def entries() -> tuple[KernelEntry, ...]:
    """Every public kernel function of every registered module, in registry order."""
    out = []
    for source in SOURCES:
        mod = host_module(source)
        out.extend(KernelEntry(name, mod.SOURCE, oracle) for name, oracle in mod.ENTRY_POINTS.items())
    return tuple(out)
