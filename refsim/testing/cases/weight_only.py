"""What the weight-only GEMM cases of the block-scaled formats share (FP8, MXFP4, NVFP4, NF4, GGUF;
the formats themselves are in :mod:`~refsim.testing.cases.fp8_mx`, :mod:`~refsim.testing.cases.bnb4`
and :mod:`~refsim.testing.cases.gguf`)::

    kernel(x f16 (M,K), <the weight's packed codes and scales in its library's layout>) -> y f16 (M,N)
    y = x @ W_hat     W_hat (K, N): the weights as the format's library dequantizes them (float32)

The activations are fp16 and so is the output; the weight is dequantized to fp16 (the compute
dtype). Bit-exact mode compares with the plainest dataflow, :func:`refsim.emulator.dequant_gemm.dequant_gemm`
(each weight rounded once to fp16, one fp32 chain over k ascending, one fp16 rounding). Real kernels
(split-K, tensor cores, fp16 scale arithmetic) write other bits: **accuracy mode is the recommended
mode** for these formats (``check_kernel(k, fmt, mode="accuracy")``): the exact product of the
library's dequantized weights, each weight allowed two fp16-sized roundings (``pre=2``: the
library's float32 arithmetic and the kernel's fp16 conversion, or fp16 scale arithmetic), and the
stated accumulation.

Every format has the case field ``edge`` (a shape field, drawn like the others): ``none`` (random
codes and scales) or one of the format's edges, written into some blocks of the weight (the rest stays
random), see each module's table:

    saturation          every element of the block at the element grid's largest magnitude
    subnormal_scales    subnormal scales (and elements) where the format has them; else scales that
                        make fp16-subnormal weights
    zero_blocks         blocks whose codes or scales are zero (+0 and -0)
    largest_block_max   the block's largest weight as large as fp16 holds (the top code times the
                        largest scale whose product stays <= 65504)
    nan_scales          a NaN scale code (MX's E8M0 0xFF, NVFP4's E4M3 0x7F): the block is NaN, every
                        output of its column is NaN (written 0x7FFF)
"""

from __future__ import annotations

import numpy as np

from refsim.emulator.dequant_gemm import dequant_gemm
from refsim.errors import FormatRuleError
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, keep_columns, values

__all__ = ["EDGES", "WeightOnlyCases", "f16_bytes"]

#: the edge cases every format may pin, simplest first
EDGES = ("none", "saturation", "subnormal_scales", "zero_blocks", "largest_block_max", "nan_scales")
_MAX_BLOCK_PROBES = 4


def f16_bytes(v) -> np.ndarray:
    """uint8 (..., 2): the little-endian bytes of float16 ``v`` (any shape)."""
    return np.ascontiguousarray(np.asarray(v, np.float16)).view(np.uint8).reshape(*np.shape(v), 2)


class WeightOnlyCases(Format):
    """A weight-only GEMM format. Subclasses set ``name``, ``signature``, ``inputs``, ``fields`` (m, k,
    n, edge, kind, seed), ``k_block`` (the block length along K), ``pinned_pool`` and implement
    :meth:`draw` (the weight's inputs of a case), :meth:`weights` (float32 (K, N) as the library
    dequantizes them) and :meth:`weight_bugs`."""

    default_max_size = 1 << 22
    shape_fields = ("m", "k", "n", "edge")
    k_block: int = 32
    k_multiple: int | None = None      # K's legal multiple when not k_block (partial blocks)
    n_multiple: int = 1                # (k_block: the format's block along K, or the probes' slice)
    pre = 2

    # --- the format
    def draw(self, rng: np.random.Generator, k: int, n: int, edge: str) -> tuple:
        """The weight's inputs (everything after x) for a (K, N) weight with ``edge`` written in."""
        raise NotImplementedError

    def weights(self, inputs: tuple) -> np.ndarray:
        """float32 (K, N): the weights of ``inputs`` as the format's library dequantizes them."""
        raise NotImplementedError

    def unit_weights(self, k: int, n: int) -> tuple:
        """The weight's inputs of a (K, N) weight whose every value is exactly 1 (adversarial cases)."""
        raise NotImplementedError

    def weight_bugs(self, case: dict):
        """``(bug class, description, weights(inputs) -> float32 (K, N))`` a buggy kernel dequantizes."""
        return []

    def more_regimes(self, case: dict) -> set:
        return set()

    # --- the Format interface
    def cost(self, case):
        return case["m"] * case["k"] * case["n"]

    def legal(self, case):
        k, n = case["k"], case["n"]
        step = self.k_multiple or self.k_block
        if k % step:
            raise FormatRuleError(f"k: {self.name} needs K % {step} == 0 (blocks of {self.k_block} along K); got K={k}")
        if n % self.n_multiple:
            raise FormatRuleError(f"n: {self.name} needs N % {self.n_multiple} == 0; got N={n}")
        if case["edge"] not in self.fields["edge"]:
            raise FormatRuleError(f"edge: {self.name} has the edges {list(self.fields['edge'])}; got {case['edge']!r}")

    def regimes(self, case, sms):
        blocks = -(-case["k"] // self.k_block)
        return {"one batch row" if case["m"] == 1 else "several batch rows",
                "one block along K" if blocks == 1 else "several blocks along K",
                f"edge: {case['edge']}"} | self.more_regimes(case)

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        x = values(rng, case["kind"], (case["m"], case["k"])).astype(np.float16)
        return (x,) + tuple(self.draw(rng, case["k"], case["n"], case["edge"]))

    def emulate(self, inputs, arch, sms):
        return dequant_gemm(inputs[0], self.weights(inputs))

    def locate(self, case, inputs, idx, arch, sms):
        m, n = idx
        return (f"y[{m}, {n}] = fp16(sum over k = 0..{case['k'] - 1} of x[{m}, k] * fp16(W[k, {n}])), one fp32 chain "
                f"over k ascending; W[:, {n}] as the format's library dequantizes it (float32)")

    def structure(self, case, inputs, shape, sms):
        rows, cols = np.indices(shape)
        return {"batch row": rows, "column": cols, "column mod 2 (edge columns are even)": cols % 2}

    def probes(self, case, inputs):
        x = inputs[0]
        blocks = -(-case["k"] // self.k_block)
        return [Probe(f"k {b * self.k_block}..{(b + 1) * self.k_block - 1} only",
                      (keep_columns(x, slice(b * self.k_block, (b + 1) * self.k_block)),) + tuple(inputs[1:]),
                      f"the codes and scales of rows k {b * self.k_block}..{(b + 1) * self.k_block - 1} of W "
                      "(their dequantization)", family="K slice")
                for b in range(min(blocks, _MAX_BLOCK_PROBES))] if blocks > 1 else []

    def known_bugs(self, case, inputs, arch, sms):
        for cls, desc, weights in self.weight_bugs(case):
            yield cls, desc, (lambda inp, weights=weights: dequant_gemm(inp[0], weights(inp)))

    def linear(self, case, inputs):
        """``y = x @ W_hat``: W_hat the library's float32 weights, two fp16-sized roundings each
        (``pre=2``); a column holding a NaN weight is NaN (``nan``), its weights read as 0."""
        w = self.weights(inputs).astype(np.float64)
        bad = np.isnan(w)
        nan_cols = bad.any(axis=0)                                       # (N,)
        m = inputs[0].shape[0]
        return Linear(inputs[0].astype(np.float64), np.where(bad, 0.0, w), terms=case["k"], pre=self.pre,
                      nan=np.broadcast_to(nan_cols, (m, w.shape[1])) if nan_cols.any() else None)


def fields(ks: tuple, ns: tuple, edges: tuple, ms: tuple = (1, 2, 4, 8, 16)) -> dict:
    """The case fields of a weight-only format: m, k, n and edge tables, then kind and seed."""
    return {"m": ms, "k": ks, "n": ns, "edge": edges, "kind": DATA_KINDS, "seed": None}
