"""Write fp8_mx_goldens.npz: FP8/FP6/FP4 casts, FP8 scaling schemes and MX/NVFP4 quantization as the
defining libraries compute them, for tests/formats/test_minifloat.py, test_fp8.py and test_mx.py.

Run it in an environment with the libraries (never in refsim's own; the tests only read the .npz):

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 torchao==0.18.0 compressed-tensors==0.19.0 ml_dtypes numpy
    VENV/bin/python tests/formats/data/make_fp8_mx_goldens.py

What comes from where (each key of the .npz, with the versions in its ``versions`` entry):
    cast_*, decode_*   ml_dtypes ``astype`` (the element casts), torch ``.to`` for the torch_* keys
    fp8_*              compressed-tensors 0.19.0's own ``calculate_qparams`` / ``quantize`` /
                       ``dequantize`` (tensor, channel, token, block128) and DeepGEMM's
                       ``per_block_cast_to_fp8`` (deepgemm_block128[_ue8m0]), transcribed line for line
                       in torch below (DeepGEMM needs CUDA to install; lines of 38939a4c,
                       deep_gemm/utils/math.py)
    mx_*, nvfp4_*      torchao itself: ``to_mx`` / ``to_dtype`` and ``nvfp4_quantize`` /
                       ``NVFP4Tensor.dequantize`` (refsim never imports torch or torchao)
It writes nothing but the .npz beside itself, refusing to write one over 1 MB.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes as md
import numpy as np
import torch
import torchao
import compressed_tensors
from compressed_tensors.quantization import QuantizationArgs
from compressed_tensors.quantization.lifecycle import forward as ct_forward
from compressed_tensors.quantization.utils import calculate_qparams
from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, nvfp4_quantize

OUT = Path(__file__).with_name("fp8_mx_goldens.npz")
ML = {"e4m3": md.float8_e4m3fn, "e5m2": md.float8_e5m2, "e4m3fnuz": md.float8_e4m3fnuz,
      "e5m2fnuz": md.float8_e5m2fnuz, "e3m2": md.float6_e3m2fn, "e2m3": md.float6_e2m3fn, "e2m1": md.float4_e2m1fn}
TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def cast_inputs() -> np.ndarray:
    """float32: random normal at several scales, every format's values, the midpoints between
    neighbours (ties) and the floats either side of them, and the specials."""
    rng = np.random.default_rng(20261129)
    parts = [rng.standard_normal(256).astype(np.float32) * np.float32(s)
             for s in (1e-6, 1e-3, 0.05, 1, 30, 500, 3e4, 1e6)]
    for t in ML.values():
        v = np.arange(1 << md.finfo(t).bits, dtype=np.uint8).view(t).astype(np.float64)   # every code's value
        v = np.unique(v[np.isfinite(v) & (v >= 0)])
        mids = ((v[1:] + v[:-1]) / 2).astype(np.float32)
        top = np.float32(v[-1] + (v[-1] - v[-2]) / 2)                        # the overflow tie
        edges = np.concatenate([v.astype(np.float32), mids, [top]])
        parts += [edges, np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(0))]
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.2e-38, 3.4e38, -3.4e38],
                        np.float32)
    x = np.concatenate(parts + [specials]).astype(np.float32)
    return np.concatenate([x, -x])


def ct_quantize(x: torch.Tensor, strategy: str):
    """compressed-tensors' own functions, FP8 (FLOAT, 8 bits, symmetric): min/max per group as the
    memoryless min-max observer reduces them, ``calculate_qparams``, ``quantize`` (and ``dequantize``)."""
    args = QuantizationArgs(num_bits=8, type="float", symmetric=True, strategy=strategy,
                            **({"block_structure": [128, 128]} if strategy == "block" else {}),
                            **({"dynamic": True} if strategy == "token" else {}))   # tokens are dynamic only
    if strategy == "tensor":
        min_vals, max_vals = torch.aminmax(x)
    elif strategy == "block":
        r, c = -(-x.shape[0] // 128), -(-x.shape[1] // 128)
        pad = torch.zeros(r * 128, c * 128)
        lo, hi = pad.clone(), pad.clone()
        lo[:x.shape[0], :x.shape[1]], hi[:x.shape[0], :x.shape[1]] = x, x   # zero padding: min <= 0 <= max anyway
        min_vals = lo.view(r, 128, c, 128).amin(dim=(1, 3))
        max_vals = hi.view(r, 128, c, 128).amax(dim=(1, 3))
    else:                                              # CHANNEL on the (N, K) weight / TOKEN on (M, K) rows
        min_vals, max_vals = torch.amin(x, dim=1, keepdim=True), torch.amax(x, dim=1, keepdim=True)
    scales, zero_points = calculate_qparams(min_vals, max_vals, args)
    codes = ct_forward.quantize(x, scales, zero_points, args, dtype=torch.float8_e4m3fn)
    deq = ct_forward.dequantize(codes, scales, zero_points, args, dtype=torch.float32)
    return codes.view(torch.uint8).numpy(), scales.reshape(-1, 1).numpy() if strategy != "block" else \
        scales.numpy(), deq.numpy()


def ceil_to_ue8m0(x: torch.Tensor):
    bits = x.abs().float().view(torch.int)
    exp = ((bits >> 23) & 0xFF) + (bits & 0x7FFFFF).bool().int()
    return (exp.clamp(1, 254) << 23).view(torch.float)


def per_block_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128):
    """DeepGEMM deep_gemm/utils/math.py (align = ceil to a multiple)."""
    m, n = x.shape
    align = lambda a, b: (a + b - 1) // b * b
    x_padded = torch.zeros((align(m, gran_k), align(n, gran_k)), dtype=x.dtype, device=x.device)
    x_padded[:m, :n] = x
    x_view = x_padded.view(-1, gran_k, x_padded.size(1) // gran_k, gran_k)
    x_amax = x_view.abs().float().amax(dim=(1, 3), keepdim=True).clamp(1e-4)
    sf = x_amax / 448.0
    sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
    x_scaled = (x_view * (1.0 / sf)).to(torch.float8_e4m3fn)
    return x_scaled.view_as(x_padded)[:m, :n].contiguous(), sf.view(x_view.size(0), x_view.size(2))


def mx_inputs(k: int) -> np.ndarray:
    """float32 (12, k): normal rows at several scales and rows of specials, blocks of 16 and 32 alike."""
    rng = np.random.default_rng(7)
    rows = [rng.standard_normal(k).astype(np.float32) * np.float32(s) for s in (1e-3, 0.3, 1, 7, 300, 1e5)]
    heavy = (rng.standard_normal(k) * np.exp(rng.standard_normal(k) * 3)).astype(np.float32)
    special = rng.standard_normal(k).astype(np.float32)
    special[0:16] = 0.0                                 # an all-zero block (both block sizes)
    special[16] = -0.0
    special[32:48] = np.float32(1e-40) * np.arange(16, dtype=np.float32)   # float32 subnormals only
    special[64] = np.nan                                # a NaN block
    special[97] = -np.inf                               # an Inf block
    special[130] = np.float32(3e38)                     # a huge block (scale near the top)
    ties = np.float32(4.0) * np.tile(np.array([1.25, 1.75, 2.5, 3.5, 5.0, 0.25, 0.75, 6.0], np.float32), k // 8)
    ties[1::2] *= -1                                    # e2m1 midpoints times a power of two
    tiny = np.full(k, np.float32(2.0 ** -130), np.float32)   # scales at the bottom of E8M0
    neg_nan = rng.standard_normal(k).astype(np.float32)
    neg_nan[5] = -np.nan
    return np.stack(rows + [heavy, special, ties, tiny, neg_nan, np.zeros(k, np.float32)])


MX_ELEM = {"mxfp4": torch.float4_e2m1fn_x2, "mxfp6_e2m3": DTYPE_FP6_E2M3, "mxfp6_e3m2": DTYPE_FP6_E3M2,
           "mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2}


def main() -> None:
    g: dict[str, np.ndarray] = {}
    x = cast_inputs()
    g["cast_x"] = x
    for name, t in ML.items():
        keep = ~np.isnan(x) if md.finfo(t).bits < 8 else np.ones(x.shape, bool)   # fp6/fp4 have no NaN
        g[f"cast_{name}"] = np.where(keep, x, 0).astype(t).view(np.uint8)
    for name, t in TORCH.items():
        xt = torch.from_numpy(x)
        g[f"torch_to_{name}"] = xt.to(t).view(torch.uint8).numpy()
        mx = torch.finfo(t).max
        g[f"torch_clamp_to_{name}"] = torch.clamp(xt, -mx, mx).to(t).view(torch.uint8).numpy()
    x64 = np.concatenate([np.array([1.0625 + 2**-40, 1.0625 - 2**-40, 464 + 2**-30, 61440 - 2**-30, 1e300, -1e300]),
                          np.random.default_rng(3).standard_normal(256) * 50])
    g["cast64_x"] = x64
    x16 = (np.random.default_rng(4).standard_normal(256) * 100).astype(np.float16)
    g["cast16_x"] = x16
    for name in ("e4m3", "e5m2"):
        g[f"cast64_{name}"] = x64.astype(ML[name]).view(np.uint8)
        g[f"cast16_{name}"] = x16.astype(ML[name]).view(np.uint8)
    for name, t in ML.items():
        bits = md.finfo(t).bits
        g[f"decode_{name}"] = np.arange(1 << bits, dtype=np.uint8).view(t).astype(np.float32)

    rng = np.random.default_rng(11)
    w = (rng.standard_normal((200, 136)) * np.exp(rng.standard_normal((200, 136)))).astype(np.float32)  # edge tiles both ways
    w[5, 7] = 0.0
    w[:, 3] = 0.0                                      # an all-zero column (scale at its floor)
    w[7, :6] = -0.0                                    # negative zeros (compressed-tensors writes +0)
    w[128:, 128:] *= np.float32(1e-7)                  # an edge tile with amax below DeepGEMM's 1e-4 floor
    g["fp8_x"] = w
    wt = torch.from_numpy(w)
    c, s, d = ct_quantize(wt, "tensor")
    g["fp8_tensor_codes"], g["fp8_tensor_scales"], g["fp8_tensor_deq16"] = c, s, d[:16]   # a slice keeps it small
    c, s, d = ct_quantize(wt.T.contiguous(), "channel")           # torch weight (N, K) = refsim's W.T
    g["fp8_channel_codes"], g["fp8_channel_scales"] = c.T, s.T
    c, s, d = ct_quantize(wt, "token")
    g["fp8_token_codes"], g["fp8_token_scales"] = c, s
    c, s, d = ct_quantize(wt.T.contiguous(), "block")
    g["fp8_block128_codes"], g["fp8_block128_scales"] = c.T, s.T
    for ue8m0 in (False, True):
        c, s = per_block_cast_to_fp8(wt, ue8m0)
        key = "deepgemm_block128_ue8m0" if ue8m0 else "deepgemm_block128"
        g[f"fp8_{key}_codes"], g[f"fp8_{key}_scales"] = c.view(torch.uint8).numpy(), s.numpy()

    xm = mx_inputs(256)
    g["mx_x"] = xm
    for kind, elem in MX_ELEM.items():
        scale, data = to_mx(torch.from_numpy(xm), elem, 32)
        g[f"mx_{kind}_scales"] = scale.view(torch.uint8).numpy()
        g[f"mx_{kind}_codes"] = data.view(torch.uint8).numpy()
        g[f"mx_{kind}_deq"] = to_dtype(data, scale, elem, 32, torch.float32).numpy()
    amax = float(np.nanmax(np.abs(xm[np.isfinite(xm)])))
    pts = torch.tensor(amax, dtype=torch.float32) / (448.0 * 6.0)
    g["nvfp4_per_tensor_scale"] = pts.numpy().reshape(1)
    for label, t in (("", None), ("_pts", pts)):
        scales, data = nvfp4_quantize(torch.from_numpy(xm), 16, per_tensor_scale=t)
        g[f"nvfp4{label}_scales"] = scales.view(torch.uint8).numpy()
        g[f"nvfp4{label}_codes"] = data.view(torch.uint8).numpy()
        nv = NVFP4Tensor.to_nvfp4(torch.from_numpy(xm), per_tensor_scale=t)
        assert np.array_equal(nv.qdata.view(torch.uint8).numpy(), g[f"nvfp4{label}_codes"])
        g[f"nvfp4{label}_deq"] = nv.dequantize(torch.float32).numpy()

    versions = {"torch": torch.__version__, "torchao": torchao.__version__, "ml_dtypes": md.__version__,
                "numpy": np.__version__, "compressed_tensors": compressed_tensors.__version__,
                "deepgemm_lines": "38939a4c494ce6e904b54da94a1183955a5e9497"}
    g["versions"] = np.array(json.dumps(versions, sort_keys=True))
    np.savez_compressed(OUT, **g)
    size = OUT.stat().st_size
    if size > 1 << 20:
        OUT.unlink()
        raise SystemExit(f"{OUT.name}: {size} bytes, over 1 MB; shrink the inputs")
    print(f"{OUT.name}: {len(g)} arrays, {size} bytes, {versions}")


if __name__ == "__main__":
    main()
