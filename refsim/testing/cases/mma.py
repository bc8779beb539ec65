"""Single tensor-core instructions (no shape: the instruction is the shape)::

    mma_m16n8k16      kernel(A f16 (16,16), B f16 (16,8), C f32 (16,8)) -> D f32 (16,8)
    mma_m16n8k16_f16  kernel(A f16 (16,16), B f16 (16,8), C f16 (16,8)) -> D f16 (16,8)
    mma_s4            kernel(A i8 (16,64) in [-8,7], B i8 (64,8), C i32 (16,8)) -> D i32 (16,8)

The fp16 instructions chain the architecture's hardware blocks along k (sm_80: k 0..7 then
k 8..15; sm_90: one block of 16), each a truncated fused dot-product-add
(:mod:`refsim.arith.tensor_core`); ``mma_s4`` is an exact int32 sum that wraps
(:mod:`refsim.arith.integer_mma`). Regimes of
``mma_s4``: C near 2^31 (wrapping) and small C. Structure labels come from the fragment layouts of
:mod:`refsim.arith.fragments`. Accuracy mode does not apply: one instruction's arithmetic is the
hardware's own, so its bits are the thing to compare.
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fragments as fr
from refsim.arith import integer_mma, tensor_core as tc
from refsim.testing.cases.base import DATA_KINDS, Format, Probe, fragment_labels, keep_columns, values


class _Instruction(Format):
    inputs = ("A", "B", "C")

    def cost(self, case):
        return 16 * self.k_size * 8

    no_accuracy = ("one tensor-core instruction, whose arithmetic is the hardware's own (not an accumulation "
                   "with a stated precision and order)")


class MmaF16Cases(_Instruction):
    """``mma.sync.m16n8k16`` with fp16 inputs and an fp32 or fp16 accumulator."""

    k_size = 16
    fields = {"kind": DATA_KINDS, "seed": None}
    shape_fields = ()
    default_max_size = 1 << 12
    pinned_pool = ({},)

    def __init__(self, acc_dtype):
        self.acc_dtype = np.dtype(acc_dtype)
        self.name = "mma_m16n8k16" if self.acc_dtype == np.float32 else "mma_m16n8k16_f16"
        acc = "f32" if self.acc_dtype == np.float32 else "f16"
        self.signature = f"kernel(A f16 (16,16), B f16 (16,8), C {acc} (16,8)) -> D {acc} (16,8)"

    def regimes(self, case, sms):
        return {"one instruction"}

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        A = values(rng, case["kind"], (16, 16)).astype(np.float16)
        B = values(rng, case["kind"], (16, 8)).astype(np.float16)
        C = values(rng, case["kind"], (16, 8)).astype(self.acc_dtype)
        return A, B, C

    def emulate(self, inputs, arch, sms):
        return tc.mma_m16n8k16(arch, *inputs)

    def locate(self, case, inputs, idx, arch, sms):
        lane, reg = fr.mma_m16n8k16_c().owner(*idx)
        L = tc.model(arch).block
        blocks = ", ".join(f"k {k0}..{k0 + L - 1}" for k0 in range(0, 16, L))
        lay = fr.mma_m16n8k16_a()
        a_lanes = sorted({lay.owner(idx[0], c)[0] for c in range(16)})
        return (f"D[{idx[0]}, {idx[1]}] is register c{reg} of lane {lane} (warp 0); chained {arch} blocks in order: "
                f"{blocks}; A row {idx[0]} comes from lanes {a_lanes}")

    def structure(self, case, inputs, shape, sms):
        return fragment_labels(fr.mma_m16n8k16_c(), shape)

    def probes(self, case, inputs):
        A, B, C = inputs
        return [Probe("k 0..7 only (one sm_80 block, C added)", (keep_columns(A, slice(0, 8)), B, C),
                      "one hardware dot-product block"),
                Probe("C = 0", (A, B, np.zeros_like(C)), "the products and their alignment, without the accumulator")]


class MmaS4Cases(_Instruction):
    """``mma.sync.m16n8k64.s32.s4.s4.s32``: an exact int32 sum that wraps."""

    name = "mma_s4"
    signature = "kernel(A i8 (16,64) in [-8,7], B i8 (64,8), C i32 (16,8)) -> D i32 (16,8)"
    k_size = 64
    fields = {"c_large": (False, True), "kind": ("zeros", "ones", "small_integers", "extremes"), "seed": None}
    shape_fields = ("c_large",)
    default_max_size = 1 << 14
    pinned_pool = ({"c_large": True}, {"c_large": False})
    pinned_kind = "extremes"
    no_accuracy = "exact integer arithmetic, where every difference is a bug"

    def regimes(self, case, sms):
        return {"C near 2^31 (wrapping)" if case["c_large"] else "small C"}

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        kind = case["kind"]
        if kind in ("zeros", "ones"):
            A, B = (np.full((16, 64), kind == "ones", np.int8), np.full((64, 8), kind == "ones", np.int8))
        elif kind == "extremes":
            A = rng.choice(np.array([-8, 7], np.int8), (16, 64))
            B = rng.choice(np.array([-8, 7], np.int8), (64, 8))
        else:
            A, B = rng.integers(-8, 8, (16, 64)).astype(np.int8), rng.integers(-8, 8, (64, 8)).astype(np.int8)
        lo, hi = (2**31 - 4096, 2**31) if case["c_large"] else (-1000, 1000)
        C = rng.integers(lo, hi, (16, 8)).astype(np.int64).astype(np.int32)
        return A, B, C

    def emulate(self, inputs, arch, sms):
        return integer_mma.mma_int(*inputs)

    def locate(self, case, inputs, idx, arch, sms):
        lane, reg = fr.mma_m16n8k64_c().owner(*idx)
        return f"D[{idx[0]}, {idx[1]}] is register c{reg} of lane {lane}; exact int32 sum over k 0..63, wrapping"

    def structure(self, case, inputs, shape, sms):
        return fragment_labels(fr.mma_m16n8k64_c(), shape)
