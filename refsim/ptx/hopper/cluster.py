"""Thread-block clusters of sm_90 (PTX ISA 8.x, "Cluster of Cooperative Thread Arrays", the cluster special
registers, "barrier.cluster"), defined once for both executors.

Spec
----
launch          ``Module.launch(..., cluster=(x, y, z))`` (:func:`check_launch`): the cluster shape, each
                dim >= 1 dividing the grid's, at most 8 CTAs (the portable size; the non-portable opt-in
                is not modelled), arch sm_90 or later. The PTX's ``.reqnctapercluster X, Y, Z`` is the shape
                when none is given and must equal a given one; ``.maxclusterrank N`` bounds the CTAs;
                ``.explicitcluster`` needs a shape (given or required). Without one, each CTA is an
                implicit 1x1x1 cluster. Every violation: PtxLaunchError naming the rule.
co-residency    the CTAs of a cluster run together: refsim keeps every block of such a launch resident,
                so a cluster launch larger than refsim.ptx.engine.RESIDENT_THREADS threads is
                PtxLimitError (1x1x1 clusters need nothing).
specials        (:func:`special`, per thread from its ``%ctaid``) ``%cluster_ctaid.{x,y,z}`` = ctaid % shape,
                ``%clusterid`` = ctaid / shape, ``%cluster_nctaid`` = shape, ``%nclusterid`` = nctaid / shape,
                ``%cluster_ctarank`` = x + y X + z X Y of %cluster_ctaid, ``%cluster_nctarank`` = X Y Z,
                ``%is_explicit_cluster`` = 1 when the launch or the PTX names a shape. The compiled executor
                runs the instructions that read them through Python (one definition).
barrier         ``barrier.cluster.arrive{.release,.relaxed}{.aligned}`` and ``barrier.cluster.wait{.acquire}
                {.aligned}``: a thread's k-th wait returns once every non-exited thread of its cluster has
                arrived k times; until then the wait does not advance and its warp yields (a wait that can
                never return is a PtxDeadlockError naming the cluster and the threads not arrived). A
                second arrive before the wait, or a wait without an arrive: PtxBarrierError.
shared::cluster another CTA's shared memory (``mapa``, ``ld/st/atom/red.shared::cluster``): refsim.ptx.hopper.dsmem.
race            under ``race=True`` a completed ``barrier.cluster`` phase starts a new race interval in every
                CTA of the cluster (as ``bar.sync`` does in one CTA): the phase is complete when every
                live thread of the cluster has arrived, and the interval is cleared once per phase.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import checks, scheduler
from refsim.ptx.errors import PtxBarrierError, PtxLaunchError, PtxLimitError, PtxUnsupportedError
from refsim.ptx.parse import Instruction

__all__ = ["SPECIALS", "MAX_CLUSTER", "check_launch", "special", "PerThread", "reads_special", "barrier",
           "deadlock_why"]

#: the portable cluster size (CUDA Programming Guide, "Thread Block Clusters")
MAX_CLUSTER = 8
SPECIALS = frozenset([f"%{n}.{c}" for n in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid")
                      for c in "xyz"] + ["%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster"])


def check_launch(kernel, arch_sm: int, grid: tuple, cluster, threads: int, resident: int) -> tuple[tuple, bool]:
    """(cluster shape, explicit) of a launch of ``kernel`` over ``grid`` on an arch numbered ``arch_sm``,
    ``cluster`` as given (None or an int or a 1..3-tuple of ints), ``threads`` per block (padded to warps),
    ``resident`` threads refsim keeps resident; the module spec's rules (PtxLaunchError / PtxLimitError)."""
    d = kernel.directives
    req = d.get(".reqnctapercluster")
    if cluster is None:
        shape = tuple(req) + (1,) * (3 - len(req)) if req else (1, 1, 1)
        explicit = req is not None
    else:
        dims = (cluster,) if isinstance(cluster, (int, np.integer)) and not isinstance(cluster, bool) else cluster
        if (not isinstance(dims, tuple) or not 1 <= len(dims) <= 3
                or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 for v in dims)):
            raise PtxLaunchError(f"cluster: must be None, a positive int or a tuple of 1 to 3 positive ints; got {cluster!r:.60}")
        shape, explicit = tuple(int(v) for v in dims) + (1,) * (3 - len(dims)), True
        if req is not None and shape != tuple(req) + (1,) * (3 - len(req)):
            raise PtxLaunchError(f"cluster: kernel {kernel.name} requires .reqnctapercluster {tuple(req)}; got {shape}")
    size = shape[0] * shape[1] * shape[2]
    if explicit and arch_sm < 90:
        raise PtxLaunchError(f"cluster: thread-block clusters need sm_90 or later; got sm_{arch_sm}")
    if ".explicitcluster" in d and not explicit:
        raise PtxLaunchError(f"cluster: kernel {kernel.name} is .explicitcluster: launch it with cluster=(x, y, z)")
    if size > MAX_CLUSTER:
        raise PtxLaunchError(f"cluster: at most {MAX_CLUSTER} CTAs per cluster (the portable size); got {shape}")
    if ".maxclusterrank" in d and size > d[".maxclusterrank"][0]:
        raise PtxLaunchError(f"cluster: kernel {kernel.name} allows .maxclusterrank {d['.maxclusterrank'][0]} CTAs; "
                             f"got {shape}")
    if any(g % c for g, c in zip(grid, shape)):
        raise PtxLaunchError(f"cluster: every grid dim must be a multiple of the cluster's; got grid {grid}, "
                             f"cluster {shape}")
    total = grid[0] * grid[1] * grid[2] * threads
    if size > 1 and total > resident:
        raise PtxLimitError(f"cluster: refsim keeps a cluster launch resident (its CTAs run together): "
                            f"{total:,} threads, more than {resident:,}")
    return shape, explicit


def special(name: str, grid: tuple, shape: tuple, explicit: bool, ctaid: tuple) -> np.ndarray:
    """The cluster special register ``name`` (one of :data:`SPECIALS`) of threads whose ``%ctaid`` are the
    uint32 arrays ``ctaid`` (x, y, z), in a launch over ``grid`` with cluster ``shape``: uint32, broadcast
    to ``ctaid``'s shape (module spec)."""
    c = np.asarray(ctaid[0])
    if name == "%cluster_nctarank":
        v = shape[0] * shape[1] * shape[2]
    elif name == "%is_explicit_cluster":
        v = int(explicit)
    elif name == "%cluster_ctarank":
        local = [np.asarray(ctaid[i]) % np.uint32(shape[i]) for i in range(3)]
        v = local[0] + local[1] * np.uint32(shape[0]) + local[2] * np.uint32(shape[0] * shape[1])
    else:
        base, axis = name[1:].split(".")
        i = "xyz".index(axis)
        v = {"clusterid": lambda: np.asarray(ctaid[i]) // np.uint32(shape[i]),
             "nclusterid": lambda: grid[i] // shape[i],
             "cluster_ctaid": lambda: np.asarray(ctaid[i]) % np.uint32(shape[i]),
             "cluster_nctaid": lambda: shape[i]}[base]()
    return np.broadcast_to(np.asarray(v, np.uint32), c.shape).astype(np.uint32)


class PerThread:
    """A per-thread special register computed when read (``fn() -> (T,) array``), as ``Launch.special``
    holds them: ``ndim`` 1 and ``[sel]``."""

    ndim = 1

    def __init__(self, fn):
        self._fn = fn

    def __getitem__(self, sel):
        return self._fn()[sel]


def reads_special(ins: Instruction) -> bool:
    """True when an operand of ``ins`` is a cluster special register (the compiled executor then runs the
    instruction through Python, reading them with :func:`special`)."""
    from refsim.ptx.operands import flatten

    return any(o[0] == "special" and o[1] in SPECIALS for o in flatten(ins.operands))


# ---------------------------------------------------------------------------------------- barrier.cluster
def _state(L) -> dict:
    s = L.ext.get("cluster")
    if s is None:
        s = L.ext["cluster"] = {"arrived": np.zeros(L.T, np.int64), "waited": np.zeros(L.T, np.int64),
                                "waiting": set(), "cleared": {}}
        L.ext.setdefault("deadlock", []).append(deadlock_why)
    return s


def _cluster_of(L, t: np.ndarray) -> np.ndarray:
    """The cluster index (row-major over the grid of clusters) of threads ``t``."""
    shape = L.cluster
    b = L.slot_block[L.slot_of[t]]
    gx, gy = L.grid[0], L.grid[1]
    x, y, z = b % gx // shape[0], b // gx % gy // shape[1], b // (gx * gy) // shape[2]
    nx, ny = gx // shape[0], gy // shape[1]
    return x + nx * (y + ny * z)


def barrier(L, ins: Instruction, idx: int):
    """``barrier.cluster.arrive`` / ``.wait`` (module spec); sets the pc itself."""
    mods = set(ins.mods)
    kind = mods & {"arrive", "wait"}
    allowed = {"cluster", "aligned", *kind} | ({"release", "relaxed"} if "arrive" in kind else {"acquire"})
    if "cluster" not in mods or len(kind) != 1 or mods - allowed or ins.operands or ins.types:
        raise PtxUnsupportedError(f"{L.where(ins)}: refsim executes barrier.cluster.arrive{{.release,.relaxed}}"
                                  f"{{.aligned}} and barrier.cluster.wait{{.acquire}}{{.aligned}}")
    arrive = "arrive" in kind

    def run(sel):
        th = L.threads(sel)
        s = _state(L)
        if arrive:
            early = s["arrived"][th] > s["waited"][th]
            if early.any():
                raise PtxBarrierError(f"{L.where(ins)}: barrier.cluster.arrive again before barrier.cluster.wait "
                                      f"(by {L.who(int(th[early][0]))})")
            s["arrived"][th] += 1
            L.progress += 1
            L.pc[th] += 1
            return
        none = s["arrived"][th] == s["waited"][th]
        if none.any():
            raise PtxBarrierError(f"{L.where(ins)}: barrier.cluster.wait without a barrier.cluster.arrive before it "
                                  f"(by {L.who(int(th[none][0]))})")
        live = ~L.exited.astype(bool)
        cl_all = _cluster_of(L, np.arange(L.T))
        mine = _cluster_of(L, th)
        done = np.zeros(len(th), bool)
        for c in np.unique(mine):
            members = live & (cl_all == c) & (L.slot_block[L.slot_of] >= 0)
            least = int(s["arrived"][members].min()) if members.any() else 1 << 62
            m = mine == c
            done[m] = s["arrived"][th[m]] <= least
            if L.race and done[m].any() and s["cleared"].get(int(c), 0) < least:     # a new race interval
                s["cleared"][int(c)] = least
                checks.barrier_released(L, np.bincount(L.slot_of[np.flatnonzero(cl_all == c)],
                                                       minlength=L.nslots) > 0)
        s["waited"][th[done]] += 1
        L.pc[th[done]] += 1
        s["waiting"] = (s["waiting"] - set(th[done].tolist())) | set(th[~done].tolist())
        if (~done).any():
            scheduler.yield_warps(L, th[~done])
    return run


def deadlock_why(L, why: str) -> str:
    """The deadlock's reason when threads wait in ``barrier.cluster.wait``: the clusters and their threads
    that have not arrived."""
    s = L.ext.get("cluster")
    if not s or not s["waiting"]:
        return why
    waiting = np.array(sorted(s["waiting"]), np.int64)
    live = ~L.exited.astype(bool) & (L.slot_block[L.slot_of] >= 0)
    cl_all = _cluster_of(L, np.arange(L.T))
    parts = []
    for c in np.unique(_cluster_of(L, waiting)).tolist():
        need = int(s["arrived"][waiting[_cluster_of(L, waiting) == c]].max())
        late = np.flatnonzero(live & (cl_all == c) & (s["arrived"] < need))
        parts.append(f"cluster {c}: {len(late)} thread(s) never arrive for barrier.cluster phase {need}"
                     + (f" (first: {L.who(int(late[0]))})" if len(late) else ""))
    return "threads wait in barrier.cluster.wait for arrivals that never come: " + "; ".join(parts[:8])
