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
new inputs    :func:`marlin_gemm` and :func:`atom_gemm` launch the recorded official kernels on NEW inputs at new
              shapes (refsim's emulator inputs, laid out as the official host code lays them), the same way
              :func:`replay` runs a recorded case; they refuse what no recorded PTX holds and the shapes the
              official kernel itself cannot run (its own rules, cited).

    cases.json + <case>.npz + <case>.ptx.gz ──replay(name, backend, arch)──► {buffer id: final bytes}
                                                                   compare ◄── h100(name)
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim._validate import MAX_ELEMENTS, require_bounded, require_choice, require_fields, require_instance
from refsim.cuda import launch
from refsim.errors import FormatRuleError
from refsim.ptx.replay import scalar_argument

__all__ = ["DATA_DIR", "RecordedCase", "cases", "load", "replay", "h100", "uses_float_mma", "marlin_instantiations",
           "marlin_gemm", "ATOM_KERNEL", "atom_gemm"]

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


# ----------------------------------------------------------------------------------------------
# the official kernels on new inputs


def _entries(name: str) -> tuple[str, ...]:
    return launch.entries(load(name).ptx)


def _marlin_entry(thread_m_blocks: int, thread_n_blocks: int, thread_k_blocks: int, group_blocks: int) -> str:
    """The mangled name of ``Marlin<256, thread_m_blocks, thread_n_blocks, thread_k_blocks, 4, group_blocks>``."""
    g = "n1" if group_blocks == -1 else str(group_blocks)
    return f"_Z6MarlinILi256ELi{thread_m_blocks}ELi{thread_n_blocks}ELi{thread_k_blocks}ELi4ELi{g}EEvPK4int4S2_PS0_S2_iiiPi"


def marlin_instantiations() -> dict[tuple[int, int, int, int], str]:
    """The recorded official Marlin instantiations: ``{(thread_m_blocks, thread_n_blocks, thread_k_blocks,
    group_blocks): case name whose PTX holds it}`` (group_blocks -1: per-channel, 8: group 128)."""
    out = {}
    for name in cases():
        for entry in _entries(name):
            m = re.fullmatch(r"_Z6MarlinILi256ELi(\d)ELi(\d+)ELi(\d+)ELi4ELi(n1|\d+)EEvPK4int4S2_PS0_S2_iiiPi", entry)
            if m:
                g = -1 if m.group(4) == "n1" else int(m.group(4))
                out.setdefault((int(m.group(1)), int(m.group(2)), int(m.group(3)), g), name)
    return out


def marlin_gemm(A: np.ndarray, B: np.ndarray, s: np.ndarray, *, sms: int, max_par: int = 16,
                thread_k: int | None = None, thread_n: int | None = None, arch: str = "sm_80",
                options: dict | None = None) -> np.ndarray:
    """The official Marlin kernel (recorded PTX) on new inputs, through refsim.ptx: float16 (M, N).

    A float16 (M, K), B int32 (K/16, 2N), s float16 (G, N) as for
    :func:`refsim.emulator.marlin_kernel.marlin_gemm` (same rules). The host loop is the official
    ``marlin_cuda``'s: :func:`refsim.formats.stripes.stripes` (tile config, ``max_par``, forced
    ``thread_k``/``thread_n``) gives the launches; each gets A and C as row views at its ``row_start``,
    ``prob_m = rows``, the full N and K, grid ``sms`` x 256 threads, 96 KiB dynamic shared memory and one
    shared lock workspace of ``N/128 * max_par`` int32 zeros. Raises FormatRuleError when a launch needs an
    instantiation no recorded PTX holds (:func:`marlin_instantiations`). options: as for
    :meth:`refsim.ptx.Module.launch`. Inputs are not modified.
    """
    from refsim.emulator import marlin_kernel
    from refsim.formats import stripes

    A, B, s, sms, k, n, group_size = marlin_kernel.check_inputs(A, B, s, arch, sms)
    plan = stripes.stripes(A.shape[0], n, k, sms, group_size, max_par=max_par, thread_k=thread_k, thread_n=thread_n)
    cfg, have = plan.config, marlin_instantiations()
    g = -1 if cfg.group_blocks is None else cfg.group_blocks
    keys = [(ln.thread_m_blocks, cfg.thread_n_blocks, cfg.thread_k_blocks, g) for ln in plan.launches]
    missing = sorted({key for key in keys if key not in have})
    if missing or len({have[key] for key in keys}) > 1:
        raise FormatRuleError(f"official Marlin: the launches need Marlin<256,m,n,k,4,g> for (m, n, k, g) in "
                              f"{sorted(set(keys))}, all in one recorded PTX; recorded: {sorted(have)}")
    text = load(have[keys[0]]).ptx
    m = A.shape[0]
    A, B, s = np.ascontiguousarray(A), np.ascontiguousarray(B), np.ascontiguousarray(s)
    C = np.zeros((m, n), np.float16)                                   # (M, N), written through row views
    locks = np.zeros(require_bounded("N/128 * max_par", n // 128 * max_par, MAX_ELEMENTS, what="lock count"),
                     np.int32)                                         # the official workspace: N/128 * max_par
    u32 = lambda v: scalar_argument("u32", int(v).to_bytes(4, "little"))    # noqa: E731
    launches = [(launch.Launch(_marlin_entry(*key), sms, stripes.THREADS, stripes.SHARED_MEM_BYTES),
                 (A[ln.row_start:ln.row_start + ln.prob_m], B, C[ln.row_start:ln.row_start + ln.prob_m], s,
                  u32(ln.prob_m), u32(n), u32(k), locks))
                for key, ln in zip(keys, plan.launches)]
    launch.run(text, launches, backend="ptx", arch=arch, options=options)
    return C


#: the recorded official Atom kernel, ``DenseLayerGEMM_i4_kernel<half>``
ATOM_KERNEL = "_Z24DenseLayerGEMM_i4_kernelI6__halfEvPKhS2_PT_iiiS2_S2_S2_S2_S2_S2_"
ATOM_KEEPER = 128            # KEEPER: the kernel's INT8 tail is always 128 channels
ATOM_SHARED_BYTES = 70656    # the recorded launch's dynamic shared memory


def _atom_arguments(a, w):
    """The official kernel's 12 arguments for quantized operands ``a``, ``w`` and the output D (M, N)."""
    from refsim.formats import atom, atom_gemm as ag

    m, n = a.q4.shape[0], w.q4.shape[1]
    D = np.zeros((m, n), np.float16)
    u32 = lambda v: scalar_argument("u32", int(v).to_bytes(4, "little"))    # noqa: E731
    args = (atom.pack_int4(np.ascontiguousarray(a.q4)),               # A (M, K4/2) uint8, row-major
            atom.pack_int4(np.ascontiguousarray(w.q4.T)),             # B (N, K4/2) uint8: W column-major
            D, u32(m), u32(n), u32(a.q4.shape[1]),                    # K_GLOBAL: the INT4 body length
            ag.activation_scale_layout(np.ascontiguousarray(a.scale4)),         # (G * SCALE_SIZE_A(M),)
            np.ascontiguousarray(w.scale4).reshape(-1),                          # (G * N,) group rows
            np.ascontiguousarray(a.q8), np.ascontiguousarray(w.q8.T),            # (M, 128), (N, 128) int8
            ag.activation_scale_layout(np.ascontiguousarray(a.scale8)[:, None]),  # (SCALE_SIZE_A(M),)
            np.ascontiguousarray(w.scale8))                                      # (N,)
    grid = (-(-n // 128), -(-m // 128))                               # BLOCK_N = BLOCK_M = 128
    return launch.Launch(ATOM_KERNEL, grid, (32, 4, 2), ATOM_SHARED_BYTES), args, D


def atom_gemm(a, w, *, arch: str = "sm_80", options: dict | None = None) -> np.ndarray:
    """The official Atom ``DenseLayerGEMM_i4_kernel<half>`` (recorded PTX) on new inputs, through refsim.ptx:
    float16 (M, N).

    a: :class:`refsim.formats.atom.AtomActivations`, w: :class:`refsim.formats.atom.AtomWeights` with
    float16 scales, as for :func:`refsim.emulator.atom_kernel.atom_group_gemm`, inside the official
    kernel's own domain: keeper 128 (its fixed ``KEEPER``), N a multiple of 128 (``BLOCK_N``: its B loads
    are not guarded along N) and the body rule of :func:`refsim.formats.atom_gemm.require_official_body`.
    The buffers are the official host code's: INT4 codes packed two per byte (A row-major, B = W
    column-major), activation scales in the ``SCALE_SIZE_A`` layout
    (:func:`refsim.formats.atom_gemm.activation_scale_layout`), weight scales (G, N) row-major. Grid
    (ceil(N/128), ceil(M/128)), block (32, 4, 2), 70,656 B dynamic shared memory. options: as for
    :meth:`refsim.ptx.Module.launch`. Inputs are not modified.
    """
    from refsim.formats import atom, atom_gemm as ag

    m, n, g, group = atom.check_gemm(a, w, pairs=False)
    if a.scale4.dtype != np.float16:
        raise FormatRuleError(f"a.scale4: the official kernel reads float16 scales; got {a.scale4.dtype}")
    if a.q8.shape[1] != ATOM_KEEPER or group != 128:
        raise FormatRuleError(f"keeper, group: the official kernel has KEEPER = 128 and GROUP_SIZE = 128; "
                              f"got keeper {a.q8.shape[1]}, group {group}")
    if n % 128:
        raise FormatRuleError(f"N: the official kernel's B loads are not guarded along N, so N must be a "
                              f"multiple of BLOCK_N = 128; got {n}")
    ag.require_official_body(a.q4.shape[1])
    la, args, D = _atom_arguments(a, w)
    launch.run(load("off_atom_m16n256k512").ptx, [(la, args)], backend="ptx", arch=arch, options=options)
    return D
