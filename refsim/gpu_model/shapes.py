"""Built-in linear-layer shape sets of common models (per transformer block, then × layers).

Each entry is ``(name, n, k, count)`` with n = output features, k = input features (the papers'
``n × k`` weight shape), and ``count`` = how many such layers per block. Sources: the models'
published configs (hidden size, intermediate size, heads / KV heads, layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from refsim._validate import require_choice, require_fields

__all__ = ["ModelShapes", "MODELS", "get_model", "model_names"]


@dataclass(frozen=True)
class ModelShapes:
    name: str
    layers: int
    linears: tuple  # ((name, n, k, count_per_block), ...)
    source: str

    def __post_init__(self) -> None:
        require_fields(self)

    def per_block(self) -> list[tuple[str, int, int, int]]:
        return list(self.linears)


def _llama(name, hidden, inter, layers, kv_heads, heads, source):
    head_dim = hidden // heads
    kv = kv_heads * head_dim
    linears = (("q_proj", hidden, hidden, 1), ("k_proj", kv, hidden, 1), ("v_proj", kv, hidden, 1),
               ("o_proj", hidden, hidden, 1), ("gate_proj", inter, hidden, 1), ("up_proj", inter, hidden, 1),
               ("down_proj", hidden, inter, 1))
    return ModelShapes(name, layers, linears, source)


MODELS = {m.name: m for m in [
    _llama("llama-2-7b", 4096, 11008, 32, 32, 32, "meta-llama/Llama-2-7b-hf config.json"),
    _llama("llama-2-13b", 5120, 13824, 40, 40, 40, "meta-llama/Llama-2-13b-hf config.json"),
    _llama("llama-3-8b", 4096, 14336, 32, 8, 32, "meta-llama/Meta-Llama-3-8B config.json"),
    _llama("mistral-7b", 4096, 14336, 32, 8, 32, "mistralai/Mistral-7B-v0.1 config.json"),
]}


def model_names() -> list[str]:
    return sorted(MODELS)


def get_model(name: str) -> ModelShapes:
    """Shape set for ``name``; unknown names raise FormatRuleError listing the valid ones."""
    require_choice("model", name, model_names())
    return MODELS[name]


def shape_layers(name: str) -> dict[tuple[int, int], str]:
    """(n, k) -> the names of the model's linears of that shape, joined by "/" ("q_proj/o_proj"),
    in first-seen order: the ``layer`` column of a ``refsim sweep --model`` CSV."""
    out: dict[tuple[int, int], list[str]] = {}
    for lname, n, k, _ in get_model(name).linears:
        out.setdefault((n, k), []).append(lname)
    return {shape: "/".join(names) for shape, names in out.items()}


def unique_layer_shapes(name: str) -> list[tuple[int, int]]:
    """Distinct (n, k) linear shapes of a model, in first-seen order."""
    seen = []
    for _, n, k, _ in get_model(name).linears:
        if (n, k) not in seen:
            seen.append((n, k))
    return seen
