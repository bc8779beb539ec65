"""Benchmark: whole-model quantization of all-MiniLM-L6-v2 on each executor, measured in one run.

Quantizes every encoder linear layer (36) with ``--method`` (default gptq) on ``serial``, ``local:2``
and ``dask-local:2`` and prints, per executor, the wall time of the quantization loop, the sum of the
per-layer job times (busy time of the workers), their ratio (how many workers were busy on average)
and the largest per-job tracemalloc peak; the speed-up over serial is the ratio of loop wall times.
It also checks that every executor wrote the same bytes. On a machine whose cores are taken by other
work, the speed-up stays near 1 while the busy ratio shows the overlap.

    python bench/bench_quantize_executors.py [--method gptq] [--executors serial,local:2,dask-local:2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from refsim.data import minilm
from refsim.io.executor import executor_from_spec
from refsim.io.quantize import QuantizeOptions, quantize_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", default="gptq")
    ap.add_argument("--executors", default="serial,local:2,dask-local:2")
    args = ap.parse_args()
    model = minilm.model_path()
    rows, blobs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.executors.split(","):
            out = Path(tmp) / spec.replace(":", "_")
            with executor_from_spec(spec) as ex:
                s = quantize_model(model, out, QuantizeOptions(args.method), executor=ex)
            busy = sum(r["seconds"] for r in s["layers"])
            rows.append((spec, s["wall_seconds"], busy, s["max_layer_peak_bytes"]))
            blobs[spec] = (out / ("model.safetensors")).read_bytes()
    base = rows[0][1]
    print(f"{'executor':<14} {'loop wall s':>11} {'job s':>8} {'busy ratio':>10} {'speed-up':>9} {'max job peak MiB':>17}")
    for spec, wall, busy, peak in rows:
        print(f"{spec:<14} {wall:>11.2f} {busy:>8.2f} {busy / wall:>10.2f} {base / wall:>9.2f} {peak / 2**20:>17.1f}")
    same = len(set(blobs.values())) == 1
    print(f"identical checkpoints across executors: {same}")


if __name__ == "__main__":
    main()
