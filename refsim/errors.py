"""One exception family for every rule refsim enforces at its public boundary.

All of them derive from :class:`RefsimError`, itself a :class:`ValueError`, so callers who
only care that "the input was wrong" can catch ``ValueError``. Messages follow one template:
``"<what>: <rule broken>; got <value received>"``.

    RefsimError(ValueError)
    ├── ShapeError          array rank/shape/divisibility rules (K % group_size, K % 32, ...)
    ├── DtypeError          array dtype rules (codes must be uint8, scales float16, ...)
    ├── FormatRuleError     format or algorithm parameters (bit-width, group size, codes
    │   │                   outside [0, 2**bits), unknown architecture or kernel name, ...)
    │   ├── NonFiniteError  NaN or Inf where the format does not allow it
    │   └── CheckpointError a checkpoint on disk breaks a rule: missing or unreadable file,
    │                       unknown config, missing tensor, mismatched layer sets (names the file)
    ├── UntrustedModelError a performance model known to be far off in this regime refuses to
    │                       answer ("no trustworthy model: ..."), naming the evidence
    └── (ToolchainError is separate: a missing or failing compiler is not bad input)
            └── CompileError   nvcc rejected a source: nvcc's diagnostics, one per line, naming the
                               user's file and line (the CLI prints them with their lines)
"""

from __future__ import annotations

__all__ = [
    "RefsimError",
    "ShapeError",
    "DtypeError",
    "FormatRuleError",
    "NonFiniteError",
    "CheckpointError",
    "UntrustedModelError",
    "ToolchainError",
    "CompileError",
]


class RefsimError(ValueError):
    """Base class of every input-validation error raised by refsim."""


class ShapeError(RefsimError):
    """An array has the wrong rank or shape, or a dimension breaks a divisibility rule."""


class DtypeError(RefsimError):
    """An array has a dtype the format or function does not accept."""


class FormatRuleError(RefsimError):
    """A format or algorithm parameter breaks a rule (bit-width, group size, code range, names)."""


class NonFiniteError(FormatRuleError):
    """NaN or Inf found where only finite values are allowed."""


class CheckpointError(FormatRuleError):
    """A checkpoint file or directory breaks a rule; the message names the file (and tensor)."""


class UntrustedModelError(RefsimError):
    """A kernel's performance model is known to be far off for this problem (published or measured
    rows show it), so it refuses rather than answer; the message starts "no trustworthy model:"."""


class ToolchainError(RuntimeError):
    """A compiler or runtime that a requested feature needs is missing or failed.

    Raised only when the feature is actually requested (e.g. a generated QIGen kernel or a
    CUDA build); the message includes the tool's own output when it failed.
    """


class CompileError(ToolchainError):
    """nvcc rejected a CUDA source. The message is one head line (``nvcc failed on FILE (...)``) followed
    by nvcc's own diagnostics, one per line, with FILE in place of refsim's temporary copy, so that
    ``FILE(LINE): error: ...`` points into the user's file. The CLI keeps the lines."""
