"""Plug-in subcommands of the ``refsim`` CLI; see :mod:`refsim.cli`."""

import argparse
import math
import re


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text!r}")
    return value


_CLOCK = re.compile(r"^(\d+(?:\.\d+)?)\s*(hz|mhz|ghz)?$")


def clock_arg(text: str):
    """argparse type for ``--clock``: ``base``, ``boost``, ``sustained`` (any case) or a frequency
    ``1500``/``1500MHz`` (a bare number is MHz), ``1.5GHz`` or ``1500000000Hz``; returns the name or
    the frequency in Hz (float)."""
    t = text.strip().lower()
    if t in ("base", "boost", "sustained"):
        return t
    m = _CLOCK.match(t)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"must be base, boost, sustained or a frequency like 1500, 1500MHz or 1.5GHz; got {text!r}")
    value, unit = float(m.group(1)), m.group(2) or "mhz"
    hz = value * {"hz": 1.0, "mhz": 1e6, "ghz": 1e9}[unit]
    if not 1e8 <= hz <= 1e10:
        raise argparse.ArgumentTypeError(f"must be a clock between 100 MHz and 10 GHz; got {text!r}")
    return hz


def add_target_args(p, *, many: bool) -> None:
    """``--gpu`` / ``--gpu-file`` (one of them) and ``--kernel`` of ``refsim predict`` (one each) and
    ``refsim sweep`` (``many``: comma-separated lists)."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--gpu", help="GPU names, comma-separated (aliases accepted)" if many
                       else "GPU name or alias (unknown names list the valid ones)")
    which.add_argument("--gpu-file", default=None, help="a GPU spec file written by refsim calibrate")
    p.add_argument("--kernel", required=True, help="kernel families, comma-separated" if many
                   else "kernel family (unknown names list the valid ones)")


def add_kernel_options(p) -> None:
    """``--bits``, ``--group-size``, ``--clock`` and the measurement conditions (:func:`add_condition_args`)
    of ``refsim predict`` / ``refsim sweep``."""
    p.add_argument("--bits", type=positive_int, default=None, help="weight bit-width (kernel default if omitted)")
    p.add_argument("--group-size", type=positive_int, default=None, help="quantization group size along K")
    p.add_argument("--clock", default="sustained", type=clock_arg,
                   help="SM clock: sustained (default), boost, base, or a frequency (1500, 1500MHz, 1.5GHz)")
    add_condition_args(p)


def add_condition_args(p) -> None:
    """``--ecc``, ``--cache`` and ``--timing``: the measurement conditions of ``refsim predict`` /
    ``refsim sweep`` besides ``--clock`` (refsim.gpu_model.conditions)."""
    p.add_argument("--ecc", default=None, type=str.lower, choices=("on", "off"),
                   help="DRAM ECC state (default: the card's own: A10 and HBM parts on, GeForce off)")
    p.add_argument("--cache", default="cold", type=str.lower, choices=("cold", "dirty", "warm"),
                   help="L2 state: cold (default: flushed clean, as Nsight Compute measures), dirty (a "
                        "buffer larger than L2 zeroed before each launch, as triton's do_bench), warm "
                        "(back-to-back launches: the working set's resident share streams from L2)")
    p.add_argument("--timing", default="kernel", type=str.lower, choices=("kernel", "events"),
                   help="what the time covers: kernel (default: the kernel's own duration, Nsight "
                        "Compute) or events (CUDA events around one launch: the launch cost included)")
