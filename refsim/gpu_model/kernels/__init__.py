"""Kernel latency models, one module per kernel family, behind one :func:`predict`.

Every module defines ``NAME``, ``BITS`` (bit-widths it runs) and
``predict(gpu, m, n, k, bits=None, group_size=None, *, clock, params) -> Breakdown``.
"""

from __future__ import annotations

import importlib

from refsim._validate import require_choice
from refsim.gpu_model.roofline import Breakdown

__all__ = ["KERNELS", "kernel_names", "kernel_module", "predict"]

_MODULES = {
    "cublas-fp16": "cublas_fp16", "marlin": "marlin", "marlin-24": "marlin_24", "anyprec": "anyprec",
    "atom-w4a4": "atom_w4a4", "int8-w8a8": "int8_w8a8", "twobit-mixed": "twobit_mixed",
    "awq-w4a16": "awq_w4a16",
}
KERNELS = tuple(_MODULES)
_CACHE: dict = {}


def kernel_names() -> list[str]:
    """Kernel names accepted by :func:`predict`."""
    return list(KERNELS)


def kernel_module(name: str):
    """The model module for ``name``; unknown names raise FormatRuleError listing valid ones."""
    if not isinstance(name, str):
        require_choice("kernel", name, KERNELS)     # raises, naming the valid kernels
    mod = _CACHE.get(name)
    if mod is None:
        require_choice("kernel", name, KERNELS)
        mod = _CACHE[name] = importlib.import_module(f"refsim.gpu_model.kernels.{_MODULES[name]}")
    return mod


def predict(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None,
            group_size: int | None = None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of ``kernel`` computing C(M,N) = A(M,K) @ W(K,N) on ``gpu``.

    m = batch/tokens, n = output features, k = input features (reduction). ``bits`` / ``group_size``
    default to the kernel's usual configuration; unsupported values raise the kernel's rule.
    """
    return kernel_module(kernel).predict(gpu, m, n, k, bits, group_size, clock=clock, params=params)
