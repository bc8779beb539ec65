"""Recorded launch sequences: read a case folder and run it again through refsim.ptx.

A case is what one host program did to the GPU: some device buffers ("bases"), kernel launches whose
pointer arguments point into them, and host writes between launches. Cases recorded through refsim.ptx
were replayed on real GPUs (tests/ptx/data/h100_replay holds 35 of them with the bytes an H100 wrote);
:func:`replay` runs one again here so the two can be compared byte for byte.

Case folder::

    case.json    name, note, modules: {hash: {file, kernels}}, bases: [{id, dtype, shape, nbytes}],
                 events: [{"type": "launch", module, kernel, grid, block, shared_bytes, arch,
                           schedule, seed, args: [...]} | {"type": "host_write", base, data}]
                 launch arguments: {"kind": "ptr", base, offset, nbytes}   pointer offset bytes into a base
                                   {"kind": "scalar", ptype, hex}          the .param's little-endian bytes
                                   {"kind": "bytes", hex}                  a .b8 p[N] struct parameter
    case.npz     init_<id> (uint8, each base before the first launch), final_<id> (what refsim.ptx left
                 when the case was recorded; absent where it equals init_<id>), and host-write data
    <hash>.ptx   the PTX of each module

Every base is one uint8 buffer for the whole case; a pointer argument is a view into it, so offset
pointers into one base alias as they do on a device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim.errors import FormatRuleError
from refsim.ptx.module import Module

__all__ = ["Case", "load_case", "replay", "scalar_argument"]

_SCALAR = {"u8": "<u1", "s8": "<i1", "b8": "<u1", "u16": "<u2", "s16": "<i2", "b16": "<u2", "f16": "<f2",
           "u32": "<u4", "s32": "<i4", "b32": "<u4", "f32": "<f4", "u64": "<u8", "s64": "<i8", "b64": "<u8",
           "f64": "<f8"}


@dataclass(frozen=True)
class Case:
    """One recorded case (see the module spec); ``ptx`` maps module hash -> PTX text."""

    name: str
    meta: dict
    ptx: dict
    arrays: dict

    @property
    def bases(self) -> list:
        return self.meta["bases"]

    @property
    def launches(self) -> list:
        return [e for e in self.meta["events"] if e["type"] == "launch"]

    def initial(self, base: int) -> np.ndarray:
        """The bytes of base ``base`` before the first launch (uint8, a copy)."""
        return self.arrays[f"init_{base}"].copy()

    def recorded(self, base: int) -> np.ndarray:
        """The bytes refsim.ptx left in base ``base`` when the case was recorded (uint8, a copy)."""
        return self.arrays.get(f"final_{base}", self.arrays[f"init_{base}"]).copy()


def load_case(folder) -> Case:
    """Read a case folder (``case.json``, ``case.npz``, the ``.ptx`` files it names)."""
    folder = Path(folder)
    meta_path = folder / "case.json"
    if not meta_path.is_file():
        raise FormatRuleError(f"case: a recorded case folder holds case.json; got {str(folder)!r}")
    meta = json.loads(meta_path.read_text())
    ptx = {h: (folder / m["file"]).read_text() for h, m in meta["modules"].items()}
    with np.load(folder / "case.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return Case(meta["name"], meta, ptx, arrays)


def scalar_argument(ptype: str, raw: bytes) -> np.generic:
    """A recorded ``.param`` scalar: the little-endian bytes ``raw`` of PTX type ``ptype`` (``"u32"``,
    ``"f16"``, ...) as the NumPy scalar Module.launch takes for that parameter."""
    if ptype not in _SCALAR:
        raise FormatRuleError(f"case argument ptype: must be one of {sorted(_SCALAR)}; got {ptype!r:.40}")
    if len(raw) != np.dtype(_SCALAR[ptype]).itemsize:
        raise FormatRuleError(f"case argument {ptype}: must be {np.dtype(_SCALAR[ptype]).itemsize} bytes; "
                              f"got {len(raw)}")
    return np.frombuffer(raw, _SCALAR[ptype])[0]


def _argument(a: dict, buffers: dict):
    kind = a["kind"]
    if kind == "ptr":
        buf = buffers[a["base"]]
        return buf[a["offset"]:a["offset"] + a["nbytes"]]
    if kind == "scalar":
        return scalar_argument(a["ptype"], bytes.fromhex(a["hex"]))
    if kind == "bytes":
        return bytes.fromhex(a["hex"])
    raise FormatRuleError(f"case argument kind: must be ptr, scalar or bytes; got {kind!r}")


def replay(case: Case, *, arch: str | None = None, modules: dict | None = None, **launch_options) -> dict:
    """Run every event of ``case`` through refsim.ptx; returns {base id: final bytes (uint8)}.

    arch: the architecture model of every launch (default: the one each launch was recorded with).
    modules: parsed :class:`refsim.ptx.Module` objects by module hash, to reuse across replays (filled
    in when given empty). launch_options: passed to every :meth:`Module.launch` (e.g. ``schedule``,
    ``seed``; the recorded ones otherwise).
    """
    modules = {} if modules is None else modules
    buffers = {b["id"]: case.initial(b["id"]) for b in case.bases}
    for ev in case.meta["events"]:
        if ev["type"] == "host_write":
            buffers[ev["base"]][:] = case.arrays[ev["data"]].view(np.uint8).reshape(-1)
            continue
        if ev["module"] not in modules:
            modules[ev["module"]] = Module(case.ptx[ev["module"]])
        opts = {"schedule": ev.get("schedule", "lockstep"), "seed": ev.get("seed", 0), **launch_options}
        modules[ev["module"]].launch(ev["kernel"], tuple(ev["grid"]), tuple(ev["block"]),
                                     [_argument(a, buffers) for a in ev["args"]],
                                     arch=arch or ev["arch"], shared_bytes=ev["shared_bytes"], **opts)
    return buffers
