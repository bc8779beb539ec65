"""``refsim inspect PATH [--json]``: what a checkpoint holds and which kernels can run it."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "inspect", help="describe a checkpoint: format, layers, bits, groups, act-order, kernel fit",
        description="Read a checkpoint (GPTQ, AWQ, Marlin, Any-Precision, QIGen, Atom, 2/4/16 or an FP "
                    "safetensors model) one layer at a time and report format, bits, group size, act-order, "
                    "symmetry, zero-point convention, size on disk vs FP16 and the layers Marlin cannot run.")
    p.add_argument("path", help="checkpoint folder (or a single .safetensors file)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (per-layer keys include format, bits, group_size, desc_act, sym)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from refsim.io.inspect import format_table, inspect_checkpoint

    summary = inspect_checkpoint(args.path)
    print(json.dumps(summary, indent=2) if args.json else format_table(summary))
    return 0
