"""Marlin's quantizer: symmetric 4-bit absmax scales and round-to-nearest codes, as the official code makes them.

Spec
----
scales          per (group, column): ``s = fp16(float32(max_{k in group} |w[k, n]|) * float32(2/15))``
                (the official test's ``gen_quant4``); group 128 or per-channel (``None``: one row).
codes           ``q = clip(rint(fp16(w / s)) + 8, 0, 15)``: the fp16 quotient rounded half to even, offset
                8 (the value is ``q - 8`` in [-8, 7]); the positive extreme ``7.5 s`` rounds to 8 and is
                clamped to code 15, as ``Layer.pack`` does when it re-quantizes its input.
shapes          w float16 (K, N), K % 128 == 0, N % 128 == 0 (the format's rules,
                :mod:`refsim.formats.marlin`); scales float16 (K/128, N) or (1, N); codes uint8 (K, N),
                ready for :func:`refsim.formats.marlin.pack`.
source          IST-DASLab/marlin ``test.py`` (``gen_quant4``) and ``marlin/__init__.py`` (``Layer.pack``),
                commit 2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c.

One column of one group, absmax 1.5: s = fp16(1.5 * 2/15) = 0.19995 (fp16 quotients below, rounded)::

    w      -1.5   -0.31   0     0.29   1.5
    w / s  -7.5   -1.55   0     1.45   7.5
    rint   -8     -2      0     1      8    (half to even: -7.5 -> -8, 7.5 -> 8)
    q       0      6      8     9      15   (+8, 16 clamped to 15)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_dtype, require_finite, require_ndim
from refsim.errors import FormatRuleError
from refsim.formats.marlin import CODE_BIAS, MAX_CODE, check_group_size, check_kn, check_scales

__all__ = ["compute_scales", "quantize"]


def compute_scales(w: np.ndarray, group_size: int | None) -> np.ndarray:
    """Absmax scales as the official test's ``gen_quant4`` makes them.

    ``w``: float16 ``(K, N)``. Returns float16 ``(K // group_size, N)`` (``(1, N)`` per-channel):
    ``fp16(float32(max_{k in group} |w[k, n]|) * float32(2/15))``.
    """
    w = require_dtype("w", w, np.float16)
    require_ndim("w", w, 2)
    k, n = w.shape
    check_kn(k, n)
    group_size = check_group_size(group_size)
    require_finite("w", w)
    gs = k if group_size is None else group_size
    amax = np.abs(w.astype(np.float32)).reshape(k // gs, gs, n).max(axis=1)  # (G, N)
    return (amax * np.float32(2.0 / MAX_CODE)).astype(np.float16)


def quantize(w: np.ndarray, scales: np.ndarray, group_size: int | None) -> np.ndarray:
    """Round-to-nearest against given scales, as ``Layer.pack`` re-quantizes its input.

    ``w`` float16 ``(K, N)``; ``scales`` float16 ``(K // group_size, N)`` or ``(1, N)``.
    Returns uint8 codes ``(K, N)``: ``clip(round_half_even(fp16(w / s)) + 8, 0, 15)``; the
    positive extreme ``7.5 s`` rounds to 8 and is clamped to code 15 (as in the official code).
    """
    w = require_dtype("w", w, np.float16)
    require_ndim("w", w, 2)
    k, n = w.shape
    check_kn(k, n)
    group_size = check_group_size(group_size)
    scales = check_scales(scales, k, n, group_size)
    require_finite("w", w)
    if np.any(scales == 0):
        raise FormatRuleError("scales: must be non-zero to quantize; got a zero scale")
    gs = k if group_size is None else group_size
    s_full = np.repeat(scales, gs, axis=0) if scales.shape[0] > 1 else scales  # (K, N) or (1, N)
    x = (w / s_full).astype(np.float16)  # fp16 division: float math, one RN rounding
    q = np.clip(np.rint(x.astype(np.float32)) + CODE_BIAS, 0, MAX_CODE)
    return q.astype(np.uint8)
