"""refsim.quant.awq against values AutoAWQ's searches computed (a torch re-run of its functions on the bundled
decoder's layer 0 in float16; tests/quant/data/make_awq_reference.py), and its quantizer against a per-scalar
restatement of ``pseudo_quantize_tensor``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from refsim.data.models import pydoc_llama_path
from refsim.errors import FormatRuleError, ShapeError
from refsim.io.model_folder import load_model
from refsim.quant import awq

REF = Path(__file__).parent / "data" / "awq_pydoc_llama_layer0.safetensors"
P = "model.layers.0"
GROUPS = {  # AutoAWQ's get_layers_for_scaling for Llama: (linears, module2inspect)
    "attn": ([f"{P}.self_attn.q_proj", f"{P}.self_attn.k_proj", f"{P}.self_attn.v_proj"], "attention"),
    "o": ([f"{P}.self_attn.o_proj"], None),
    "mlp": ([f"{P}.mlp.gate_proj", f"{P}.mlp.up_proj"], "mlp"),
    "down": ([f"{P}.mlp.down_proj"], None),
}


@pytest.fixture(scope="module")
def ref():
    return load_file(str(REF))


@pytest.fixture(scope="module")
def model():
    lm = load_model(pydoc_llama_path())
    W16 = {n: np.asarray(v, np.float16).astype(np.float32) for n, v in lm.weights.items() if v.dtype.kind == "f"}
    return lm, W16


@pytest.fixture(scope="module")
def searches(ref, model):
    lm, W16 = model
    out = {}
    for g, (names, what) in GROUPS.items():
        X = ref[f"{g}.input"]                                              # float16 (512, K)
        X3 = X.astype(np.float32).reshape(4, 128, -1)

        def forward(trial, names=names, what=what, X3=X3):
            Wt = {**W16, **{n + ".weight": w.astype(np.float32) for n, w in trial.items()}}
            return lm.arch.inspect(0, what, X3, Wt, names[0])

        out[g] = awq.search_scale(X, {n: W16[n + ".weight"] for n in names}, forward)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_scale_search_picks_autoawqs_ratio_and_scales(ref, searches, group):
    res = searches[group]
    assert np.float32(res.ratio) == ref[f"{group}.ratio"][0]
    np.testing.assert_array_equal(res.scales.view(np.uint16), ref[f"{group}.scales"].view(np.uint16))
    # the losses of every grid point agree to float16 rounding of the module outputs (float32 BLAS sums
    # instead of PyTorch's fp16 kernels): a few percent at most, far below the spread of the grid
    np.testing.assert_allclose(res.losses, ref[f"{group}.losses"], rtol=0.05)


def test_clip_search_picks_autoawqs_max_values(ref, model):
    lm, W16 = model
    W = {n + ".weight": W16[n + ".weight"].copy() for names, _ in GROUPS.values() for n in names}
    prev_rows = {"o": f"{P}.self_attn.v_proj", "down": f"{P}.mlp.up_proj"}
    for g, (names, _) in GROUPS.items():                   # AutoAWQ's apply_scale, in its order, in fp16
        s = ref[f"{g}.scales"].astype(np.float32)
        if g in prev_rows:
            W[prev_rows[g] + ".weight"] = (W[prev_rows[g] + ".weight"] / s[:, None]).astype(np.float16)
        for n in names:
            W[n + ".weight"] = (W[n + ".weight"].astype(np.float32) * s).astype(np.float16)
    agree = []
    for g, (names, _) in GROUPS.items():
        X = (ref[f"{g}.input"].astype(np.float32) / ref[f"{g}.scales"].astype(np.float32)).astype(np.float16)
        for n in names:
            local = n[len(P) + 1:]
            if any(a in n for a in awq.AVOID_CLIP):
                assert f"{local}.clip_max" not in ref
                continue
            got = awq.search_clip(W[n + ".weight"], X)
            want = ref[f"{local}.clip_max"][:, :, 0]             # AutoAWQ keeps (N, G, 1)
            assert got.shape == want.shape
            agree.append(float(np.mean(got.view(np.uint16) == want.view(np.uint16))))
    assert len(agree) == 5                                 # v, o, gate, up, down (q and k are never clipped)
    assert min(agree) >= 0.99, agree                       # 99.8 %: ties within fp16 rounding may pick a neighbour


def test_pseudo_quantize_matches_autoawq_per_scalar():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 256)) * 0.05).astype(np.float16)
    w[0, :128] = np.abs(w[0, :128])                         # an all-positive group: zero point clamps to 0
    fq, s, z = awq.pseudo_quantize(w, 4, 128)
    h = np.float16
    for r in range(4):
        for g in range(2):
            col = w[r, 128 * g:128 * (g + 1)]
            mx, mn = col.max(), col.min()
            sc = h(max(h(mx - mn), h(1e-5)) / h(15))
            zp = min(max(-np.rint(float(h(mn / sc))), 0), 15)
            assert s[r, g] == sc and z[r, g] == zp
            for k, v in enumerate(col):
                q = min(max(np.rint(float(h(v / sc))) + zp, 0), 15)
                assert fq[r, 128 * g + k] == h(h(q - zp) * sc)


def test_bad_arguments_are_named():
    with pytest.raises(ShapeError, match="multiple of group_size"):
        awq.pseudo_quantize(np.zeros((2, 100), np.float16), 4, 128)
    with pytest.raises(FormatRuleError, match="at least one linear"):
        awq.search_scale(np.zeros((4, 128), np.float32), {}, lambda t: np.zeros(1))
    with pytest.raises(ShapeError, match=r"must be \(N, K=128\)"):
        awq.search_scale(np.zeros((4, 128), np.float32), {"a": np.zeros((8, 64))}, lambda t: np.zeros(1))


def test_duo_scaling_must_be_a_bool():
    with pytest.raises(FormatRuleError, match=r"duo_scaling: must be True or False; got array"):
        awq.search_scale(np.zeros((4, 128), np.float32), {"a": np.zeros((8, 128), np.float16)},
                         lambda t: np.zeros(1), duo_scaling=np.array([True, False]))
