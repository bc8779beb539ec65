"""refsim.cuda.official: the five official kernels' recorded H100 launches, kept as package data and
replayed through refsim.cuda's launch path (the other recorded cases are in tests/ptx/test_replay.py)."""

from __future__ import annotations

import pytest

from refsim.cuda import official
from refsim.errors import FormatRuleError
from refsim.testing import assert_bitexact

# the cases README.md in refsim/cuda/official/ documents: two Any-Precision GEMVs, one Atom GEMM and two
# Marlin host-loop calls (M=80 is one launch of 64 rows and one of 16)
NAMES = ("off_anyprec_m1k1024n64_b3", "off_anyprec_m4k1024n64_b4", "off_atom_m16n256k512",
         "off_marlin_m24n256k512_chan_sms2", "off_marlin_m80n256k256_g128_sms2")


def test_cases_lists_the_five_official_cases_sorted():
    assert official.cases() == NAMES


def test_a_loaded_case_is_read_only_and_has_its_launches():
    case = official.load("off_marlin_m80n256k256_g128_sms2")
    assert len(case.launches) == 2                         # Marlin's host loop: 64 rows, then 16
    assert all(not a.flags.writeable for a in case.init.values())
    assert all(case.init[b["id"]].nbytes == b["nbytes"] for b in case.bases)
    with pytest.raises(ValueError):
        case.init[0][0] = 1


@pytest.mark.parametrize("name, fp_mma", [
    ("off_anyprec_m1k1024n64_b3", False),     # a LUT GEMV: fp16 adds, no tensor core
    ("off_atom_m16n256k512", False),          # INT4 mma.sync: integer, exact on every arch
    ("off_marlin_m24n256k512_chan_sms2", True),   # fp16 mma.sync
])
def test_uses_float_mma_tells_the_arch_dependent_cases(name, fp_mma):
    assert official.uses_float_mma(name) is fp_mma


def test_h100_gives_the_initial_bytes_of_the_buffers_the_gpu_left_alone():
    case = official.load("off_anyprec_m1k1024n64_b3")
    got = official.h100(case.name)
    assert sorted(got) == sorted(b["id"] for b in case.bases)
    for i, init in case.init.items():
        if i not in case.h100_final:
            assert got[i] is init
    assert set(case.h100_final) == {3}                     # the output buffer only


def test_replay_matches_the_h100_and_leaves_the_recorded_inputs_alone():
    name = "off_anyprec_m1k1024n64_b3"
    before = {i: b.copy() for i, b in official.load(name).init.items()}
    out = official.replay(name, arch="sm_90")
    for i, want in official.h100(name).items():
        assert_bitexact(out[i], want, f"{name} base {i}")
    for i, b in official.load(name).init.items():
        assert_bitexact(b, before[i], f"recorded input {i}")


@pytest.mark.slow
@pytest.mark.parametrize("name", official.cases())
def test_every_official_case_is_bit_identical_to_the_h100(name):
    out = official.replay(name, arch="sm_90")
    for i, want in official.h100(name).items():
        assert_bitexact(out[i], want, f"{name} base {i}")


@pytest.mark.parametrize("call", [official.load, official.replay, official.h100, official.uses_float_mma])
def test_an_unknown_case_is_refused_with_the_names(call):
    with pytest.raises(FormatRuleError, match=r"name: must be one of \['off_anyprec_m1k1024n64_b3'.*got 'marlin'"):
        call("marlin")
