"""The formats :func:`refsim.testing.check_kernel` knows, one module per kernel family:

    base          the Format interface, data kinds, probes, the exact linear form (accuracy mode)
    marlin        Marlin FP16 x INT4 GEMM (stripe partition per SM count, tensor cores)
    anyprec       Any-Precision LLM bitplane GEMV (lookup tables, fp16 chains per lane)
    mixed_2_4_16  the 2/4/16-bit GEMV with its fused outlier SpMV
    atom          Atom W4A4 group GEMM (s4/s8 mma, FFMA epilogue)
    gptq_awq      W4A16 GEMV of GPTQ (v1 and v2 zero points, act-order) and AWQ checkpoints
    mma           single mma.sync instructions (f16 with f32/f16 accumulator, s4)
    hopper_w4a16  refsim's sm_90a W4A16 GEMM (TMA, mbarrier ring, wgmma on weights converted in registers)
    weight_only   what the weight-only GEMMs of the block-scaled formats share (fp16 x, dequantized W)
    fp8_mx        FP8 per-channel and 128x128-block weights, MXFP4, NVFP4
    bnb4          bitsandbytes NF4, without and with double quantization
    gguf          llama.cpp's GGUF Q4_0, Q8_0, Q4_K

:data:`FORMATS` maps each name (``check_kernel(kernel, fmt)``, ``refsim check --fmt``) to its
:class:`~refsim.testing.cases.base.Format`. docs/harness.md lists every rule and regime and how to
add a format.
"""

from __future__ import annotations

import numpy as np

from refsim.testing.cases.anyprec import AnyprecCases
from refsim.testing.cases.atom import AtomCases
from refsim.testing.cases.bnb4 import NF4Cases, NF4DQCases
from refsim.testing.cases.fp8_mx import FP8BlockCases, FP8ChannelCases, MXFP4Cases, NVFP4Cases
from refsim.testing.cases.gguf import Q4_0Cases, Q4_KCases, Q8_0Cases
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, values
from refsim.testing.cases.gptq_awq import AWQCases, GPTQCases
from refsim.testing.cases.hopper_w4a16 import HopperW4A16Cases
from refsim.testing.cases.marlin import MarlinCases
from refsim.testing.cases.mixed_2_4_16 import Mixed2416Cases
from refsim.testing.cases.mma import MmaF16Cases, MmaS4Cases

__all__ = ["Format", "Probe", "Linear", "FORMATS", "DATA_KINDS", "values"]

#: name -> format, sorted by name
FORMATS: dict[str, Format] = {f.name: f for f in sorted(
    (AnyprecCases(), AtomCases(), AWQCases(), GPTQCases("gptq"), GPTQCases("gptq_v2"), HopperW4A16Cases(), MarlinCases(),
     Mixed2416Cases(), MmaF16Cases(np.float32), MmaF16Cases(np.float16), MmaS4Cases(),
     FP8ChannelCases(), FP8BlockCases(), MXFP4Cases(), NVFP4Cases(), NF4Cases(), NF4DQCases(), Q4_0Cases(),
     Q8_0Cases(), Q4_KCases()),
    key=lambda f: f.name)}
