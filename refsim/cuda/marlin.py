"""Host side of ``refsim/cuda/marlin.cu``: the launch plan and the call through :mod:`refsim.ptx`.

Spec
----
computes        ``C (M, N) float16 = A (M, K) float16 @ W``, W in Marlin's packed format
                (``B`` int32 ``(K/16, 2N)``, ``s`` float16 ``(G, N)``, :mod:`refsim.formats.marlin`),
                by running the CUDA kernel ``marlin.cu`` (its sm_80 PTX, committed as
                ``ptx/marlin.sm_80.ptx`` by ``python -m refsim.cuda.regenerate``, see
                :mod:`refsim.cuda.build`) on a CPU with :mod:`refsim.ptx`; the same PTX runs under every
                later ``arch``'s tensor-core model (only the PTX ``.target`` must be <= ``arch``).
equals          :func:`refsim.emulator.marlin_kernel.marlin_gemm` bit for bit, for the same
                ``arch`` and ``sms`` (the emulator models the official Marlin kernel; the tests
                check that this kernel agrees with it).
launch plan     exactly the emulator's (:func:`refsim.formats.stripes.stripes`, ``max_par`` 16 unless
                given, 1..16): tile config ``M <= 16 -> (thread_k, thread_n) = (128, 128)`` else
                ``(64, 256)`` unless forced (``thread_k``/``thread_n``, as the official host takes them);
                one launch per step of the host M loop, each on the rows
                ``[row_start, row_start + prob_m)`` (``prob_m`` may hold several 64-row problems
                side by side); grid = ``sms`` blocks of 256 threads; dynamic shared memory
                :func:`shared_bytes`; one lock workspace of ``N / thread_n * 16`` int32 zeros,
                shared by every launch, which the kernel leaves all zero.

Launches for M = 130 (tile k64 x n256; 9 m-blocks, 14 padding rows)::

    rows   0 .. 127   launch 0: entry m4 (4 m-blocks), prob_m = 128 = 2 problems of 64 rows
    rows 128 .. 129   launch 1: entry m1 (1 m-block),  prob_m = 2 (rows 2..15 of the block padded)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim import archs
from refsim._validate import (MAX_ELEMENTS, require_bounded, require_dtype, require_fields, require_instance,
                              require_int, require_shape)
from refsim.arith import tensor_core
from refsim.cuda import build, launch
from refsim.emulator import marlin_kernel
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import stripes

__all__ = ["SOURCE", "ENTRY_POINTS", "KERNEL_ARCH", "ARCHS", "PlannedLaunch", "entry_name", "shared_bytes",
           "launch_plan", "entries", "engine_gap", "workspace", "marlin_gemm", "gemm"]

SOURCE = "marlin"
ENTRY_POINTS = {"marlin_gemm": "refsim.emulator.marlin_kernel.marlin_gemm"}
#: the PTX target the kernel is compiled for (cp.async, ldmatrix and mma.m16n8k16 need sm_80)
KERNEL_ARCH = "sm_80"
#: tensor-core models the kernel can run under (sm_80 PTX runs on every later architecture)
ARCHS = tuple(a for a in tensor_core.MMA_ARCHS if archs.ARCHS[a].sm >= archs.ARCHS[KERNEL_ARCH].sm)
THREADS = stripes.THREADS
STAGES = stripes.STAGES
MAX_PAR = 16


@dataclass(frozen=True)
class PlannedLaunch:
    """One kernel launch: which entry, on which rows, with how much dynamic shared memory."""

    kernel: str          # extern "C" entry point in marlin.cu
    row_start: int       # first row of A / C
    rows: int            # rows of A / C handed to the launch (= prob_m)
    grid: int            # = sms
    block: int           # = 256
    shared_bytes: int

    def __post_init__(self):
        require_fields(self)  # a str and Python ints, whatever NumPy scalars came in


def entry_name(thread_m_blocks: int, config: stripes.TileConfig) -> str:
    """The ``extern "C"`` entry of ``marlin.cu`` for one tile shape, e.g. ``refsim_marlin_m1_n8_k8_grouped``."""
    thread_m_blocks, config = _tile(thread_m_blocks, config)
    mode = "channel" if config.group_blocks is None else "grouped"
    return f"refsim_marlin_m{thread_m_blocks}_n{config.thread_n_blocks}_k{config.thread_k_blocks}_{mode}"


def shared_bytes(thread_m_blocks: int, config: stripes.TileConfig) -> int:
    """Dynamic shared memory of one block (bytes): ``STAGES`` stages of A, B and the scale row.

    Mirrors ``Config::STAGE`` in ``marlin.cu``: per stage, in 16-byte units, A is
    ``16 MB x thread_k / 8``, B ``thread_k / 16 x thread_n / 2``, scales (grouped) ``thread_n / 8``.
    """
    thread_m_blocks, config = _tile(thread_m_blocks, config)
    a_units = 16 * thread_m_blocks * config.thread_k // 8
    b_units = config.thread_k_blocks * config.thread_n // 2
    s_units = 0 if config.group_blocks is None else config.thread_n // 8
    return STAGES * 16 * (a_units + b_units + s_units)


def _tile(thread_m_blocks, config) -> tuple[int, stripes.TileConfig]:
    """``thread_m_blocks`` (1..4 blocks of 16 rows, as marlin.cu's entries) and a TileConfig, checked."""
    thread_m_blocks = require_int("thread_m_blocks", thread_m_blocks, minimum=1)
    if thread_m_blocks > 4:
        raise FormatRuleError(f"thread_m_blocks: marlin.cu has entries for 1 to 4 blocks of 16 rows; got {thread_m_blocks}")
    return thread_m_blocks, require_instance("config", config, stripes.TileConfig)


def launch_plan(m: int, n: int, k: int, sms: int, group_size: int | None, *, max_par: int = MAX_PAR,
                thread_k: int | None = None, thread_n: int | None = None) -> tuple[PlannedLaunch, ...]:
    """The launches :func:`marlin_gemm` makes for an (M, N, K) problem on ``sms`` blocks.

    The tile config and the host M loop are :func:`refsim.formats.stripes.stripes`' (the same call
    the emulator makes, with ``max_par`` 1..16 and the forced ``thread_k``/``thread_n``, if any); the
    per-block stripes are computed by the kernel itself from the grid size.
    """
    max_par = require_int("max_par", max_par, minimum=1)
    if max_par > MAX_PAR:
        raise FormatRuleError(f"max_par: the lock workspace holds N/128 * {MAX_PAR} entries, so max_par must lie "
                              f"in [1, {MAX_PAR}]; got {max_par}")
    plan = stripes.stripes(m, n, k, sms, group_size, max_par=max_par, thread_k=thread_k, thread_n=thread_n)
    return tuple(PlannedLaunch(entry_name(ln.thread_m_blocks, plan.config), ln.row_start, ln.prob_m, sms, THREADS,
                        shared_bytes(ln.thread_m_blocks, plan.config))
                 for ln in plan.launches)


def _ptx_text() -> str:
    return build.ptx(SOURCE, KERNEL_ARCH)


def engine_gap() -> str | None:
    """Why :mod:`refsim.ptx` cannot run ``marlin.cu`` here (the first instruction or feature it
    refuses, as its error says), or ``None`` when every entry point loads."""
    try:  # every entry uses the same instruction kinds; the two smallest cover both group modes
        for name in ("refsim_marlin_m1_n8_k8_grouped", "refsim_marlin_m1_n8_k8_channel"):
            launch.module(_ptx_text(), name)
    except ImportError as e:
        return f"refsim.ptx is not available: {e}"
    except Exception as e:  # the engine's own PtxError family: unsupported instruction, parse error
        return f"{type(e).__name__}: {e}"
    return None


def entries() -> tuple[str, ...]:
    """Entry points present in the committed PTX (in file order)."""
    return launch.entries(_ptx_text())


def workspace(n: int) -> np.ndarray:
    """A fresh lock workspace for N output columns: int32 zeros, one per (column tile, problem),
    sized for the smaller column tile (128) and ``max_par`` 16 problems. n: an int >= 1."""
    n = require_int("n", n, minimum=1)
    return np.zeros(require_bounded("workspace", n // 128 * MAX_PAR, MAX_ELEMENTS, what="entry count"), np.int32)


def marlin_gemm(A: np.ndarray, B: np.ndarray, s: np.ndarray, *, arch: str = "sm_80", sms: int = 108,
                backend: str = "ptx", options: dict | None = None, max_par: int = MAX_PAR,
                thread_k: int | None = None, thread_n: int | None = None) -> np.ndarray:
    """Run ``marlin.cu`` for ``C = A @ W``: float16 ``(M, N)``, bit-identical to the emulator.

    A: float16 (M, K). B: int32 (K/16, 2N), s: float16 (G, N) as from
    :func:`refsim.formats.marlin.pack` (grouped, group size 128, iff G > 1; K % 128 == 0,
    N % 128 == 0; M > 16 needs N % 256, the kernel's thread_n). arch: tensor-core model, one of :data:`ARCHS`. sms: grid size (A100: 108).
    backend: ``"ptx"`` (the :mod:`refsim.ptx` interpreter, on a CPU) or ``"gpu"`` (the same PTX on
    a GPU through :mod:`refsim.cuda.launch`). options: extra keywords for
    :meth:`refsim.ptx.Module.launch` (``schedule``, ``seed``, ``race``, ``poison``). max_par (1..16),
    thread_k, thread_n: the host loop's parameters, as for the emulator. Inputs are not modified.
    Returns what :func:`refsim.emulator.marlin_kernel.marlin_gemm` returns for the same arguments.
    """
    return gemm(A, B, s, None, arch=arch, sms=sms, backend=backend, options=options, max_par=max_par,
                thread_k=thread_k, thread_n=thread_n)


def gemm(A: np.ndarray, B: np.ndarray, s: np.ndarray, locks: np.ndarray | None, *, arch: str = "sm_80",
         sms: int = 108, backend: str = "ptx", options: dict | None = None,
         stats: list | None = None, max_par: int = MAX_PAR, thread_k: int | None = None,
         thread_n: int | None = None) -> np.ndarray:
    """:func:`marlin_gemm` with a caller-provided lock workspace, as the official API takes one.

    locks: int32 1-D, all zero, at least ``workspace(N).size`` entries (``None``: a fresh one). The
    kernel leaves it all zero again (it is written in place: device-buffer semantics); a workspace that
    cannot be device memory as it is (not C-contiguous, not aligned) is all zero before and after, so a
    fresh one stands in for it.
    options, max_par, thread_k, thread_n: as for :func:`marlin_gemm`. stats: a list that receives each launch's ``LaunchStats``
    (``None`` entries for the GPU backend).
    """
    A, B, s, sms, k, n, group_size = marlin_kernel.check_inputs(A, B, s, arch, sms)  # the emulator's own rules
    require_shape("s", s, (1 if group_size is None else k // 128, n))
    if arch not in ARCHS:
        raise FormatRuleError(f"arch: marlin.cu needs sm_80 or newer (cp.async, ldmatrix, mma.m16n8k16), "
                              f"one of {list(ARCHS)}; got {arch!r}")
    locks = workspace(n) if locks is None else require_dtype("locks", locks, np.int32)
    if locks.ndim != 1 or locks.size < n // 128 * MAX_PAR:
        raise ShapeError(f"locks: must be 1-D with at least N/128*16 = {n // 128 * MAX_PAR} entries; "
                         f"got shape {locks.shape}")
    if locks.any():
        raise FormatRuleError(f"locks: the workspace must be all zero; got non-zero entries at "
                              f"{np.flatnonzero(locks)[:8].tolist()}")
    if not (locks.flags.c_contiguous and locks.flags.aligned and locks.flags.writeable):
        locks = workspace(n)
    if stats is not None:
        require_instance("stats", stats, list, "list (receives each launch's LaunchStats) or None")
    m = A.shape[0]
    A, B, s = np.ascontiguousarray(A), np.ascontiguousarray(B), np.ascontiguousarray(s)  # C order, no copy if already
    C = np.zeros((m, n), np.float16)                       # (M, N): each launch writes its rows through a view
    launches = [(launch.Launch(ln.kernel, ln.grid, ln.block, ln.shared_bytes),
                 (A[ln.row_start:ln.row_start + ln.rows], B, C[ln.row_start:ln.row_start + ln.rows], s, locks,
                  np.int32(ln.rows), np.int32(n), np.int32(k)))       # A, C row views: (rows, K), (rows, N)
                for ln in launch_plan(m, n, k, sms, group_size, max_par=max_par, thread_k=thread_k,
                                      thread_n=thread_n)]
    st = launch.run(_ptx_text(), launches, backend=backend, arch=arch, options=options)
    if stats is not None:
        stats.extend(st)
    return C
