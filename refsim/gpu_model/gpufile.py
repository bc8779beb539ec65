"""GPU spec files: a GPU of the table with some constants replaced by measured ones.

``refsim calibrate`` writes one; ``refsim predict --gpu-file`` and ``refsim sweep --gpu-file`` read
it. JSON, UTF-8::

    {
      "format": "refsim-gpu-spec/1",
      "base": "h100-sxm",                      the table row it starts from (a name or alias)
      "name": "my-h100",                       the GPU's name in predictions
      "fields": {"dram_latency_s": 3.9e-07, ...},         GPUSpec fields replaced
      "provenance": {"dram_latency_s": ["microbenchmark", "refsim calibrate --measure, ..."]},
      "measured": {...}                        the benchmark results the fields came from (optional)
    }

Every field is checked by :class:`refsim.gpu_model.specs.GPUSpec` itself (type, range); an
unknown field, a missing key or a malformed file is a FormatRuleError naming the file and the rule.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

from refsim._validate import plain_scalar, require_instance, require_path
from refsim.errors import FormatRuleError
from refsim.gpu_model.specs import GPUSpec, expand_provenance, get_gpu

__all__ = ["FORMAT", "load_gpu_file", "gpu_file_dict", "write_gpu_file"]

FORMAT = "refsim-gpu-spec/1"
MAX_FILE_BYTES = 1 << 22
# fields a file may replace: the numbers, not the identity of the table row or its provenance
_REPLACEABLE = frozenset(f.name for f in fields(GPUSpec)) - {"name", "arch", "compute_capability", "provenance",
                                                            "l2_dirty_bytes"}


def gpu_file_dict(base: str, name: str, values: dict, provenance: dict, measured: dict | None = None) -> dict:
    """The JSON object of a spec file (module docstring); ``values`` are checked by building the spec."""
    spec = _apply(base, name, values, provenance, "values")
    out = {"format": FORMAT, "base": get_gpu(base).name, "name": spec.name, "fields": dict(values),
           "provenance": {k: list(v) for k, v in provenance.items()}}
    if measured is not None:
        out["measured"] = require_instance("measured", measured, dict)
    return out


def write_gpu_file(path, base: str, name: str, values: dict, provenance: dict, measured: dict | None = None) -> Path:
    """Write a spec file to ``path`` (a new file; an existing one is refused)."""
    path = require_path("path", path)
    if path.exists():
        raise FormatRuleError(f"path: must not exist (a spec file is never overwritten); got {str(path)!r}")
    text = json.dumps(gpu_file_dict(base, name, values, provenance, measured), indent=1, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _apply(base, name, values, provenance, where: str) -> GPUSpec:
    g = get_gpu(base)
    name = plain_scalar(name)
    if type(name) is not str or not name.strip() or len(name) > 64:
        raise FormatRuleError(f"{where}: name must be a non-empty string of at most 64 characters; got {name!r:.80}")
    if not isinstance(values, dict):
        raise FormatRuleError(f"{where}: fields must be an object of GPUSpec fields; got {type(values).__name__}")
    unknown = sorted(set(values) - _REPLACEABLE)
    if unknown:
        raise FormatRuleError(f"{where}: unknown or fixed GPUSpec fields {unknown}; a file may set {sorted(_REPLACEABLE)}")
    if not isinstance(provenance, dict) or not all(
            isinstance(v, (list, tuple)) and len(v) == 2 and all(type(x) is str for x in v) for v in provenance.values()):
        raise FormatRuleError(f"{where}: provenance must map a field to [tag, source]; got {provenance!r:.120}")
    prov = dict(g.provenance)
    try:                  # per field, as the table's rows hold it (a key may name a group: "a/b", "tc_*")
        prov.update(expand_provenance({k: tuple(v) for k, v in provenance.items()}, any_tag=True))
    except FormatRuleError as err:
        raise FormatRuleError(f"{where}: {err}") from None
    return replace(g, name=name.strip(), provenance=prov, **values)


def load_gpu_file(path) -> GPUSpec:
    """The :class:`GPUSpec` a spec file describes (module docstring)."""
    path = require_path("path", path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise FormatRuleError(f"gpu file: must be a readable file; got {str(path)!r} ({err.strerror})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise FormatRuleError(f"{path}: a spec file is at most {MAX_FILE_BYTES} bytes; got {len(raw)}")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise FormatRuleError(f"{path}: must be UTF-8 JSON; got {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise FormatRuleError(f"{path}: must be an object with \"format\": \"{FORMAT}\"; got "
                              f"{(doc.get('format') if isinstance(doc, dict) else type(doc).__name__)!r:.80}")
    for key in ("base", "name", "fields"):
        if key not in doc:
            raise FormatRuleError(f"{path}: must have the key {key!r}; got keys {sorted(doc)}")
    return _apply(doc["base"], doc["name"], doc["fields"], doc.get("provenance", {}), str(path))
