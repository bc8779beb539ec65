"""Memory accounting of Any-Precision LLM deployments (the paper's Table 1), from the format.

What is stored (official ``pack.py`` output, see :mod:`refsim.formats.bitplane`):

    quantized linears   p bitplanes: p * N * K / 8 bytes per layer (p = the largest supported b)
    tables              one float16 table per supported bit-width b and output row:
                        N * 2**b * 2 bytes per layer
    everything else     float16: embeddings, lm_head (untied in Llama-2), norm weights

Separate deployment stores one b-bit model per supported b.  Assumption that reproduces the
paper's "Separate" column (to within 0.05 GB in every row): each separate model is counted as its
b-bit weights plus its own float16 non-quantized parameters, *without* per-model tables (with the
tables, {3,6} would be 8.53 GB instead of the paper's 8.3).  The any-precision column counts the
tables of every supported bit-width.  GB = 1e9 bytes.

Napkin math, Llama-2-7B (hidden 4096, MLP 11008, 32 layers, vocab 32000):
    quantized weights  32 * (4 * 4096*4096 + 3 * 4096*11008) = 6.476e9 weights
    rows (N) per model 32 * (4 * 4096 + 2 * 11008 + 4096)     = 1.360e6 table rows
    float16 rest       2 * 32000*4096 + 65 * 4096              = 2.624e8 params = 0.525 GB
    {3,...,8}: 6.476e9 B (8 planes) + 1.360e6 * 2 * (8+16+...+256) B + 0.525 GB = 8.37 GB
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import require_bool, require_instance, require_int, require_fields
from refsim.errors import FormatRuleError

__all__ = [
    "DecoderShape",
    "LLAMA2_7B",
    "MemoryRow",
    "PAPER_TABLE1",
    "linear_layers",
    "quantized_weight_count",
    "table_rows",
    "fp16_param_count",
    "anyprec_bytes",
    "separate_bytes",
    "memory_table",
]


@dataclass(frozen=True)
class DecoderShape:
    """A Llama-style decoder: every attention/MLP projection is quantized, the rest is fp16."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    vocab: int
    tied_embeddings: bool = False
    norms_per_layer: int = 2  # input_layernorm, post_attention_layernorm (RMSNorm weights)

    def __post_init__(self):
        require_fields(self)
        # sizes become Python ints (NumPy int32 sizes would overflow the weight counts)
        if not isinstance(self.name, str):
            raise FormatRuleError(f"name: must be a str; got {type(self.name).__name__}")
        for field in ("hidden", "intermediate", "layers", "vocab"):
            object.__setattr__(self, field, require_int(field, getattr(self, field), minimum=1))
        object.__setattr__(self, "norms_per_layer", require_int("norms_per_layer", self.norms_per_layer, minimum=0))
        if not isinstance(self.tied_embeddings, (bool, np.bool_)):
            raise FormatRuleError(f"tied_embeddings: must be True or False; got {self.tied_embeddings!r}")
        object.__setattr__(self, "tied_embeddings", bool(self.tied_embeddings))


LLAMA2_7B = DecoderShape("Llama-2-7B", hidden=4096, intermediate=11008, layers=32, vocab=32000)

# Paper Table 1 (any-precision GB, separate GB, saving), Llama-2-7B.
PAPER_TABLE1 = {
    (3, 6): (5.6, 8.3, 1.49),
    (4, 8): (7.7, 10.8, 1.40),
    (3, 4, 6): (5.6, 12.1, 2.15),
    (3, 4, 8): (7.7, 13.7, 1.76),
    (3, 4, 6, 8): (7.9, 19.1, 2.41),
    (3, 4, 5, 6, 7, 8): (8.4, 29.9, 3.56),
}


def linear_layers(m: DecoderShape) -> list[tuple[str, int, int]]:
    """(name, N = out_features, K = in_features) of the quantized projections of one layer."""
    require_instance("m", m, DecoderShape)
    h, i = m.hidden, m.intermediate
    return [("q_proj", h, h), ("k_proj", h, h), ("v_proj", h, h), ("o_proj", h, h),
            ("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)]


def quantized_weight_count(m: DecoderShape) -> int:
    """Number of quantized weights in the whole model."""
    require_instance("m", m, DecoderShape)
    return m.layers * sum(n * k for _, n, k in linear_layers(m))


def table_rows(m: DecoderShape) -> int:
    """Number of per-row lookup tables per bit-width (sum of N over all quantized linears)."""
    require_instance("m", m, DecoderShape)
    return m.layers * sum(n for _, n, _ in linear_layers(m))


def fp16_param_count(m: DecoderShape) -> int:
    """Parameters kept in float16: embeddings, lm_head (unless tied), all norm weights."""
    require_instance("m", m, DecoderShape)
    emb = m.vocab * m.hidden * (1 if m.tied_embeddings else 2)
    norms = (m.layers * m.norms_per_layer + 1) * m.hidden  # + the final norm
    return emb + norms


def _check_bits(bits) -> tuple[int, ...]:
    if isinstance(bits, (str, bytes)) or not isinstance(bits, (tuple, list, set, frozenset, range)):
        raise FormatRuleError(f"bits: must be a collection of bit-widths (e.g. (3, 4, 8)); got {type(bits).__name__}")
    bits = tuple(sorted(set(require_int("bit-width", b, minimum=1) for b in bits)))
    if not bits or bits[-1] > 8:
        raise FormatRuleError(f"bits: need at least one bit-width, all in 1..8; got {bits}")
    return bits


def anyprec_bytes(m: DecoderShape, bits) -> int:
    """Bytes of one any-precision model serving every b in ``bits``: max(bits) bitplanes, one
    float16 table per b and row, float16 rest."""
    require_instance("m", m, DecoderShape)
    bits = _check_bits(bits)
    weights = quantized_weight_count(m) * bits[-1] // 8
    tables = table_rows(m) * sum(2 ** b for b in bits) * 2
    return weights + tables + fp16_param_count(m) * 2


def separate_bytes(m: DecoderShape, bits, *, with_tables: bool = False) -> int:
    """Bytes of one separate b-bit model per b in ``bits`` (tables only if ``with_tables``)."""
    require_instance("m", m, DecoderShape)
    bits = _check_bits(bits)
    with_tables = require_bool("with_tables", with_tables)
    total = 0
    for b in bits:
        total += quantized_weight_count(m) * b // 8 + fp16_param_count(m) * 2
        if with_tables:
            total += table_rows(m) * 2 ** b * 2
    return total


@dataclass(frozen=True)
class MemoryRow:
    """One row of Table 1: bytes of both deployments and the saving ratio."""

    bits: tuple[int, ...]
    anyprec_bytes: int
    separate_bytes: int

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    @property
    def saving(self) -> float:
        """Separate bytes / any-precision bytes (the paper's "Memory Savings")."""
        return self.separate_bytes / self.anyprec_bytes


def memory_table(m: DecoderShape = LLAMA2_7B, bit_sets=tuple(PAPER_TABLE1), *,
                 separate_with_tables: bool = False) -> list[MemoryRow]:
    """Table 1 for ``m``: one :class:`MemoryRow` per set of supported bit-widths."""
    require_instance("m", m, DecoderShape)
    separate_with_tables = require_bool("separate_with_tables", separate_with_tables)
    if isinstance(bit_sets, (str, bytes)) or not isinstance(bit_sets, (tuple, list)):
        raise FormatRuleError(f"bit_sets: must be a list of bit-width collections; got {type(bit_sets).__name__}")
    bit_sets = [_check_bits(b) for b in bit_sets]
    return [MemoryRow(tuple(b), anyprec_bytes(m, b),
                      separate_bytes(m, b, with_tables=separate_with_tables)) for b in bit_sets]
