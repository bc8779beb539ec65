"""``backend="gpu"``: one call's launches on the current CUDA device through ``cuda.core`` (the ``gpu`` extra).

Spec
----
driver        :func:`_driver` returns the CUDA API this module calls — ``cuda.core`` (Device, ObjectCode,
              LaunchConfig, launch, LegacyPinnedMemoryResource, Buffer, utils.StridedMemoryView), the
              tensor-map enums of ``cuda.core._tensor_map`` (TensorMapDataType, ...: cuda.core 1.2.2 checks
              ``isinstance`` against them and exports only TensorMapDescriptor) and ``cuda.bindings.driver``
              (the kernel attribute calls cuda.core 1.2 has no setter for). It is the one seam: tests
              replace it with a fake that records every call; the code below is the same for both.
modules       the PTX text is loaded once per device (``ObjectCode.from_ptx``: the driver JIT-compiles it
              for the device's arch) and each kernel looked up once.
launch shape  every launch is checked by :func:`refsim.ptx.check_launch_shape` (the one launch-shape rule,
              the same as the ptx backend's) against the device's facts: the row of its arch in
              :data:`refsim.archs.ARCHS` with the opt-in shared-memory maximum the device reports
              (``max_shared_memory_per_block_optin``: 101,376 B on sm_86/89, 166,912 on sm_80, 232,448 on
              sm_90), before anything is allocated. When static + dynamic shared bytes exceed what a
              kernel gets without the opt-in (48 KiB), the kernel's
              ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` is raised to the dynamic request
              (``cuKernelSetAttribute``; never lowered) and read back.
buffers       ONE device buffer per base array across all launches of the call: each pointer argument
              is a NumPy array; arrays that are views of one base (``C[64:]``, ``A[row:row+16]``, a lock
              workspace passed to every launch) map to one buffer spanning their bytes, and each becomes
              ``buffer address + its byte offset``. So they alias on the GPU as they do in refsim.ptx
              (one memory), and what launch 0 writes, launch 1 reads. Every buffer is copied back after
              the last launch: writable bases take the device's bytes; a read-only base the kernel
              changed raises.
scalars       a value parameter takes a NumPy scalar whose size is the parameter's (``np.int32(m)`` for
              ``.s32``), or ``bytes`` of a 1/2/4/8-byte ``.b8`` parameter; a Python int is refused (cuda.core
              would pass it as a 64-bit pointer). Sizes are checked against the kernel's parameter table.
tensor maps   a ``__grid_constant__ CUtensorMap`` parameter (a 128-byte ``.param .align 64 .b8 p[128]``;
              anything else is refused) takes a :class:`TensorMapArg`: the NumPy array it maps and a
              :class:`refsim.formats.tensor_map.TensorMap` holding its fields (the map's global address is
              not used). The array joins the call's device buffers like a pointer argument (same aliasing
              and copy-back rules), and at launch the map is encoded by cuda.core at ``buffer address +
              the array's byte offset``: ``StridedMemoryView.from_buffer(buffer, shape, strides,
              itemsize=)`` then ``.as_tensor_map(box_dim, element_strides=, data_type=, interleave=,
              swizzle=, l2_promotion=, oob_fill=)``. cuda.core takes shape, strides (in elements),
              box_dim and element_strides in NumPy order, outermost first, and reverses them into the
              driver's innermost-first globalDim / globalStrides (bytes, rank - 1, the innermost implicit)
              / boxDim / elementStrides (``cuda_core/cuda/core/_tensor_map.pyx``:
              ``TensorMapDescriptor._from_tiled``, ``_fill_global_strides``; ``_memoryview.pyx``:
              ``from_buffer``, ``as_tensor_map``; read at NVIDIA/cuda-python
              358d9753685637faa0190e8baf4b6e33d0fa476a and, with ``options=`` and 1.2's ``isinstance``
              checks of the enums, at the fork cpcloud/cuda-python
              9478eca7e8a293ad0dd32e11412d38a449527c4b). So this module passes the TensorMap's innermost-
              first fields reversed, with strides ``global_strides[i] / element size``. A map whose
              in-bounds elements reach past its array's bytes is refused (the TMA would read another
              buffer). The oob fill ``zero`` is the driver's FLOAT_OOB_FILL_NONE.
clusters      a :class:`refsim.cuda.launch.Launch` with ``cluster`` other than 1 is launched with
              ``LaunchConfig(grid=grid / cluster per dimension, cluster=cluster, ...)``: with a cluster,
              cuda.core counts the grid in CLUSTERS (``LaunchConfig`` docstring); the Launch counts blocks,
              as refsim.ptx does, and has checked that every grid dimension is a multiple of the cluster's.
errors        every driver failure is a :class:`GpuError` naming the step and the CUDA error
              (``CUDA_ERROR_ILLEGAL_INSTRUCTION`` in launch 1 of 2 of refsim_marlin_m1_n8_k8_grouped);
              each launch is synchronised before the next, so a fault names its launch.

    NumPy arrays          device buffers (one per base)              kernel arguments
    A (130, K) ─┬─ A[0:128]   ─┐                              launch 0: A+0,       C+0
                └─ A[128:130] ─┴─► buf_A (130*K*2 B) ───────► launch 1: A+128*K*2, C+128*N*2
    C (130, N) ── C[0:128], C[128:130] ─► buf_C ────────────► (and locks+0 in both)
    X (M, K) + TensorMap fields ─► TensorMapArg ─► buf_X ─► StridedMemoryView(buf_X + off, (M, K))
                                                             .as_tensor_map((64, 64), ...) ─► 128-byte param
"""

from __future__ import annotations

import functools
import re
import weakref
from dataclasses import dataclass, field, replace

import numpy as np

from refsim.archs import ARCHS, ArchFacts, parse_sm
from refsim.errors import FormatRuleError, RefsimError, ShapeError, ToolchainError
from refsim.formats import tensor_map as tmap
from refsim.ptx.arch import check_launch_shape

__all__ = ["GpuError", "TensorMapArg", "DeviceBase", "Resident", "device_bases", "device_facts", "prepare", "run",
           "device_info"]

_ALIGN = 256          # device allocations are 256-byte aligned; spans keep their offset modulo this
_CUDA_ERROR = re.compile(r"CUDA_ERROR_[A-Z0-9_]+")


class GpuError(RefsimError, ToolchainError):
    """A CUDA driver call of ``backend="gpu"`` failed. ``step`` says which (loading the PTX, raising an
    attribute, a launch, a copy), ``cuda_error`` the CUDA error name (``CUDA_ERROR_INVALID_VALUE``) or
    None when the driver gave none. Both a :class:`RefsimError` and a :class:`ToolchainError`."""

    def __init__(self, step: str, cuda_error: str | None, detail: str):
        self.step, self.cuda_error = step, cuda_error
        super().__init__(f"backend='gpu': {step} failed with {cuda_error or 'an error'}: {detail}")


@dataclass(frozen=True)
class _CudaApi:
    core: object       # the cuda.core module
    bindings: object   # cuda.bindings.driver
    enums: object = None   # cuda.core._tensor_map (TensorMapDataType, TensorMapSwizzle, ...)


@functools.lru_cache(maxsize=None)
def _api(core, bindings, enums=None) -> _CudaApi:
    return _CudaApi(core, bindings, enums)


def _driver() -> _CudaApi:
    """The CUDA API of the ``gpu`` extra (one object per pair of modules, so per-device state is kept
    across calls); ToolchainError saying how to install it when missing."""
    try:
        import cuda.core as core
        from cuda.bindings import driver as bindings
        from cuda.core import _tensor_map as enums
    except ImportError as err:
        raise ToolchainError("backend='gpu' needs cuda.core: pip install 'refsim[gpu]' "
                             f"(import failed: {err})") from err
    return _api(core, bindings, enums)


def _named(step: str, err: BaseException) -> GpuError:
    m = _CUDA_ERROR.search(str(err))
    return GpuError(step, m.group(0) if m else None, f"{type(err).__name__}: {err}")


def _check(api: _CudaApi, step: str, result):
    """The value of a cuda.bindings call's ``(CUresult, value...)``; GpuError naming a non-success code."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != api.bindings.CUresult.CUDA_SUCCESS:
        raise GpuError(step, getattr(err, "name", None) or str(err), f"code {int(err)}")
    return rest[0] if rest else None


# ----------------------------------------------------------------------------------------------
# one buffer per base array


@dataclass
class DeviceBase:
    """The bytes one device buffer mirrors: ``host`` (uint8 1-D view of a base array's bytes) and
    whether they may be written back."""

    host: np.ndarray
    writable: bool
    args: list = field(default_factory=list)   # (launch index, argument index) of each view


def _base_of(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory (NumPy collapses view chains to it), or ``a`` itself when that
    owner is not a C-contiguous array (then only ``a``'s own bytes can be mirrored)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root if root.flags.c_contiguous else a


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def device_bases(arrays) -> tuple[list[DeviceBase], list[tuple[int, int]]]:
    """Group C-contiguous arrays by the base array they view.

    arrays: a sequence of ``((launch, arg), ndarray)``. Returns the bases and, per input array,
    ``(base index, byte offset into the base's buffer)``. A base's buffer spans from the first byte any
    of its views uses (rounded down to 256 bytes, so device alignment equals host alignment modulo 256)
    to the last, so two views that overlap on the host overlap on the device at the same distance."""
    groups: dict[int, tuple[np.ndarray, list]] = {}
    for key, a in arrays:
        root = _base_of(a)
        groups.setdefault(id(root), (root, []))[1].append((key, a))
    bases, where = [], {}
    for root, views in groups.values():
        flat = root.reshape(-1).view(np.uint8) if root.size else np.zeros(0, np.uint8)   # (nbytes,)
        r0 = _address(root)
        offs = [(_address(a) - r0 if a.size else 0, a.nbytes) for _, a in views]
        lo = min(o for o, _ in offs) // _ALIGN * _ALIGN
        hi = max(o + n for o, n in offs)
        base = DeviceBase(flat[lo:hi], all(a.flags.writeable for _, a in views) and root.flags.writeable)
        for (key, _), (o, _) in zip(views, offs):
            base.args.append(key)
            where[key] = (len(bases), o - lo)
        bases.append(base)
    for i, b in enumerate(bases):      # owners that are not C-contiguous map only their views' bytes
        for c in bases[i + 1:]:
            if np.may_share_memory(b.host, c.host):
                raise FormatRuleError(f"args: arrays {b.args[0]} and {c.args[0]} (launch, argument) overlap but "
                                      f"are not views of one C-contiguous array, so one device buffer cannot "
                                      f"hold both; pass views of one C-contiguous array")
    return bases, [where[key] for key, _ in arrays]


# ----------------------------------------------------------------------------------------------
# tensor maps


@dataclass(frozen=True, eq=False)
class TensorMapArg:
    """A ``__grid_constant__ CUtensorMap`` kernel argument of ``backend="gpu"``: ``array`` (a C-contiguous
    NumPy array of rank >= 1, any dtype: its bytes are the map's global memory from byte 0) and
    ``tensor_map`` (a :class:`refsim.formats.tensor_map.TensorMap`: data type, dims innermost first,
    byte strides, box, element strides, interleave, swizzle, L2 promotion, oob fill; its
    ``global_address`` is not used: the backend puts the array's device address there). The array is
    one of the call's device buffers (module spec)."""

    array: np.ndarray
    tensor_map: tmap.TensorMap

    def __post_init__(self):
        if not isinstance(self.tensor_map, tmap.TensorMap):
            raise FormatRuleError(f"tensor_map: must be a refsim.formats.tensor_map.TensorMap; got "
                                  f"{type(self.tensor_map).__name__}")
        a = self.array
        if (not isinstance(a, np.ndarray) or a.ndim == 0 or not a.flags.c_contiguous or a.dtype.hasobject
                or not a.dtype.isnative):
            got = (f"shape {a.shape}, dtype {a.dtype}, strides {a.strides}" if isinstance(a, np.ndarray)
                   else type(a).__name__)
            raise FormatRuleError(f"array: a tensor map's array must be a C-contiguous numeric NumPy array of rank "
                                  f">= 1 in native byte order (its bytes are the map's global memory, copied to "
                                  f"the device and back as they are); got {got}")
        m = self.tensor_map
        esize = tmap.DATA_TYPES[m.data_type][1]
        need = sum((d - 1) * s for d, s in zip(m.global_dims, (esize,) + m.global_strides)) + esize
        if need > a.nbytes:
            raise ShapeError(f"array: the map's in-bounds elements reach byte {need - 1}; the array has {a.nbytes} "
                             f"bytes (dims {m.global_dims}, strides {m.global_strides})")


def _view_layout(m: tmap.TensorMap) -> tuple[tuple, tuple, tuple, tuple]:
    """cuda.core's NumPy-order (outermost first) shape, strides in elements, box_dim and element_strides
    of the map ``m`` (whose fields are innermost first, strides in bytes; module spec)."""
    esize = tmap.DATA_TYPES[m.data_type][1]
    strides = tuple(s // esize for s in m.global_strides[::-1]) + (1,)   # NumPy axis i is driver dim rank-1-i
    return m.global_dims[::-1], strides, m.box_dims[::-1], m.element_strides[::-1]


def _descriptor(api: _CudaApi, dbuf, off: int, nbytes: int, m: tmap.TensorMap):
    """The cuda.core TensorMapDescriptor of ``m`` over the ``nbytes`` at ``dbuf``'s address + ``off``."""
    core, e = api.core, api.enums
    shape, strides, box, estr = _view_layout(m)
    esize = tmap.DATA_TYPES[m.data_type][1]
    buf = dbuf if off == 0 else core.Buffer.from_handle(int(dbuf.handle) + off, nbytes, owner=dbuf)
    view = core.utils.StridedMemoryView.from_buffer(buf, shape, strides, itemsize=esize)
    return view.as_tensor_map(
        box, element_strides=estr, data_type=e.TensorMapDataType(tmap.DATA_TYPES[m.data_type][0]),
        interleave=e.TensorMapInterleave(tmap.INTERLEAVES.index(m.interleave)),
        swizzle=e.TensorMapSwizzle(tmap.SWIZZLES.index(m.swizzle)),
        l2_promotion=e.TensorMapL2Promotion(tmap.L2_PROMOTIONS.index(m.l2_promotion)),
        oob_fill=e.TensorMapOOBFill(tmap.OOB_FILLS.index(m.oob_fill)))


# ----------------------------------------------------------------------------------------------
# scalars


def _scalar(what: str, a, size: int):
    """The cuda.core kernel argument for a value parameter of ``size`` bytes."""
    if isinstance(a, (bytes, bytearray)):
        if len(a) != size or size not in (1, 2, 4, 8):
            raise FormatRuleError(f"{what}: bytes must have the parameter's size, and cuda.core passes only "
                                  f"1/2/4/8-byte ones; got {len(a)} bytes for a {size}-byte parameter")
        return np.frombuffer(bytes(a), f"<u{size}")[0]
    if isinstance(a, np.generic) and np.issubdtype(type(a), np.number) or isinstance(a, np.bool_):
        if a.itemsize != size:
            raise FormatRuleError(f"{what}: a NumPy scalar must have the parameter's size ({size} bytes); got "
                                  f"{type(a).__name__} ({a.itemsize} bytes)")
        return a
    raise FormatRuleError(f"{what}: a value parameter takes a NumPy scalar of its type (np.int32(...)) or bytes; "
                          f"got {type(a).__name__} (cuda.core would pass a Python int as a 64-bit pointer)")


# ----------------------------------------------------------------------------------------------
# the device


def device_facts(arch: str, optin: int) -> ArchFacts:
    """The launch limits of a device of ``arch`` (``"sm_90"``) that reports ``optin`` bytes of opt-in
    shared memory per block: the :data:`refsim.archs.ARCHS` row of its arch (of the newest arch before
    it when the table lacks it: every per-block limit but the shared-memory maximum is the same across
    the table; the oldest row for an older device) with the device's own maximum."""
    if not isinstance(arch, str) or parse_sm(arch) is None:
        raise FormatRuleError(f"arch: must be an SM architecture name like 'sm_90'; got {arch!r:.80}")
    arch = str(arch)
    sm = parse_sm(arch)
    rows = [f for f in ARCHS.values() if sm is not None and f.sm <= sm] or [next(iter(ARCHS.values()))]
    return replace(ARCHS.get(arch, rows[-1]), name=arch, max_shared_bytes_per_block=optin)


class _Device:
    """One CUDA device through ``api``: its stream, opt-in shared-memory limit, loaded modules."""

    def __init__(self, api: _CudaApi):
        self.api = api
        try:
            self.dev = api.core.Device()
            self.dev.set_current()
            self.stream = self.dev.create_stream()
            self.optin = int(self.dev.properties.max_shared_memory_per_block_optin)
            self.arch = f"sm_{self.dev.arch}"
            self.name = str(self.dev.name)
            self.facts = device_facts(self.arch, self.optin)
        except Exception as err:  # cuda.core raises CUDAError/RuntimeError for a missing driver or device
            raise ToolchainError(f"backend='gpu' found no usable CUDA GPU/driver: {err}") from err
        self.pinned = api.core.LegacyPinnedMemoryResource()
        self._objects: dict[str, object] = {}
        self._kernels: dict[tuple[str, str], object] = {}
        self._dynamic: dict[tuple[str, str], int] = {}     # the attribute as this module last raised it

    def kernel(self, ptx_text: str, name: str):
        key = (ptx_text, name)
        if key not in self._kernels:
            if ptx_text not in self._objects:
                try:
                    self._objects[ptx_text] = self.api.core.ObjectCode.from_ptx(ptx_text.encode())
                except Exception as err:
                    raise _named("loading the PTX", err) from err
            try:
                self._kernels[key] = self._objects[ptx_text].get_kernel(name)
            except Exception as err:
                raise _named(f"looking up kernel {name}", err) from err
        return self._kernels[key]

    def allow_dynamic_shared(self, ptx_text: str, name: str, kernel, shape) -> None:
        """Raise ``kernel``'s max-dynamic-shared attribute to the launch's dynamic bytes when the launch
        (a :class:`refsim.ptx.LaunchShape`) needs the opt-in, and check it took."""
        key, nbytes = (ptx_text, name), shape.dynamic_shared_bytes
        if not shape.needs_opt_in or nbytes <= self._dynamic.get(key, -1):
            return
        b = self.api.bindings
        attr = b.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        step = f"raising the dynamic shared memory of {name} to {nbytes} bytes"
        _check(self.api, step, b.cuKernelSetAttribute(attr, nbytes, kernel.handle, self.dev.device_id))
        got = _check(self.api, step, b.cuKernelGetAttribute(attr, kernel.handle, self.dev.device_id))
        if got != nbytes:
            raise GpuError(step, None, f"the attribute reads {got} after setting it")
        self._dynamic[key] = nbytes


_DEVICES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _device() -> _Device:
    api = _driver()
    if api not in _DEVICES:
        _DEVICES[api] = _Device(api)
    return _DEVICES[api]


def device_info() -> dict:
    """The current device as ``backend="gpu"`` sees it: ``name``, ``arch`` (``"sm_90"``), ``optin``
    (bytes of shared memory a block may opt in to)."""
    d = _device()
    return {"name": d.name, "arch": d.arch, "optin": d.optin}


# ----------------------------------------------------------------------------------------------
# one call


def _plan(d: _Device, ptx_text: str, launches) -> list:
    """Per launch: (launch, kernel, LaunchShape, args with arrays as ("ptr", key)); every rule checked."""
    planned = []
    for i, (ln, args) in enumerate(launches):
        kernel = d.kernel(ptx_text, ln.kernel)
        shape = check_launch_shape(d.facts, ln.grid, ln.block, dynamic_shared_bytes=ln.shared_bytes,
                                   static_shared_bytes=int(kernel.attributes.shared_size_bytes))
        if ln.cluster_dims != (1, 1, 1) and parse_sm(d.arch) < 90:
            from refsim.ptx.errors import PtxLaunchError     # the launch-shape rule's own error

            raise PtxLaunchError(f"cluster: thread-block clusters need sm_90 or later; got {d.arch}, "
                                 f"cluster {ln.cluster}")
        sizes = [int(p.size) for p in kernel.arguments_info]
        if isinstance(args, (np.ndarray, str, bytes)) or not hasattr(args, "__len__") or len(args) != len(sizes):
            got = len(args) if hasattr(args, "__len__") and not isinstance(args, np.ndarray) else type(args).__name__
            raise FormatRuleError(f"args: kernel {ln.kernel} takes {len(sizes)} parameters; got {got}")
        kargs = []
        for j, (a, size) in enumerate(zip(args, sizes)):
            what = f"launch {i} ({ln.kernel}) args[{j}]"
            if isinstance(a, np.ndarray):
                if a.ndim == 0 or not a.flags.c_contiguous or a.dtype.hasobject or size != 8:
                    raise FormatRuleError(f"{what}: a pointer argument must be a C-contiguous numeric array of "
                                          f"rank >= 1 for a 64-bit parameter; got shape {a.shape}, dtype "
                                          f"{a.dtype}, strides {a.strides}, parameter of {size} bytes")
                kargs.append(("ptr", (i, j), a))
            elif isinstance(a, TensorMapArg):
                if size != tmap.MAP_BYTES:
                    raise FormatRuleError(f"{what}: a TensorMapArg fills a {tmap.MAP_BYTES}-byte CUtensorMap "
                                          f"parameter; got a parameter of {size} bytes")
                if _address(a.array) % 16:       # device offsets keep the host's alignment modulo 256
                    raise FormatRuleError(f"{what}: a tensor map's array must start 16-byte aligned (the TMA "
                                          f"global address rule); got address {_address(a.array):#x}")
                kargs.append(("map", (i, j), a.array, a.tensor_map))
            else:
                kargs.append(_scalar(what, a, size))
        planned.append((ln, kernel, shape, kargs))
    return planned


class Resident:
    """One call's launches with their buffers resident on the device, made by :func:`prepare`:
    :meth:`launch` enqueues the launches (again) on :attr:`stream`, :meth:`copy_back` brings every
    buffer's bytes back into its arrays (module spec, "buffers"), :meth:`close` frees the device and
    pinned memory. :func:`run` is prepare, launch, copy back, close; a benchmark launches many times
    between prepare and close (kernel arguments, tensor maps and attributes are set up once)."""

    def __init__(self, d: _Device, ptx_text: str, planned: list, staged: list, calls: list):
        self._d, self._ptx, self._planned, self._staged, self._calls = d, ptx_text, planned, staged, calls

    @property
    def stream(self):
        """The cuda.core Stream the launches and copies run on."""
        return self._d.stream

    def launch(self, *, sync: bool = True) -> None:
        """Enqueue every launch in order; with ``sync`` wait for each before the next, so a fault names
        its launch (GpuError); without, return as soon as they are enqueued (timing)."""
        core, stream = self._d.api.core, self._d.stream
        for config, kernel, args, step in self._calls:
            try:
                core.launch(stream, config, kernel, *args)
                if sync:
                    stream.sync()
            except Exception as err:
                raise _named(step, err) from err

    def copy_back(self) -> None:
        """Copy every device buffer back into the arrays it mirrors (writable ones take the device's
        bytes; a read-only array the kernel changed raises FormatRuleError)."""
        stream = self._d.stream
        try:
            for base, host, dbuf in self._staged:
                dbuf.copy_to(host, stream=stream)
            stream.sync()
        except Exception as err:
            raise _named("copying the buffers back", err) from err
        for base, host, _ in self._staged:
            out = np.from_dlpack(host).view(np.uint8)[:base.host.size]
            if base.writable:
                base.host[:] = out
            elif not np.array_equal(out, base.host):
                raise FormatRuleError(f"args: the kernel wrote a read-only array (launch, argument) "
                                      f"{base.args[0]}; pass a writable array")

    def close(self) -> None:
        """Free the device and pinned buffers (errors after a kernel fault are ignored: the context
        refuses everything then, and the error that named the fault has been raised)."""
        for _, host, dbuf in self._staged:
            try:
                dbuf.close(self._d.stream)
                host.close()
            except Exception:  # noqa: BLE001 - see the docstring
                pass
        self._staged = []


def prepare(ptx_text: str, launches) -> Resident:
    """Check ``launches`` (``(refsim.cuda.launch.Launch, args)`` pairs, as :func:`refsim.cuda.launch.run`
    checked them) of ``ptx_text`` against the current device, allocate one device buffer per base array
    and copy the arrays in (module spec), raise the kernels' shared-memory attributes and encode their
    tensor maps: a :class:`Resident` whose :meth:`~Resident.launch` runs them. Call
    :meth:`~Resident.close` when done (on an error here everything is freed)."""
    d = _device()
    planned = _plan(d, ptx_text, launches)
    arrays = [(k[1], k[2]) for p in planned for k in p[3] if isinstance(k, tuple)]
    bases, where = device_bases(arrays)
    offset = dict(zip((key for key, _ in arrays), where))
    core, stream = d.api.core, d.stream
    staged = []                                        # (DeviceBase, pinned host buffer, device buffer)
    resident = Resident(d, ptx_text, planned, staged, [])
    try:
        for base in bases:
            n = max(base.host.size, 1)
            try:
                host, dbuf = d.pinned.allocate(n), d.dev.allocate(n, stream=stream)
                np.from_dlpack(host).view(np.uint8)[:base.host.size] = base.host
                staged.append((base, host, dbuf))
                dbuf.copy_from(host, stream=stream)
            except Exception as err:
                raise _named(f"allocating and copying {n} bytes to the device", err) from err
        for i, (ln, kernel, shape, kargs) in enumerate(planned):
            d.allow_dynamic_shared(ptx_text, ln.kernel, kernel, shape)
            grid, block, shared = shape.grid, shape.block, shape.dynamic_shared_bytes
            args = []
            for k in kargs:
                if isinstance(k, tuple):
                    b, off = offset[k[1]]
                    if k[0] == "map":
                        try:
                            args.append(_descriptor(d.api, staged[b][2], off, k[2].nbytes, k[3]))
                        except Exception as err:
                            raise _named(f"encoding the tensor map of launch {i} argument {k[1][1]}", err) from err
                    else:
                        args.append(int(staged[b][2].handle) + off)     # cuda.core passes an int as a pointer
                else:
                    args.append(k)
            cluster = ln.cluster_dims
            step = (f"launch {i} of {len(planned)} ({ln.kernel}, grid {grid}, block {block}, {shared} B shared"
                    + (f", cluster {cluster})" if cluster != (1, 1, 1) else ")"))
            if cluster == (1, 1, 1):
                config = core.LaunchConfig(grid=grid, block=block, shmem_size=shared)
            else:                                  # cuda.core counts the grid in clusters (module spec)
                config = core.LaunchConfig(grid=tuple(g // c for g, c in zip(grid, cluster)), cluster=cluster,
                                           block=block, shmem_size=shared)
            resident._calls.append((config, kernel, args, step))
    except BaseException:
        resident.close()
        raise
    return resident


def run(ptx_text: str, launches) -> list:
    """Run ``launches`` (``(refsim.cuda.launch.Launch, args)`` pairs, as :func:`refsim.cuda.launch.run`
    checked them) of ``ptx_text`` on the current device, in order, with one device buffer per base array
    (module spec); arrays are updated in place. Returns ``[None] * n``. (:func:`prepare`, then one
    :meth:`Resident.launch`, :meth:`Resident.copy_back`, :meth:`Resident.close`.)"""
    resident = prepare(ptx_text, launches)
    try:
        resident.launch(sync=True)
        resident.copy_back()
    finally:
        resident.close()
    return [None] * len(resident._planned)
