"""compressed-tensors ``quantization_config``: every field honoured as the library reads it, or refused.

Read by :class:`refsim.io.compressed_tensors.CompressedTensorsReader`. The rules follow
vllm-project/compressed-tensors 0.19.0 (``quantization/quant_args.py`` ``QuantizationArgs``,
``quantization/quant_scheme.py``, ``quantization/quant_config.py``, ``utils/match.py``
``is_match``, ``compressors/model_compressors/model_compressor.py``):

=====================  ==========================================================================
field                  what refsim does
=====================  ==========================================================================
quant_method           must be "compressed-tensors"
format                 "pack-quantized" (int), "float-quantized" (FP8 e4m3), "nvfp4-pack-quantized",
                       "mxfp4-pack-quantized", or "mixed-precision" when every group names one of
                       these (a group's own format must equal a single top-level one); one
                       checkpoint holds int groups or float groups, not both; anything
                       else (naive-quantized, int-quantized, marlin-24, sparse formats, ...) refused
quantization_status    "compressed" (or absent); other states hold unpacked weights: refused
sparsity_config        null or {} (the library treats an empty one as none); else refused
transform_config       null or {}; a transform (rotations) changes the weights: refused
kv_cache_scheme        null; else refused (refsim reads weight-only schemes)
ignore                 a list of targets; a packed layer matched by one is a contradiction: refused
config_groups          name -> {targets, weights, input_activations, output_activations, format};
                       other keys refused; activations must be null for int groups (weight-only);
                       float groups may name an activation scheme (an object): recorded as
                       ``input_activations``, not applied (refsim reads the weights)
targets / ignore       matched as ``is_match`` does: exact name, ``re:<pattern>`` with ``re.match``
                       (a pattern that does not compile is refused), class name ``Linear`` (every
                       packed layer); another class name cannot be resolved from tensors: refused.
                       A layer matched by two groups is refused (no precedence is guessed)
weights.num_bits       default 8; int: one of refsim's bit-widths (2, 3, 4, 8); float: the format's
weights.type           default "int" (case-insensitive); "float" for the float formats, below
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

The float formats (``kind`` of the scheme dict; type "float", symmetric true, dynamic false,
actorder null in each)::

    format                 kind    num_bits  strategy                 group_size  block_structure
    float-quantized        fp8     8         "tensor" | "channel"     null / -1   null
                                             "block"                  null        [128, 128]
    nvfp4-pack-quantized   nvfp4   4         "tensor_group"           16          null
    mxfp4-pack-quantized   mxfp4   4         "group"                  32          null

    any other strategy, block shape, group size or width of a float format is refused by name
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from refsim._validate import require_instance, require_path
from refsim.errors import CheckpointError
from refsim.formats import gptq as gptq_format

__all__ = ["CTConfig", "CT_BITS", "FLOAT_FORMATS"]

#: the bit-widths refsim reads and writes in compressed-tensors' pack-quantized format (GPTQ's words)
CT_BITS = gptq_format.BITS

#: the weight-only compressor format refsim reads
PACK_QUANTIZED = "pack-quantized"
#: compressed-tensors float format -> refsim's kind of its layers, and (num_bits, strategy, group_size,
#: block_structure) of each strategy the library writes for it
FLOAT_FORMATS: dict[str, str] = {"float-quantized": "fp8", "nvfp4-pack-quantized": "nvfp4",
                                 "mxfp4-pack-quantized": "mxfp4"}
_FLOAT_SCHEMES: dict[str, dict[str, tuple]] = {
    "fp8": {"tensor": (8, None, None), "channel": (8, None, None), "block": (8, None, [128, 128])},
    "nvfp4": {"tensor_group": (4, 16, None)},
    "mxfp4": {"group": (4, 32, None)},
}
_FORMATS = (PACK_QUANTIZED, *FLOAT_FORMATS)
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
        if top not in (*_FORMATS, "mixed-precision"):
            raise _fail(where, "format", f"must be one of {list(_FORMATS)} (or 'mixed-precision' of such "
                        "groups): the layouts refsim reads", top)
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
        families = sorted({"int" if g["kind"] == "int" else "float" for g in self.groups.values()})
        if len(families) > 1:
            raise _fail(where, "config_groups", "must all be int (pack-quantized) or all float formats "
                        "(one layer layout per checkpoint)", [f"{n}: {g['kind']}" for n, g in self.groups.items()])
        #: "int" (pack-quantized layers) or "float" (fp8 / nvfp4 / mxfp4 layers)
        self.family = families[0]
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
    if fmt is None and top in _FORMATS:
        fmt = top
    if fmt not in _FORMATS:
        raise _fail(where, "format", f"must be one of {list(_FORMATS)} (the layouts refsim reads)", fmt)
    if top != "mixed-precision" and fmt != top:
        raise _fail(where, "format", f"must equal the checkpoint's format {top!r} (groups name their own only "
                    "under 'mixed-precision')", fmt)
    kind = FLOAT_FORMATS.get(fmt, "int")
    if grp.get("output_activations") is not None:
        raise _fail(where, "output_activations", "must be null (refsim reads weights)", grp["output_activations"])
    act = grp.get("input_activations")
    if act is not None and (kind == "int" or not isinstance(act, dict)):
        raise _fail(where, "input_activations", "must be null for int groups (weight-only) and null or an "
                    "object for float groups", act)
    targets = grp.get("targets")
    if not isinstance(targets, list) or not targets:
        raise _fail(where, "targets", "must be a non-empty list of strings", targets)
    targets = [_Target(t, where, "targets") for t in targets]
    if kind == "int":
        return {"targets": targets, "kind": kind, **_weights(grp["weights"], f"{where}.weights")}
    return {"targets": targets, "kind": kind, "input_activations": act,
            **_float_weights(grp["weights"], f"{where}.weights", kind, fmt)}


def _float_weights(w: dict, where: str, kind: str, fmt: str) -> dict:
    """The weights of a float-format group (module docstring's table): bits, strategy, group_size."""
    extra = sorted(set(w) - _WEIGHT_KEYS)
    if extra:
        raise _fail(where, f"key {extra[0]!r}", "is not a QuantizationArgs field", w[extra[0]])
    kind_name = w.get("type", "int")
    if not isinstance(kind_name, str) or kind_name.lower() != "float":
        raise _fail(where, "type", f"must be 'float' for format {fmt!r}", kind_name)
    schemes = _FLOAT_SCHEMES[kind]
    strategy = w.get("strategy")
    if not isinstance(strategy, str) or strategy.lower() not in schemes:
        raise _fail(where, "strategy", f"must be one of {list(schemes)} for format {fmt!r}", strategy)
    strategy = strategy.lower()
    bits, gs, block = schemes[strategy]
    got = {"num_bits": w.get("num_bits", 8), "group_size": w.get("group_size"),
           "block_structure": w.get("block_structure")}
    if kind == "fp8" and got["group_size"] == -1:                  # the library's "no group" spelling
        got["group_size"] = None
    for key, want in (("num_bits", bits), ("group_size", gs), ("block_structure", block)):
        if got[key] != want or isinstance(got[key], bool):
            raise _fail(where, key, f"must be {want!r} for format {fmt!r} strategy {strategy!r}", got[key])
    for key, want in (("symmetric", True), ("dynamic", False)):
        if w.get(key, want) is not want:
            raise _fail(where, key, f"must be {want} (static symmetric weight scales)", w[key])
    if w.get("actorder") not in (None, False, "weight", "static"):   # GPTQ's processing order: no g_idx stored
        raise _fail(where, "actorder", "must be null, false, 'weight' or 'static' for a float format (no g_idx)",
                    w["actorder"])
    return {"bits": bits, "sym": True, "group_size": gs, "actorder": None, "strategy": strategy}


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
    return {"bits": bits, "sym": sym, "group_size": gs, "actorder": actorder, "strategy": strategy}
