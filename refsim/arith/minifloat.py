"""The minifloat element formats as data: FP8 (OCP e4m3/e5m2, AMD's fnuz pair), FP6 (e2m3, e3m2), FP4 (e2m1).

One row per format: exponent and mantissa bits, bias, largest finite value, Inf and NaN rules (the
value formula and the special codes are spelled out in :mod:`refsim.formats.minifloat`, which encodes
and decodes them and re-exports this table). It sits in :mod:`refsim.arith` so that the tensor-core
models (:mod:`refsim.arith.block_scaled`) read the same rows as the format layer above them.
"""

from __future__ import annotations

from dataclasses import dataclass

from refsim._validate import require_fields

__all__ = ["MiniFloat", "FORMATS"]


@dataclass(frozen=True)
class MiniFloat:
    """One row of the module's format table."""

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max_value: float
    has_inf: bool
    nan: str            # "all_ones" (S.1..1.1..1), "ieee" (exponent all ones, mantissa != 0), "0x80", "none"
    ml_dtypes: str

    def __post_init__(self):
        require_fields(self)

    @property
    def bits(self) -> int:
        """1 + E + M."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.exp_bits + self.man_bits)


FORMATS: dict[str, MiniFloat] = {f.name: f for f in (
    MiniFloat("e4m3", 4, 3, 7, 448.0, False, "all_ones", "float8_e4m3fn"),
    MiniFloat("e5m2", 5, 2, 15, 57344.0, True, "ieee", "float8_e5m2"),
    MiniFloat("e4m3fnuz", 4, 3, 8, 240.0, False, "0x80", "float8_e4m3fnuz"),
    MiniFloat("e5m2fnuz", 5, 2, 16, 57344.0, False, "0x80", "float8_e5m2fnuz"),
    MiniFloat("e3m2", 3, 2, 3, 28.0, False, "none", "float6_e3m2fn"),
    MiniFloat("e2m3", 2, 3, 1, 7.5, False, "none", "float6_e2m3fn"),
    MiniFloat("e2m1", 2, 1, 1, 6.0, False, "none", "float4_e2m1fn"),
)}
