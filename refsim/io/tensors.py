"""safetensors files, one tensor at a time, with named errors.

refsim reads and writes every checkpoint through the ``safetensors`` package's NumPy API
(``safe_open(..., framework="numpy")`` memory-maps the file and copies out only the tensor asked
for; ``save_file`` writes). BF16 tensors come back as ``ml_dtypes.bfloat16`` arrays (importing
``ml_dtypes`` registers the dtype with NumPy). F8_E4M3 tensors come back as
``ml_dtypes.float8_e4m3fn`` arrays: the installed ``safetensors`` NumPy loader (0.8.0) asks NumPy itself
for ``numpy.float8_e4m3fn``, which does not exist, so their bytes are copied from the data offsets
the header names (the header is read as JSON; ``safe_open`` has already validated the file).

    [u64 little-endian n][n bytes of JSON header][raw tensor bytes]      (the format, for orientation)

Every failure is a :class:`refsim.errors.CheckpointError` (or a ShapeError/DtypeError) whose
message starts with the file and, where one is involved, the tensor::

    model.safetensors: tensor 'l.qweight': dtype must be int32; got float16
"""

from __future__ import annotations

import json
import os
from typing import Iterable

import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy so safetensors can return BF16)
import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from refsim._validate import require_array, require_instance, require_path
from refsim.errors import CheckpointError, DtypeError, ShapeError

__all__ = ["TensorFile", "save_tensors"]


class TensorFile:
    """A safetensors file opened for reading one tensor at a time (context manager).

    ``names()`` lists the tensors (header order is not meaningful: sorted), ``shape(name)`` and
    ``dtype_name(name)`` read the header only, ``read(name, dtype=..., shape=...)`` copies one
    tensor out of the memory map and checks it.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = require_path("path", path)
        if not self.path.is_file():
            raise CheckpointError(f"{self.path}: safetensors file must exist; got no such file")
        try:
            self._f = safe_open(str(self.path), framework="numpy")
            self._names = sorted(self._f.keys())
            self._meta = self._f.metadata() or {}
        except (SafetensorError, OSError, ValueError) as err:
            raise CheckpointError(f"{self.path}: must be a valid safetensors file; got {err}") from None

    def __enter__(self) -> "TensorFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the memory map."""
        self._f = None

    def names(self) -> list[str]:
        """Tensor names, sorted."""
        return list(self._names)

    def metadata(self) -> dict[str, str]:
        """The header's ``__metadata__`` (str -> str)."""
        return dict(self._meta)

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def _where(self, name: str) -> str:
        return f"{self.path.name}: tensor {name!r}"

    def _slice(self, name: str):
        if name not in self._names:
            raise CheckpointError(f"{self._where(name)}: must be present; got no such tensor")
        try:
            return self._f.get_slice(name)
        except (SafetensorError, ValueError) as err:
            raise CheckpointError(f"{self._where(name)}: header entry must be readable; got {err}") from None

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape from the header (no data read)."""
        return tuple(int(d) for d in self._slice(name).get_shape())

    def dtype_name(self, name: str) -> str:
        """safetensors dtype string from the header ("F16", "I32", "BF16", ...)."""
        return str(self._slice(name).get_dtype())

    def nbytes(self, name: str) -> int:
        """Bytes the tensor occupies in the file (from the header)."""
        n = 1
        for d in self.shape(name):
            n *= d
        return n * _ITEMSIZE.get(self.dtype_name(name), 0)

    def read(self, name: str, *, dtype: Iterable | np.dtype | type | None = None,
             shape: tuple[int | None, ...] | None = None) -> np.ndarray:
        """Copy one tensor out of the file (a writable NumPy array, C order).

        ``dtype``: one dtype or several accepted ones; ``shape``: expected shape, ``None`` entries
        match anything. Raises DtypeError/ShapeError naming file and tensor.
        """
        if name not in self._names:
            raise CheckpointError(f"{self._where(name)}: must be present; got no such tensor")
        if dtype is not None:
            want = [np.dtype(d) for d in (dtype if isinstance(dtype, (list, tuple)) else [dtype])]
            got = _DTYPES.get(self.dtype_name(name))
            if got is None or got not in want:
                raise DtypeError(f"{self._where(name)}: dtype must be "
                                 f"{' or '.join(str(d) for d in want)}; got {self.dtype_name(name)}")
        if shape is not None:
            self.require_shape(name, shape)
        if self.dtype_name(name) in _RAW_DTYPES:
            return self._read_raw(name)
        try:
            arr = self._f.get_tensor(name)
        except (SafetensorError, ValueError, TypeError, OSError) as err:
            raise CheckpointError(f"{self._where(name)}: data must be readable; got {err}") from None
        return np.array(arr, copy=True, order="C")

    def _read_raw(self, name: str) -> np.ndarray:
        """A tensor of a dtype the NumPy loader cannot return (:data:`_RAW_DTYPES`): its bytes, from
        the offsets the header names, viewed as the ml_dtypes dtype."""
        dtype = _DTYPES[self.dtype_name(name)]
        shape = self.shape(name)
        with open(self.path, "rb") as fh:
            hlen = int.from_bytes(fh.read(8), "little")
            begin, end = json.loads(fh.read(hlen))[name]["data_offsets"]
            fh.seek(8 + hlen + begin)
            raw = fh.read(end - begin)
        if len(raw) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise CheckpointError(f"{self._where(name)}: data must hold {shape} x {dtype.itemsize} bytes; "
                                  f"got {len(raw)}")
        return np.frombuffer(raw, np.uint8).copy().view(dtype).reshape(shape)

    def require_shape(self, name: str, shape: tuple[int | None, ...]) -> tuple[int, ...]:
        """Check the header shape against ``shape`` (``None`` = any size); return the shape."""
        got = self.shape(name)
        if len(got) != len(shape) or any(w is not None and w != g for w, g in zip(shape, got)):
            want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
            raise ShapeError(f"{self._where(name)}: shape must be {want}; got {got}")
        return got


_DTYPES = {
    "F64": np.dtype(np.float64), "F32": np.dtype(np.float32), "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64), "I32": np.dtype(np.int32), "I16": np.dtype(np.int16), "I8": np.dtype(np.int8),
    "U64": np.dtype(np.uint64), "U32": np.dtype(np.uint32), "U16": np.dtype(np.uint16), "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_), "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
}
#: safetensors dtypes read from their bytes (the NumPy loader cannot return them; module docstring)
_RAW_DTYPES = ("F8_E4M3",)
_ITEMSIZE = {k: v.itemsize for k, v in _DTYPES.items()}


def save_tensors(path: str | os.PathLike, tensors: dict[str, np.ndarray],
                 metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (name -> array of a safetensors dtype, written C-contiguous) to ``path``
    with ``safetensors.numpy.save_file``; ``metadata``: str -> str or None. The folder must exist."""
    path = require_path("path", path)
    require_instance("tensors", tensors, dict)
    arrays = {}
    for k, v in tensors.items():
        require_instance("tensors: key", k, str)
        v = require_array(f"tensors[{k!r}]", v)
        if v.dtype not in _DTYPES.values():
            raise DtypeError(f"tensors[{k!r}]: dtype must be one safetensors stores "
                             f"({', '.join(str(d) for d in _DTYPES.values())}); got {v.dtype}")
        arrays[k] = np.ascontiguousarray(v)
    if metadata is not None:
        require_instance("metadata", metadata, dict)
        for k, v in metadata.items():
            if not (isinstance(k, str) and isinstance(v, str)):
                raise DtypeError(f"metadata: must map str to str; got {k!r}: {v!r}")
    if not path.parent.is_dir():
        raise CheckpointError(f"{path}: folder must exist to write a safetensors file; got no folder {path.parent}")
    try:
        save_file(arrays, str(path), metadata=metadata)
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{path}: safetensors file must be writable; got {err}") from None
