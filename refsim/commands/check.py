"""``refsim check MODULE:FUNCTION --fmt marlin``: run :func:`refsim.testing.check_kernel` on a
kernel written in Python (any importable callable) and print its report.

Exit status 0 when every case matches, 1 on a mismatch or a failing kernel (the report on stdout),
2 for bad arguments or a target that cannot be imported (one line on stderr).

A CUDA source or PTX file runs through :mod:`refsim.ptx` on the CPU:
``refsim check my_marlin.cu:marlin_kernel --launch my_launch.py:plan --fmt marlin`` compiles the file
(the ``cuda`` extra's nvcc, cached), and launches its ``.entry`` ``marlin_kernel`` as ``plan(*inputs)``
describes (a function returning a :class:`refsim.cuda.LaunchPlan`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

from refsim.errors import FormatRuleError


def load_kernel(target: str):
    """The callable named by ``MODULE:FUNCTION`` (``MODULE`` importable, or a ``.py`` path)."""
    if target.count(":") != 1:
        raise FormatRuleError(f"kernel: must be MODULE:FUNCTION (e.g. my_kernels:marlin); got {target!r}")
    mod_name, func = target.split(":")
    try:
        if mod_name.endswith(".py"):
            spec = importlib.util.spec_from_file_location("_refsim_check_target", mod_name)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except (ImportError, FileNotFoundError) as err:
        raise FormatRuleError(f"kernel: cannot import {mod_name!r}: {err}") from None
    kernel = getattr(module, func, None)
    if kernel is None:
        raise FormatRuleError(f"kernel: module {mod_name!r} has no attribute {func!r}")
    return kernel


def _kernel_of(args):
    """The callable to check: an imported function, or a .cu/.ptx entry launched through refsim.ptx."""
    from refsim.testing.harness import _source_kernel

    path, _, entry = args.kernel.rpartition(":")
    if path.endswith((".cu", ".ptx")):
        if args.launch is None:
            raise FormatRuleError(f"--launch: a CUDA/PTX kernel ({args.kernel!r}) needs --launch MODULE:FUNCTION "
                                  f"returning a refsim.cuda.LaunchPlan; got none")
        return _source_kernel(path, entry, load_kernel(args.launch), args.arch)
    if args.launch is not None:
        raise FormatRuleError(f"--launch: only for a .cu/.ptx kernel; got kernel {args.kernel!r}")
    return load_kernel(args.kernel)


#: sorted(refsim.testing.cases.FORMATS), spelled out so building the CLI parser does not
#: import the harness (~0.25 s for every refsim command); tests/commands keep the two equal
FORMAT_NAMES = ("anyprec", "atom", "marlin", "mixed_2_4_16", "mma_m16n8k16", "mma_m16n8k16_f16", "mma_s4")


def add_check_options(p, *, launch_required: bool = False) -> None:
    """The options ``refsim check`` and ``refsim ptx check`` share."""
    if launch_required:
        p.add_argument("--launch", required=True,
                       help="MODULE:FUNCTION returning a refsim.cuda.LaunchPlan for the format's inputs")
    p.add_argument("--fmt", default="marlin", choices=FORMAT_NAMES)
    p.add_argument("--arch", default="sm_80")
    p.add_argument("--sms", type=int, default=108, help="SM count = grid size (default 108, A100)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument("--max-size", type=int, default=None, help="largest case in multiply-adds")
    p.add_argument("--deadline", type=float, default=None, help="seconds one kernel call may take")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--save-failures", default=None, help=".npz path or directory for a failing case")


def register(subparsers) -> None:
    p = subparsers.add_parser("check", help="check a Python kernel bit for bit against refsim's emulator",
                              description="Check MODULE:FUNCTION bit for bit against refsim's emulator of a format "
                                          "(pinned regime-covering cases, then seeded draws; a diagnosis on mismatch).")
    p.add_argument("kernel", help="MODULE:FUNCTION, path/to/file.py:FUNCTION, or path/to/file.cu|.ptx:ENTRY "
                                  "(with --launch)")
    p.add_argument("--launch", default=None,
                   help="for a .cu/.ptx kernel: MODULE:FUNCTION returning a refsim.cuda.LaunchPlan for the inputs")
    add_check_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from refsim.testing import harness

    kernel = _kernel_of(args)
    try:
        res = harness.check_kernel(kernel, args.fmt, arch=args.arch, sms=args.sms, seed=args.seed,
                                   max_examples=args.max_examples, max_size=args.max_size, deadline=args.deadline,
                                   shrink=not args.no_shrink, save_failures=args.save_failures)
    except (harness.KernelMismatch, harness.KernelCallError) as err:
        sys.stdout.write(f"{err}\n")
        return 1
    sys.stdout.write(f"{res.fmt}: {res.pinned} pinned + {res.drawn} drawn cases match on {res.arch}, sms={res.sms} "
                     f"(seed {res.seed}, {res.seconds:.1f} s)\n")
    return 0
