"""All-or-nothing output folders: write into a temporary sibling, move into place when complete.

``with atomic_output_dir(OUT) as tmp:`` checks OUT before any work is done:

    OUT absent                      created at the end by renaming the finished temporary folder
    OUT an empty folder             kept (its owner, mode and ACLs): the finished files are moved into it
    OUT a symbolic link (to a folder, to a file, or dangling), a file, a non-empty folder,
    or a parent that is missing or not writable        refused with FormatRuleError naming it

It yields a fresh temporary folder next to OUT (``.OUT.<random>.tmp``, same file system, so every
rename is atomic) and, on success, gives the folder and every file in it the permissions a plain
``mkdir``/``open`` would (``0o777``/``0o666`` less the process umask; ``tempfile`` makes 0700/0600
and the safetensors writer 0600). On any exception, and if the final move fails, the temporary
folder is removed and OUT is left as it was (absent or empty).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from refsim._validate import require_path
from refsim.errors import FormatRuleError

__all__ = ["atomic_output_dir", "check_output_dir"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_output_dir(out) -> Path:
    """OUT as a Path after the checks of the module docstring (nothing is created)."""
    out = require_path("out", out)
    if out.is_symlink():
        raise FormatRuleError(f"out: must be a new or empty folder, not a symbolic link (refsim does not write "
                              f"through links); got {out} -> {os.readlink(out)}")
    if out.exists() and not out.is_dir():
        raise FormatRuleError(f"out: must be a new or empty folder; got a file {out}")
    if out.is_dir() and any(out.iterdir()):
        raise FormatRuleError(f"out: must be a new or empty folder (nothing is overwritten); got {out}")
    parent = out.absolute().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise FormatRuleError(f"out: parent folder must exist and be writable; got {parent}")
    return out


def _normal_permissions(tmp: Path) -> None:
    mask = _umask()
    for root, dirs, files in os.walk(tmp):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o777 & ~mask)
        for f in files:
            os.chmod(os.path.join(root, f), 0o666 & ~mask)
    os.chmod(tmp, 0o777 & ~mask)


@contextlib.contextmanager
def atomic_output_dir(out) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``out`` when the block completes (module docstring)."""
    out = check_output_dir(out)
    parent = out.absolute().parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
    try:
        yield tmp
        check_output_dir(out)  # still new or empty: nothing appeared there while the job ran
        _normal_permissions(tmp)
        if out.is_dir():
            for entry in sorted(tmp.iterdir()):
                os.replace(entry, out / entry.name)
            tmp.rmdir()
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
