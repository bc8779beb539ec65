"""``refsim quantize MODEL --method ... --out DIR [--executor ...]``: quantize a whole FP model."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys


@contextlib.contextmanager
def progress_bar(quiet: bool, desc: str):
    """Yield ``update(done, total, name)`` driving a tqdm bar on stderr (nothing when quiet)."""
    if quiet:
        yield None
        return
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int, name: str) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=desc, unit="layer", file=sys.stderr, leave=False)
        bar.set_postfix_str(name[-40:], refresh=False)
        bar.update(done - bar.n)

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def _group(text: str):
    """``--group-size``: a positive integer, or 'none' for per-channel (-1, quantize_config.json's value for
    per-channel, is read the same)."""
    if text in ("none", "-1"):
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'none' (per-channel); got {text!r}")
    return int(text)


#: refsim.io.quantize.METHODS, spelled out so building the CLI parser does not import the
#: quantizers (~0.4 s for every refsim command); tests/commands keep the two equal
METHODS = ("rtn", "gptq", "awq", "anyprec", "atom", "mixed_2_4_16")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "quantize", help="quantize an FP safetensors model layer by layer (GPTQ, RTN, AWQ, Any-Precision, ...)",
        description="Quantize the linear layers of an FP/BF16 safetensors model (Llama-style decoders and BERT-style "
                    "encoders are calibrated on text through their own NumPy forward, layer by layer), write a "
                    "folder transformers/vLLM load (config.json with quantization_config, tokenizer files) and "
                    "print quality measured on held-out text: per layer, and perplexity (decoders) or embedding "
                    "cosine (encoders) at the model output.")
    p.add_argument("model", help="FP model: a folder of .safetensors files or one file (a float .gguf file for gguf:TYPE)")
    p.add_argument("--method", default="rtn", choices=METHODS,
                   help="quantization method (default rtn: round to nearest, the only one for the format presets)")
    p.add_argument("--out", required=True, help="output folder (must not exist, or be empty); a new .gguf file for gguf:TYPE")
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--group-size", type=_group, default=128, help="group size along K, or 'none' (per-channel; -1 reads the same)")
    p.add_argument("--sym", action="store_true", help="gptq/rtn: symmetric (zero = 2**(bits-1))")
    p.add_argument("--act-order", action="store_true", help="gptq: desc_act (process rows by descending diag H)")
    p.add_argument("--checkpoint-format", choices=("gptq", "gptq_v2"), default="gptq_v2",
                   help="gptq/rtn: zero-point convention (default gptq_v2; v1 'gptq' stores zero - 1 and cannot hold a zero of 0)")
    p.add_argument("--seed-bits", type=int, default=3, help="anyprec: seed precision")
    p.add_argument("--parent-bits", type=int, default=4, help="anyprec: parent precision")
    p.add_argument("--calib", default="auto",
                   help="'auto' (the built-in corpus, 4096 tokens, when refsim has a forward for the model), "
                        "'corpus:T', a UTF-8 text file ('PATH' or 'PATH:T' tokens), 'none', or a safetensors "
                        "file of per-layer inputs (T, K) named by layer")
    p.add_argument("--heldout", default="corpus",
                   help="text for the quality figures: 'corpus' (the built-in held-out split) or a text file")
    p.add_argument("--layers", default=None, help="regular expression selecting layers by name")
    p.add_argument("--ignore", default=None,
                   help="regular expression of layers left unquantized (default: embeddings and lm_head; '' = none)")
    p.add_argument("--to", default="auto",
                   help="output format: the method's own (auto), compressed-tensors (rtn, gptq, awq), "
                        "compressed-tensors:FP8_DYNAMIC|FP8_BLOCK|NVFP4A16|MXFP4A16 (llm-compressor's presets, rtn or gptq), "
                        "gguf:Q4_0|Q4_1|Q5_0|Q5_1|Q8_0|F16|BF16 (a float .gguf re-quantized, metadata kept) "
                        "or bitsandbytes 4-bit as transformers saves it (bnb-nf4, bnb-fp4; rtn)")
    p.add_argument("--double-quant", action="store_true",
                   help="bnb-nf4/bnb-fp4: bitsandbytes' double quantization of the absmax (bnb_4bit_use_double_quant)")
    p.add_argument("--executor", default="local",
                   help="'serial', 'local' (one process per core), 'local:N', 'dask-local:N', 'dask://HOST:PORT'")
    p.add_argument("--no-memory", action="store_true", help="skip the per-layer tracemalloc peak (faster)")
    p.add_argument("--json", action="store_true", help="print the whole quality summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from refsim.io.executor import executor_from_spec
    from refsim.io.quantize import QuantizeOptions, quantize_model

    opts = QuantizeOptions(args.method, bits=args.bits, group_size=args.group_size, sym=args.sym,
                           act_order=args.act_order, checkpoint_format=args.checkpoint_format,
                           seed_bits=args.seed_bits, parent_bits=args.parent_bits,
                           measure_memory=not args.no_memory)
    with executor_from_spec(args.executor) as ex, progress_bar(args.quiet, f"quantize {args.method}") as bar:
        summary = quantize_model(args.model, args.out, opts, executor=ex, calib=args.calib, layers=args.layers,
                                 ignore=args.ignore, to=args.to, heldout=args.heldout, progress=bar,
                                 double_quant=args.double_quant)
    for note in summary["notes"]:  # what config.json derived; loaders known to refuse the folder
        print(note, file=sys.stderr)
    if ":" in args.to and not args.json:               # a format preset: weight error per layer, no calibration
        for name, r in (summary["layers"].items() if isinstance(summary["layers"], dict)
                        else ((r["name"], r) for r in summary["layers"])):
            print(f"{name[-48:]:<48} {r['k']:>5} {r['n']:>5} max|dW| {r['max_abs_weight_error']:.4g}")
        print(f"wrote {args.out} ({len(summary['layers'])} layers, {args.to})")
        return 0
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{'layer':<48} {'K':>5} {'N':>5} {'held-out':>9} {'calib':>9} {'max|dW|':>9} {'s':>6} {'peak MiB':>8}")
    for r in summary["layers"]:
        cal = "-" if r["rel_output_error"] is None else f"{r['rel_output_error']:.4f}"
        held = "-" if r.get("heldout_rel_output_error") is None else f"{r['heldout_rel_output_error']:.4f}"
        peak = "-" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f}"
        print(f"{r['name'][-48:]:<48} {r['k']:>5} {r['n']:>5} {held:>9} {cal:>9} {r['max_abs_weight_error']:>9.4g} "
              f"{r['seconds']:>6.2f} {peak:>8}")
    print("(relative layer-output error ||XW - XW'|| / ||XW||: held-out text, and the calibration text itself)")
    mq = summary.get("model_quality")
    if mq and mq["metric"] == "perplexity":
        print(f"model: perplexity on {mq['heldout_tokens']} held-out tokens {mq['quantized']:.3f} "
              f"(unquantized {mq['fp']:.3f})")
    elif mq:
        print(f"model: embedding cosine similarity to the unquantized model on {mq['sequences']} held-out "
              f"sequences: mean {mq['mean']:.5f}, min {mq['min']:.5f}")
    print(f"wrote {args.out} ({len(summary['layers'])} layers, {summary['wall_seconds']:.1f} s)")
    return 0
