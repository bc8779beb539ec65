"""Properties of the PTX engine's scheduling: a race-free kernel writes the same bits under every
interleaving (``schedule="random"`` with any seed) as under ``lockstep``, and lockstep is
deterministic down to its statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

from refsim import ptx
from refsim.testing import assert_bitexact

KERNELS = Path(__file__).resolve().parent / "kernels"
_MODULES: dict[str, ptx.Module] = {}


def module(name: str) -> ptx.Module:
    if name not in _MODULES:
        _MODULES[name] = ptx.Module((KERNELS / f"{name}.ptx").read_text())
    return _MODULES[name]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 600), data_seed=st.integers(0, 2**16))
def test_race_free_kernels_do_not_depend_on_the_interleaving(seed, n, data_seed):
    x = np.random.default_rng(data_seed).integers(-(2**31), 2**31, n).astype(np.int32)
    nb = (n + 255) // 256
    outs = []
    for kw in ({"schedule": "lockstep"}, {"schedule": "random", "seed": seed}):
        out = np.zeros(nb, np.int32)
        module("reduce").launch("block_sum", nb, 256, [x, out, n], **kw)
        outs.append(out)
    assert_bitexact(outs[1], outs[0])


@settings(max_examples=5, deadline=None)
@given(nb=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_lockstep_is_deterministic_and_random_spin_locks_finish(nb, seed):
    x = np.arange(nb * 64, dtype=np.int32)
    stats = []
    for _ in range(2):
        out, lock = np.zeros(1, np.int32), np.zeros(1, np.int32)
        stats.append(module("flags").launch("chain", nb, 64, [x, out, lock, nb]))
    assert stats[0] == stats[1]
    out, lock = np.zeros(1, np.int32), np.zeros(1, np.int32)
    module("flags").launch("chain", nb, 64, [x, out, lock, nb], schedule="random", seed=seed)
    assert int(out[0]) == int(x.sum()) and int(lock[0]) == nb
