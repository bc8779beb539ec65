"""refsim.ptx.hopper.dsmem: distributed shared memory (mapa, ld/st/atom/red.shared::cluster and the generic
accesses cooperative_groups emits) through both executors (kernels of tests/ptx/kernels/hopper_dsmem.cu; the
expected values are the kernel's arithmetic written out per CTA)."""

from pathlib import Path

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx

pytestmark = needs_compiled

_KERNELS = ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_dsmem.ptx").read_text())


def _expected(nblocks: int, n: int):
    """(out (nblocks, 4, 64), words (nblocks, 8)) of ``exchange`` over clusters of ``n`` CTAs."""
    out, words = np.zeros((nblocks, 4, 64), np.uint32), np.zeros((nblocks, 8), np.uint32)
    t = np.arange(64)
    for b in range(nblocks):
        first, rank = b - b % n, b % n
        nxt, prv = first + (rank + 1) % n, first + (rank - 1) % n
        out[b, 0] = 1000 * nxt + t                       # the next CTA's buf (generic)
        out[b, 1] = 1000 * prv + t                       # the previous CTA's buf (.v2 load)
        out[b, 2] = 1000 * prv + (t + 1) % 64            # the previous CTA's buf (mapa .u64)
        out[b, 3] = 7 * prv + t                          # mail the previous CTA stored here
        words[b, 2] = 0xFFFFFFFF
        if rank == 0:
            words[b, 0] = n * (sum(range(1, 65)) + 64 * 1000)
            words[b, 1] = 64 * (first + n - 1) + 63
        if rank == n - 1:
            words[b, 2] = 64 * first + 5
        words[b, 3], words[b, 4] = 100 + (rank - 1) % n, 200 + (rank - 1) % n
        words[b, 5], words[b, 6], words[b, 7] = 0, 0, 200 + rank
    return out, words


@pytest.mark.parametrize("n,schedule,seed", [(2, "lockstep", 0), (4, "random", 3), (4, "lockstep", 0)])
def test_ctas_read_write_and_add_into_each_others_shared_memory(n, schedule, seed):
    out, words = np.zeros((8, 4, 64), np.uint32), np.zeros((8, 8), np.uint32)
    _, arrays, _ = run_both(_KERNELS, "exchange", 8, 64, [out, words, 1], arch="sm_90a", cluster=n,
                            schedule=schedule, seed=seed, race=True)
    want_out, want_words = _expected(8, n)
    assert np.array_equal(arrays[0], want_out)
    assert np.array_equal(arrays[1], want_words)


def test_a_cluster_of_one_maps_to_itself():
    out, words = np.zeros((2, 4, 64), np.uint32), np.zeros((2, 8), np.uint32)
    _, arrays, _ = run_both(_KERNELS, "exchange", 2, 64, [out, words, 1], arch="sm_90a")
    want_out, want_words = _expected(2, 1)
    assert np.array_equal(arrays[0], want_out) and np.array_equal(arrays[1], want_words)


def test_remote_access_without_barrier_cluster_is_a_race():
    out, words = np.zeros((4, 4, 64), np.uint32), np.zeros((4, 8), np.uint32)
    _, _, err = run_both(_KERNELS, "exchange", 4, 64, [out, words, 0], arch="sm_90a", cluster=2, race=True,
                         expect_error=True)
    assert type(err) is ptx.PtxRaceError and "since the last barrier" in str(err), str(err)


@pytest.mark.parametrize("rank,word,cls,rule", [
    (2, 0, ptx.PtxMemoryError, "mapa names CTA rank 2 of the cluster, which has 2 CTA(s) (ranks 0..1)"),
    (1, 64, ptx.PtxMemoryError, "out-of-bounds 4-byte .shared::cluster access at offset 0x100 of CTA rank 1's"),
])
def test_bad_ranks_and_offsets_are_named(rank, word, cls, rule):
    _, _, err = run_both(_KERNELS, "remote_word", 2, 32, [np.zeros(2, np.uint32), rank, word], arch="sm_90a",
                         cluster=2, expect_error=True)
    assert type(err) is cls and rule in str(err) and "kernel remote_word, PTX line" in str(err), str(err)


def test_remote_word_reads_the_named_cta():
    _, arrays, _ = run_both(_KERNELS, "remote_word", 4, 32, [np.zeros(4, np.uint32), 1, 9], arch="sm_90a", cluster=2)
    assert arrays[0].tolist() == [9, 9, 9, 9]
