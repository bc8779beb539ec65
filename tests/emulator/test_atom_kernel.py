"""Atom group GEMM emulation: equals the format module's independent value-level oracle when fused,
and the fused/unfused flag changes bits where the FFMA rounding matters."""

from __future__ import annotations

import numpy as np

from refsim.emulator import atom_kernel as ek
from refsim.formats import atom
from refsim.testing import assert_bitexact


def _problem(seed, m=4, k=512, n=64, keeper=128):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-2, 3, (m, k))).astype(np.float16)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float16)
    a = atom.quantize_activations(x, "kernel", keeper=keeper)
    wq = atom.quantize_weights(w, "kernel", keeper=keeper)
    return a, wq


def test_fused_emulation_equals_the_format_oracle():
    for seed in range(3):
        a, w = _problem(seed)
        assert_bitexact(ek.atom_group_gemm(a, w, fused=True), atom.atom_gemm(a, w), f"seed {seed}")
    a, w = _problem(7, m=2, k=384, n=8)
    assert_bitexact(ek.atom_group_gemm(a, w), atom.atom_gemm_reference(a, w), "plain loop")


def test_without_keeper_channels():
    a, w = _problem(3, keeper=0)
    assert_bitexact(ek.atom_group_gemm(a, w), atom.atom_gemm(a, w))


def test_contraction_flag_matters_somewhere():
    diffs = 0
    for seed in range(4):
        a, w = _problem(10 + seed, m=8, k=1024, n=128)
        fused = ek.atom_group_gemm(a, w, fused=True)
        unfused = ek.atom_group_gemm(a, w, fused=False)
        diffs += int((fused.view(np.uint16) != unfused.view(np.uint16)).sum())
    assert diffs > 0
