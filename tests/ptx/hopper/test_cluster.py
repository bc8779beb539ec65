"""refsim.ptx.hopper.cluster: cluster launches, the cluster special registers and barrier.cluster through both
executors (kernels of tests/ptx/kernels/hopper_cluster.cu; refusals in small hand-written PTX)."""

from pathlib import Path

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx

pytestmark = needs_compiled

_KERNELS = ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_cluster.ptx").read_text())


def _ids(grid, shape, explicit):
    """The 16 words ids stores per block, from the ISA's definitions written out per block."""
    rows = []
    for b in range(grid[0] * grid[1]):
        c = (b % grid[0], b // grid[0], 0)
        local = [c[i] % shape[i] for i in range(3)]
        rows.append([c[i] // shape[i] for i in range(3)] + [grid[i] // shape[i] for i in range(3)] + local
                    + list(shape) + [local[0] + local[1] * shape[0] + local[2] * shape[0] * shape[1],
                                     shape[0] * shape[1] * shape[2], int(explicit), b])
    return np.array(rows, np.uint32)


@pytest.mark.parametrize("cluster,shape,explicit", [((2, 2), (2, 2, 1), True), (None, (1, 1, 1), False),
                                                    (4, (4, 1, 1), True)])
def test_cluster_special_registers(cluster, shape, explicit):
    out = np.zeros((8, 16), np.uint32)
    _, arrays, _ = run_both(_KERNELS, "ids", (4, 2), 32, [out], arch="sm_90a", cluster=cluster)
    assert np.array_equal(arrays[0], _ids((4, 2, 1), shape, explicit))


def test_reqnctapercluster_is_the_shape_and_its_rules_hold():
    out = np.zeros((4, 16), np.uint32)
    _, arrays, _ = run_both(_KERNELS, "fixed_ids", 4, 32, [out], arch="sm_90a")
    assert np.array_equal(arrays[0], _ids((4, 1, 1), (2, 1, 1), True))
    with pytest.raises(ptx.PtxLaunchError, match=r"requires .reqnctapercluster \(2, 1, 1\); got \(4, 1, 1\)"):
        _KERNELS.launch("fixed_ids", 4, 32, [out], arch="sm_90a", cluster=4)


@pytest.mark.parametrize("spin,schedule,seed", [(0, "lockstep", 0), (25, "random", 1), (25, "random", 7)])
def test_barrier_cluster_waits_for_every_cta_of_the_cluster(spin, schedule, seed):
    vals, out = np.zeros(8, np.uint32), np.zeros((8, 64), np.uint32)
    _, arrays, _ = run_both(_KERNELS, "handoff", 8, 64, [vals, out, spin], arch="sm_90a", cluster=4,
                            schedule=schedule, seed=seed)
    sums = [sum(10 * b + 1 for b in range(4 * c, 4 * c + 3)) for c in range(2)]     # 33, 153
    assert np.array_equal(arrays[1], np.repeat(np.array(sums, np.uint32), 4)[:, None] * np.ones(64, np.uint32))


@pytest.mark.parametrize("cluster,arch,cls,rule", [
    ((3, 1), "sm_90a", ptx.PtxLaunchError, "multiple of the cluster's"),
    ((4, 4), "sm_90a", ptx.PtxLaunchError, "at most 8 CTAs per cluster"),
    ((0,), "sm_90a", ptx.PtxLaunchError, "positive int"),
    ("2", "sm_90a", ptx.PtxLaunchError, "positive int"),
])
def test_launch_rules(cluster, arch, cls, rule):
    with pytest.raises(cls, match=rule):
        _KERNELS.launch("ids", (4, 4), 32, [np.zeros((16, 16), np.uint32)], arch=arch, cluster=cluster)


def test_clusters_need_sm_90_and_resident_blocks():
    sm80 = ptx.Module(_hand("ret;", target="sm_80"))
    with pytest.raises(ptx.PtxLaunchError, match="need sm_90 or later; got sm_80"):
        sm80.launch("k", 2, 32, [np.zeros(4, np.uint32)], arch="sm_80", cluster=2)
    with pytest.raises(ptx.PtxLimitError, match="keeps a cluster launch resident"):
        _KERNELS.launch("ids", 1024, 128, [np.zeros((1024, 16), np.uint32)], arch="sm_90a", cluster=2)


def _hand(body: str, target: str = "sm_90a", directives: str = "") -> str:
    return f""".version 8.0
.target {target}
.address_size 64
.visible .entry k(.param .u64 pout)
{directives}
{{
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 ld.param.u64 %rd1, [pout];
 mov.u32 %r1, %tid.x;
 {body}
 ret;
}}
"""


def test_directives_bound_the_launch():
    m = ptx.Module(_hand("ret;", directives=".explicitcluster\n.maxclusterrank 2"))
    with pytest.raises(ptx.PtxLaunchError, match="is .explicitcluster: launch it with cluster"):
        m.launch("k", 4, 32, [np.zeros(4, np.uint32)], arch="sm_90a")
    with pytest.raises(ptx.PtxLaunchError, match="allows .maxclusterrank 2 CTAs; got \\(4, 1, 1\\)"):
        m.launch("k", 4, 32, [np.zeros(4, np.uint32)], arch="sm_90a", cluster=4)
    run_both(m, "k", 4, 32, [np.zeros(4, np.uint32)], arch="sm_90a", cluster=2)


@pytest.mark.parametrize("body,cls,rule", [
    ("barrier.cluster.wait.aligned;", ptx.PtxBarrierError, "without a barrier.cluster.arrive before it"),
    ("barrier.cluster.arrive;\n barrier.cluster.arrive;", ptx.PtxBarrierError, "arrive again before"),
    # thread 0 of each CTA takes a second phase the other 62 threads of the cluster never arrive at
    ("barrier.cluster.arrive;\n barrier.cluster.wait;\n setp.ne.u32 %p1, %r1, 0;\n @%p1 bra S;\n"
     " barrier.cluster.arrive;\n barrier.cluster.wait;\nS:\n bar.sync 0;", ptx.PtxDeadlockError,
     "cluster 0: 62 thread(s) never arrive for barrier.cluster phase 2"),
])
def test_barrier_cluster_misuse_is_named(body, cls, rule):
    _, _, err = run_both(ptx.Module(_hand(body)), "k", 2, 32, [np.zeros(4, np.uint32)], expect_error=True,
                         arch="sm_90a", cluster=2)
    assert type(err) is cls and rule in str(err), str(err)


@pytest.mark.parametrize("body,rule", [
    ("mapa.shared::cta.u32 %r2, %r1, 1;", "refsim executes mapa{.shared::cluster}"),
    ("barrier.cluster.sync;", "refsim executes barrier.cluster.arrive"),
])
def test_unknown_cluster_forms_are_refused_at_load(body, rule):
    why = ptx.Module(_hand(body)).unsupported["k"]
    assert "PTX line 10" in why and rule in why, why
