"""The built-in text: calibration and held-out splits of the Python Language Reference topics.

    calibration.txt   71 topic pages (428 kB)   GPTQ/AWQ calibration, the bundled decoder's training text
    heldout.txt        8 topic pages ( 36 kB)   model-level quality only: never calibration, never training

Both are CPython's ``pydoc_data.topics`` pages (PSF License 2; provenance in README.md beside this
file), copied into the repository so results do not depend on the Python version. A user's own text
file goes through :func:`read_text` (UTF-8, must hold some non-whitespace text).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from refsim._validate import require_choice, require_path
from refsim.errors import FormatRuleError

__all__ = ["SPLITS", "text", "read_text"]

SPLITS = ("calibration", "heldout")
_HERE = Path(__file__).parent


@functools.lru_cache(maxsize=2)
def text(split: str = "calibration") -> str:
    """The built-in text of ``split`` ("calibration" or "heldout") as one str; pages separated by
    a blank line."""
    split = require_choice("split", split, SPLITS)
    return (_HERE / f"{split}.txt").read_text(encoding="utf-8")


def read_text(path: str | os.PathLike) -> str:
    """A user's calibration or evaluation text: a UTF-8 file with at least one non-space character."""
    path = require_path("path", path)
    try:
        out = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise FormatRuleError(f"{path}: text file must be readable UTF-8; got {err}") from None
    if not out.strip():
        raise FormatRuleError(f"{path}: text file must hold some text; got only whitespace")
    return out
