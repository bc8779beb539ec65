"""Kernel latency models, one module per kernel family; the public entry points.

Each module (``cublas_fp16``, ``marlin``, ``sparse_marlin``, ``anyprec``, ``atom_w4a4``,
``atom_w8a8``, ``int8_w8a8``, ``mixed_2_4_16``, ``awq_w4a16``, ``deepgemm_fp8``, ``hopper_w4a16``) defines its rules (``check``) and one plain
``model(machine, m, n, k, bits, group_size)``: the definition of its latency
(:mod:`refsim.gpu_model.problem` states the protocol). This package re-exports the entry points:
:func:`predict` / :func:`predict_many` (the fast path, :mod:`refsim.gpu_model.evaluate`) and
:func:`predict_reference` (the plain definition, :func:`refsim.gpu_model.problem.reference`).
"""

from refsim.gpu_model.evaluate import clear_caches, predict, predict_many
from refsim.gpu_model.problem import INT32_MAX, KERNELS, kernel_module, kernel_names
from refsim.gpu_model.problem import reference as predict_reference

__all__ = ["KERNELS", "kernel_names", "kernel_module", "predict", "predict_many", "predict_reference",
           "clear_caches", "INT32_MAX"]
