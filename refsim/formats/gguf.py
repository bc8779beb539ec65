"""llama.cpp's GGUF tensor data: rows of ggml blocks, read and written bit for bit with ggml.

Spec
----
    tensor       shape (..., cols): each row of ``cols`` values (the last, fastest-varying dimension; ggml's
                 ``ne[0]``) is cut into blocks of the type's block size; ``cols`` must be a multiple of it
    bytes        uint8, rows after rows, each row ``cols / block * bytes_per_block`` bytes, blocks in order;
                 no padding anywhere
    types        legacy (blocks of 32, refsim.formats.gguf_legacy): Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL, and
                 F16 BF16 (blocks of 1); k-quants (super-blocks of 256, refsim.formats.gguf_kquants):
                 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS; ternary (256, refsim.formats.gguf_ternary): TQ1_0 TQ2_0;
                 4-bit floats (refsim.formats.gguf_fp4): MXFP4 (32), NVFP4 (64); lattice (256,
                 refsim.formats.gguf_iquants): IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M -- every
                 type gguf-py 0.19.0 dequantizes (it dequantizes no Q8_1, Q8_K or Q1_0, nor does refsim)
    dequantize   every type; float32 out, ggml's ``dequantize_row_*`` bit for bit (fp16 scales widened
                 exactly, then ggml's float32 operations in its order, unfused)
    quantize     Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16 BF16 TQ1_0 TQ2_0 MXFP4: exactly the types the ``gguf`` package
                 quantizes, as it does (ggml's ``quantize_row_*_ref``); the k-quants', IQ and NVFP4
                 quantizers search scales and are not modelled
    source       ggml-common.h / ggml-quants.c of llama.cpp; the ``gguf`` package 0.19.0 (``GGML_QUANT_SIZES``,
                 gguf/quants.py) made the goldens in tests/formats/data/gguf_goldens.npz

Layout of a (2, 64) Q4_0 tensor (2 blocks of 18 bytes per row)::

    row 0: | d0 f16 | qs0[16] | d1 f16 | qs1[16] |   36 bytes: values 0..31, then 32..63
    row 1: | d2 f16 | qs2[16] | d3 f16 | qs3[16] |
"""

from __future__ import annotations

import numpy as np

from refsim._validate import plain_scalar, require_choice, require_dtype, require_int, require_shape_arg
from refsim.errors import ShapeError
from refsim.formats import gguf_fp4, gguf_iquants, gguf_kquants, gguf_legacy, gguf_ternary

__all__ = ["BLOCK_TYPES", "QUANTIZABLE", "row_bytes", "dequantize", "dequantize_reference", "quantize",
           "quantize_reference"]

#: type -> (values per block, bytes per block): ggml's ``GGML_QUANT_SIZES`` for the types refsim reads
BLOCK_TYPES: dict[str, tuple[int, int]] = {**gguf_legacy.LEGACY_TYPES, **gguf_kquants.KQUANT_TYPES,
                                            **gguf_ternary.TERNARY_TYPES, **gguf_fp4.FP4_TYPES,
                                            **gguf_iquants.IQUANT_TYPES}
QUANTIZABLE: tuple[str, ...] = gguf_legacy.QUANTIZABLE + gguf_ternary.QUANTIZABLE + gguf_fp4.QUANTIZABLE
#: type -> the module that holds its blocks
_MODULES = {t: m for m, types in ((gguf_legacy, gguf_legacy.LEGACY_TYPES), (gguf_kquants, gguf_kquants.KQUANT_TYPES),
                                  (gguf_ternary, gguf_ternary.TERNARY_TYPES), (gguf_fp4, gguf_fp4.FP4_TYPES),
                                  (gguf_iquants, gguf_iquants.IQUANT_TYPES)) for t in types}


def row_bytes(qtype: str, cols: int) -> int:
    """Bytes of one row of ``cols`` values of ``qtype`` (``cols`` a positive multiple of the block size)."""
    qtype = require_choice("qtype", plain_scalar(qtype), tuple(BLOCK_TYPES))
    block, size = BLOCK_TYPES[qtype]
    cols = require_int("cols", cols, minimum=0)
    if cols == 0 or cols % block:
        raise ShapeError(f"cols: a row's length must be a positive multiple of {qtype}'s block of {block}; "
                         f"got {cols}")
    return cols // block * size


def _blocks(raw: np.ndarray, qtype: str, shape) -> tuple[np.ndarray, tuple[int, ...], str]:
    qtype = require_choice("qtype", plain_scalar(qtype), tuple(BLOCK_TYPES))
    shape = require_shape_arg("shape", shape)
    if not shape:
        raise ShapeError("shape: must have at least one dimension (the row length); got ()")
    per_row = row_bytes(qtype, shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    raw = require_dtype("raw", raw, np.uint8)
    if raw.size != rows * per_row:
        raise ShapeError(f"raw: {qtype} {shape} takes {rows} rows of {per_row} bytes = {rows * per_row} bytes; "
                         f"got {raw.size}")
    return np.ascontiguousarray(raw).reshape(-1, BLOCK_TYPES[qtype][1]), shape, qtype  # (blocks, bytes per block)


def dequantize(raw: np.ndarray, qtype: str, shape) -> np.ndarray:
    """float32 ``shape`` from the uint8 bytes ``raw`` (any shape, ``row_bytes`` per row in order) of a
    GGUF tensor of ``qtype``: ggml's ``dequantize_row_*`` bit for bit."""
    b, shape, qtype = _blocks(raw, qtype, shape)
    return _MODULES[qtype].dequantize_blocks(b, qtype).reshape(shape)


def dequantize_reference(raw: np.ndarray, qtype: str, shape) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize` (each type's C loop, block by block)."""
    b, shape, qtype = _blocks(raw, qtype, shape)
    return _MODULES[qtype].dequantize_blocks_reference(b, qtype).reshape(shape)


def _values(x: np.ndarray, qtype: str) -> tuple[np.ndarray, str, int]:
    qtype = require_choice("qtype", plain_scalar(qtype), QUANTIZABLE)
    x = require_dtype("x", x, np.float32)
    if x.ndim == 0:
        raise ShapeError("x: must have at least one dimension (the row length); got a 0-d array")
    row_bytes(qtype, x.shape[-1])
    return np.ascontiguousarray(x).reshape(-1, BLOCK_TYPES[qtype][0]), qtype, x.shape  # (blocks, block)


def quantize(x: np.ndarray, qtype: str) -> np.ndarray:
    """uint8 (..., row_bytes(qtype, cols)) from float32 x (..., cols), finite: ggml's
    ``quantize_row_*_ref`` for ``qtype`` in :data:`QUANTIZABLE` (what ``gguf.quants.quantize`` returns)."""
    xb, qtype, shape = _values(x, qtype)
    return _MODULES[qtype].quantize_blocks(xb, qtype).reshape(*shape[:-1], row_bytes(qtype, shape[-1]))


def quantize_reference(x: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`quantize`."""
    xb, qtype, shape = _values(x, qtype)
    return _MODULES[qtype].quantize_blocks_reference(xb, qtype).reshape(*shape[:-1], row_bytes(qtype, shape[-1]))
