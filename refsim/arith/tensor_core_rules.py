"""Zero-handling rules refsim's tensor-core models state but no hardware data of refsim's has measured.

Spec
----
table           :data:`UNMEASURED`: one :class:`UnmeasuredRule` per rule where refsim's models and MMA-Sim's
                (arXiv:2511.10909; its models agree with refsim's on every other output of the mma kinds both
                model) give different bits. Each carries the instruction and the single 16 x 8 probe tile
                (:func:`probe_tile`) that tells the two apart, refsim's and MMA-Sim's D for the tile's
                distinguishing element, and ``measured_at`` (the archs where a GPU has answered: none yet).
                ``refsim validate``'s mma group runs every tile (``rule <name>: ...`` cases) and prints the
                table with ``--json``; docs/emulator.md lists it.
rules           negzero-sum        a zero sum is -0 when every product is -0 and C is -0 (IEEE's sign of an
                                   exact zero sum of -0 terms); MMA-Sim writes +0.
                zero-product-exp   a zero product aligns at e_zero (-132 / -133), whatever the other operand;
                                   MMA-Sim aligns 0 x b at -126 + e(b), so 0 x 2^127 raises E to 1 and the
                                   coarser grid drops the small products.
                f16-zero-floor     with an fp16 accumulator a zero C aligns at e_zero_f16 (-21 on sm_80/86/87/89),
                                   a floor that truncates products below 2^(-21-24); MMA-Sim aligns it at -126.
source          refsim/arith/tensor_core.py (the rules as implemented); MMA-Sim's published models
                (microsoft/MMA-Sim, ``nv_fused_dot_add``: a zero operand takes exponent -126, the sum starts at +0).

Tile values (worked by hand, checked in ``tests/arith/test_tensor_core_rules.py``)::

    negzero-sum       f16 in, f32 out: A = -0 everywhere, B = +1 (even columns) / -1 (odd), C = -0
                      even columns: 16 products -0 and C -0 -> refsim -0, MMA-Sim +0 (odd columns +0 in both)
    zero-product-exp  bf16 in, f32 out: A[0, :3] = [0, 1, 1], B[:3, 0] = [2^127, 2^-20 (1 + 2^-7), 2^-42], C = 0
                      refsim: E = -20, every term on the grid -> 2^-20 (1 + 2^-7 + 2^-22)
                      MMA-Sim: E = 1, grid 2^-23 (sm_80) / 2^-24 (sm_90) drops 2^-27 and 2^-42 -> 2^-20
    f16-zero-floor    f16 in, f16 out: A[0, :2] = [2^-13 (1 + 2^-10), 2^-13], B[:2, 0] = [2^-13 (1 + 2^-10),
                      2^-13 (1 - 2^-9)], C = +0: products 2^-26 + 2^-35 + 2^-46 and 2^-26 - 2^-35
                      refsim sm_80: E = -21, grid 2^-45 drops 2^-46: S = 2^-25, a tie -> even: +0
                      MMA-Sim: E = -26, S = 2^-25 + 2^-46 > half of 2^-24 -> 2^-24 (refsim sm_90: F = 25,
                      grid 2^-47 keeps 2^-46 -> 2^-24 too: the tile tells the models apart on sm_80/86/87/89)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import require_choice, require_fields

__all__ = ["UnmeasuredRule", "UNMEASURED", "rule", "probe_tile"]


@dataclass(frozen=True)
class UnmeasuredRule:
    """One rule of :data:`UNMEASURED` (module spec). ``refsim_d`` / ``mma_sim_d``: the raw bits of D at
    ``element`` (row, column) of the probe tile, under refsim's model at ``archs`` and under MMA-Sim's."""

    name: str
    refsim: str           # the rule refsim implements
    mma_sim: str          # what MMA-Sim's model does instead
    instruction: str      # the mma.sync form of the probe tile
    archs: tuple[str, ...]    # the archs where the tile tells the two apart
    element: tuple[int, int]
    refsim_d: int
    mma_sim_d: int
    measured_at: tuple[str, ...] = ()    # archs where a GPU answered (none yet: the rule is unverified)

    def __post_init__(self):
        require_fields(self)

    @property
    def status(self) -> str:
        """``"unverified"`` until a GPU has answered the probe, then ``"measured"``."""
        return "measured" if self.measured_at else "unverified"

    def as_dict(self) -> dict:
        """JSON-ready fields (bits as hex strings) and the status."""
        d = dict(self.__dict__)
        d.update(refsim_d=f"0x{self.refsim_d:x}", mma_sim_d=f"0x{self.mma_sim_d:x}", status=self.status,
                 archs=list(self.archs), element=list(self.element), measured_at=list(self.measured_at))
        return d


_F16 = "mma.sync.aligned.m16n8k16.row.col.{d}.f16.f16.{d}"
_AMPERE_ADA = ("sm_80", "sm_86", "sm_87", "sm_89")
_ALL = _AMPERE_ADA + ("sm_90",)

UNMEASURED: tuple[UnmeasuredRule, ...] = (
    UnmeasuredRule("negzero-sum", "a zero sum is -0 when every product is -0 and C is -0, else +0",
                   "a zero sum is always +0", _F16.format(d="f32"), _ALL, (0, 0), 0x80000000, 0x00000000),
    UnmeasuredRule("zero-product-exp", "a zero product aligns at e_zero (-132 / -133) beside any operand",
                   "0 x b aligns at -126 + e(b): 0 x 2^127 raises the alignment exponent to 1",
                   "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", _ALL, (0, 0), 0x35810002, 0x35800000),
    UnmeasuredRule("f16-zero-floor", "fp16 accumulation: a zero C aligns at e_zero_f16 (-21), flooring the grid",
                   "a zero C aligns at -126: no floor", _F16.format(d="f16"), _AMPERE_ADA, (0, 0), 0x0000, 0x0001),
)


def rule(name: str) -> UnmeasuredRule:
    """The :class:`UnmeasuredRule` named ``name``."""
    table = {r.name: r for r in UNMEASURED}
    return table[require_choice("name", name, tuple(table))]


def probe_tile(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The probe tile of rule ``name`` as raw bits: A (16, 16) uint16, B (16, 8) uint16, C (16, 8) uint32
    (f32 accumulator) or uint16 (f16). Module spec for the values."""
    r = rule(name)
    A = np.zeros((16, 16), np.uint16)
    B = np.zeros((16, 8), np.uint16)
    if r.name == "negzero-sum":
        A[:] = 0x8000                                   # -0
        B[:, 0::2], B[:, 1::2] = 0x3C00, 0xBC00         # +1, -1
        return A, B, np.full((16, 8), 0x80000000, np.uint32)
    if r.name == "zero-product-exp":
        A[0, :3] = [0x0000, 0x3F80, 0x3F80]             # bf16 0, 1, 1
        B[:3, 0] = [0x7F00, 0x3581, 0x2A80]             # bf16 2^127, 2^-20 (1 + 2^-7), 2^-42
        return A, B, np.zeros((16, 8), np.uint32)
    A[0, :2] = [0x0801, 0x0800]                         # f16 2^-13 (1 + 2^-10), 2^-13
    B[:2, 0] = [0x0801, 0x07FC]                         # f16 2^-13 (1 + 2^-10), 2^-13 (1 - 2^-9)
    return A, B, np.zeros((16, 8), np.uint16)
