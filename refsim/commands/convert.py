"""``refsim convert SRC --to marlin|gptq-v1|gptq-v2|awq|compressed-tensors|qigen|anyprec|fp8-block OUT``."""

from __future__ import annotations

import argparse
import json
import sys

from refsim.commands.quantize import progress_bar


#: refsim.io.convert.TARGETS, spelled out so building the CLI parser does not import the checkpoint
#: readers (~0.5 s for every refsim command); tests/commands keep the two equal
TARGETS = ("marlin", "gptq-v1", "gptq-v2", "awq", "compressed-tensors", "qigen", "anyprec", "fp8-block")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert", help="convert a checkpoint (GPTQ/AWQ/compressed-tensors/Marlin between each other, GPTQ -> QIGen, "
             "FP -> Any-Precision, DeepSeek-style FP8 blocks <-> compressed-tensors float-quantized)",
        description="Convert SRC into the new folder OUT (written to a temporary folder and renamed: a refused "
                    "or failed conversion leaves OUT absent or empty). Exit 2 with one line on stderr on refusal.")
    p.add_argument("src", help="source checkpoint folder")
    p.add_argument("--to", required=True, choices=TARGETS, help="target format")
    p.add_argument("out", help="output folder (must not exist, or be empty)")
    p.add_argument("--requantize", action="store_true",
                   help="marlin: re-quantize layers Marlin cannot take as is (asymmetric, other group sizes) "
                        "symmetrically and report the error added")
    p.add_argument("--mb", type=int, default=None, help="qigen: block height (multiple of 32 dividing K)")
    p.add_argument("--tb", type=int, default=32, help="qigen: panel width (multiple of 8 dividing N)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from refsim.io.convert import convert

    with progress_bar(args.quiet, "convert") as bar:
        summary = convert(args.src, args.to, args.out, requantize=args.requantize, mb=args.mb, tb=args.tb,
                          progress=bar)
    for note in summary.get("notes", []):  # what config.json derived; loaders known to refuse the folder
        print(note, file=sys.stderr)
    requant = {k: v for k, v in summary.get("layers", {}).items() if isinstance(v, dict) and v.get("requantized")}
    for name, v in requant.items():
        print(f"{name}: re-quantized ({v['reason']}); added error max |dW| = {v['max_abs']:.4g}, "
              f"||dW||/||W|| = {v['rel_fro']:.4g}", file=sys.stderr)
    print(json.dumps({"out": args.out, "to": args.to, "layers": len(summary.get("layers", {})),
                      "requantized": len(requant)}))
    return 0
