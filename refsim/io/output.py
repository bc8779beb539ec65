"""All-or-nothing output folders: write into a temporary sibling, rename when complete.

``with atomic_output_dir(OUT) as tmp:`` checks OUT first (it must not exist, or be an empty
folder), yields a fresh temporary folder next to it (same file system, so the final
``os.replace`` is atomic), and on success moves it to OUT. On any exception the temporary folder
is removed and OUT is left as it was (absent or empty): a failed or refused conversion never
leaves a partial checkpoint behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from refsim.errors import FormatRuleError

__all__ = ["atomic_output_dir"]


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``out`` when the block completes (module docstring)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FormatRuleError(f"out: must be a new or empty folder (nothing is overwritten); got {out}")
    parent = out.absolute().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise FormatRuleError(f"out: parent folder must exist and be writable; got {parent}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        out.rmdir()  # empty, checked above
    os.replace(tmp, out)
