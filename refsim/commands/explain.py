"""``refsim explain TARGET``: print how a format's layout maps onto the hardware.

A small registry of named targets: a format adds its own with :func:`register_target`
(``name``, one-line help, a function adding its options, a function returning the text).
Built in: ``marlin`` (which (k, n) element each lane's 16-byte load holds, in which nibble, and
which ``mma.m16n8k16`` B-fragment element it feeds).
"""

from __future__ import annotations

import argparse

from refsim.commands import positive_int, positive_float  # noqa: F401

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Target:
    """One ``refsim explain`` target."""

    name: str
    help: str
    add_arguments: Callable  # (argparse parser) -> None
    explain: Callable  # (argparse namespace) -> str


TARGETS: dict[str, Target] = {}


def register_target(target: Target) -> None:
    """Add (or replace) a named explain target."""
    TARGETS[target.name] = target


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "explain",
        help="explain a format's layout in terms of the hardware (e.g. `refsim explain marlin`)",
        description="Explain how a format's bits map to threads, registers and instructions.",
    )
    sub = p.add_subparsers(dest="target", metavar="TARGET")
    for name in sorted(TARGETS):
        t = TARGETS[name]
        tp = sub.add_parser(name, help=t.help, description=t.help)
        t.add_arguments(tp)
        tp.set_defaults(func=_runner(t))
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _runner(target: Target):
    def run(args) -> int:
        print(target.explain(args))
        return 0

    return run


# ----------------------------------------------------------------------------------------------
# marlin
# ----------------------------------------------------------------------------------------------
def _lanes(text: str):
    """argparse type of ``--lanes``: 'all' or comma-separated lanes 0..31."""
    if text == "all":
        return range(32)
    try:
        lanes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be 'all' or comma-separated lanes 0..31; got {text!r}") from None
    bad = [x for x in lanes if not 0 <= x < 32]
    if bad:
        raise argparse.ArgumentTypeError(f"lanes must lie in 0..31 (a warp); got {bad[0]}")
    return lanes


def _marlin_args(p) -> None:
    p.add_argument("--lanes", type=_lanes, default="0,1,5", help="comma-separated lanes to list (default 0,1,5; 'all')")


def marlin_lane_table(lane: int) -> list[dict]:
    """Rows for one lane of a 16x64 tile: word, nibble, (k, n) from the real permutation, and the
    PTX B-fragment slot that element occupies (sub-tile, n8 half, register, half)."""
    from refsim.formats import marlin

    ids = np.arange(16 * 64, dtype=np.int64).reshape(16, 64)  # element id = 64 k + n
    slots = marlin.permute_weights(ids)[0]  # storage order of one tile, 8 per word
    rows = []
    g, t = lane // 4, lane % 4
    for j in range(4):
        for nib in range(8):
            e = int(slots[8 * (4 * lane + j) + nib])
            k, n = divmod(e, 64)
            half_n8 = (n % 16) // 8
            reg = 0 if k % 16 < 8 else 1
            hi = k % 2
            ok = (n == 16 * j + 8 * half_n8 + g) and (k % 8 // 2 == t)
            rows.append(dict(word=j, nibble=nib, k=k, n=n, n8=half_n8, reg=reg, half="hi" if hi else "lo", ok=ok))
    return rows


def explain_marlin(args) -> str:
    lanes = _lanes(args.lanes) if isinstance(args.lanes, str) else args.lanes
    out = [
        "Marlin B layout for one 16 (k) x 64 (n) tile = 512 bytes = 128 int32 words.",
        "Lane l loads 16 bytes at byte 16*l (one int4): words 4l..4l+3, word j for 16x16 sub-tile j.",
        "Each word feeds two mma.m16n8k16 (n8 halves) of its sub-tile: dequant(q) gives the first",
        "MMA's b0=(k 2t, 2t+1) and b1=(k 2t+8, 2t+9) at column g; dequant(q >> 8) the second (column g+8).",
        "g = lane // 4 (groupID), t = lane % 4 (threadID_in_group). Nibble i holds element [0,2,4,6,1,3,5,7][i].",
        "",
    ]
    for lane in lanes:
        out.append(f"lane {lane:2d}  (g={lane // 4}, t={lane % 4})  bytes {16 * lane}..{16 * lane + 15}")
        for r in marlin_lane_table(lane):
            if r["nibble"] == 0:
                out.append(f"  word {r['word']} (sub-tile j={r['word']}, n {16 * r['word']}..{16 * r['word'] + 15}):")
            lo_bit = 4 * r["nibble"]
            out.append(
                f"    nibble {r['nibble']} (bits {lo_bit + 3:2d}..{lo_bit:2d}) -> W[k={r['k']:2d}, n={r['n']:2d}]"
                f"  mma j{r['word']}.n8[{r['n8']}] b{r['reg']}.{r['half']}"
                f"{'' if r['ok'] else '   <-- does not match the PTX fragment rule'}"
            )
        out.append("")
    return "\n".join(out)


register_target(Target("marlin", "Marlin FP16xINT4: lanes, nibbles and mma B fragments", _marlin_args, explain_marlin))
