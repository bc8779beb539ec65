"""``refsim validate``: does refsim compute what this GPU computes? Every refsim/cuda kernel, the official
kernels' recorded launches and a tensor-core probe per modelled mma form, on the GPU and through refsim,
one verdict per case (:mod:`refsim.testing.validate` holds the cases and the rules).

    refsim validate                      # --backend gpu when a GPU is usable, else --backend ptx
    refsim validate --backend gpu --json > validate.json
    refsim validate --backend ptx                    # every mma form under every arch model it has
    refsim validate --backend ptx --arch sm_90 --group mma --only '*bf16*'

The mma group also probes the zero-handling rules refsim states but no GPU has measured (``rule ...`` cases;
``--json`` lists them under ``unmeasured_rules``), runs the wgmma probes (refsim/cuda/wgmma.cu, sm_90a: on an
sm_90 GPU or through refsim.ptx; ``--json`` summarises every kind under ``kinds``) and lists the block-scaled
kinds defined as data without a kernel (``pending``). A kernel refsim.ptx cannot execute yet is ``not-run``
with the refused instruction named.

Exit status 0 when every case is bit-identical, 1 when any differs, errs, is not run or has no model on the
device's arch, 2 on bad arguments, without a usable GPU for --backend gpu, or when no case could run.
"""

from __future__ import annotations

import json
import sys

from refsim.commands import positive_int

_GROUPS = ("kernel", "official", "mma")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate", help="run refsim's kernels and tensor-core probes on a GPU and through refsim, case by case",
        description="Run every refsim/cuda kernel, the official kernels' recorded launches and a tensor-core "
                    "probe for every mma form refsim models, on the GPU (--backend gpu) and through refsim, and "
                    "print per case 'bit-identical' or the differences and which arch model matched. Without a "
                    "GPU (--backend ptx) the same cases run through refsim.ptx against refsim's emulators.")
    p.add_argument("--backend", choices=("gpu", "ptx"), default=None,
                   help="gpu: the current CUDA device through cuda.core; ptx: refsim.ptx on this CPU "
                        "(default: gpu when one is usable, else ptx)")
    p.add_argument("--arch", default=None,
                   help="ptx backend: run every case refsim models at this tensor-core model (default: each mma "
                        "form under every arch model it has, Marlin under sm_80 and sm_90, the rest at sm_80); "
                        "the gpu backend runs at the device's arch and compares under every model")
    p.add_argument("--group", action="append", choices=_GROUPS, default=None,
                   help="run only this group of cases (repeatable; default all)")
    p.add_argument("--only", action="append", default=[], metavar="PATTERN",
                   help="run only the cases whose name matches PATTERN (a glob or a substring; repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kernel and probe inputs (default 0)")
    p.add_argument("--tiles", type=positive_int, default=4, help="probe tiles per input category (default 4)")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.set_defaults(func=run)


def _backend(requested):
    """(backend, device info or None): gpu when requested or usable, ptx otherwise."""
    from refsim.cuda import gpu
    from refsim.errors import ToolchainError

    if requested == "ptx":
        return "ptx", None
    try:
        return "gpu", gpu.device_info()
    except ToolchainError:
        if requested == "gpu":
            raise
        return "ptx", None


def run(args) -> int:
    from refsim.testing import validate as v
    from refsim.errors import FormatRuleError

    groups = tuple(dict.fromkeys(args.group or _GROUPS))
    if args.list:
        for case in v.cases(seed=args.seed, tiles=args.tiles, groups=groups, only=tuple(args.only)):
            archs = f"; {', '.join(case.archs)}" if case.archs else ""
            sys.stdout.write(f"[{case.group}] {case.name}  ({case.what}{archs})\n")
        for name in v.pending(groups=groups, only=tuple(args.only)):
            sys.stdout.write(f"[mma] {name}  (pending: defined as data, no kernel runs it yet)\n")
        return 0
    backend, device = _backend(args.backend)
    if backend == "gpu":
        if args.arch is not None:
            raise FormatRuleError(f"--arch: the gpu backend runs on {device['arch']} and compares under every "
                                  f"model; --arch is for --backend ptx; got {args.arch!r}")
        arch = device["arch"]
    else:
        arch = args.arch
        if arch is not None and arch not in v.TENSOR_CORE_ARCHS:
            raise FormatRuleError(f"--arch: must be one of {list(v.TENSOR_CORE_ARCHS)}; got {arch!r}")
    selected = v.cases(seed=args.seed, tiles=args.tiles, groups=groups, only=tuple(args.only))  # bad arguments: exit 2
    if device:
        where = f"{device['name']} ({arch})"
    else:
        where = "refsim.ptx " + (f"at {arch}" if arch else "under each case's arch models") + " on this CPU"
    skipped = [c.name for c in selected if backend == "gpu" and not v.applicable(c, backend, arch)]
    if not args.json:
        sys.stdout.write(f"refsim validate: backend {backend}, {where}, seed {args.seed}\n")
        if skipped:
            sys.stdout.write(f"not run: {len(skipped)} cases whose PTX needs a newer arch than {arch} or is "
                             f"arch-specific to another SM (sm_90a: sm_90 only) ({', '.join(skipped)})\n")
        sys.stdout.flush()

    def show(r):
        if not args.json:
            sys.stdout.write(v.format_result(r, backend) + "\n")
            sys.stdout.flush()

    results = v.validate(backend=backend, arch=arch, seed=args.seed, tiles=args.tiles, groups=groups,
                         only=tuple(args.only), on_result=show)
    status = v.exit_status(results)
    counts = {k: sum(r.verdict == k for r in results)
              for k in ("bit-identical", "differs", "error", "not-run", "no-model")}
    if args.json:
        doc = {"backend": backend, "device": device, "arch": arch, "seed": args.seed, "tiles": args.tiles,
               "cases": [r.as_dict() for r in results], "not_run": skipped, "summary": counts,
               "kinds": v.kinds(results), "exit_status": status,
               "unmeasured_rules": v.unmeasured_rules(), "pending": v.pending(groups=groups, only=tuple(args.only))}
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        if not results:
            sys.stdout.write("no case matches the selection\n")
        rules = [r["name"] for r in v.unmeasured_rules()]
        if rules and "mma" in groups:
            sys.stdout.write(f"rules refsim states but no GPU has measured: {', '.join(rules)} (the 'rule ...' cases "
                             f"probe them; --json lists refsim's and MMA-Sim's answers)\n")
        waiting = v.pending(groups=groups, only=tuple(args.only))
        if waiting:
            sys.stdout.write(f"pending: {len(waiting)} block-scaled kinds defined as data, not run "
                             f"(no block-scaled mma kernel yet)\n")
        sys.stdout.write(f"summary: {counts['bit-identical']} bit-identical, {counts['differs']} differ, "
                         f"{counts['error']} errors, {counts['not-run']} not run (refsim.ptx refuses an instruction), "
                         f"{counts['no-model']} without a model on {arch or 'their archs'} (exit {status})\n")
    return status
