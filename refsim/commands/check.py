"""``refsim check MODULE:FUNCTION --fmt gptq``: :func:`refsim.testing.check_kernel` on a kernel that
runs in a process of its own, which holds nothing that decides the verdict.

Exit status: 0 only with a verdict that every case matches (or, with ``--accuracy``, lies within
the bound); 1 on a mismatch, a kernel that misbehaved (raised, exited, crashed, hung, wrote an
input, sent anything but its output), or no verdict at all (``refsim check`` itself was
terminated); 2 for bad arguments, a target that cannot be imported or compiled (one line on stderr).

This process runs the harness: cases, emulator, comparison, shrinking, diagnosis, the exit status.
It never imports the user's module; a child process in its own session does, and is called
through :class:`refsim.testing.sandbox.KernelProcess` (copies of the inputs in, the output's bytes
out, parsed strictly; docs/harness.md, "Threat model")::

    refsim check (this process)  --inputs of call n-->  kernel process: import MODULE, kernel(*copies)
        harness, verdict         <--output bytes------  (killed with its process group at the end)

``--deadline`` seconds (default :data:`DEFAULT_DEADLINE`; ``--deadline none`` for no limit) bound
the module's import and every kernel call; past it the kernel's process group is killed. It is
killed too when ``refsim check`` ends in any way: a verdict, an error, SIGTERM, SIGINT or SIGHUP.
Without ``--fmt`` the format is inferred from the kernel's parameter names (the child reports
them) and the progress says so; a kernel whose names fit no single format is refused.

A CUDA source or PTX file runs through :mod:`refsim.ptx` on the CPU, in the kernel's process:
``refsim check my_marlin.cu:marlin_kernel --launch my_launch.py:plan --fmt marlin`` compiles the
file (the ``cuda`` extra's nvcc, cached; its errors name the file and line), and launches its
``.entry`` ``marlin_kernel`` as ``plan(*inputs)`` describes (a :class:`refsim.cuda.LaunchPlan`).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import sys

__all__ = ["DEFAULT_DEADLINE", "FORMAT_NAMES", "add_check_options", "register", "run"]

#: seconds the kernel's import, and each kernel call, may take in ``refsim check`` unless
#: ``--deadline`` says otherwise
DEFAULT_DEADLINE = 60.0

#: sorted(refsim.testing.cases.FORMATS), spelled out so building the CLI parser does not
#: import the harness (~0.25 s for every refsim command); tests/commands keep the two equal
FORMAT_NAMES = ("anyprec", "atom", "awq", "fp8_block", "fp8_channel", "gptq", "gptq_v2", "hopper_w4a16", "marlin",
                "mixed_2_4_16", "mma_m16n8k16", "mma_m16n8k16_f16", "mma_s4", "mxfp4", "nf4", "nf4_dq",
                "nvfp4", "q4_0", "q4_k", "q8_0")


def _deadline(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds or 'none'; got {text!r}")
    return value


def _seed(text: str) -> int:
    """``--seed``: a non-negative int, or 'random' (one drawn now; check_kernel's progress prints it)."""
    if text.lower() == "random":
        return int.from_bytes(os.urandom(4), "little") >> 1
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer or 'random'; got {text!r}")
    return value


def add_check_options(p, *, launch_required: bool = False) -> None:
    """The options ``refsim check`` and ``refsim ptx check`` share."""
    if launch_required:
        p.add_argument("--launch", required=True,
                       help="MODULE:FUNCTION returning a refsim.cuda.LaunchPlan for the format's inputs")
    p.add_argument("--fmt", default=None, choices=FORMAT_NAMES,
                   help="the kernel's format (default: inferred from the kernel's parameter names, or refused)")
    p.add_argument("--arch", default="sm_80")
    p.add_argument("--sms", type=int, default=108, help="SM count = grid size (default 108, A100)")
    p.add_argument("--seed", type=_seed, default=0,
                   help="seed of the drawn cases' shapes and data: an integer (default 0: the same cases every run) "
                        "or 'random' (one drawn and printed); the progress prints the seed used")
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument("--max-size", type=int, default=None, help="largest case in multiply-adds")
    p.add_argument("--deadline", type=_deadline, default=DEFAULT_DEADLINE,
                   help=f"seconds the kernel's import, and each kernel call, may take, or 'none' "
                        f"(default {DEFAULT_DEADLINE:g})")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--save-failures", default=None, help=".npz path or directory for a failing case")
    p.add_argument("--accuracy", action="store_true",
                   help="accept outputs within the forward-error bound of --accumulation/--order around the exact "
                        "product (bit-exactness with refsim's order reported apart)")
    p.add_argument("--accumulation", default="fp32", choices=("fp32", "fp16"),
                   help="with --accuracy: the kernel's accumulator precision (default fp32)")
    p.add_argument("--order", default="sequential", choices=("sequential", "pairwise", "any"),
                   help="with --accuracy: the kernel's summation order (default sequential)")
    p.add_argument("--executor", default=None, metavar="SPEC",
                   help="run the cases in parallel: local:N, dask-local:N or dask://HOST:PORT (each worker runs its "
                        "own sandboxed kernel process); the first failing case in plan order is then shrunk and "
                        "diagnosed here, the serial run's verdict")
    p.add_argument("--legal", default=None, metavar="RULE",
                   help="the kernel's own shape rule, e.g. 'n%%128==0, m<=64' (clauses FIELD%%INT==0, FIELD<=INT, "
                        "FIELD>=INT, FIELD==INT, FIELD!=INT over the format's shape fields): pinned and drawn cases "
                        "respect it, skipped pinned cases are counted")


def register(subparsers) -> None:
    p = subparsers.add_parser("check", help="check a kernel bit for bit against refsim's emulator",
                              description="Check MODULE:FUNCTION bit for bit against refsim's emulator of a format "
                                          "(pinned regime-covering cases, then seeded draws; a diagnosis on mismatch), "
                                          "with the kernel in a process of its own that cannot reach the verdict: exit 0 only "
                                          "with a verdict that every case passed.")
    p.add_argument("kernel", help="MODULE:FUNCTION, path/to/file.py:FUNCTION, or path/to/file.cu|.ptx:ENTRY "
                                  "(with --launch)")
    p.add_argument("--launch", default=None,
                   help="for a .cu/.ptx kernel: MODULE:FUNCTION returning a refsim.cuda.LaunchPlan for the inputs")
    add_check_options(p)
    p.set_defaults(func=run)


_REQUEST = ("kernel", "launch", "fmt", "arch", "sms", "seed", "max_examples", "max_size", "deadline", "no_shrink",
            "save_failures", "accuracy", "accumulation", "order", "legal", "executor")


def run(args) -> int:
    """Run the check here with the kernel in a process of its own, print the verdict; the exit status."""
    return _supervise({name: getattr(args, name) for name in _REQUEST})


# ----------------------------------------------------------------------------------------------
# this process: the harness, with the kernel behind a process boundary


class _Terminated(BaseException):
    """refsim check received SIGTERM or SIGHUP (raised in the main thread by the handler)."""


@contextlib.contextmanager
def _signals_end_the_check():
    """SIGTERM and SIGHUP raise _Terminated (SIGINT raises KeyboardInterrupt), so the ``with`` of the
    kernel's process runs and kills its group; the previous handlers come back afterwards."""
    def handler(signum, frame):
        raise _Terminated(signal.Signals(signum).name)

    old = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            old[sig] = signal.signal(sig, handler)
    except ValueError:                          # not the main thread: the caller owns the signals
        pass
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def _not_dumpable():
    """Linux: this process is not dumpable while the kernel runs, so a process of the same user (the
    kernel's) cannot ptrace it or write its memory through /proc/PID/mem (prctl PR_SET_DUMPABLE)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    was = prctl(3, 0, 0, 0, 0)                  # PR_GET_DUMPABLE
    prctl(4, 0, 0, 0, 0)                        # PR_SET_DUMPABLE 0
    try:
        yield
    finally:
        if was > 0:
            prctl(4, was, 0, 0, 0)


def _supervise(request: dict) -> int:
    from refsim.errors import CompileError, RefsimError, ToolchainError
    from refsim.testing import harness          # the harness and every format, loaded before any kernel runs
    from refsim.testing.sandbox import KernelLoadError, KernelProcess

    def say(line):
        sys.stderr.write(f"check_kernel: {line}\n")

    with _signals_end_the_check(), _not_dumpable():
        try:
            with KernelProcess({k: request[k] for k in ("kernel", "launch", "arch")}, request["deadline"]) as kernel:
                res = harness.check_kernel(
                    kernel, request["fmt"], arch=request["arch"], sms=request["sms"], seed=request["seed"],
                    max_examples=request["max_examples"], max_size=request["max_size"], deadline=None,
                    shrink=not request["no_shrink"], save_failures=request["save_failures"],
                    mode="accuracy" if request["accuracy"] else "bitexact", accumulation=request["accumulation"],
                    order=request["order"], legal=request["legal"], executor=request["executor"], progress=say)
                kernel.settle()
        except KernelLoadError as err:
            sys.stderr.write(f"refsim check: no verdict: {err}\n")
            return 1
        except (harness.KernelMismatch, harness.KernelCallError) as err:
            sys.stdout.write(f"{err}\n")
            return 1
        except CompileError as err:              # nvcc's diagnostics keep their lines, naming the user's file
            sys.stderr.write(f"refsim check: error: {err}\n")
            return 2
        except (RefsimError, ToolchainError) as err:
            sys.stderr.write(f"refsim check: error: {' '.join(str(err).split())}\n")
            return 2
        except OSError as err:
            sys.stderr.write(f"refsim check: error: {err.filename or ''}: {err.strerror or err}\n")
            return 2
        except (_Terminated, KeyboardInterrupt) as err:
            how = f"received {err}" if isinstance(err, _Terminated) else "interrupted"
            sys.stderr.write(f"refsim check: no verdict: {how}; the kernel's process group was killed\n")
            return 1
    sys.stdout.write(f"{res.summary()}\n")
    return 0
