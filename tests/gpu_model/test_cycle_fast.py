"""cycle._run (event-skipping fast path) against cycle._run_reference (plain cycle-by-cycle loop):
the same float, bit for bit, on the kernel models' bodies and on random bodies."""

import numpy as np
import pytest

from refsim.gpu_model import cycle
from refsim.gpu_model.loop import Instr
from refsim.gpu_model.specs import get_gpu


def _same(body, warps, gpu, iterations, tensor_interval=0.0, dram_bpc=None):
    g = get_gpu(gpu)
    f = g.clock_hz("sustained")
    fast = cycle._run(body, warps, g, f, iterations, tensor_interval, dram_bpc)
    ref = cycle._run_reference(body, warps, g, f, iterations, tensor_interval, dram_bpc)
    assert np.array_equal(np.float64(fast).view(np.uint64), np.float64(ref).view(np.uint64)), (fast, ref)
    return fast


@pytest.mark.parametrize("bits,m,warps", [(3, 1, 12), (4, 2, 3), (8, 8, 1)])
def test_anyprec_body(bits, m, warps):
    _same(cycle.anyprec_body(bits, m), warps, "rtx4070-laptop", 4)


@pytest.mark.parametrize("m_blocks,warps", [(1, 2), (4, 2), (2, 5)])
def test_marlin_body(m_blocks, warps):
    _same(cycle.marlin_body(m_blocks), warps, "rtx4090", 5, tensor_interval=7.5)


def _random_body(rng, n):
    pipes = ["int", "fp16", "fp32", "mio", "tensor", "dram"]
    body = []
    for j in range(n):
        pipe = pipes[rng.integers(len(pipes))]
        deps = tuple(sorted(set(rng.integers(0, j, rng.integers(0, 3)).tolist()))) if j else ()
        prev = tuple(sorted(set(rng.integers(0, n, rng.integers(0, 2)).tolist())))
        body.append(Instr(pipe, int(rng.integers(0, 40)), deps, prev,
                          dram_bytes=float(rng.integers(1, 512)) if pipe == "dram" else 0.0,
                          wavefronts=float(rng.integers(1, 5)) + 0.25 * rng.integers(0, 4)))
    return body


@pytest.mark.parametrize("seed", range(12))
def test_random_bodies(seed):
    rng = np.random.default_rng(seed)
    body = _random_body(rng, int(rng.integers(1, 25)))
    _same(body, int(rng.integers(1, 9)), ["a10", "rtx4090", "orin-agx-64gb"][seed % 3], int(rng.integers(1, 6)),
          tensor_interval=float(rng.integers(0, 9)) + 0.5, dram_bpc=float(rng.integers(1, 64)) / 3)


def test_reference_differs_from_a_wrong_machine():
    # the comparison can fail: a body with one more dependent instruction takes longer
    body = cycle.anyprec_body(3, 1)
    longer = body + [Instr("int", 4, (len(body) - 1,))]
    assert _same(longer, 4, "a10", 3) != _same(body, 4, "a10", 3)
