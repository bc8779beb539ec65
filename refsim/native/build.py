"""Compile C (refsim's own .c files and QIGen's generated kernels) into a content-addressed cache; load with ctypes.

Cache: ``$REFSIM_CACHE/native/<sha256>/kernel.so`` (default ``~/.cache/refsim``). The hash covers the
source text, the compiler command (path and flags) and the compiler's ``--version`` banner, so a
changed generator, flag or compiler never reuses an old library. The hash is also compiled into
the library (``refsim_native_id()``) and checked after loading: a stale or corrupted entry whose id
does not match is rebuilt, never used. Builds go to a temporary file renamed into place (atomic), under
an exclusive lock on ``<sha256>/lock`` so that processes needing the same library at once (pytest-xdist
workers) build it once: the others wait and load it.

Flags: ``-O2 -fPIC -shared -std=gnu99 -ffp-contract=off -fno-fast-math`` (``-O1`` where the caller asks:
refsim.ptx.compiled's generated kernels; see ``OPT_LEVELS``) plus ``-mavx2 -mfma`` for the AVX2 ISA and
``-fopenmp`` on request; ``-ffast-math`` is never used (it would allow reassociation and break the
bit-exact contract with :mod:`refsim.qigen.oracle`). ``CC`` overrides the compiler.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from refsim._validate import require_bool, require_choice
from refsim.errors import ToolchainError

__all__ = ["cache_dir", "find_compiler", "compile_flags", "build", "load", "entry_valid", "objdump_mnemonics"]

BASE_FLAGS = ("-fPIC", "-shared", "-std=gnu99", "-ffp-contract=off", "-fno-fast-math")
#: optimisation levels a build may ask for, with their gcc flags: -O2 (the default), or -O1 for large
#: generated C that is built about as often as it runs (refsim.ptx.compiled's kernels: ~35 % less
#: compile time); -O1 keeps -O2's -fstrict-aliasing (the C is held to the same aliasing rules; without
#: it a test kernel's generated code executed ~10 % more instructions, with it ~1 %)
OPT_LEVELS = {"-O2": ("-O2",), "-O1": ("-O1", "-fstrict-aliasing")}


def cache_dir() -> Path:
    """``$REFSIM_CACHE/native`` or ``~/.cache/refsim/native``."""
    root = os.environ.get("REFSIM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "refsim")
    return Path(root) / "native"


def find_compiler() -> str:
    """Path of the C compiler (``$CC``, else ``cc``, ``gcc``, ``clang``); ToolchainError if none."""
    names = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise ToolchainError(
        f"native: a C compiler is needed to build refsim's C code; none of {names} found on PATH "
        "(install gcc or set CC)"
    )


@functools.lru_cache(maxsize=8)
def _compiler_banner(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as err:
        raise ToolchainError(f"native: cannot run compiler {cc}: {err}") from err
    return out.stdout.splitlines()[0] if out.stdout else ""


def compile_flags(isa: str, openmp: bool, opt: str = "-O2") -> tuple[str, ...]:
    """Flags for one ISA ("avx2" or "scalar") at the optimisation level ``opt`` (one of
    :data:`OPT_LEVELS`); never contains -ffast-math."""
    openmp = require_bool("openmp", openmp)
    flags = [*OPT_LEVELS[require_choice("opt", opt, OPT_LEVELS)], *BASE_FLAGS]
    if isa == "avx2":
        flags += ["-mavx2", "-mfma"]
    if openmp:
        flags.append("-fopenmp")
    return tuple(flags)


def _key(source: str, cc: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (source, cc, " ".join(flags), _compiler_banner(cc)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _with_id(source: str, key: str) -> str:
    return source + f'\nconst char* refsim_native_id(void) {{ return "{key}"; }}\n'


def build(source: str, isa: str, openmp: bool = False, opt: str = "-O2") -> Path:
    """Compile ``source`` (cached by content hash) at the level ``opt`` and return the shared library's path.

    Raises ToolchainError with the compiler's output if compilation fails.
    """
    cc = find_compiler()
    flags = compile_flags(isa, openmp, opt)
    key = _key(source, cc, flags)
    target = cache_dir() / key / "kernel.so"
    if entry_valid(target, key):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _entry_lock(target.parent):
        if entry_valid(target, key):        # another process built it while this one waited
            return target
        _compile(source, key, cc, flags, target)
    return target


@contextlib.contextmanager
def _entry_lock(entry: Path):
    """Hold an exclusive ``flock`` on ``entry/lock`` (one build per key at a time across processes,
    e.g. pytest-xdist workers that need the same kernel at once; the others wait, then load it). The
    operating system drops the lock when its holder exits, so a killed build never blocks the next one."""
    with open(entry / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _compile(source: str, key: str, cc: str, flags: tuple[str, ...], target: Path) -> None:
    src_path = target.parent / "kernel.c"
    src_path.write_text(_with_id(source, key))
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    cmd = [cc, *flags, "-o", tmp, str(src_path), "-lm"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as err:
        os.unlink(tmp)
        raise ToolchainError(f"native: running the compiler failed: {' '.join(cmd)}: {err}") from err
    if proc.returncode != 0:
        os.unlink(tmp)
        raise ToolchainError(
            f"native: compiling failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stdout}{proc.stderr}"
        )
    os.replace(tmp, target)


def entry_valid(path: Path, key: str) -> bool:
    """True if ``path`` is a shared library carrying the id string ``key``.

    Checked on the file's bytes, not by ``dlopen``: the dynamic loader returns an already-loaded
    handle for a path it has seen, so opening a stale file would pin it for the process.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return data[:4] == b"\x7fELF" and key.encode() in data


@functools.lru_cache(maxsize=64)
def _load_cached(source: str, isa: str, openmp: bool, opt: str) -> ctypes.CDLL:
    path = build(source, isa, openmp, opt)
    expected = _key(source, find_compiler(), compile_flags(isa, openmp, opt))
    lib = ctypes.CDLL(str(path))
    lib.refsim_native_id.restype = ctypes.c_char_p
    got = lib.refsim_native_id().decode()
    if got != expected:
        # the loader handed back a handle opened earlier from a since-replaced file: load the
        # verified file under a fresh name instead
        fresh = Path(tempfile.mkdtemp(dir=path.parent)) / "kernel.so"
        shutil.copyfile(path, fresh)
        lib = ctypes.CDLL(str(fresh))
        lib.refsim_native_id.restype = ctypes.c_char_p
        got = lib.refsim_native_id().decode()
        if got != expected:
            raise ToolchainError(f"native: library {fresh} has id {got}; expected {expected}")
    return lib


def load(source: str, isa: str, openmp: bool = False, opt: str = "-O2") -> ctypes.CDLL:
    """Build (or reuse) and load the library for ``source`` at the level ``opt``; checks its embedded id."""
    return _load_cached(source, isa, require_bool("openmp", openmp), require_choice("opt", opt, OPT_LEVELS))


def objdump_mnemonics(path: Path | str) -> list[str]:
    """Instruction mnemonics of a shared library from ``objdump -d`` (ToolchainError if absent)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise ToolchainError("native: objdump not found on PATH (binutils)")
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        raise ToolchainError(f"native: objdump failed: {out.stderr}")
    mnemonics = []
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip().endswith(":"):
            mnemonics.append(parts[1].split()[0] if parts[1].split() else "")
    return mnemonics
