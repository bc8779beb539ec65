"""2/4/16-bit mixed GEMV with asynchronous dequantization + CSR SpMV of sparse FP16 outliers.

Source: the paper "Fast and Efficient 2-bit LLM Inference on GPU: 2/4/16-bit in a Weight Matrix
with Asynchronous Dequantization" (§3-§4; no official code
in the project's reference set). Two kernels per linear layer:

1. dense GEMV over 2-bit groups (fraction ``1 - FRAC_4BIT``) and 4-bit groups (``FRAC_4BIT``),
   group size 16 along K, 1st-order 4-bit scales and zeros per group, 2nd-order fp16 scale/zero per 16
   groups (≈ 0.25 + 0.03 bits per weight), CUDA cores; ~ 1.5 dequant lane-instructions per weight
   plus one HFMA2 per two weights per batch row;
2. cuSPARSE CSR SpMV over ``OUTLIER_RATIO`` of the weights (0.2 % in the paper's Llama runs):
   32 bits per outlier (fp16 value + 16-bit column) + 4 bytes per row pointer, gathered activations
   from L2, then the sum — a second launch (T0 each).

``bits`` names the low precision (2). Constraints: K % 256 == 0 (16 groups of 16 in a 2nd-order
block), N % 4 == 0.
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import compiled_registers, require_multiple
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import Breakdown, dram_time, _overlap

NAME = "mixed-2-4-16"
BITS = (2,)
DEFAULT_BITS = 2
GROUPS = (None, 16)
DEFAULT_GROUP = None
GROUP_RULE = "uses 1st-order groups of 16"
FRAC_4BIT = 0.25
OUTLIER_RATIO = 0.002
SCALE_BITS_PER_WEIGHT = 0.25 + 0.03


def avg_bits() -> float:
    """Average stored bits per weight of the dense part."""
    return 2 * (1 - FRAC_4BIT) + 4 * FRAC_4BIT + SCALE_BITS_PER_WEIGHT


def check(gpu, m, n, k, bits, group_size) -> None:
    """K % 256 == 0 (2nd-order blocks of 16 groups of 16), N % 4 == 0 (4 rows per CTA)."""
    if k % 256:
        require_multiple(NAME, "k", k, 256, "2nd-order blocks of 16 groups of 16")
    if n % 4:
        require_multiple(NAME, "n", n, 4, "4 rows per CTA")


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of the 2/4/16 mixed GEMV + outlier SpMV on ``mc.gpu``: two launches, each overlapped
    on its own, their terms summed key by key."""
    g, f, p = mc
    sm_clk = g.sm_count * f
    # kernel 1: dense mixed GEMV
    dense_bytes = n * k * avg_bits() / 8 + 2.0 * m * (k + n)
    ctas = math.ceil(n / 4)
    # occupancy from the compiled GEMV (refsim/cuda/resources.json "mixed_gemv": 39 registers, 4 warps)
    ctas_per_sm = resident(g, 128, compiled_registers("mixed_gemv"), 0, None).ctas_per_sm
    lanes = n * k * (1.5 + 0.5 * m)
    t_alu = lanes / 32 / (4 * sm_clk)
    t_dram = dram_time(dense_bytes, g, ctas, ctas_per_sm, 4 * 256)
    dense_s, dense_terms, _ = _overlap(g, {"dram": t_dram, "alu": t_alu}, p)
    # kernel 2: CSR SpMV (memory-bound, irregular activation gathers served by L2)
    nnz = OUTLIER_RATIO * n * k
    sp_bytes = nnz * 4 + (n + 1) * 4 + 2.0 * m * n * 2
    sp_ctas = max(1, math.ceil(n / 128))
    t_sp_dram = dram_time(sp_bytes, g, sp_ctas, ctas_per_sm, 4 * 1024)
    t_sp_l2 = nnz * m * 32 / g.l2_bytes_per_s(f)          # one 32-byte sector per gathered activation
    sparse_s, sparse_terms, _ = _overlap(g, {"dram": t_sp_dram, "l2": t_sp_l2}, p)
    terms = {key: dense_terms.get(key, 0.0) + sparse_terms.get(key, 0.0)
             for key in ("dram", "alu", "l2", "launch", "tail")}
    pipes = {key: terms[key] for key in ("dram", "l2", "alu")}
    bottleneck = max(pipes, key=pipes.get)
    if terms["launch"] + terms["tail"] > pipes[bottleneck]:
        bottleneck = "launch"
    return Breakdown(kernel=NAME, gpu=g.name, m=m, n=n, k=k, bits=2,
                     latency_s=dense_s + sparse_s, bottleneck=bottleneck, terms=terms,
                     bytes_dram=dense_bytes + sp_bytes, flops=2.0 * m * n * k, ctas=ctas,
                     waves=ctas / (g.sm_count * ctas_per_sm), launches=2,
                     notes=f"avg {avg_bits():.2f} bits dense + {OUTLIER_RATIO:.1%} CSR outliers")
