"""refsim.cuda.official_anyprec: the official ``matmul_kbit_32`` instantiations run through refsim.ptx with
main.cu's dispatch, against refsim's emulator (both paths), refsim's own anyprec.cu and a derived bound
of the exact product, over cases that take every branch of the plan (anyprec_plan.BRANCHES).

The campaign is differential: the official kernel is the judge of the emulator, and the bound
(refsim.emulator.anyprec_kernel.error_bound) the judge of both, so a bug they share is caught too.
K-split launches add their slices with fp16 atomicAdd in an order the hardware does not fix: the
official kernel's output must lie in the emulator's admissible set of every slice order."""

from __future__ import annotations

import gzip
import hashlib

import numpy as np
import pytest

from refsim.cuda import anyprec as refsim_cuda
from refsim.cuda import launch, official
from refsim.cuda import official_anyprec as oa
from refsim.emulator import anyprec_kernel as ek
from refsim.errors import FormatRuleError
from refsim.formats import anyprec_plan as ak
from refsim.formats import bitplane as bp
from refsim.testing import assert_bitexact

# the recorded H100 cases' kernel names (refsim/cuda/official/cases.json), written out
M1_B3 = "_Z14matmul_kbit_32ILi1ELi3ELb0EEvPK6__halfPKjjjjS2_PS0_"
M4_B4 = "_Z14matmul_kbit_32ILi4ELi4ELb0EEvPK6__halfPKjjjjS2_PS0_"


def _problem(m, n, k, bits, kind, seed):
    """Inputs of one case: 'normal' (signed, cancelling), 'positive' (S ~ P: the bound is tight enough
    to catch a dropped chunk), 'large' (values near the fp16 range: overflowing partial sums)."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    if kind == "normal":
        lut = (rng.standard_normal((n, 2**bits)) * 0.05).astype(np.float16)
        x = rng.standard_normal((m, k)).astype(np.float16)
    elif kind == "positive":
        lut = (rng.random((n, 2**bits)) * 0.02).astype(np.float16)
        x = (rng.random((m, k)) * 0.5).astype(np.float16)
    else:
        lut = (rng.standard_normal((n, 2**bits)) * 64).astype(np.float16)
        x = (rng.standard_normal((m, k)) * 512).astype(np.float16)
    return x, bp.pack(codes, bits), lut


def _compare(m, n, k, bits, kind, seed):
    """Official kernel == emulator (C and NumPy) == anyprec.cu, bit for bit (K-split: the official
    output in the emulator's admissible set), and within the derived bound of the exact product."""
    x, q, lut = _problem(m, n, k, bits, kind, seed)
    official_out = oa.anyprec_gemv(x, q, lut, bits)
    ksplit = ak.plan(m, n, k, bits).ksplit > 1
    order = "ascending" if ksplit else None
    emu = ek.anyprec_gemv(x, q, lut, bits, order, native=True)
    assert_bitexact(ek.anyprec_gemv(x, q, lut, bits, order, native=False), emu, name="numpy path")
    assert_bitexact(refsim_cuda.anyprec_gemv(x, q, lut, bits, order), emu, name="refsim anyprec.cu")
    if ksplit:
        assert_bitexact(official_out, ek.anyprec_gemv_admissible(x, q, lut, bits), name="official")
    else:
        assert_bitexact(official_out, emu, name="official")
    S, B = ek.error_bound(x, q, lut, bits)
    y = official_out.astype(np.float64)
    finite = np.isfinite(y)
    assert (np.abs(y[finite] - S[finite]) <= B[finite]).all()
    assert (~finite <= (np.abs(S) + B >= 65520)).all()        # +-inf / NaN only where a sum can overflow
    if kind == "large":
        assert np.isnan(y).any()                                # premise: the canonical NaN is compared
    return ak.plan_branches(m, n, k, bits)


# (M, N, K, bits, kind): each branch of the plan, the long-K shapes a user meets (Llama-2's 4096,
# 11008, 13824), tail chunks, K-split with a partial slice, and an overflowing case
CASES = [
    (1, 8, 1024, 3, "normal"),        # one chunk, pair table
    (1, 8, 96, 5, "normal"),          # one partial chunk, scalar table
    (1, 8, 8192, 3, "positive"),      # long K, no K-split (the case the emulator once dropped)
    (1, 4, 11008, 5, "normal"),       # long K with a tail chunk
    (2, 16, 5120, 4, "positive"),     # multi_row, pair table (b = 4, M >= 2)
    (8, 16, 4128, 8, "normal"),       # eight rows, tail chunk
    (4, 16, 13824, 6, "positive"),
    (1, 4, 8192, 8, "normal"),        # K-split: 2 slices
    (1, 4, 12320, 7, "positive"),     # K-split: 4 slices, the last of one chunk (partial slice)
    (3, 16, 2048, 3, "large"),        # partial sums overflow: +-inf and the canonical NaN
]


@pytest.mark.parametrize("m,n,k,bits,kind", CASES)
def test_official_kernel_equals_the_emulator_and_anyprec_cu_within_the_bound(m, n, k, bits, kind):
    _compare(m, n, k, bits, kind, seed=m * 131 + k + bits)


def test_the_cases_take_every_branch_of_the_plan():
    taken = set().union(*(ak.plan_branches(m, n, k, b) for m, n, k, b, _ in CASES))
    assert taken == set(ak.BRANCHES), f"branches no case takes: {sorted(set(ak.BRANCHES) - taken)}"


def test_plan_branches_of_hand_picked_shapes():
    assert ak.plan_branches(1, 4, 1024, 3) == {"m1", "pair_table", "whole_chunks", "one_chunk"}
    assert ak.plan_branches(2, 16, 4128, 4) == {"multi_row", "pair_table", "tail_chunk", "long_k"}
    assert ak.plan_branches(1, 4, 4096, 8) == {"m1", "scalar_table", "whole_chunks"}      # exactly 4 chunks
    assert ak.plan_branches(1, 4, 4128, 7) == {"m1", "scalar_table", "tail_chunk", "ksplit", "ksplit_partial_slice"}
    assert ak.plan_branches(1, 4, 8192, 6) == {"m1", "scalar_table", "whole_chunks", "long_k"}   # b < 7: no split


def test_the_ptx_holds_the_fifty_instantiations_main_cu_dispatches():
    names = set(launch.entries(oa.ptx_text()))
    assert len(names) == 50
    assert {M1_B3, M4_B4} <= names
    assert oa.entry_name(1, 3, False) == M1_B3 and oa.entry_name(4, 4, False) == M4_B4
    assert names == {oa.entry_name(m, b, False) for m in range(1, 9) for b in range(3, 9)} | \
        {oa.entry_name(1, b, True) for b in (7, 8)}
    text = gzip.decompress((official.DATA_DIR / oa.PTX_FILE).read_bytes())
    assert hashlib.sha256(text).hexdigest() == "30afeac8a7dd3f0150de0a46ab14f656ae88b8711a76627bd9505f93719dea45"


def test_entry_name_refuses_shapes_main_cu_never_instantiates():
    with pytest.raises(FormatRuleError, match="1..8"):
        oa.entry_name(9, 4, False)
    with pytest.raises(FormatRuleError, match="K-split only for 1"):
        oa.entry_name(2, 8, True)


@pytest.mark.parametrize("name", ["off_anyprec_m1k1024n64_b3", "off_anyprec_m4k1024n64_b4"])
def test_the_recorded_h100_launches_give_the_h100_bytes_through_this_launcher(name):
    case = official.load(name)
    dt = {b["id"]: (np.dtype(b["dtype"]), tuple(b["shape"])) for b in case.bases}
    x, q, lut = (case.init[i].view(dt[i][0]).reshape(dt[i][1]) for i in (0, 1, 2))
    bits = lut.shape[1].bit_length() - 1
    out = oa.anyprec_gemv(x, q.view(np.int32), lut, bits)
    want = official.h100(name)[3].view(np.float16).reshape(dt[3][1])
    assert_bitexact(out, want, name)


def test_inputs_are_checked_by_the_emulators_rule_and_left_alone():
    x, q, lut = _problem(1, 8, 64, 3, "normal", 0)
    before = [a.copy() for a in (x, q, lut)]
    oa.anyprec_gemv(x, q, lut, 3)
    for a, b in zip((x, q, lut), before):
        assert_bitexact(a, b)
    with pytest.raises(FormatRuleError, match="stored planes"):
        oa.anyprec_gemv(x, q, lut, 4)


@pytest.mark.slow
@pytest.mark.parametrize("m", range(1, 9))
def test_every_m_and_bit_width_at_the_long_k_of_llama_layers(m):
    """Bits 3..8 at K = 4096, 4128, 8192, 11008, 12320 and 28672 (Llama-2 layer widths, tail chunks and
    K-split partial slices) for one M (one test per M: each parses only its own six entries). Each
    (M, bits) takes one K, rotating with M + bits, so every (bits, K) pair runs at one or two M and
    every M meets every K (through six different bit widths): 48 launches instead of 288 (CI time)."""
    ks = (4096, 4128, 8192, 11008, 12320, 28672)
    for bits in range(3, 9):
        k = ks[(m + bits) % len(ks)]
        _compare(m, 4 if m == 1 else 16, k, bits, "positive" if (m + bits) % 2 else "normal", seed=k + 10 * m + bits)
