"""Checkpoint and format containers refuse a corrupt field when they are built, with
the named error of the rule; consumers then trust them. One case per rule, each a hand-made
corruption of a valid container."""

import dataclasses

import numpy as np
import pytest

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import atom, awq, gptq
from refsim.formats import mixed_2_4_16 as m24
from refsim.quant import mixed_2_4_16 as q24

RNG = np.random.default_rng(11)


def _gptq():
    q = RNG.integers(0, 16, (64, 32), dtype=np.uint8)
    s = RNG.random((2, 32)).astype(np.float32) + 0.1
    z = RNG.integers(1, 16, (2, 32), dtype=np.uint8)
    return gptq.pack(q, s, z, 4, group_size=32)


def _awq():
    q = RNG.integers(0, 16, (64, 16), dtype=np.uint8)
    return awq.pack(q, RNG.random((2, 16)).astype(np.float32) + 0.1, RNG.integers(0, 16, (2, 16), dtype=np.uint8), 32)


def _m24():
    k, n = 64, 32
    W = (RNG.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = RNG.standard_normal((2 * k, k))
    return q24.quantize(W, (X.T @ X) / k, alpha=0.25, outlier_ratio=0.005)


def _atom():
    w = atom.quantize_weights(RNG.standard_normal((256 + 128, 8)).astype(np.float16), "kernel")
    a = atom.quantize_activations(RNG.standard_normal((3, 256 + 128)).astype(np.float16), "kernel")
    return a, w


G, A, M = _gptq(), _awq(), _m24()
P = m24.pack(M)
ACT, W = _atom()
KV = atom.quantize_kv(RNG.standard_normal((2, 4, 128)).astype(np.float32))


def _nan(x):
    y = x.copy()
    y.flat[0] = np.nan
    return y


CASES = [
    # GPTQCheckpoint
    (G, {"qweight": G.qweight.astype(np.float32)}, DtypeError, "qweight: dtype"),
    (G, {"qweight": G.qweight[:7]}, ShapeError, "qweight: rows must be K\\*bits/32"),
    (G, {"scales": G.scales[:, :16]}, ShapeError, "scales: shape must be \\(G >= 1, N=32\\)"),
    (G, {"scales": _nan(G.scales)}, NonFiniteError, "scales"),
    (G, {"qzeros": G.qzeros[:1]}, ShapeError, "qzeros: shape must be \\(2, 4\\)"),
    (G, {"g_idx": G.g_idx + 1}, FormatRuleError, "g_idx: entries must lie in \\[0, 1\\]"),
    (G, {"g_idx": G.g_idx[:63]}, ShapeError, "g_idx"),
    (G, {"bits": 5}, FormatRuleError, "bits"),
    (G, {"bits": 3}, ShapeError, "qweight: rows"),               # 8 rows cannot hold K*3/32 words
    (G, {"checkpoint_format": "gptq_v3"}, FormatRuleError, "checkpoint_format"),
    # AWQCheckpoint
    (A, {"group_size": 48}, ShapeError, "group_size: K=64 rows of qweight must be G=2 groups"),
    (A, {"group_size": True}, FormatRuleError, "group_size"),
    (A, {"qweight": A.qweight[:, :1]}, ShapeError, "qweight: shape must be \\(any, 2\\)"),
    (A, {"scales": _nan(A.scales)}, NonFiniteError, "scales"),
    (A, {"qzeros": A.qzeros.astype(np.int64)}, DtypeError, "qzeros: dtype"),
    # Packed2416
    (P, {"group_bits": np.full(P.group_bits.shape, 3, np.uint8)}, FormatRuleError, "group_bits: one entry per 16-row group, each 2 or 4"),
    (P, {"w_side": P.w_side[:, :0]}, ShapeError, "w_side") if P.w_side.shape[1] else
    (P, {"w_main": P.w_main[:, :0]}, ShapeError, "w_main"),
    (P, {"row_ptr": P.row_ptr[::-1].copy()}, FormatRuleError, "row_ptr: must start at 0"),
    (P, {"s2": P.s2.astype(np.float32)}, DtypeError, "s2: dtype"),
    # Mixed2416
    (M, {"four": M.four[:-1]}, ShapeError, "four"),
    (M, {"q": M.q[:40]}, ShapeError, "K: must be a positive multiple of the group size 16"),
    (M, {"col": M.col.astype(np.int32)}, DtypeError, "col: dtype"),
    # AtomActivations / AtomWeights
    (ACT, {"q4": np.full_like(ACT.q4, 9)}, FormatRuleError, "q4: INT4 codes must lie in \\[-8, 7\\]"),
    (ACT, {"scale8": ACT.scale8.astype(np.float32)}, FormatRuleError, "scale8: must have the dtype of scale4"),
    (ACT, {"scale4": np.concatenate([ACT.scale4, ACT.scale4[:, :1]], axis=1)}, ShapeError, "scale4: must have one entry per group"),
    (ACT, {"q8": ACT.q8[:2]}, ShapeError, "must agree on the M axis"),
    (W, {"q4": W.q4[:, :7], "scale4": W.scale4[:, :7], "q8": W.q8[:, :7], "scale8": W.scale8[:7]},
     ShapeError, "N: must be even"),
    (W, {"scale4": _nan(W.scale4)}, NonFiniteError, "scale4"),
    (W, {"q8": W.q8.astype(np.int16)}, DtypeError, "q8: dtype"),
    # AtomKV
    (KV, {"zero": np.full_like(KV.zero, 16)}, FormatRuleError, "zero"),
    (KV, {"scale": KV.scale[:, :3]}, ShapeError, "scale"),
    (KV, {"q": KV.q.astype(np.int8)}, DtypeError, "q: dtype"),
]


@pytest.mark.parametrize("valid,change,error,message", CASES,
                         ids=[f"{type(c[0]).__name__}-{'+'.join(c[1])}-{i}" for i, c in enumerate(CASES)])
def test_a_corrupt_field_is_refused_when_the_container_is_built(valid, change, error, message):
    with pytest.raises(error, match=message):
        dataclasses.replace(valid, **change)


@pytest.mark.parametrize("valid", [G, A, P, M, ACT, W, KV], ids=lambda c: type(c).__name__)
def test_the_valid_containers_rebuild_unchanged(valid):
    again = dataclasses.replace(valid)
    for f in dataclasses.fields(valid):
        a, b = getattr(valid, f.name), getattr(again, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
        else:
            assert a == b


def test_checks_do_not_copy_or_modify_the_fields():
    qweight = G.qweight
    again = dataclasses.replace(G, qweight=qweight)
    assert again.qweight is qweight
