"""QIGen's performance model: register (micro-GEMV) search, cache (mini-GEMV) MILP, time estimate.

Paper (Pegolotti et al., QIGen, Sec. 3) and IST-DASLab/QIGen @ be868d3 ``utils.mem_model``:

* registers (eq. 4): ``m_u + m_u*t_u + t_u <= eta`` with ``t_u`` counted in vector registers (8
  fp32 columns each) and ``m_u`` the activations held at once (our kernel: the in-word
  ``unroll``, so ``m_u`` must divide the codes per word). The paper finds (m_u, t_u) "through
  empirical search"; :func:`register_search` ranks the feasible pairs by FMAs per loaded register
  ``m_u*t_u`` (ties: wider ``t_u``). With eta = 16 this gives (2, 4), i.e. unroll 2 and
  tu = 32 columns - QIGen's shipped defaults.
* accumulators (refsim's extension, not in QIGen): each column's sum can be split into A
  partial sums (see :mod:`refsim.qigen.oracle`) so that a micro-tile has ``A*t_u`` independent
  FMA chains. :func:`accumulator_search` takes the largest A in (1, 2, 4) whose registers fit:
  ``A*t_u`` accumulators + ``w*t_u`` live weight words (w = 1; 2 for 3-bit, whose kernel keeps
  two of a triple live) + 2 (the x broadcast and the mask) ``<= eta``, and ``A*t_u <= 8``.
  With eta = 16, t_u = 4: A = 2 at 2/4-bit (8 + 4 + 2 = 14), A = 1 at 3-bit (8 + 8 + 2 > 16).
* L1 (eq. 5, batch term as in the official code, all in bits):
  ``L(mb, tb) = 32*mb*n + bits*mb*tb + 32*tb*n <= gamma`` (n = batch), with ``mb | K``,
  ``32 | mb`` (refsim's kernel walks 32-row chunks), ``gs | mb`` when grouped, ``tu | tb`` and
  ``tb | N/p`` (p threads; ``tb <= N/p``). Objective: maximise L (use as much L1 as possible).
  ``L`` is bilinear in (mb, tb), so :func:`cache_milp` writes it as a MILP over one-hot choices:
  binaries ``y_i`` (mb = d_i), ``w_j`` (tb = e_j) and ``z_ij = y_i*w_j`` linearised exactly
  (``z <= y``, ``z <= w``, ``z >= y + w - 1``); maximise ``Σ L_ij z_ij`` s.t. ``Σ L_ij z_ij <=
  gamma``, ``Σ y = Σ w = 1``. Solved with ``scipy.optimize.milp`` (HiGHS). Ties between equal L
  go to the larger mb (fewer accumulator spills per column), via a small secondary term.
* time (:func:`predict_time`): ``max(bytes / memory bandwidth, max(vector ops / issue, FMA
  latency chain) / clock)``, napkin math in the function body.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from refsim._validate import (require_bits, require_bool, require_bounded, require_choice, require_fields,
                              require_instance, require_int)
from refsim.errors import FormatRuleError, ShapeError
from refsim.native.machine import MachineInfo

__all__ = ["Plan", "register_search", "accumulator_search", "cache_candidates", "cache_milp", "cache_bruteforce",
           "plan", "predict_time", "TimeEstimate", "l1_bits"]


def _sizes(**values) -> tuple[int, ...]:
    """Sizes of the model's arguments: Python ints >= 1, each <= 2**31 - 1 (a GEMV shape)."""
    return tuple(require_bounded(n, require_int(n, v, minimum=1)) for n, v in values.items())


def l1_bits(mb: int, tb: int, bits: int, batch: int = 1) -> int:
    """Left-hand side of the L1 constraint, in bits: ``32*mb*n + bits*mb*tb + 32*tb*n``."""
    mb, tb, bits, batch = (require_int(n, v, minimum=1) for n, v in (("mb", mb), ("tb", tb), ("bits", bits), ("batch", batch)))
    return 32 * mb * batch + bits * mb * tb + 32 * tb * batch


def register_search(eta: int, bits: int) -> tuple[int, int]:
    """(m_u, t_u registers) maximising ``m_u*t_u`` under ``m_u + m_u*t_u + t_u <= eta``.

    ``m_u`` in {1, 2, 4, 8} and dividing the codes per word (3-bit: any, its order is fixed),
    ``t_u`` in 1..8 (at most 64 columns). Ties: larger t_u.
    """
    bits = require_bits(bits, (2, 3, 4))
    eta = require_int("eta", eta, minimum=1)
    per_word = 32 // bits if bits != 3 else 32
    best = None
    for mu in (1, 2, 4, 8):
        if per_word % mu:
            continue
        for tu in range(1, 9):
            if mu + mu * tu + tu > eta:
                continue
            key = (mu * tu, tu)
            if best is None or key > best[0]:
                best = (key, (mu, tu))
    if best is None:
        raise FormatRuleError(f"eta: no (m_u, t_u) fits {eta} vector registers")
    return best[1]


def accumulator_search(eta: int, tu_regs: int, bits: int) -> int:
    """Partial sums per column A in (1, 2, 4): the largest with ``A*t_u + w*t_u + 2 <= eta``
    and ``A*t_u <= 8`` (w = 2 live words per column vector at 3-bit, else 1). Returns 1 when
    nothing larger fits."""
    bits = require_bits(bits, (2, 3, 4))
    eta = require_int("eta", eta, minimum=1)
    tu_regs = require_int("tu_regs", tu_regs, minimum=1)
    live_words = 2 if bits == 3 else 1
    best = 1
    for a in (1, 2, 4):
        if a * tu_regs + live_words * tu_regs + 2 <= eta and a * tu_regs <= 8:
            best = a
    return best


def cache_candidates(k: int, n: int, tu_cols: int, threads: int, group_size: int | None):
    """Allowed mb (divisors of K, multiples of 32 and of the group size) and tb values."""
    k, n, tu_cols, threads = _sizes(k=k, n=n, tu_cols=tu_cols, threads=threads)
    group_size = None if group_size is None else require_int("group_size", group_size, minimum=1)
    step = 32 if group_size is None else math.lcm(32, group_size)  # Python ints: no int64 overflow
    mbs = [d for d in range(step, k + 1, step) if k % d == 0]
    width = n // threads if n % threads == 0 else n
    tbs = [d for d in range(tu_cols, min(width, n // threads if threads <= n else n) + 1, tu_cols)
           if width % d == 0 and n % d == 0]
    if not mbs:
        raise ShapeError(f"K: needs a divisor that is a multiple of {step} (32 and the group size); got {k}")
    if not tbs:
        raise ShapeError(f"N: needs a panel width tb, multiple of tu={tu_cols}, dividing N/p={n}/{threads}; got {n}")
    return mbs, tbs


def cache_bruteforce(k, n, bits, batch, gamma_bits, tu_cols, threads=1, group_size=None):
    """Enumeration twin of :func:`cache_milp` (same objective and tie-break)."""
    bits, batch, gamma_bits = _sizes(bits=bits, batch=batch, gamma_bits=gamma_bits)
    mbs, tbs = cache_candidates(k, n, tu_cols, threads, group_size)
    best = None
    for mb in mbs:
        for tb in tbs:
            used = l1_bits(mb, tb, bits, batch)
            if used <= gamma_bits and (best is None or (used, mb) > best[0]):
                best = ((used, mb), (mb, tb))
    if best is None:
        return None
    return best[1]


def cache_milp(k, n, bits, batch, gamma_bits, tu_cols, threads=1, group_size=None):
    """(mb, tb) maximising L1 use by mixed-integer linear programming; None if nothing fits."""
    bits, batch, gamma_bits = _sizes(bits=bits, batch=batch, gamma_bits=gamma_bits)
    from scipy.optimize import Bounds, LinearConstraint, milp

    mbs, tbs = cache_candidates(k, n, tu_cols, threads, group_size)
    ni, nj = len(mbs), len(tbs)
    nz = ni * nj
    nvar = ni + nj + nz  # [y_0..y_ni-1, w_0..w_nj-1, z_00..z_(ni-1)(nj-1)]
    used = np.array([[l1_bits(mb, tb, bits, batch) for tb in tbs] for mb in mbs], dtype=np.float64)
    # objective (milp minimises): -(L + tie * mb_rank), tie < 1/(ni) so it never beats a unit of L
    rank = np.repeat(np.arange(ni, dtype=np.float64), nj).reshape(ni, nj) / (ni + 1)
    c = np.zeros(nvar)
    c[ni + nj:] = -(used + rank).reshape(-1)
    rows, lo, hi = [], [], []

    def row():
        return np.zeros(nvar)

    r = row(); r[:ni] = 1; rows.append(r); lo.append(1); hi.append(1)               # one mb
    r = row(); r[ni:ni + nj] = 1; rows.append(r); lo.append(1); hi.append(1)        # one tb
    r = row(); r[ni + nj:] = used.reshape(-1); rows.append(r); lo.append(0); hi.append(gamma_bits)  # L1
    for i in range(ni):
        for j in range(nj):
            zi = ni + nj + i * nj + j
            r = row(); r[zi] = 1; r[i] = -1; rows.append(r); lo.append(-np.inf); hi.append(0)          # z <= y
            r = row(); r[zi] = 1; r[ni + j] = -1; rows.append(r); lo.append(-np.inf); hi.append(0)     # z <= w
            r = row(); r[zi] = 1; r[i] = -1; r[ni + j] = -1; rows.append(r); lo.append(-1); hi.append(np.inf)  # z >= y+w-1
    res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi),
               integrality=np.ones(nvar), bounds=Bounds(0, 1))
    if res.status == 2 or res.x is None:  # infeasible
        return None
    if res.status != 0:
        raise FormatRuleError(f"cache_milp: solver failed: {res.message}")
    y = np.round(res.x[:ni]).astype(int)
    w = np.round(res.x[ni:ni + nj]).astype(int)
    return mbs[int(np.argmax(y))], tbs[int(np.argmax(w))]


@dataclass(frozen=True)
class TimeEstimate:
    """Napkin-math time of one qGEMV call: the larger of memory and issue time."""

    bytes_moved: int
    vector_ops: int
    memory_s: float
    compute_s: float
    bound: str

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s)


def predict_time(k: int, n: int, bits: int, batch: int, tu_cols: int, group_size: int | None,
                 mem_bytes_per_s: float, clock_hz: float, issue_per_cycle: float = 3.0,
                 fma_latency_cycles: float = 4.0, accumulators: int = 1,
                 compact_meta: bool = False, path: str = "prescaled") -> TimeEstimate:
    """Estimated time of the generated AVX2 kernel (single thread, ``path`` "prescaled",
    "shift" or "bitcast"; see :func:`refsim.qigen.kernel.qgemv`).

    ``issue_per_cycle``: sustained 256-bit vector ops per cycle (assumption, default 3: two FMA
    pipes plus integer vector ALUs on Zen 3 / Skylake; not fitted). ``fma_latency_cycles``: each
    column's sum is one dependent FMA chain (the bit-exact order), so a micro-tile of ``tu/8``
    accumulators cannot retire a code faster than one FMA latency (4 cycles on Zen 3/Skylake);
    with ``accumulators`` = A partial sums per column there are A times as many chains, so the
    latency term is divided by A (the combining tree adds A-1 vector adds per group).
    ``compact_meta``: the ``meta="f16u8"`` kernel reads 3 bytes of scale + zero per group and
    column instead of 8. ``path``: "bitcast" reads codes as fp32 bit patterns (no int-to-float
    convert: and + fma per code, and one extra load of each word's upper half); "shift" shifts
    each non-bottom code down before masking (one op more per code than "prescaled").
    """
    k, n, bits, batch, tu_cols, accumulators = _sizes(k=k, n=n, bits=bits, batch=batch, tu_cols=tu_cols,
                                                      accumulators=accumulators)
    group_size = None if group_size is None else require_int("group_size", group_size, minimum=1)
    if group_size is not None and k % group_size:
        raise ShapeError(f"group_size: must divide K={k}; got {group_size}")
    rates = {}
    for name, v in (("mem_bytes_per_s", mem_bytes_per_s), ("clock_hz", clock_hz), ("issue_per_cycle", issue_per_cycle),
                    ("fma_latency_cycles", fma_latency_cycles)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not (0 < float(v) < float("inf")):
            raise FormatRuleError(f"{name}: must be a finite number > 0; got {v!r:.60}")
        rates[name] = float(v)  # Python floats: a float32 rate must not make float32 times
    mem_bytes_per_s, clock_hz, issue_per_cycle, fma_latency_cycles = rates.values()
    path = require_choice("path", path, ("prescaled", "shift", "bitcast"))
    compact_meta = require_bool("compact_meta", compact_meta)
    gs = k if group_size is None else group_size
    groups = k // gs
    # DRAM bytes: packed weights once, fp32 scales + zeros once, x read, y written (the y and
    # accumulator re-reads per group/block stay in L1/L2: N*4 bytes per batch row)
    weights = k * n * bits // 8
    meta = groups * n * (3 if compact_meta else 8)
    vectors = batch * k * 4 + batch * n * 4
    bytes_moved = weights + meta + vectors
    # vector ops per 8 columns per code: (and | srli) + cvt + fma = 3 (prescaled path);
    # 3-bit: 2 of 32 codes straddle words (srli, slli, or, and, cvt, fma = 6);
    # per chunk: one load per word; per code per micro-tile: one broadcast of x;
    # per group: ~6 ops per 8 columns (loads, fnmadd, fmadd, store)
    per_word = 32 // bits if bits != 3 else 32
    words = bits if bits == 3 else 1
    chunks = k // per_word
    col_vecs = n // 8
    per_code = {"prescaled": 3, "shift": 4, "bitcast": 2}[path]
    ops_chunk = per_word * per_code + words * (2 if path == "bitcast" else 1) + (2 * 3 if bits == 3 else 0)
    ops = batch * (chunks * col_vecs * ops_chunk + k * (n // tu_cols)
                   + groups * col_vecs * (6 + 2 * (accumulators - 1)))
    issue_cycles = ops / issue_per_cycle
    # one FMA latency per code per tile, shared by A independent partial-sum chains
    latency_cycles = batch * k * (n // tu_cols) * fma_latency_cycles / accumulators
    memory_s = bytes_moved / mem_bytes_per_s
    compute_s = max(issue_cycles, latency_cycles) / clock_hz
    return TimeEstimate(bytes_moved, ops, memory_s, compute_s, "memory" if memory_s >= compute_s else "compute")


@dataclass(frozen=True)
class Plan:
    """The model's choice for one (K, N, bits, batch, group_size) on one machine."""

    k: int
    n: int
    bits: int
    batch: int
    group_size: int | None
    threads: int
    gamma_bits: int
    eta: int
    mu: int
    tu_regs: int
    mb: int
    tb: int
    l1_used_bits: int
    alternatives: list = field(default_factory=list)
    accumulators: int = 1

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    @property
    def tu_cols(self) -> int:
        return 8 * self.tu_regs

    def summary(self) -> str:
        """Human-readable explanation of the choice (what ``refsim qigen plan`` prints)."""
        g = "per-channel" if self.group_size is None else f"group {self.group_size}"
        lines = [
            f"QIGen plan: K={self.k} N={self.n} {self.bits}-bit {g}, batch {self.batch}, {self.threads} thread(s)",
            f"  machine: gamma = L1d = {self.gamma_bits} bits ({self.gamma_bits // 8192} KiB), "
            f"eta = {self.eta} vector registers (AVX2 ymm)",
            f"  registers: m_u + m_u*t_u + t_u <= eta -> m_u={self.mu}, t_u={self.tu_regs} "
            f"({self.mu} + {self.mu * self.tu_regs} + {self.tu_regs} = {self.mu + self.mu * self.tu_regs + self.tu_regs} <= {self.eta}); "
            f"micro-tile {self.tu_cols} columns, unroll {self.mu}",
            f"  accumulators: A*t_u + w*t_u + 2 <= eta, A*t_u <= 8 -> A={self.accumulators} partial sums per column "
            f"({self.accumulators * self.tu_regs} independent FMA chains per micro-tile; fixed combine order, "
            f"bit-exact with the oracle)",
            f"  L1 (MILP): 32*mb*n + b*mb*tb + 32*tb*n = 32*{self.mb}*{self.batch} + {self.bits}*{self.mb}*{self.tb} + "
            f"32*{self.tb}*{self.batch} = {self.l1_used_bits} <= {self.gamma_bits} "
            f"({100 * self.l1_used_bits / self.gamma_bits:.1f}% of L1) -> mb={self.mb}, tb={self.tb}",
        ]
        if self.alternatives:
            alt = ", ".join(f"(mb={a}, tb={b}: {u / self.gamma_bits:.0%})" for a, b, u in self.alternatives)
            lines.append(f"  next best feasible: {alt}")
        return "\n".join(lines)


def _check_micro(micro) -> tuple[int, int]:
    """A fixed ``(m_u, t_u registers)``: m_u in {1, 2, 4, 8}, t_u in 1..8."""
    if not isinstance(micro, (tuple, list)) or len(micro) != 2:
        raise FormatRuleError(f"micro: must be None or a pair (m_u, t_u); got {micro!r:.60}")
    mu = require_choice("micro[0] (m_u)", micro[0], (1, 2, 4, 8))
    tu = require_choice("micro[1] (t_u)", micro[1], tuple(range(1, 9)))
    return mu, tu


def plan(k: int, n: int, bits: int, machine: MachineInfo, *, batch: int = 1,
         group_size: int | None = None, threads: int = 1,
         micro: tuple[int, int] | None = None, accumulators: int | None = None) -> Plan:
    """Choose (m_u, t_u) by register search, A by :func:`accumulator_search` and (mb, tb) by
    MILP for this machine.

    ``micro``: a fixed ``(m_u, t_u registers)`` instead of the register search, e.g. the winner
    of an empirical search (as QIGen's ``--search`` build does); the MILP then respects it.
    ``accumulators``: a fixed A (1, 2 or 4) instead of the search.
    """
    bits = require_bits(bits, (2, 3, 4))
    k = require_int("k", k, minimum=32)
    n = require_int("n", n, minimum=8)
    batch = require_int("batch", batch, minimum=1)
    threads = require_int("threads", threads, minimum=1)
    require_instance("machine", machine, MachineInfo)
    mu, tu = register_search(machine.eta, bits) if micro is None else _check_micro(micro)
    tu_cols = 8 * tu
    while tu_cols > 8 and n % tu_cols:
        tu_cols -= 8
        tu = tu_cols // 8
    if accumulators is None:
        accumulators = accumulator_search(machine.eta, tu, bits)
    else:
        accumulators = require_choice("accumulators", accumulators, (1, 2, 4))
    gamma = machine.gamma_bits
    choice = cache_milp(k, n, bits, batch, gamma, tu_cols, threads, group_size)
    if choice is None:
        mbs, tbs = cache_candidates(k, n, tu_cols, threads, group_size)
        raise FormatRuleError(
            f"L1: no (mb, tb) with mb in {mbs[:4]}..., tb in {tbs[:4]}... fits gamma={gamma} bits; "
            f"got smallest L = {l1_bits(mbs[0], tbs[0], bits, batch)}")
    mb, tb = choice
    mbs, tbs = cache_candidates(k, n, tu_cols, threads, group_size)
    feas = sorted(((l1_bits(a, b, bits, batch), a, b) for a in mbs for b in tbs
                   if l1_bits(a, b, bits, batch) <= gamma and (a, b) != (mb, tb)), reverse=True)[:3]
    return Plan(k, n, bits, batch, group_size, threads, gamma, machine.eta, mu, tu, mb, tb,
                l1_bits(mb, tb, bits, batch), [(a, b, u) for u, a, b in feas], accumulators)
