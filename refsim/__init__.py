"""refsim: the golden reference for quantized-LLM kernels.

Parts:
    refsim.formats    golden NumPy implementations of every packed layout
    refsim.quant      quantization algorithms producing those layouts
    refsim.emulator   numerically exact emulation of kernel arithmetic
    refsim.gpu_model  roofline and cycle models of kernel latency
    refsim.cuda       a thin set of real CUDA kernels diffed against the oracle
    refsim.testing    bit-exact assertions and hypothesis profiles
"""

__version__ = "0.1.0"

import sys as _sys

if _sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("refsim needs a little-endian host: packed words are defined (and viewed as bytes) "
                      "in little-endian order, as the GPUs and checkpoints they describe")
