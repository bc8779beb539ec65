"""Marlin's striped partitioning of a GEMM across SMs, exactly as the official kernel computes it.

Spec block
----------
- **Problem**: ``C (M, N) = A (M, K) @ W (K, N)``, fp16 x int4 (see :mod:`refsim.formats.marlin`).
- **Tiles**: a threadblock tile is ``thread_k x thread_n`` of ``W``; ``k_tiles = K / thread_k``,
  ``n_tiles = N / thread_n``. Auto choice (host code): ``M <= 16`` -> ``(thread_k, thread_n) =
  (128, 128)``, otherwise ``(64, 256)``. 256 threads, 4 stages, 96 KiB shared memory.
- **M splitting (host)**: M is cut into launches of at most 4 m-blocks (64 rows); when more than
  4 m-blocks remain, one launch solves ``par = min((16 * remaining_blocks - pad) // 64, max_par)``
  independent 64-row problems side by side ("parallel"), see :func:`stripes`.
- **Tile numbering (device)**: tiles are numbered column-major, ``L = k_tiles * col_par + k_tile``
  with ``col_par in [0, n_tiles * parallel)`` (``col_par // n_tiles`` = which 64-row problem).
  Block ``b`` owns ``L in [iters * b, iters * (b + 1))`` with
  ``iters = ceil(k_tiles * n_tiles * parallel / sms)``, rounded up to a multiple of
  ``group_blocks / thread_k_blocks`` when grouped (stripes start on group boundaries).
- **Slices**: the part of a stripe inside one column. The blocks sharing a column reduce
  serially through ``C`` in the order ``slice_idx = 0, 1, ...``, numbered **bottom to top**
  (highest k-tiles first); ``slice_idx == slice_count - 1`` (the block holding k-tile 0) writes C.
- **Invariants** (tested exhaustively): every tile is covered exactly once; slice indices of a
  column are ``0 .. count-1`` in decreasing ``k_tile_start``; each stripe is ``iters`` long except
  the last non-empty one.
- **Branches**: :data:`BRANCHES` names every path of this plan (tile config, host M loop, partition,
  global reduction, scales); :func:`plan_branches` tells which ones a shape takes, so tests can prove
  their cases run every one.
- **Source matched**: IST-DASLab/marlin ``marlin/marlin_cuda_kernel.cu`` (``Marlin`` prologue,
  ``init_slice``, the slice loop, and the host ``marlin_cuda``), commit
  ``2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c``.

Diagram (the kernel's own 3x3, 5-SM example: k-tiles down, n-tiles across, digit = block)::

    0 1 3        iters = ceil(9 / 5) = 2
    0 2 3        column 0: block 1 (k-tile 2) reduces first, then block 0 (k-tiles 0-1) writes
    1 2 4        column 2: 4 -> 3 (writes)

API (used by the GPU performance model and the warp-level emulator)::

    cfg  = marlin_tile_config(m, n, k, group_size)            # TileConfig
    plan = stripes(m, n, k, sms, group_size)                   # StripePlan
    for launch in plan.launches:
        launch.blocks[b]                  # tuple[Slice, ...] of block b, in processing order
        launch.reduction_order(p, nt)     # blocks in reduction order for problem p, n-tile nt
        launch.iters, launch.busy_blocks, launch.idle_sms, launch.global_reduction_steps
"""

from __future__ import annotations

from dataclasses import dataclass

from refsim._validate import (MAX_ELEMENTS, require_bounded, require_fields, require_group_128, require_int,
                              require_ints)
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "THREADS",
    "STAGES",
    "SHARED_MEM_BYTES",
    "KERNELS",
    "TileConfig",
    "Slice",
    "Launch",
    "StripePlan",
    "marlin_tile_config",
    "stripes",
    "stripes_reference",
    "launch_partition",
    "launch_kinds",
    "launch_summary",
    "BRANCHES",
    "plan_branches",
]

THREADS = 256
STAGES = 4
SHARED_MEM_BYTES = 96 * 1024
#: compiled (thread_m_blocks, thread_n_blocks, thread_k_blocks); each with group_blocks -1 or 8
KERNELS = frozenset({(1, 8, 8), (1, 16, 4), (2, 16, 4), (3, 16, 4), (4, 16, 4)})


def _ceildiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class TileConfig:
    """A Marlin threadblock tile: ``thread_k x thread_n`` of W, group size in 16-row blocks."""

    thread_k: int
    thread_n: int
    group_blocks: int | None  # group_size // 16, None for per-channel

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    @property
    def thread_k_blocks(self) -> int:
        return self.thread_k // 16

    @property
    def thread_n_blocks(self) -> int:
        return self.thread_n // 16

    @property
    def warps_n(self) -> int:
        """Warps across n (each warp covers 64 columns)."""
        return self.thread_n // 64

    @property
    def warps_k(self) -> int:
        """Warps splitting the k16 blocks of a tile (8 warps in all)."""
        return (THREADS // 32) // self.warps_n

    @property
    def group_tiles(self) -> int:
        """Stripe-length quantum: k-tiles per quantization group (1 for per-channel)."""
        return 1 if self.group_blocks is None else self.group_blocks // self.thread_k_blocks

    def __str__(self) -> str:
        g = "per-channel" if self.group_blocks is None else f"group {16 * self.group_blocks}"
        return f"tile k{self.thread_k} x n{self.thread_n}, {g}"


@dataclass(frozen=True)
class Slice:
    """The part of one block's stripe inside one tile column."""

    block: int
    col_par: int  # column counting the parallel problems: problem = col_par // n_tiles
    problem: int  # which independent 64-row sub-problem (0 when parallel == 1)
    n_tile: int  # col_par % n_tiles
    k_tile_start: int
    k_tile_count: int
    slice_idx: int  # reduction rank, 0 = bottom (highest k-tiles), count-1 = top (writes C)
    slice_count: int  # blocks sharing this column

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    @property
    def k_tiles(self) -> range:
        return range(self.k_tile_start, self.k_tile_start + self.k_tile_count)

    @property
    def writes_output(self) -> bool:
        return self.slice_idx == self.slice_count - 1


@dataclass(frozen=True)
class Launch:
    """One kernel launch of the host's M loop and its per-block stripes."""

    row_start: int  # first row of A / C this launch handles
    prob_m: int  # rows handled (all parallel problems together)
    thread_m_blocks: int
    parallel: int
    k_tiles: int
    n_tiles: int
    iters: int  # stripe length in tiles
    sms: int
    blocks: tuple[tuple[Slice, ...], ...]  # blocks[b] = slices of block b in processing order

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    def reduction_order(self, problem: int, n_tile: int) -> tuple[int, ...]:
        """Blocks that reduce into output tile (problem, n_tile), in reduction order (bottom first)."""
        found = [s for stripe in self.blocks for s in stripe if s.problem == problem and s.n_tile == n_tile]
        return tuple(s.block for s in sorted(found, key=lambda s: s.slice_idx))

    @property
    def iterations_per_block(self) -> tuple[int, ...]:
        """Tiles each block processes (its main-loop iterations)."""
        return tuple(sum(s.k_tile_count for s in stripe) for stripe in self.blocks)

    @property
    def busy_blocks(self) -> int:
        return sum(1 for stripe in self.blocks if stripe)

    @property
    def idle_sms(self) -> int:
        return self.sms - self.busy_blocks

    @property
    def global_reduction_steps(self) -> int:
        """Serial cross-block reductions: sum over output tiles of ``slice_count - 1``."""
        return sum(s.slice_count - 1 for stripe in self.blocks for s in stripe if s.writes_output)


@dataclass(frozen=True)
class StripePlan:
    """The whole problem: tile configuration and the launches of the host M loop."""

    m: int
    n: int
    k: int
    sms: int
    group_size: int | None
    config: TileConfig
    launches: tuple[Launch, ...]

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in


def marlin_tile_config(m: int, n: int, k: int, group_size: int | None,
                       thread_k: int | None = None, thread_n: int | None = None,
                       max_par: int = 16) -> TileConfig:
    """The tile configuration the official host code picks (or checks, when given).

    ``m, n, k`` ints; ``group_size`` 128 or ``None``. Auto: ``m <= 16`` -> (128, 128), else
    (64, 256). Raises :class:`ShapeError` for the kernel's ERR_PROB_SHAPE (N % thread_n,
    K % thread_k) and :class:`FormatRuleError` for ERR_KERN_SHAPE (no compiled kernel).
    """
    m = require_int("M", m, minimum=1)
    n = require_int("N", n, minimum=1)
    k = require_int("K", k, minimum=1)
    group_size = require_group_128(group_size, "the Marlin kernel")
    if thread_k is None or thread_n is None:
        thread_k, thread_n = (128, 128) if m <= 16 else (64, 256)
    else:
        thread_k, thread_n = require_int("thread_k", thread_k, minimum=16), require_int("thread_n", thread_n, minimum=64)
    if n % thread_n:
        raise ShapeError(f"N: must be a multiple of thread_n={thread_n} (kernel ERR_PROB_SHAPE); got {n}")
    if k % thread_k:
        raise ShapeError(f"K: must be a multiple of thread_k={thread_k} (kernel ERR_PROB_SHAPE); got {k}")
    cfg = TileConfig(thread_k, thread_n, None if group_size is None else group_size // 16)
    for _, _, mb, _ in launch_kinds(m, max_par):
        if (mb, cfg.thread_n_blocks, cfg.thread_k_blocks) not in KERNELS:
            raise FormatRuleError(
                f"tile: no compiled kernel for thread_k={thread_k}, thread_n={thread_n} with "
                f"{mb} m-blocks (kernel ERR_KERN_SHAPE); got M={m}"
            )
    return cfg


MAX_SMS = 1 << 12  # no GPU has more; bounds the per-block loop


def _check_partition(k_tiles, n_tiles, parallel, sms, group_tiles) -> tuple[int, int, int, int, int]:
    """The one check of :func:`launch_partition` and :func:`stripes_reference`."""
    vals = require_ints(k_tiles=k_tiles, n_tiles=n_tiles, parallel=parallel, sms=sms, group_tiles=group_tiles)
    require_bounded("sms", vals[3], MAX_SMS, what="SM count")
    require_bounded("k_tiles*n_tiles*parallel", vals[0] * vals[1] * vals[2], MAX_ELEMENTS // (16 * 16),
                    what="tile count")
    return vals


def launch_partition(k_tiles: int, n_tiles: int, parallel: int, sms: int, group_tiles: int) -> tuple[int, tuple[tuple[Slice, ...], ...]]:
    """Device-side bookkeeping of one launch: ``(iters, blocks)``, transcribing ``init_slice``.

    ``blocks[b]`` lists block b's slices in processing order. All five arguments are integers
    >= 1 (NumPy scalars are normalised to Python ints, so nothing wraps); ``sms`` and the tile
    count are bounded (:func:`_check_partition`).
    """
    k_tiles, n_tiles, parallel, sms, group_tiles = _check_partition(k_tiles, n_tiles, parallel, sms, group_tiles)
    iters = _ceildiv(k_tiles * n_tiles * parallel, sms)
    if group_tiles > 1:
        iters = group_tiles * _ceildiv(iters, group_tiles)
    blocks = []
    for b in range(sms):
        slices = []
        row = (iters * b) % k_tiles
        col_par = (iters * b) // k_tiles
        while True:
            it = iters * (b + 1) - (k_tiles * col_par + row)
            if it <= 0 or col_par >= n_tiles * parallel:
                break
            it = min(it, k_tiles - row)
            count, idx = 1, 0
            col_first = iters * _ceildiv(k_tiles * col_par, iters)
            if col_first <= k_tiles * (col_par + 1):
                col_off = col_first - k_tiles * col_par
                count = _ceildiv(k_tiles - col_off, iters) + (1 if col_off > 0 else 0)
                delta = iters * b - col_first
                if delta < 0 or (col_off == 0 and delta == 0):
                    idx = count - 1
                else:
                    idx = count - 1 - delta // iters - (1 if col_off > 0 else 0)
            slices.append(Slice(b, col_par, col_par // n_tiles, col_par % n_tiles, row, it, idx, count))
            row = 0
            col_par += 1
        blocks.append(tuple(slices))
    return iters, tuple(blocks)


def _launches(m: int, max_par: int):
    """The host M loop: yields ``(row_start, prob_m, thread_m_blocks, par)``."""
    tot_m_blocks = _ceildiv(m, 16)
    pad = 16 * tot_m_blocks - m
    i = 0
    while i < tot_m_blocks:
        tmb = tot_m_blocks - i
        prob_m = m - 16 * i
        par = 1
        step = i
        if tmb > 4:
            par = min((16 * tmb - pad) // 64, max_par)
            prob_m = 64 * par
            i += 4 * (par - 1)
            tmb = 4
        yield 16 * step, prob_m, tmb, par
        i += 4


def launch_summary(k_tiles: int, n_tiles: int, parallel: int, sms: int, group_tiles: int) -> tuple[int, int, int, int, int]:
    """The numbers a cost model needs from :func:`launch_partition`, in closed form (no slice objects):
    ``(iters, busy_blocks, longest_stripe, max_slices, reduction_steps)``.

    From the spec block: block ``b`` owns tiles ``[iters·b, iters·(b+1)) ∩ [0, T)``, T = k_tiles ·
    n_tiles · parallel, so ``busy_blocks = ceil(T / iters)`` and the longest stripe is
    ``min(iters, T)``. Column ``c`` holds tiles ``[c·k_tiles, (c+1)·k_tiles)``; the blocks meeting it
    (its slice count) number ``floor((c·k + k − 1) / iters) − floor(c·k / iters) + 1``, which depends
    only on ``c·k mod iters``. ``max_slices`` is their maximum and ``reduction_steps`` the sum of
    (count − 1); ``c·k mod iters`` repeats with period ``iters / gcd(k, iters)``, so one period (or
    all columns, when fewer) is evaluated with NumPy, no Python loop per slice. Same numbers as
    summarising :func:`launch_partition` (tested exhaustively on small sizes).
    """
    import math

    import numpy as np

    k_tiles, n_tiles, parallel, sms, group_tiles = require_ints(
        k_tiles=k_tiles, n_tiles=n_tiles, parallel=parallel, sms=sms, group_tiles=group_tiles)
    require_bounded("sms", sms, MAX_SMS, what="SM count")
    require_bounded("k_tiles", k_tiles, MAX_ELEMENTS, what="tile count")
    require_bounded("group_tiles", group_tiles, MAX_ELEMENTS, what="tile count")  # iters stays an int64
    require_bounded("n_tiles*parallel", n_tiles * parallel, MAX_SUMMARY_COLUMNS, what="column count")
    total = k_tiles * n_tiles * parallel
    iters = _ceildiv(total, sms)
    if group_tiles > 1:
        iters = group_tiles * _ceildiv(iters, group_tiles)
    columns = n_tiles * parallel
    # c·k mod iters repeats with period iters / gcd(k, iters): evaluate one period (or all columns)
    period = iters // math.gcd(k_tiles, iters)
    span = min(columns, period)
    start = (np.arange(span, dtype=np.int64) * k_tiles) % iters
    counts = (start + (k_tiles - 1)) // iters + 1                          # blocks meeting column c
    full, rest = divmod(columns, span)
    steps = full * int(counts.sum()) + int(counts[:rest].sum()) - columns
    return iters, _ceildiv(total, iters), min(iters, total), int(counts.max()), steps


#: columns (n_tiles · parallel) :func:`launch_summary` accepts: 2^24 (Marlin's 16·N int32 bound and
#: max_par 16 allow at most 2^24)
MAX_SUMMARY_COLUMNS = 1 << 24


def launch_kinds(m: int, max_par: int = 16) -> tuple[tuple[int, int, int, int], ...]:
    """The host M loop of :func:`stripes` grouped by identical launches, in O(1) of ``m``.

    Returns ``((count, prob_m, thread_m_blocks, par), ...)`` in launch order: ``count``
    consecutive launches with those parameters. Only a run of full launches (``prob_m = 64·max_par``,
    4 m-blocks, ``par = max_par``) repeats, so at most three kinds come back; expanding the counts
    gives the launches of ``_launches`` without their ``row_start`` (tested against it).
    ``m``, ``max_par``: ints >= 1.
    """
    m, max_par = require_ints(M=m, max_par=max_par)
    tot = _ceildiv(m, 16)
    pad = 16 * tot - m
    # a launch is full when (16·remaining − pad) // 64 >= max_par, i.e. remaining >= need blocks
    need = 4 * max_par + (1 if pad else 0)
    full = (tot - need) // (4 * max_par) + 1 if tot >= need and tot > 4 else 0
    kinds = [(full, 64 * max_par, 4, max_par)] if full else []
    rest = m - 64 * max_par * full
    if rest:
        for _, prob_m, tmb, par in _launches(rest, max_par):
            kinds.append((1, prob_m, tmb, par))
    return tuple(kinds)


def stripes(m: int, n: int, k: int, sms: int, group_size: int | None, *, max_par: int = 16,
            thread_k: int | None = None, thread_n: int | None = None) -> StripePlan:
    """Marlin's full partition of ``C (M, N) = A (M, K) @ W (K, N)`` over ``sms`` threadblocks.

    Returns a :class:`StripePlan`: one :class:`Launch` per host launch, each with every block's
    slices (tiles in order), per-column reduction order, and counts. ``max_par`` as the Python
    ``marlin.mul`` passes it (16).
    """
    m, n, k, sms, max_par = require_ints(M=m, N=n, K=k, sms=sms, max_par=max_par)
    require_bounded("sms", sms, MAX_SMS, what="SM count")
    require_bounded("M*K", m * k)  # the kernel indexes A with int32
    cfg = marlin_tile_config(m, n, k, group_size, thread_k, thread_n, max_par)
    k_tiles, n_tiles = k // cfg.thread_k, n // cfg.thread_n
    launches = []
    for row_start, prob_m, tmb, par in _launches(m, max_par):
        # device prologue: parallel = prob_m / (16 tmb) when prob_m > 16 tmb
        parallel = prob_m // (16 * tmb) if prob_m > 16 * tmb else 1
        iters, blocks = launch_partition(k_tiles, n_tiles, parallel, sms, cfg.group_tiles)
        launches.append(Launch(row_start, prob_m, tmb, parallel, k_tiles, n_tiles, iters, sms, blocks))
    return StripePlan(m, n, k, sms, group_size, cfg, tuple(launches))


def stripes_reference(k_tiles: int, n_tiles: int, parallel: int, sms: int, group_tiles: int) -> dict:
    """Plain reference for :func:`launch_partition`, from the spec block's definitions only.

    Cuts the column-major tile sequence into stripes of ``iters`` tiles, splits each stripe at
    column boundaries, and ranks each column's pieces bottom to top. Returns
    ``{(block, col_par): (k_tile_start, k_tile_count, slice_idx, slice_count)}``.
    """
    k_tiles, n_tiles, parallel, sms, group_tiles = _check_partition(k_tiles, n_tiles, parallel, sms, group_tiles)
    iters = _ceildiv(k_tiles * n_tiles * parallel, sms)
    if group_tiles > 1:
        iters = group_tiles * _ceildiv(iters, group_tiles)
    owner = {}
    for tile in range(k_tiles * n_tiles * parallel):
        owner[tile] = tile // iters
    pieces: dict[tuple[int, int], list[int]] = {}
    for tile, b in owner.items():
        pieces.setdefault((b, tile // k_tiles), []).append(tile % k_tiles)
    out = {}
    for col in range(n_tiles * parallel):
        here = sorted(((b, min(ks), len(ks)) for (b, c), ks in pieces.items() if c == col), key=lambda x: -x[1])
        for rank, (b, start, cnt) in enumerate(here):
            out[(b, col)] = (start, cnt, rank, len(here))
    return out


#: every path of Marlin's launch plan a shape can take (see :func:`plan_branches`)
BRANCHES: tuple[str, ...] = (
    "tile_k128_n128",         # thread_k = thread_n = 128 (the host's choice for M <= 16)
    "tile_k64_n256",          # thread_k = 64, thread_n = 256 (the host's choice for M > 16)
    "tile_forced",            # thread_k / thread_n given, unlike the host's own choice
    "m_blocks_1",             # a launch with 1 m-block of 16 rows (template thread_m_blocks)
    "m_blocks_2",
    "m_blocks_3",
    "m_blocks_4",
    "m_partial_block",        # M % 16 != 0: the last m-block is padded
    "m_split",                # the host M loop makes several launches
    "parallel_problems",      # a launch solves several 64-row problems side by side (parallel > 1)
    "max_par_capped",         # a launch's parallel is cut to max_par (more launches follow)
    "group_128",              # grouped scales (group_blocks 8)
    "group_per_channel",      # one scale row, applied to the output
    "iters_group_rounded",    # grouped stripes rounded up to whole groups (iters > ceil(tiles / sms))
    "one_slice_per_column",   # some column is computed by one block alone
    "slices_gt1",             # some column is split over several blocks (global reduction through C)
    "slices_gt2",             # some column has 3+ slices (a middle slice reads and writes C)
    "stripe_crosses_columns", # a block's stripe runs into the next column
    "partial_stripe",         # the last busy block's stripe is shorter than iters
    "idle_sms",               # some blocks of the grid get no tile
)


def plan_branches(m: int, n: int, k: int, sms: int, group_size: int | None, *, max_par: int = 16,
                  thread_k: int | None = None, thread_n: int | None = None) -> frozenset[str]:
    """The :data:`BRANCHES` that :func:`stripes` with these arguments (same rules) takes.

    One name per decision of the plan: the tile config, each launch's ``thread_m_blocks``, the host M
    loop (several launches, parallel problems, the ``max_par`` cap), the scale mode, and, over every
    launch, the partition's shapes (slices per column, stripes crossing columns, a partial last stripe,
    idle blocks). A set of cases whose branches cover :data:`BRANCHES` runs every path of the plan.
    """
    plan = stripes(m, n, k, sms, group_size, max_par=max_par, thread_k=thread_k, thread_n=thread_n)
    cfg = plan.config
    auto = (128, 128) if plan.m <= 16 else (64, 256)
    out = {f"tile_k{cfg.thread_k}_n{cfg.thread_n}", "group_per_channel" if cfg.group_blocks is None else "group_128"}
    if (thread_k is not None and thread_n is not None) and (cfg.thread_k, cfg.thread_n) != auto:
        out.add("tile_forced")
    if plan.m % 16:
        out.add("m_partial_block")
    if len(plan.launches) > 1:
        out.add("m_split")
    if _ceildiv(plan.m, 16) > 4 and plan.m // 64 > max_par:       # the first launch's par = min(M // 64, max_par)
        out.add("max_par_capped")
    for la in plan.launches:
        out.add(f"m_blocks_{la.thread_m_blocks}")
        if la.parallel > 1:
            out.add("parallel_problems")
        if la.iters > _ceildiv(la.k_tiles * la.n_tiles * la.parallel, la.sms):
            out.add("iters_group_rounded")
        counts = [sl.slice_count for stripe in la.blocks for sl in stripe]
        if min(counts) == 1:
            out.add("one_slice_per_column")
        if max(counts) > 1:
            out.add("slices_gt1")
        if max(counts) > 2:
            out.add("slices_gt2")
        if any(len(stripe) > 1 for stripe in la.blocks):
            out.add("stripe_crosses_columns")
        busy = [i for i in la.iterations_per_block if i]
        if busy[-1] < la.iters:
            out.add("partial_stripe")
        if la.idle_sms:
            out.add("idle_sms")
    return frozenset(out)
