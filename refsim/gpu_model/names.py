"""One name per GPU and per kernel, and the one table of the other names people type.

    kind     canonical names                         aliases (matched case-insensitively)
    -------  --------------------------------------  --------------------------------------------
    kernel   kernels.KERNELS (cublas-fp16, marlin,   marlin-24 -> sparse-marlin (Sparse-Marlin's
             sparse-marlin, anyprec, ...)             2:4 kernel file name), twobit-mixed ->
                                                     mixed-2-4-16 (the model's former name)
    gpu      specs.GPUS (a10, rtx4090, h100-sxm,     a100 -> a100-80gb, h100 -> h100-sxm, 4090 ->
             ...)                                    rtx4090, orin -> orin-agx-64gb, ...

:func:`resolve` turns a typed name into the canonical one; an unknown name is a
:class:`~refsim.errors.FormatRuleError` that lists the canonical names and the aliases, so the
message answers "what may I type".
"""

from __future__ import annotations

from refsim._validate import plain_scalar
from refsim.errors import FormatRuleError

__all__ = ["KERNEL_ALIASES", "GPU_ALIASES", "resolve"]

KERNEL_ALIASES = {"marlin-24": "sparse-marlin", "twobit-mixed": "mixed-2-4-16"}
GPU_ALIASES = {"a100": "a100-80gb", "h100": "h100-sxm", "orin": "orin-agx-64gb", "4090": "rtx4090",
               "a6000": "rtx-a6000", "3090": "rtx3090", "2080": "rtx2080", "h100-pcie-80gb": "h100-pcie",
               "a100-40gb-sxm": "a100-40gb", "l40s-48gb": "l40s", "l4-24gb": "l4"}
_ALIASES = {"kernel": KERNEL_ALIASES, "gpu": GPU_ALIASES}


def _choices_text(kind: str, names) -> str:
    """``[name, ...] (aliases: a -> b, ...)``: what an error message lists for ``kind``."""
    aliases = ", ".join(f"{a} -> {b}" for a, b in _ALIASES[kind].items() if b in names)
    return f"{sorted(names)}" + (f" (aliases: {aliases})" if aliases else "")


def resolve(kind: str, name, names) -> str:
    """The canonical name for ``name`` of ``kind`` ('kernel' or 'gpu'): ``name`` itself when it is
    in ``names``, else its case-insensitive match or alias. Anything else (unknown names, non-strings)
    raises FormatRuleError listing ``names`` and the aliases (a ``np.str_`` is the ``str`` it holds). ``names``: a collection of the
    canonical names (strings)."""
    if type(name) is str and type(names) in (dict, tuple) and name in names:
        return name                       # the common case: a canonical name of a refsim table
    kind, name = plain_scalar(kind), plain_scalar(name)      # np.str_ names (read from arrays, CSVs)
    if type(kind) is not str or kind not in _ALIASES:
        raise FormatRuleError(f"kind: must be one of {sorted(_ALIASES)}; got {kind!r:.80}")
    if not isinstance(names, (dict, tuple, list, frozenset, set)) or not all(type(x) is str for x in names):
        raise FormatRuleError(f"names: must be a collection of name strings; got {type(names).__name__}")
    if type(name) is str:
        if name in names:
            return name
        key = name.strip().lower()
        key = _ALIASES[kind].get(key, key)
        if key in names:
            return key
    raise FormatRuleError(f"{kind}: must be one of {_choices_text(kind, names)}; got {name!r:.80}")
