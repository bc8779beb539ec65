"""The README's quality table, computed: what `refsim quantize` prints for each method on the two bundled models.

Each row runs the README's command (4-bit, group 128, asymmetric unless --sym; calibration "auto": 4096
tokens of the built-in corpus; held-out split, 2048 tokens) through ``refsim.io.quantize.quantize_model``
and prints the README's markdown row: decoder (pydoc_llama) held-out perplexity at 4 and 3 bits, encoder
(all-MiniLM-L6-v2, fetched on first use) embedding cosine mean / min at 4 bits. AWQ at 3 bits is written
as compressed-tensors (AWQ GEMM checkpoints are 4-bit).

Cost (2-core machine): a decoder run takes 5-10 s, an encoder run about a minute (36 layers); the whole
table about 7 minutes. tests/test_readme_quality.py runs the decoder column (marked slow) and compares it
with the README.

The figures are BLAS floating point (the model forwards, GPTQ's Hessians and Cholesky factors): the last
digits may differ on another CPU (README, "Which bits hold on every machine").

    python bench/quality_table.py [--decoder-only] [--executor local]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

#: README row label -> QuantizeOptions arguments (None: the unquantized model)
ROWS = {
    "unquantized": None,
    "`rtn`": {"method": "rtn"},
    "`rtn --sym`": {"method": "rtn", "sym": True},
    "`gptq`": {"method": "gptq"},
    "`gptq --sym --act-order`": {"method": "gptq", "sym": True, "act_order": True},
    "`awq`": {"method": "awq"},
}


def model_quality(model: Path, options: dict, bits: int, executor: str = "serial") -> dict:
    """``summary["model_quality"]`` of ``refsim quantize MODEL`` with ``options`` at ``bits``."""
    from refsim.io.executor import executor_from_spec
    from refsim.io.quantize import QuantizeOptions, quantize_model

    opts = QuantizeOptions(**options, bits=bits, measure_memory=False)
    to = "compressed-tensors" if options["method"] == "awq" and bits != 4 else "auto"
    with tempfile.TemporaryDirectory() as tmp, executor_from_spec(executor) as ex:
        return quantize_model(model, Path(tmp) / "out", opts, executor=ex, to=to)["model_quality"]


def decoder_figures(executor: str = "serial") -> dict[str, tuple[float, float] | float]:
    """Row label -> (perplexity at 4 bits, at 3 bits); "unquantized" -> the FP perplexity."""
    from refsim.data.models import pydoc_llama_path

    path = pydoc_llama_path()
    out: dict = {}
    for label, options in ROWS.items():
        if options is None:
            continue
        q4, q3 = (model_quality(path, options, bits, executor) for bits in (4, 3))
        out.setdefault("unquantized", q4["fp"])
        out[label] = (q4["quantized"], q3["quantized"])
    return out


def encoder_figures(executor: str = "serial") -> dict[str, tuple[float, float]]:
    """Row label -> (embedding cosine mean, min) at 4 bits."""
    from refsim.data import minilm

    path = minilm.model_path()
    out = {}
    for label, options in ROWS.items():
        if options is not None:
            q = model_quality(path, options, 4, executor)
            out[label] = (q["mean"], q["min"])
    return out


def rows(decoder: dict, encoder: dict | None) -> list[str]:
    """The README's markdown rows (perplexity to 3 decimals, cosine to 4); "-" where not computed."""
    lines = []
    for label in ROWS:
        if label == "unquantized":
            dec, enc = f"{decoder[label]:.3f}", "1"
        else:
            dec = f"{decoder[label][0]:.3f} / {decoder[label][1]:.3f}"
            enc = "-" if encoder is None else f"{encoder[label][0]:.4f} / {encoder[label][1]:.4f}"
        lines.append(f"| {label} | {dec} | {enc} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decoder-only", action="store_true", help="skip the encoder column (about 5 minutes)")
    ap.add_argument("--executor", default="serial", help="as refsim quantize --executor (the figures do not depend on it)")
    args = ap.parse_args(argv)
    dec = decoder_figures(args.executor)
    enc = None if args.decoder_only else encoder_figures(args.executor)
    print("\n".join(rows(dec, enc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
