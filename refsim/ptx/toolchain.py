"""``refsim.ptx.compile``: CUDA source -> PTX text with nvcc, cached on disk.

nvcc discovery, first hit wins::

    1. $NVCC                                   (a path to an nvcc executable)
    2. site-packages/nvidia/**/bin/nvcc         (the PyPI wheels of the ``cuda`` extra)
    3. nvcc on PATH

Cache: ``~/.cache/refsim/ptx/<sha256>.ptx`` (``$REFSIM_CACHE`` replaces ``~/.cache/refsim``),
keyed by the hash of (source, arch, options, include-directory contents are NOT hashed, nvcc
version string). A missing nvcc raises :class:`refsim.errors.ToolchainError` saying how to install
one; a failing compilation raises :class:`refsim.errors.CompileError` with nvcc's own output, line for
line, naming the caller's file (``source_name``) where nvcc named refsim's temporary copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from refsim.errors import CompileError, FormatRuleError, ToolchainError

__all__ = ["compile", "find_nvcc", "find_tool", "nvcc_version", "cache_dir"]

_INSTALL = 'install the CUDA compiler with `pip install "refsim[cuda]"` or set $NVCC to an nvcc executable'


def cache_dir() -> Path:
    """The directory holding compiled PTX (``~/.cache/refsim/ptx`` unless $REFSIM_CACHE is set)."""
    root = os.environ.get("REFSIM_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "refsim") / "ptx"


def _wheel_tool(tool: str) -> Path | None:
    """``site-packages/nvidia/**/bin/<tool>`` of the ``cuda`` extra's wheels, if installed."""
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    roots |= {p for p in sys.path if p.endswith("site-packages")}
    for root in sorted(roots):
        nv = Path(root) / "nvidia"
        if nv.is_dir():
            for cand in sorted(nv.glob(f"**/bin/{tool}")):
                if cand.is_file() and os.access(cand, os.X_OK):
                    return cand
    return None


def find_nvcc() -> Path:
    """The nvcc to use ($NVCC, then the ``cuda`` extra's wheel, then PATH); ToolchainError if none."""
    env = os.environ.get("NVCC")
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ToolchainError(f"$NVCC={env!r} is not an executable file; {_INSTALL}")
        return p
    wheel = _wheel_tool("nvcc")
    if wheel is not None:
        return wheel
    on_path = shutil.which("nvcc")
    if on_path:
        return Path(on_path)
    raise ToolchainError(f"no CUDA compiler (nvcc) found; {_INSTALL}")


def find_tool(tool: str) -> Path | None:
    """Path of a CUDA tool (``ptxas``, ``nvdisasm``, ``cuobjdump``): beside the nvcc :func:`find_nvcc`
    picks, else in the ``cuda`` extra's wheels (``site-packages/nvidia/**/bin``), else on PATH; None
    when absent."""
    try:
        nvcc = find_nvcc()
    except ToolchainError:
        nvcc = None
    if nvcc is not None and (nvcc.parent / tool).is_file():
        return nvcc.parent / tool
    wheel = _wheel_tool(tool)
    if wheel is not None:
        return wheel
    found = shutil.which(tool)
    return Path(found) if found else None


def nvcc_version(nvcc: Path) -> str:
    """The full ``nvcc --version`` text (part of the cache key)."""
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise ToolchainError(f"cannot run {nvcc}: {e}; {_INSTALL}") from None
    if out.returncode != 0:
        raise ToolchainError(f"{nvcc} --version failed: {out.stderr.strip()}")
    return out.stdout.strip()


def compile_error(output: str, temp_path: str, source_name: str | None, arch: str, options: tuple) -> CompileError:
    """The CompileError for nvcc's ``output``: a head line naming ``source_name``, then nvcc's lines
    (blank ones dropped) with ``temp_path`` (the copy nvcc compiled) replaced by ``source_name``
    (kept as it is when ``source_name`` is None: a source that came from no file)."""
    source_name = temp_path if source_name is None else source_name
    lines = [ln.rstrip().replace(temp_path, source_name) for ln in output.splitlines() if ln.strip()]
    head = f"nvcc failed on {source_name} (-arch={arch}{''.join(' ' + o for o in options)})"
    return CompileError("\n".join([head + ":", *lines]) if lines else head + " without a message")


def compile(cuda_source: str, *, arch: str = "sm_80", options=(), include_dirs=(),  # noqa: A001
            source_name: str | None = None) -> str:
    """Compile CUDA C++ ``cuda_source`` to PTX text with ``nvcc -arch=<arch> -ptx``.

    options: extra nvcc arguments (e.g. ``("-O3", "--use_fast_math")``); include_dirs: ``-I``
    directories; source_name: the file the source came from (its path as the user gave it), named
    in nvcc's diagnostics instead of the temporary copy nvcc compiles (None: the copy's path stays).
    The result is cached under :func:`cache_dir` by a hash of (source, arch, options, include dirs,
    nvcc version). Raises ToolchainError when nvcc is missing, CompileError when it rejects the source.
    """
    if not isinstance(cuda_source, str):
        raise FormatRuleError(f"cuda_source: must be a str; got {type(cuda_source).__name__}")
    if source_name is not None and not isinstance(source_name, str):
        raise FormatRuleError(f"source_name: must be a str or None; got {type(source_name).__name__}")
    if not isinstance(arch, str) or not arch.startswith(("sm_", "compute_")):
        raise FormatRuleError(f"arch: must look like 'sm_80'; got {arch!r}")
    options = tuple(str(o) for o in options)
    includes = tuple(str(Path(d).resolve()) for d in include_dirs)
    nvcc = find_nvcc()
    version = nvcc_version(nvcc)
    key = hashlib.sha256("\0".join((cuda_source, arch, *options, "--", *includes, version)).encode()).hexdigest()
    cached = cache_dir() / f"{key}.ptx"
    if cached.is_file():
        return cached.read_text()
    with tempfile.TemporaryDirectory(prefix="refsim-ptx-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(cuda_source)
        out = Path(tmp) / "kernel.ptx"
        cmd = [str(nvcc), f"-arch={arch}", "-ptx", *options, *[f"-I{d}" for d in includes], str(src), "-o", str(out)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except OSError as e:
            raise ToolchainError(f"cannot run {nvcc}: {e}; {_INSTALL}") from None
        if res.returncode != 0:
            raise compile_error(res.stdout + res.stderr, str(src), source_name, arch, options)
        text = out.read_text()
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmpfile = cached.with_suffix(f".{os.getpid()}.tmp")
    tmpfile.write_text(text)
    os.replace(tmpfile, cached)
    return text
