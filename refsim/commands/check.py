"""``refsim check MODULE:FUNCTION --fmt gptq``: run :func:`refsim.testing.check_kernel` on a kernel
and print its report, in a child process that the kernel cannot end with a false pass.

Exit status: 0 only with a verdict that every case matches (or, with ``--accuracy``, lies within
the bound); 1 on a mismatch, a failing kernel, or no verdict at all; 2 for bad arguments, a
target that cannot be imported or compiled (one line on stderr).

The kernel runs in a child Python process; the parent waits for the verdict on a private pipe::

    refsim check (parent) --request--> child: import the kernel, check_kernel(...)
            ^                                   | progress lines, "call"/"return" around each
            +------- verdict (JSON line) -------+ kernel call, then the verdict, then os._exit

Whatever the kernel does — ``sys.exit(0)``, ``os._exit(0)``, a signal, a segfault, raising
``KeyboardInterrupt``, spinning forever — the parent sees no verdict (or a failing one) and exits
1 with a message naming how the check ended and where. A kernel call has ``--deadline`` seconds
(default :data:`DEFAULT_DEADLINE`; ``--deadline none`` for no limit): Python code is interrupted
in the child (``KernelTimeout``); a call that does not return :data:`GRACE` seconds later (a loop
in C) has its process killed by the parent. Without ``--fmt`` the format is inferred from the
kernel's parameter names and the progress says so; a kernel whose names fit no single format is
refused.

A CUDA source or PTX file runs through :mod:`refsim.ptx` on the CPU:
``refsim check my_marlin.cu:marlin_kernel --launch my_launch.py:plan --fmt marlin`` compiles the
file (the ``cuda`` extra's nvcc, cached; its errors name the file and line), and launches its
``.entry`` ``marlin_kernel`` as ``plan(*inputs)`` describes (a :class:`refsim.cuda.LaunchPlan`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback

from refsim.errors import FormatRuleError

__all__ = ["DEFAULT_DEADLINE", "GRACE", "FORMAT_NAMES", "load_kernel", "add_check_options", "register", "run"]

#: seconds one kernel call may take in ``refsim check`` unless ``--deadline`` says otherwise
DEFAULT_DEADLINE = 60.0
#: seconds past the deadline after which a kernel call that ignores the interrupt is killed
GRACE = 5.0

#: sorted(refsim.testing.cases.FORMATS), spelled out so building the CLI parser does not
#: import the harness (~0.25 s for every refsim command); tests/commands keep the two equal
FORMAT_NAMES = ("anyprec", "atom", "awq", "gptq", "gptq_v2", "marlin", "mixed_2_4_16", "mma_m16n8k16",
                "mma_m16n8k16_f16", "mma_s4")


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
    except (Exception, SystemExit) as err:        # the module's own code failed or exited while loading
        raise FormatRuleError(f"kernel: importing {mod_name!r} raised {type(err).__name__}: {err}") from None
    kernel = getattr(module, func, None)
    if kernel is None:
        raise FormatRuleError(f"kernel: module {mod_name!r} has no attribute {func!r}")
    return kernel


def _kernel_of(request: dict):
    """The callable to check: an imported function, or a .cu/.ptx entry launched through refsim.ptx."""
    from refsim.testing.harness import _source_kernel

    path, _, entry = request["kernel"].rpartition(":")
    if path.endswith((".cu", ".ptx")):
        if request["launch"] is None:
            raise FormatRuleError(f"--launch: a CUDA/PTX kernel ({request['kernel']!r}) needs --launch MODULE:FUNCTION "
                                  f"returning a refsim.cuda.LaunchPlan; got none")
        return _source_kernel(path, entry, load_kernel(request["launch"]), request["arch"])
    if request["launch"] is not None:
        raise FormatRuleError(f"--launch: only for a .cu/.ptx kernel; got kernel {request['kernel']!r}")
    return load_kernel(request["kernel"])


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
                   help=f"seconds one kernel call may take, or 'none' (default {DEFAULT_DEADLINE:g})")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--save-failures", default=None, help=".npz path or directory for a failing case")
    p.add_argument("--accuracy", action="store_true",
                   help="accept outputs within the forward-error bound of --accumulation/--order around the exact "
                        "product (bit-exactness with refsim's order reported apart)")
    p.add_argument("--accumulation", default="fp32", choices=("fp32", "fp16"),
                   help="with --accuracy: the kernel's accumulator precision (default fp32)")
    p.add_argument("--order", default="sequential", choices=("sequential", "pairwise", "any"),
                   help="with --accuracy: the kernel's summation order (default sequential)")


def register(subparsers) -> None:
    p = subparsers.add_parser("check", help="check a kernel bit for bit against refsim's emulator",
                              description="Check MODULE:FUNCTION bit for bit against refsim's emulator of a format "
                                          "(pinned regime-covering cases, then seeded draws; a diagnosis on mismatch), "
                                          "in a child process: exit 0 only with a verdict.")
    p.add_argument("kernel", help="MODULE:FUNCTION, path/to/file.py:FUNCTION, or path/to/file.cu|.ptx:ENTRY "
                                  "(with --launch)")
    p.add_argument("--launch", default=None,
                   help="for a .cu/.ptx kernel: MODULE:FUNCTION returning a refsim.cuda.LaunchPlan for the inputs")
    add_check_options(p)
    p.set_defaults(func=run)


_REQUEST = ("kernel", "launch", "fmt", "arch", "sms", "seed", "max_examples", "max_size", "deadline", "no_shrink",
            "save_failures", "accuracy", "accumulation", "order")


def run(args) -> int:
    """Run the check in a child process and print its verdict (module docstring); the exit status."""
    return _supervise({name: getattr(args, name) for name in _REQUEST})


# ----------------------------------------------------------------------------------------------
# the parent: wait for a verdict


def _ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def _supervise(request: dict) -> int:
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", "import sys; from refsim.commands.check import _child; "
                              "_child(int(sys.argv[1]), sys.argv[2])", str(write_fd), json.dumps(request)],
                             pass_fds=(write_fd,), stdin=subprocess.DEVNULL)
    os.close(write_fd)
    verdict, last, call_t0, call_deadline, pending = None, "starting", None, None, b""
    try:
        while True:
            wait = None if call_t0 is None or call_deadline is None else \
                max(0.0, call_t0 + call_deadline + GRACE - time.monotonic())
            if not select.select([read_fd], [], [], wait)[0]:
                child.kill()
                child.wait()
                sys.stderr.write(f"refsim check: no verdict: a kernel call did not return within --deadline "
                                 f"{call_deadline:g} s and ignored the interrupt for {GRACE:g} s more (a loop outside "
                                 f"Python?); the check process was killed (last: {last})\n")
                return 1
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if "say" in msg:
                    last = msg["say"]
                    sys.stderr.write(f"check_kernel: {last}\n")
                elif "call" in msg:
                    call_t0, call_deadline = time.monotonic(), msg["call"]
                elif "return" in msg:
                    call_t0 = None
                else:
                    verdict = msg
    except KeyboardInterrupt:
        child.kill()
        child.wait()
        sys.stderr.write(f"refsim check: no verdict: interrupted (last: {last})\n")
        return 1
    finally:
        os.close(read_fd)
    returncode = child.wait()
    during = "during a kernel call" if call_t0 is not None else "outside a kernel call"
    if verdict is None:
        sys.stderr.write(f"refsim check: no verdict: the check process {_ended(returncode)} {during} before a "
                         f"verdict (last: {last}); a kernel must return its output, not end the process\n")
        return 1
    if verdict["exit"] == 2:
        sys.stderr.write(f"refsim check: error: {verdict['text']}\n")
    else:
        sys.stdout.write(f"{verdict['text']}\n")
    if returncode != 0:
        sys.stderr.write(f"refsim check: the check process {_ended(returncode)} after its verdict\n")
        return max(1, verdict["exit"])
    return verdict["exit"]


# ----------------------------------------------------------------------------------------------
# the child: run the check, report through the pipe, exit


def _guarded(kernel, send):
    """``kernel`` with a "call" / "return" message around every call (the parent's watchdog); its
    signature stays the kernel's (``functools.wraps``: the format is inferred from it)."""

    @functools.wraps(kernel)
    def call(*inputs):
        send(call=call.deadline)
        try:
            return kernel(*inputs)
        finally:
            send(**{"return": True})

    call.deadline = None
    return call


def _child(fd: int, request_json: str) -> None:
    out = os.fdopen(fd, "w")

    def send(**msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    status = 1
    try:
        status = _check(json.loads(request_json), send)
    except KeyboardInterrupt:
        send(verdict="fail", exit=1, text="no verdict: KeyboardInterrupt raised (by the kernel, or Ctrl-C) before the "
                                          "check ended")
        status = 0                             # the failing verdict is sent: the process itself did its job
    except BaseException as err:               # a kernel's exotic exception, or a fault of refsim's own
        traceback.print_exc()
        send(verdict="fail", exit=1, text=f"no verdict: the check raised {type(err).__name__}: {err}")
        status = 0
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        out.close()
        os._exit(status)


def _check(request: dict, send) -> int:
    from refsim.errors import RefsimError, ToolchainError
    from refsim.testing import harness

    try:
        kernel = _guarded(_kernel_of(request), send)
        kernel.deadline = request["deadline"]
        res = harness.check_kernel(
            kernel, request["fmt"], arch=request["arch"], sms=request["sms"], seed=request["seed"],
            max_examples=request["max_examples"], max_size=request["max_size"], deadline=request["deadline"],
            shrink=not request["no_shrink"], save_failures=request["save_failures"],
            mode="accuracy" if request["accuracy"] else "bitexact", accumulation=request["accumulation"],
            order=request["order"], progress=lambda line: send(say=line))
    except (harness.KernelMismatch, harness.KernelCallError) as err:
        send(verdict="fail", exit=1, text=str(err))
        return 0
    except (RefsimError, ToolchainError) as err:
        send(verdict="error", exit=2, text=" ".join(str(err).split()))
        return 0
    except OSError as err:
        send(verdict="error", exit=2, text=f"{err.filename or ''}: {err.strerror or err}")
        return 0
    send(verdict="pass", exit=0, text=res.summary())
    return 0
