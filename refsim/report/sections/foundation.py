"""Report section: uniform quantization, GPTQ/AWQ checkpoint formats and the GPTQ algorithm."""

from __future__ import annotations

import warnings

import numpy as np

from refsim.formats import awq, gptq, uniform
from refsim.quant.gptq import gptq_quantize, hessian, layer_output_error
from refsim.quant.rtn import rtn_quantize
from refsim.report import Check
from refsim.testing import assert_bitexact

TITLE = "Uniform, GPTQ and AWQ"
ORDER = 10


def _workload(seed: int = 0, k: int = 256, n: int = 128, t: int = 1024):
    """Deterministic correlated-activation layer: X (T, K) with a random mixing matrix, W (K, N)."""
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((k, k)) * 0.3 + np.eye(k)
    X = (rng.standard_normal((t, k)) @ mix).astype(np.float32)
    W = rng.standard_normal((k, n)).astype(np.float32)
    return X, W


def _roundtrip() -> str:
    rng = np.random.default_rng(1)
    for bits in gptq.BITS:
        q = rng.integers(0, 1 << bits, (128, 64), dtype=np.uint8)
        assert_bitexact(gptq.unpack_qweight(gptq.pack_qweight(q, bits), bits, 128), q, name=f"gptq {bits}-bit qweight")
        z = rng.integers(1, 1 << bits, (4, 64)).astype(np.int32)
        assert_bitexact(gptq.unpack_qzeros(gptq.pack_qzeros(z, bits), bits, 64), z, name=f"gptq {bits}-bit qzeros")
    q = rng.integers(0, 16, (128, 64), dtype=np.uint8)
    assert_bitexact(awq.unpack_columns(awq.pack_columns(q), 64), q, name="awq columns")
    return "qweight/qzeros 2/3/4/8-bit and AWQ 4-bit: unpack(pack(q)) == q on 128x64"


def _conformance() -> str:
    q = np.zeros((32, 1), np.uint8)
    q[:8, 0] = np.arange(1, 9)
    assert_bitexact(gptq.pack_qweight(q, 4).view(np.uint32)[0, :1], np.array([0x87654321], np.uint32),
                    name="4-bit stream word")
    z = np.full((1, 32), 8)
    z[0, 3] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gptq.ZeroPointOverflowWarning)
        qz = gptq.pack_qzeros(z, 4).view(np.uint32)[0, :1]
    assert_bitexact(qz, np.array([0xFFFFF777], np.uint32), name="v1 zero-0 overflow word (AutoGPTQ)")
    assert_bitexact(awq.pack_columns(np.arange(8, dtype=np.uint8)[None]).view(np.uint32)[0, :1],
                    np.array([0x75316420], np.uint32), name="AWQ interleave word")
    return "GPTQ 0x87654321, v1 zero-0 overflow 0xfffff777, AWQ 0x75316420"


def _rtn_error() -> str:
    _, W = _workload()
    parts = []
    for bits in (2, 3, 4, 8):
        uq = uniform.quantize(W, bits, scheme="gptq_asym", granularity="group", group_size=128)
        err = np.abs(uq.dequantize() - W)
        half = uniform.expand_groups(uq.scale, 128, W.shape[0]) / 2
        if np.any(err > half * (1 + 1e-6)):
            raise AssertionError(f"{bits}-bit RTN error exceeds half a step")
        rel = float(np.linalg.norm(uq.dequantize() - W) / np.linalg.norm(W))
        parts.append(f"{bits}b {rel:.4f}")
    return "relative Frobenius error of RTN g128 (each element within half a step): " + ", ".join(parts)


def _gptq_vs_rtn() -> str:
    X, W = _workload()
    H = hessian(X)
    parts = []
    for bits in (3, 4):
        g = gptq_quantize(W, H, bits, group_size=128, act_order=True)
        r = rtn_quantize(W, bits, group_size=128, clip_grid=None)
        eg, er = layer_output_error(X, W, g.W_hat), layer_output_error(X, W, r.dequantize())
        if not eg < er:
            raise AssertionError(f"{bits}-bit GPTQ output error {eg:.4f} not below RTN {er:.4f}")
        parts.append(f"{bits}b GPTQ {eg:.4f} vs RTN {er:.4f}")
    return "layer-output error, 256x128 layer, correlated inputs: " + "; ".join(parts)


def checks() -> list[Check]:
    return [
        Check("pack/unpack round trips", _roundtrip),
        Check("conformance words (AutoGPTQ, AutoAWQ)", _conformance),
        Check("uniform RTN error on the built-in workload", _rtn_error),
        Check("GPTQ below RTN on correlated inputs", _gptq_vs_rtn),
    ]
