"""Instruction counts the performance model reads or is checked against, from refsim.ptx (deterministic).

    python bench/ptx_counts.py            # print the counts
    python bench/ptx_counts.py --write    # also write refsim/data/timings/ptx_counts.json

``hopper_w4a16``: the static instruction mix of one k-tile of the consumer warpgroup's main loop of
refsim/cuda/ptx/hopper_w4a16.sm_90a.ptx (the committed PTX; the loop from the label its back-branch after
``wgmma.wait_group`` targets to that branch, the barrier spin counted once), per consumer thread: the
in-register dequant cost kernels/hopper_w4a16.py charges.

``anyprec_official``: runs ``matmul_kbit_32<1, bits, false>`` (refsim/cuda/official/anyprec_matmul_kbit_32.ptx.gz, main.cu's
launch) through refsim.ptx (compiled executor) on seeded uniformly random bitplanes, LUT and activations
(numpy default_rng(0)) and keeps the launch's LaunchStats: warp instructions, shared-memory requests and
wavefronts (bank conflicts add wavefronts), opcodes. Deterministic: the same numbers on every run. The
performance model's expected LUT conflict degree (kernels/anyprec.lds_conflict_degree) is tested
against the wavefronts per lookup here (tests/gpu_model/kernels/test_anyprec.py).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from refsim.cuda import official_anyprec
from refsim.ptx import Module
from refsim.ptx.parse import parse

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "refsim" / "data" / "timings" / "ptx_counts.json"
HOPPER_PTX = ROOT / "refsim" / "cuda" / "ptx" / "hopper_w4a16.sm_90a.ptx"
N = K = 4096
BITS = (3, 4, 5, 6, 7, 8)


def counts(n: int = N, k: int = K, bits_list=BITS) -> dict:
    """{bits: dict(warp_instructions, shared_requests, shared_wavefronts, lds, per_chunk...)} of one M = 1 launch."""
    mod = Module(official_anyprec.ptx_text())
    out = {}
    for bits in bits_list:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, k)).astype(np.float16)
        q = rng.integers(0, 2**32, size=(bits, n, k // 32), dtype=np.uint64).astype(np.uint32)
        lut = rng.standard_normal((n, 2**bits)).astype(np.float16)
        c = np.zeros((1, n), np.float16)
        launch = official_anyprec.launch_of(1, n, k, bits)
        st = mod.launch(launch.kernel, launch.grid, launch.block, (x, q, np.uint32(1), np.uint32(n), np.uint32(k), lut, c),
                        executor="compiled")
        lds = sum(v for name, v in st.opcodes.items() if name.startswith("ld.shared"))
        chunks = n * k // 1024                     # one warp's step: 1024 weights of one row
        out[str(bits)] = {"entry": launch.kernel, "grid": launch.grid, "block": list(launch.block),
                          "warp_instructions": st.warp_instructions, "shared_requests": st.shared_requests,
                          "shared_wavefronts": st.shared_wavefronts, "ld_shared": lds,
                          "warp_instructions_per_chunk": st.warp_instructions / chunks,
                          "ld_shared_per_chunk": lds / chunks,
                          "wavefronts_per_request": st.shared_wavefronts / st.shared_requests}
    return out


def hopper_w4a16_ktile() -> dict:
    """{instruction name: count} of one k-tile of hopper_w4a16_gemm's consumer loop (module docstring)."""
    text = HOPPER_PTX.read_text(encoding="utf-8")
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if "wgmma.mma_async" in ln)
    back = next(i for i in range(first, len(lines)) if re.match(r"\s*@%p\d+ bra\s+\$L__\w+;", lines[i]))
    label = re.search(r"(\$L__\w+);", lines[back]).group(1)
    start = next(i for i, ln in enumerate(lines) if ln.strip() == label + ":")
    mix: dict = {}
    for ins in parse(text).kernels["hopper_w4a16_gemm"].instructions:
        if start + 1 < ins.line <= back + 1:                 # PTX lines are 1-based
            mix[ins.name] = mix.get(ins.name, 0) + 1
    return dict(sorted(mix.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    args = ap.parse_args()
    mix = hopper_w4a16_ktile()
    doc = {"generated_by": "python bench/ptx_counts.py --write (refsim.ptx); never edit by hand",
           "hopper_w4a16": {"what": "static PTX instructions of one k-tile (64 x 64 weights) of the consumer loop, "
                                    "per consumer thread", "ptx": "refsim/cuda/ptx/hopper_w4a16.sm_90a.ptx",
                            "instructions": mix},
           "anyprec_official": {"shape": {"m": 1, "n": N, "k": K},
                                "data": "numpy default_rng(0): uniform bitplane words, normal LUT and x",
                                "bits": counts()}}
    print(f"hopper_w4a16: {sum(mix.values())} PTX instructions per k-tile per consumer thread: {mix}")
    for b, c in doc["anyprec_official"]["bits"].items():
        print(f"bits {b}: {c['warp_instructions_per_chunk']:.1f} warp instr / chunk, {c['ld_shared_per_chunk']:.1f} LDS / "
              f"chunk, {c['wavefronts_per_request']:.4f} wavefronts / request")
    if args.write:
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
