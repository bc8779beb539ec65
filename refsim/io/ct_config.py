"""compressed-tensors ``quantization_config``: every field honoured as the library reads it, or refused.

Read by :class:`refsim.io.compressed_tensors.CompressedTensorsReader`. The rules follow
vllm-project/compressed-tensors 0.19.0 (``quantization/quant_args.py`` ``QuantizationArgs``,
``quantization/quant_scheme.py``, ``quantization/quant_config.py``, ``utils/match.py``
``is_match``, ``compressors/model_compressors/model_compressor.py``):

=====================  ==========================================================================
field                  what refsim does
=====================  ==========================================================================
quant_method           must be "compressed-tensors"
format                 "pack-quantized", or "mixed-precision" when every group names its own;
                       anything else (float-quantized, naive-quantized, sparse formats, ...) refused
quantization_status    "compressed" (or absent); other states hold unpacked weights: refused
sparsity_config        null or {} (the library treats an empty one as none); else refused
transform_config       null or {}; a transform (rotations) changes the weights: refused
kv_cache_scheme        null; else refused (refsim reads weight-only schemes)
ignore                 a list of targets; a packed layer matched by one is a contradiction: refused
config_groups          name -> {targets, weights, input_activations, output_activations, format};
                       other keys refused; activations must be null (weight-only)
targets / ignore       matched as ``is_match`` does: exact name, ``re:<pattern>`` with ``re.match``
                       (a pattern that does not compile is refused), class name ``Linear`` (every
                       packed layer); another class name cannot be resolved from tensors: refused.
                       A layer matched by two groups is refused (no precedence is guessed)
weights.num_bits       default 8; one of refsim's bit-widths (2, 3, 4, 8)
weights.type           default "int" (case-insensitive); "float" refused
weights.symmetric      default true
weights.strategy       "group" or "channel" (case-insensitive); absent: inferred as the library
                       does (group_size > 0 -> group, -1 -> channel, null -> tensor); "tensor",
                       "block", "token", ... refused
weights.group_size     > 0 with strategy group; null, 0 or -1 with channel
weights.actorder       true -> "group", false/null -> none, "dynamic" -> "group", "static" ->
                       "weight" (case-insensitive); "group" needs strategy group and each layer's
                       ``weight_g_idx``; "weight" and none store no g_idx (one present is refused)
weights.dynamic        false
weights.block_structure null
weights.observer, observer_kwargs, scale_dtype, zp_dtype   calibration / storage hints: the tensors'
                       own dtypes are read
other weights keys     refused (the library's ``extra="forbid"``)
=====================  ==========================================================================
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from refsim._validate import require_instance, require_path
from refsim.errors import CheckpointError
from refsim.formats import gptq as gptq_format

__all__ = ["CTConfig", "CT_BITS"]

#: the bit-widths refsim reads and writes in compressed-tensors' pack-quantized format (GPTQ's words)
CT_BITS = gptq_format.BITS

#: the weight-only compressor format refsim reads
PACK_QUANTIZED = "pack-quantized"
_GROUP_KEYS = {"targets", "weights", "input_activations", "output_activations", "format"}
_WEIGHT_KEYS = {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic",
                "actorder", "scale_dtype", "zp_dtype", "observer", "observer_kwargs"}
_ACTORDER = {"group": "group", "weight": "weight", "dynamic": "group", "static": "weight"}


def _fail(where: str, field: str, rule: str, value: Any) -> CheckpointError:
    return CheckpointError(f"{where}: {field} {rule}; got {value!r:.200}")


class _Target:
    """One entry of ``targets`` or ``ignore``: an exact name, a compiled ``re:`` pattern or ``Linear``."""

    def __init__(self, text: Any, where: str, field: str) -> None:
        if not isinstance(text, str) or not text:
            raise _fail(where, field, "entries must be non-empty strings", text)
        self.text = text
        self.regex = None
        if text.startswith("re:"):
            try:
                self.regex = re.compile(text[3:])
            except (re.error, RecursionError, OverflowError) as err:
                raise _fail(where, field, f"entry must be a valid regular expression ({err})", text) from None
        elif text[:1].isupper() and text.isidentifier() and text != "Linear":
            raise _fail(where, field, "class names other than 'Linear' cannot be resolved from the tensors "
                        "(refsim reads packed Linear layers)", text)

    def matches(self, name: str) -> bool:
        if self.regex is not None:
            return self.regex.match(name) is not None
        return self.text == "Linear" or self.text == name


class CTConfig:
    """The parsed ``quantization_config``: ``groups`` name -> scheme dict (targets, bits, sym,
    group_size, actorder) and the ``ignore`` targets; :meth:`scheme_of` names a layer's scheme."""

    def __init__(self, qc: Any, cpath: Path) -> None:
        """``qc``: ``config.json``'s ``quantization_config`` as read from ``cpath`` (the path the
        errors name). Every field is checked here (module docstring)."""
        cpath = require_path("cpath", cpath)
        if not isinstance(qc, dict):
            raise CheckpointError(f"{cpath}: field 'quantization_config' must be an object; got {qc!r:.200}")
        where = str(cpath)
        method = qc.get("quant_method", "compressed-tensors")
        if method != "compressed-tensors":
            raise _fail(where, "quant_method", "must be 'compressed-tensors'", method)
        top = qc.get("format", PACK_QUANTIZED)
        if top not in (PACK_QUANTIZED, "mixed-precision"):
            raise _fail(where, "format", f"must be {PACK_QUANTIZED!r} (or 'mixed-precision' of "
                        f"{PACK_QUANTIZED!r} groups): the int layout refsim reads", top)
        status = qc.get("quantization_status", "compressed")
        if status != "compressed":
            raise _fail(where, "quantization_status", "must be 'compressed' (packed weights)", status)
        for key in ("sparsity_config", "transform_config"):
            if qc.get(key):
                raise _fail(where, key, "must be null or {} (refsim reads dense, untransformed weights)", qc[key])
        if qc.get("kv_cache_scheme") is not None:
            raise _fail(where, "kv_cache_scheme", "must be null (weight-only schemes)", qc["kv_cache_scheme"])
        ignore = qc.get("ignore")
        if ignore is None:
            ignore = []
        if not isinstance(ignore, list):
            raise _fail(where, "ignore", "must be a list of strings or null", ignore)
        self.ignore = [_Target(t, where, "ignore") for t in ignore]
        groups = qc.get("config_groups")
        if not isinstance(groups, dict) or not groups:
            raise _fail(where, "config_groups", "must be an object holding at least one group", groups)
        self.groups = {name: _group(grp, f"{where}: config_groups[{name!r}]", top) for name, grp in groups.items()}
        self.path = cpath

    def scheme_of(self, name: str) -> dict:
        """The scheme of packed layer ``name``: the one group whose targets match it (ignore must not)."""
        require_instance("name", name, str)
        for t in self.ignore:
            if t.matches(name):
                raise CheckpointError(f"{self.path}: ignore lists {t.text!r}, which matches layer {name!r}; "
                                      "got a packed (quantized) layer of that name")
        hits = [g for g, grp in self.groups.items() if any(t.matches(name) for t in grp["targets"])]
        if not hits:
            raise CheckpointError(f"{self.path}: layer {name!r} must match a config group's targets; got no match")
        if len(hits) > 1:
            raise CheckpointError(f"{self.path}: layer {name!r} must match one config group's targets; got "
                                  f"{len(hits)}: {hits[:4]}")
        return self.groups[hits[0]]


def _group(grp: Any, where: str, top: str) -> dict:
    """One config group as a scheme dict, every field checked (module docstring)."""
    if not isinstance(grp, dict) or not isinstance(grp.get("weights"), dict):
        raise _fail(where, "group", "must be an object with a 'weights' object", grp)
    extra = sorted(set(grp) - _GROUP_KEYS)
    if extra:
        raise _fail(where, f"key {extra[0]!r}", f"is not a config-group field ({sorted(_GROUP_KEYS)})",
                    grp[extra[0]])
    fmt = grp.get("format")
    if fmt is None and top == PACK_QUANTIZED:
        fmt = top
    if fmt != PACK_QUANTIZED:
        raise _fail(where, "format", f"must be {PACK_QUANTIZED!r} (the int layout refsim reads)", fmt)
    for act in ("input_activations", "output_activations"):
        if grp.get(act) is not None:
            raise _fail(where, act, "must be null (weight-only schemes)", grp[act])
    targets = grp.get("targets")
    if not isinstance(targets, list) or not targets:
        raise _fail(where, "targets", "must be a non-empty list of strings", targets)
    targets = [_Target(t, where, "targets") for t in targets]
    return {"targets": targets, **_weights(grp["weights"], f"{where}.weights")}


def _weights(w: dict, where: str) -> dict:
    extra = sorted(set(w) - _WEIGHT_KEYS)
    if extra:
        raise _fail(where, f"key {extra[0]!r}", "is not a QuantizationArgs field", w[extra[0]])

    def field(key, kinds, default):
        v = w.get(key, default)
        if v is None and default is None or isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds):
            return v
        raise _fail(where, key, f"must be {'/'.join(k.__name__ for k in kinds)}", v)

    bits = field("num_bits", (int,), 8)
    if bits not in CT_BITS:
        raise _fail(where, "num_bits", f"must be one of {list(CT_BITS)}", bits)
    kind = field("type", (str,), "int")
    if kind.lower() != "int":
        raise _fail(where, "type", "must be 'int' (refsim reads integer codes)", kind)
    sym = field("symmetric", (bool,), True)
    gs = field("group_size", (int,), None)
    strategy = field("strategy", (str,), None)
    if strategy is None:                                      # the library's inference
        strategy = "tensor" if gs is None else "group" if gs > 0 else "channel" if gs == -1 else None
    strategy = strategy and strategy.lower()
    if strategy == "group":
        if gs is None or gs < 1:
            raise _fail(where, "group_size", "must be a positive integer for strategy 'group'", gs)
    elif strategy == "channel":
        if gs is not None and gs > 0:
            raise _fail(where, "group_size", "must be null or -1 for strategy 'channel'", gs)
        gs = None
    else:
        raise _fail(where, "strategy", "must be 'group' or 'channel' (the int schemes refsim reads)", strategy)
    if w.get("dynamic", False) is not False:
        raise _fail(where, "dynamic", "must be false (static weight scales)", w["dynamic"])
    if w.get("block_structure") is not None:
        raise _fail(where, "block_structure", "must be null (strategy 'block' is not read)", w["block_structure"])
    raw = w.get("actorder")
    if raw is None or raw is False:
        actorder = None
    elif raw is True:
        actorder = "group"
    elif isinstance(raw, str) and raw.lower() in _ACTORDER:
        actorder = _ACTORDER[raw.lower()]
    else:
        raise _fail(where, "actorder", f"must be null, true, false or one of {list(_ACTORDER)}", raw)
    if actorder == "group" and strategy != "group":
        raise _fail(where, "actorder", "'group' needs strategy 'group'", raw)
    return {"bits": bits, "sym": sym, "group_size": gs, "actorder": actorder}
