"""40 recorded launches replayed through refsim.ptx at sm_90 against the bytes an H100 wrote for them
(tests/ptx/data/h100_replay/README.md: the GPU, driver, CUDA, clocks, method, date). 35 are folders here;
the five official cases ``refsim validate`` replays are kept once, as package data in refsim/cuda/official
(refsim.cuda.official reads them; the package must not read tests/), and replayed from there by
tests/cuda/test_official.py.

    deterministic cases (36)   every byte of every buffer equal to the H100's (31 here, the 5 official)
    K-split cases (2)          the H100's output is in refsim's admissible set: the official kernel's
                               fp16 atomicAdd from four warps gives 24 orders (and the H100 took
                               another than refsim's ascending one); refsim's own K-split kernel adds
                               its slices without atomics, a set of one
    faulting (2)               the official Marlin<256,1,8,8,4,8> stopped on the H100 (illegal
                               instruction in ptxas's SASS): no GPU bytes; refsim.ptx runs them and
                               reproduces what it recorded
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from refsim import ptx
from refsim.cuda import official
from refsim.errors import FormatRuleError
from refsim.ptx.replay import _argument, load_case, replay, scalar_argument
from refsim.testing import assert_bitexact
from refsim.testing.admissible import ptx_admissible

DATA = Path(__file__).parent / "data" / "h100_replay"
CASES = sorted(p.name for p in DATA.iterdir() if p.is_dir())
FAULTING = ("off_marlin_m16n256k1024_g128_sms1", "off_marlin_m16n512k2048_g128_sms3")
KSPLIT = {"off_anyprec_m1k12320n16_b7": (24, "no"), "own_anyprec_m1n4k4128_b7_ksplit": (1, "yes")}
DETERMINISTIC = tuple(c for c in CASES if c not in FAULTING and c not in KSPLIT)


@lru_cache(maxsize=1)
def _gpu() -> dict:
    with np.load(DATA / "gpu_results.npz") as z:
        return {k: z[k] for k in z.files}


def _h100(case, base: int) -> np.ndarray:
    """The bytes the H100 left in a base (the initial bytes where it changed nothing)."""
    return _gpu().get(f"{case.name}/final_{base}", case.initial(base))


def test_the_cases_are_the_documented_forty_each_kept_once():
    assert len(CASES) == 35 and len(DETERMINISTIC) == 31 and len(official.cases()) == 5
    assert not set(CASES) & set(official.cases())
    with_gpu = {k.split("/")[0] for k in _gpu()}
    assert with_gpu == set(CASES) - set(FAULTING)      # the GPU wrote something in every case it ran


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_every_deterministic_case_is_bit_identical_to_the_h100(name):
    case = load_case(DATA / name)
    out = replay(case, arch="sm_90")
    for b in case.bases:
        assert_bitexact(out[b["id"]], _h100(case, b["id"]), f"{name} base {b['id']}")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KSPLIT))
def test_the_ksplit_cases_are_in_the_admissible_set(name):
    orders, own = KSPLIT[name]
    case = load_case(DATA / name)
    (ev,) = case.launches
    m = ptx.Module(case.ptx[ev["module"]])
    buffers = {b["id"]: case.initial(b["id"]) for b in case.bases}
    args = [_argument(a, buffers) for a in ev["args"]]
    written = {i for i, a in enumerate(ev["args"]) if a["kind"] == "ptr" and f"{name}/final_{a['base']}" in _gpu()}
    sets = ptx_admissible(m, ev["kernel"], tuple(ev["grid"]), tuple(ev["block"]), args, outputs=sorted(written),
                          arch="sm_90", shared_bytes=ev["shared_bytes"])
    for i, s in sets.items():
        hw = _h100(case, ev["args"][i]["base"])
        assert s.orders == orders                          # official: 4 slices meet at each output
        verdict = assert_bitexact(hw, s, "H100 output")
        assert verdict == (f"H100 output: in the admissible set of {orders} orders; equal to refsim's "
                           f"ascending order: {own}")


@pytest.mark.slow
@pytest.mark.parametrize("name", FAULTING)
def test_the_faulting_official_marlin_cases_are_the_documented_exception(name):
    case = load_case(DATA / name)
    kernels = {ev["kernel"] for ev in case.launches}
    assert kernels == {"_Z6MarlinILi256ELi1ELi8ELi8ELi4ELi8EEvPK4int4S2_PS0_S2_iiiPi"}   # Marlin<256,1,8,8,4,8>
    assert not any(k.startswith(name + "/") for k in _gpu())
    readme = (DATA / "README.md").read_text()
    assert name in readme and "illegal instruction" in readme and "+0x1170" in readme
    out = replay(case, arch="sm_90")                        # refsim.ptx runs what the H100 could not
    for b in case.bases:
        assert_bitexact(out[b["id"]], case.recorded(b["id"]), f"{name} base {b['id']}")


def test_case_files_name_only_what_is_in_the_folder():
    for name in CASES:
        meta = json.loads((DATA / name / "case.json").read_text())
        assert all((DATA / name / m["file"]).is_file() for m in meta["modules"].values()), name


def test_a_recorded_scalar_is_its_little_endian_bytes_as_the_parameter_type():
    one = scalar_argument("f16", bytes.fromhex("003c"))           # 0x3c00 = 1.0 in binary16
    assert one.dtype == np.float16 and one.view(np.uint16) == 0x3C00
    assert scalar_argument("s32", bytes.fromhex("feffffff")) == -2
    assert scalar_argument("u64", bytes.fromhex("0100000000000080")) == 2**63 + 1
    with pytest.raises(FormatRuleError, match="must be 4 bytes; got 2"):
        scalar_argument("u32", b"\x00\x01")
    with pytest.raises(FormatRuleError, match="ptype"):
        scalar_argument("f128", b"\x00" * 16)
