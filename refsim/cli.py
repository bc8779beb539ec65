"""The ``refsim`` command line.

Subcommands are plug-ins: every module in :mod:`refsim.commands` that defines
``register(subparsers)`` adds one (``report``, ``predict``, ``explain``, ...). ``register`` adds a
parser and sets its ``func`` default to a callable ``func(args) -> int`` (the exit status).
``python -m refsim ...`` runs the same :func:`main`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys

import refsim
import refsim.commands
from refsim.errors import CompileError, RefsimError, ToolchainError

#: exit status when the reader of stdout went away (``refsim inspect DIR | head``): 128 + SIGPIPE,
#: what a shell reports for a standard tool the closed pipe stopped, so ``set -o pipefail`` scripts
#: can tell the output was cut short; nothing is printed
EXIT_BROKEN_PIPE = 128 + int(getattr(signal, "SIGPIPE", 13))


class _Parser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line on stderr, exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse hook
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every plug-in subcommand registered (sorted by module name)."""
    parser = _Parser(
        prog="refsim",
        description="Golden reference for quantized-LLM kernels: formats, exact kernel "
        "arithmetic and GPU performance models.",
    )
    parser.add_argument("--version", action="version", version=f"refsim {refsim.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(refsim.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"refsim.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit status.

    Input errors (:class:`refsim.errors.RefsimError`, argparse usage errors, OS errors on output
    paths) and missing toolchains are printed as one line on stderr with exit status 2, not as a
    traceback; nvcc's diagnostics (CompileError) keep their lines after the one-line head. A closed stdout ends the command quietly with :data:`EXIT_BROKEN_PIPE`.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()                      # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except CompileError as err:  # nvcc's diagnostics keep their lines (FILE(LINE): error: ...)
        print(f"refsim {args.command}: error: {err}", file=sys.stderr)
        return 2
    except (RefsimError, ToolchainError) as err:
        print(f"refsim {args.command}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except OSError as err:  # an unwritable output path, a full disk: the user's environment
        print(f"refsim {args.command}: error: {err.filename or ''}: {err.strerror or err}", file=sys.stderr)
        return 2


def _silence_stdout() -> None:
    """Point stdout's descriptor at the null device, so the interpreter's final flush of what is
    still buffered does not raise (and print) a second BrokenPipeError."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced sys.stdout (tests): nothing to flush to
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
