"""The official kernels' recorded launches (``refsim/cuda/official/``), replayed through refsim.cuda's launch path.

Spec
----
cases         :func:`cases` lists the recorded cases (official Marlin, Any-Precision LLM, Atom; provenance in
              ``refsim/cuda/official/README.md``). Each is PTX, buffers with their initial bytes, launches
              in order, and the bytes an H100 left in the buffers it changed.
replay        :func:`replay` runs a case's launches as ONE call of :func:`refsim.cuda.launch.run`: every
              buffer is one uint8 array, a pointer argument is a view of it at the recorded byte offset
              (so the official Marlin host loop's second launch, on A and C 64 rows in, aliases the first's
              buffers on both backends), a value argument the NumPy scalar of its PTX type. Returns the
              buffers' final bytes. The recorded inputs are read-only; every replay starts from them.
reference     :func:`h100` gives the H100's final bytes of every buffer (unchanged ones: their initial bytes).

    cases.json + <case>.npz + <case>.ptx.gz ──replay(name, backend, arch)──► {buffer id: final bytes}
                                                                   compare ◄── h100(name)
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim._validate import require_choice, require_fields, require_instance
from refsim.cuda import launch
from refsim.ptx.replay import scalar_argument

__all__ = ["DATA_DIR", "RecordedCase", "cases", "load", "replay", "h100", "uses_float_mma"]

DATA_DIR = Path(__file__).resolve().parent / "official"


@dataclass(frozen=True)
class RecordedCase:
    """One recorded case: its PTX, buffer specs, launches and bytes (see the module spec)."""

    name: str
    note: str
    ptx: str
    bases: tuple          # ({"id", "dtype", "shape", "nbytes"}, ...)
    launches: tuple       # ({"kernel", "grid", "block", "shared_bytes", "args"}, ...)
    init: dict            # id -> uint8 bytes (read-only)
    h100_final: dict      # id -> uint8 bytes, buffers the H100 changed

    def __post_init__(self):
        require_fields(self)  # strs and tuples, whatever came in
        for name in ("init", "h100_final"):
            require_instance(name, getattr(self, name), dict)


@functools.lru_cache(maxsize=None)
def _index() -> dict:
    return json.loads((DATA_DIR / "cases.json").read_text())


def cases() -> tuple[str, ...]:
    """Names of the recorded cases, sorted."""
    return tuple(sorted(_index()))


@functools.lru_cache(maxsize=None)
def load(name: str) -> RecordedCase:
    """The recorded case ``name`` (one of :func:`cases`), read once."""
    entry = _index()[require_choice("name", name, cases())]
    with gzip.open(DATA_DIR / entry["ptx"], "rt") as f:
        text = f.read()
    with np.load(DATA_DIR / f"{name}.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for a in arrays.values():
        a.setflags(write=False)
    init = {b["id"]: arrays[f"init_{b['id']}"] for b in entry["bases"]}
    final = {i: arrays[f"h100_{i}"] for i in entry["h100_changed"]}
    return RecordedCase(name, entry["note"], text, tuple(entry["bases"]), tuple(entry["launches"]), init, final)


def uses_float_mma(name: str) -> bool:
    """Whether the case's PTX has a floating-point ``mma`` (its result depends on the arch model)."""
    text = load(require_choice("name", name, cases())).ptx
    return any(f".{t}.{t}." in text for t in ("f16", "bf16", "tf32", "e4m3", "e5m2")) and "mma.sync" in text


def _argument(spec: dict, buffers: dict):
    if spec["kind"] == "ptr":
        return buffers[spec["base"]][spec["offset"]:]
    raw = bytes.fromhex(spec["hex"])
    if spec["kind"] == "bytes":
        return raw
    return scalar_argument(spec["ptype"], raw)


def replay(name: str, *, backend: str = "ptx", arch: str = "sm_90") -> dict[int, np.ndarray]:
    """Run case ``name``'s launches from its recorded inputs on ``backend`` (``arch``: the tensor-core model
    of the ptx backend); returns {buffer id: uint8 final bytes}."""
    case = load(require_choice("name", name, cases()))
    buffers = {i: b.copy() for i, b in case.init.items()}          # (nbytes,) uint8, writable
    launches = [(launch.Launch(ev["kernel"], tuple(ev["grid"]), tuple(ev["block"]), ev["shared_bytes"]),
                 tuple(_argument(a, buffers) for a in ev["args"])) for ev in case.launches]
    launch.run(case.ptx, launches, backend=backend, arch=arch)
    return buffers


def h100(name: str) -> dict[int, np.ndarray]:
    """The bytes an H100 left in every buffer of case ``name`` (unchanged buffers: their initial bytes)."""
    case = load(require_choice("name", name, cases()))
    return {i: case.h100_final.get(i, b) for i, b in case.init.items()}
