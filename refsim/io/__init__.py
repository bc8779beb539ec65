"""Real checkpoints in and out: read, validate, convert and write quantized models.

    refsim.io.tensors      safetensors files one tensor at a time (the ``safetensors`` package)
    refsim.io.checkpoint   a checkpoint folder: its files and config, its layers, read one at a time
    refsim.io.readers      detect a folder's format; the table of readers; open_checkpoint
    refsim.io.gptq         GPTQ (AutoGPTQ/GPTQModel, v1/v2, act-order) and AWQ (AutoAWQ GEMM)
    refsim.io.containers   Marlin, Any-Precision, QIGen, Atom, 2/4/16 and plain FP models
    refsim.io.convert      gptq → marlin / gptq-v1 / gptq-v2 / qigen, fp → anyprec
    refsim.io.quantize     whole-model quantization, layer-parallel on any Executor
    refsim.io.executor     "serial", "local[:N]", "dask-local:N", "dask://HOST:PORT"
    refsim.io.inspect      the facts ``refsim inspect`` prints
    refsim.io.output       write-to-temporary-then-rename output folders

See docs/io.md for the on-disk layouts and the command line.
"""

from refsim.io.checkpoint import Checkpoint
from refsim.io.readers import detect, open_checkpoint

__all__ = ["Checkpoint", "detect", "open_checkpoint"]
