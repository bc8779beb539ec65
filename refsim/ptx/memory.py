"""The state spaces of one launch: global buffers, shared memory per block, local memory per thread.

Address map (virtual, 64-bit; chosen here, documented in docs/ptx.md)::

    0x0000_0000_0000 ... 0x0000_FFFF_FFFF   (unused: a null or small pointer faults)
    SHARED_WINDOW = 0x0001_0000_0000        generic window of the block's shared memory
    LOCAL_WINDOW  = 0x0002_0000_0000        generic window of the thread's local memory
    GLOBAL_BASE   = 0x0100_0000_0000        global buffers, 4 KiB-aligned, >= 4 KiB apart: module variables,
                                            then the pointer arguments in parameter order
    BUFFER_BASE   = 0x0200_0000_0000        the launch's extra buffers (``Module.launch(buffers=...)``), placed
                                            alike from here in the order given (:func:`buffer_addresses`)

    global buffer i:  [base_i, base_i + nbytes_i)   every byte of a user array, written in place
    shared (block b): flat offset b * shared_stride + address (address = ``.shared`` offset)
    local (thread t): flat offset t * local_stride + address

Accesses are gathered and scattered as typed elements (``<u1/<u2/<u4/<u8`` views of the byte
buffers); an access must be aligned to its total size (vector width x element size), as the
hardware faults otherwise, so a typed view never straddles the end of a buffer.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.errors import PtxLaunchError, PtxLimitError, PtxMemoryError

__all__ = ["SHARED_WINDOW", "LOCAL_WINDOW", "WINDOW_BYTES", "WINDOWS", "GLOBAL_BASE", "BUFFER_BASE", "GlobalMemory",
           "typed", "read_only_error", "check_device_array", "check_buffers", "buffer_addresses"]

SHARED_WINDOW = 1 << 32
LOCAL_WINDOW = 2 << 32
WINDOW_BYTES = 1 << 32
#: The generic windows, one table: state space -> first generic address of its window (each holds
#: WINDOW_BYTES). A generic address in none of them is global (``cvta``, ``isspacep`` read this).
WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}
GLOBAL_BASE = 1 << 40
BUFFER_BASE = 1 << 41
_GAP = 4096
_ALLOC_ALIGN = 256          # cudaMalloc's alignment: what a device pointer's low bits can be


def _offset_in_allocation(data: np.ndarray) -> int:
    """Bytes from the start of the memory ``data`` views (its outermost base array) to its first byte."""
    root = data
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is data or root.size == 0:
        return 0
    return data.__array_interface__["data"][0] - root.__array_interface__["data"][0]

_UINT = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


def read_only_error(where: str, name: str) -> PtxMemoryError:
    """The error of a write (``st``, ``atom``, ``red``) to the global buffer of a read-only array.

    One rule for both executors: an instruction whose global accesses touch a buffer whose array has
    ``writeable=False`` writes nothing and raises this. ``where`` is the executor's ``kernel k, PTX
    line N `text``` and ``name`` the buffer's name (the kernel parameter the array was passed for)."""
    return PtxMemoryError(f"{where}: writes to read-only array {name!r} (writeable=False)")


def check_device_array(what: str, a) -> np.ndarray:
    """``a`` if it can be device memory (a C-contiguous, non 0-d array of numbers in native byte order,
    written in place), else PtxLaunchError naming ``what`` and the rule."""
    if not isinstance(a, np.ndarray):
        raise PtxLaunchError(f"{what}: must be a NumPy array; got {type(a).__name__}")
    if a.ndim == 0:
        raise PtxLaunchError(f"{what}: 0-d arrays are ambiguous (pass a NumPy scalar or a 1-d array); got shape ()")
    if not a.flags.c_contiguous:
        raise PtxLaunchError(f"{what}: a pointer argument must be C-contiguous (it is written in place); "
                             f"got strides {a.strides}")
    if a.dtype.hasobject or not a.dtype.isnative:
        raise PtxLaunchError(f"{what}: a pointer argument's bytes are device memory, which the GPU reads "
                             f"little-endian: it must hold numbers in native byte order; got dtype {a.dtype}")
    return a


def check_buffers(buffers) -> tuple:
    """``buffers`` (a list or tuple of ``(name, array)`` pairs, names distinct non-empty str, arrays as
    :func:`check_device_array`) as a tuple of pairs; anything else -> PtxLaunchError naming the rule."""
    if not isinstance(buffers, (list, tuple)):
        raise PtxLaunchError(f"buffers: must be a list or tuple of (name, array) pairs; got {type(buffers).__name__}")
    out, seen = [], set()
    for i, item in enumerate(buffers):
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str) or not item[0]:
            raise PtxLaunchError(f"buffers[{i}]: must be a (name, array) pair with a non-empty str name; got {item!r:.60}")
        if item[0] in seen:
            raise PtxLaunchError(f"buffers[{i}]: name {item[0]!r} given twice")
        seen.add(item[0])
        out.append((item[0], check_device_array(f"buffers[{i}] ({item[0]})", item[1])))
    return tuple(out)


def _placed(end: int | None, data: np.ndarray, start: int) -> int:
    """The base of ``data`` placed after a buffer ending at ``end`` (None: the first, at ``start``): the next
    4 KiB boundary at least 4 KiB on, plus the array's offset into its allocation modulo 256."""
    base = start if end is None else (end + _GAP + _GAP - 1) // _GAP * _GAP
    return base + _offset_in_allocation(data) % _ALLOC_ALIGN


def buffer_addresses(buffers) -> dict:
    """``{name: global address}`` of a launch's extra buffers (``Module.launch(..., buffers=buffers)``,
    ``buffers`` as :func:`check_buffers`): placed from :data:`BUFFER_BASE` in the order given, as
    GlobalMemory places arguments (4 KiB boundaries >= 4 KiB apart, each array's offset into its
    allocation modulo 256 kept). They depend on nothing else (not on the kernel's arguments or module
    variables), so a host computes them before it builds what holds them (tensor maps)."""
    out, end = {}, None
    for name, data in check_buffers(buffers):
        base = _placed(end, data, BUFFER_BASE)
        out[name] = base
        end = base + data.nbytes
    return out


def typed(buf: np.ndarray, esize: int) -> np.ndarray:
    """The byte buffer ``buf`` viewed as little-endian unsigned elements of ``esize`` bytes."""
    n = buf.size // esize * esize
    return buf[:n].view(_UINT[esize])


class GlobalMemory:
    """Global (and ``.const``) buffers of a launch, each a byte view of an array, at virtual bases."""

    def __init__(self) -> None:
        self.bases: list[int] = []
        self.sizes: list[int] = []
        self.buffers: list[np.ndarray] = []    # uint8 1-D views sharing memory with the arrays
        self.names: list[str] = []
        self._views: dict[tuple[int, int], np.ndarray] = {}
        self._base_arr = np.zeros(0, np.uint64)
        self._end_arr = np.zeros(0, np.uint64)

    def add(self, data: np.ndarray, name: str, at: int | None = None) -> int:
        """Map ``data`` (a C-contiguous array of any dtype) and return its virtual base address.

        The address keeps the array's byte offset into the allocation it views, modulo 256 (the
        alignment cudaMalloc gives): a view 3 bytes into a buffer is 3 bytes off every alignment
        here too, so an aligned access through it faults as on the GPU (PtxMisalignedError).
        ``at``: the address :func:`buffer_addresses` gave (extra buffers, mapped after every other);
        PtxLimitError when the buffers mapped before it reach it."""
        end = self.bases[-1] + self.sizes[-1] if self.bases else None
        if at is None:
            base = _placed(end, data, GLOBAL_BASE)
        else:
            if end is not None and end > at:
                raise PtxLimitError(f"global buffer {name!r} at 0x{at:x}: the buffers mapped before it (module "
                                    f"variables, pointer arguments) end at 0x{end:x}, past it")
            base = int(at)
        flat = data.reshape(-1).view(np.uint8) if data.size else np.zeros(0, np.uint8)
        self.bases.append(base)
        self.sizes.append(flat.size)
        self.buffers.append(flat)
        self.names.append(name)
        self._base_arr = np.array(self.bases, np.uint64)
        self._end_arr = np.array([b + s for b, s in zip(self.bases, self.sizes)], np.uint64)
        return base

    def view(self, i: int, esize: int) -> np.ndarray:
        key = (i, esize)
        v = self._views.get(key)
        if v is None:
            v = self._views[key] = typed(self.buffers[i], esize)
        return v

    def locate(self, addr: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """Buffer index per address and a mask of accesses ``[addr, addr + nbytes)`` inside it."""
        if not self.bases:
            return np.zeros(addr.shape, np.int64), np.zeros(addr.shape, bool)
        i = np.searchsorted(self._base_arr, addr, side="right").astype(np.int64) - 1
        ok = i >= 0
        ic = np.maximum(i, 0)
        ok &= addr + np.uint64(nbytes) <= self._end_arr[ic]
        ok &= addr >= self._base_arr[ic]
        return ic, ok
