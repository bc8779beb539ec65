"""A fake of the part of ``cuda.core`` 1.2 and ``cuda.bindings.driver`` that refsim.cuda.gpu calls.

It records every call in ``calls`` and executes each kernel launch through refsim.ptx on the fake
device memory, so a call through ``backend="gpu"`` computes real results on a CPU. What it enforces, as
the driver does (CUDA Driver API, cuLaunchKernelEx / cuKernelSetAttribute):
- a launch with more dynamic shared memory than the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES attribute
  (48 KiB minus the kernel's static shared bytes until raised) fails with CUDA_ERROR_INVALID_VALUE;
- the attribute cannot be set above the device's opt-in limit minus the kernel's static shared bytes;
- a pointer argument must point into a live device allocation;
- a tensor map (``utils.StridedMemoryView.from_buffer(...).as_tensor_map(...)``) takes the enum types
  of ``cuda.core._tensor_map`` (``isinstance``-checked, as cuda.core 1.2.2's ``_require_tensor_map_enum``
  does) and a 16-byte aligned address inside a live device allocation; the request the fake records
  (``tensor_maps()``) is what cuda.core hands the driver: shape, strides, box and element strides
  reversed into innermost-first order, strides times the item size, the innermost stride dropped
  (cuda_core/cuda/core/_tensor_map.pyx ``_from_tiled``, ``_fill_global_strides``).
A launch with a tensor-map argument is recorded, not executed: refsim.ptx would place the mapped arrays at
its own addresses, not at the ones the maps hold. ``configs`` keeps every LaunchConfig (its ``cluster``).
``exec_arch`` (default ``arch``) is the tensor-core model the launches execute under: an "sm_90" device
that computes like sm_80 shows how a mismatch is reported.
``fail={"load"|"launch"|"sync"|"set_attribute": "CUDA_ERROR_..."}`` makes that step fail with that name
(cuda.core raises ``CUDAError("NAME: explanation")``; cuda.bindings returns the code).

Install: ``monkeypatch.setattr(refsim.cuda.gpu, "_driver", lambda: fake)``.
"""

from __future__ import annotations

import enum
import re

import numpy as np

from refsim.cuda import launch as cuda_launch


class CUDAError(Exception):
    """What cuda.core raises for a failing driver call: message ``"CUDA_ERROR_NAME: explanation"``."""


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715


class CUfunction_attribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


_STATIC_SHARED = re.compile(r"^\s*\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+[\w$]+\[(\d+)\]", re.M)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+[\w$]+(?:\[(\d+)\])?")
_BITS = {"8": 1, "16": 2, "32": 4, "64": 8}


class ParamInfo:
    def __init__(self, offset, size):
        self.offset, self.size = offset, size


class Buffer:
    """Device or pinned host memory: ``data`` (uint8) at integer address ``handle``."""

    def __init__(self, fake, size, kind):
        self.fake, self.size, self.kind = fake, size, kind
        self.data = np.zeros(size, np.uint8)
        self.handle = fake._next_address(size)
        fake.memory[self.handle] = self
        self.closed = False

    def copy_from(self, src, *, stream):
        assert src.size == self.size, "cuda.core copies between buffers of one size"
        self.fake.calls.append(("copy_from", self.kind, self.handle, src.size))
        self.data[:] = src.data

    def copy_to(self, dst, *, stream):
        assert dst.size == self.size, "cuda.core copies between buffers of one size"
        self.fake.calls.append(("copy_to", self.kind, self.handle, dst.size))
        dst.data[:] = self.data
        return dst

    def close(self, stream=None):
        self.fake.calls.append(("close", self.kind, self.handle))
        self.fake.memory.pop(self.handle, None)
        self.closed = True

    def __dlpack__(self, **kwargs):            # pinned host memory: NumPy reads it through DLPack
        assert self.kind == "pinned", "only host memory is visible to NumPy"
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()


class HandleBuffer:
    """``Buffer.from_handle(ptr, size, owner=)``: a non-owning view of device memory."""

    def __init__(self, fake, ptr, size, owner):
        self.handle, self.size, self.owner = int(ptr), size, owner
        fake.calls.append(("from_handle", self.handle, size))


class TensorMapDataType(enum.IntEnum):          # the CUtensorMapDataType values (cuda.h)
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    INT32 = 3
    UINT64 = 4
    INT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT32_FTZ = 10
    TFLOAT32 = 11
    TFLOAT32_FTZ = 12


class TensorMapInterleave(enum.IntEnum):
    NONE = 0
    INTERLEAVE_16B = 1
    INTERLEAVE_32B = 2


class TensorMapSwizzle(enum.IntEnum):
    NONE = 0
    SWIZZLE_32B = 1
    SWIZZLE_64B = 2
    SWIZZLE_128B = 3


class TensorMapL2Promotion(enum.IntEnum):
    NONE = 0
    L2_64B = 1
    L2_128B = 2
    L2_256B = 3


class TensorMapOOBFill(enum.IntEnum):
    NONE = 0
    NAN_REQUEST_ZERO_FMA = 1


class _Enums:
    """The names of ``cuda.core._tensor_map`` refsim.cuda.gpu uses."""

    TensorMapDataType = TensorMapDataType
    TensorMapInterleave = TensorMapInterleave
    TensorMapSwizzle = TensorMapSwizzle
    TensorMapL2Promotion = TensorMapL2Promotion
    TensorMapOOBFill = TensorMapOOBFill


def image_request(image: bytes) -> dict:
    """The request (as :meth:`FakeCuda.tensor_maps` records one, less the address) that refsim.ptx's
    128-byte image of a map stands for: the comparison of the two backends' encodings of one map."""
    from refsim.formats import tensor_map

    t = tensor_map.decode_tiled(image)
    return {"data_type": TensorMapDataType(tensor_map.DATA_TYPES[t.data_type][0]), "global_dims": t.global_dims,
            "global_strides": t.global_strides, "box_dims": t.box_dims, "element_strides": t.element_strides,
            "interleave": TensorMapInterleave(tensor_map.INTERLEAVES.index(t.interleave)),
            "swizzle": TensorMapSwizzle(tensor_map.SWIZZLES.index(t.swizzle)),
            "l2_promotion": TensorMapL2Promotion(tensor_map.L2_PROMOTIONS.index(t.l2_promotion)),
            "oob_fill": TensorMapOOBFill(tensor_map.OOB_FILLS.index(t.oob_fill))}


class TensorMapDescriptor:
    """What ``as_tensor_map`` returns: ``request``, the driver's cuTensorMapEncodeTiled arguments."""

    def __init__(self, request):
        self.request = request


class StridedMemoryView:
    def __init__(self, fake, buffer, shape, strides, itemsize):
        self.fake, self.buffer = fake, buffer
        self.ptr, self.shape, self.strides, self.itemsize = int(buffer.handle), tuple(shape), strides, itemsize

    def as_tensor_map(self, box_dim=None, *, options=None, element_strides=None, data_type=None, interleave=None,
                      swizzle=None, l2_promotion=None, oob_fill=None):
        fake, rank = self.fake, len(self.shape)
        for name, v, t in (("interleave", interleave, TensorMapInterleave), ("swizzle", swizzle, TensorMapSwizzle),
                           ("l2_promotion", l2_promotion, TensorMapL2Promotion),
                           ("oob_fill", oob_fill, TensorMapOOBFill), ("data_type", data_type, TensorMapDataType)):
            if v is not None and not isinstance(v, t):
                raise TypeError(f"{name} must be a {t.__name__}, got {type(v)}")
        if self.ptr % 16:
            raise ValueError(f"Global memory address must be 16-byte aligned, got address 0x{self.ptr:x}")
        fake._pointer(self.ptr)
        if len(box_dim) != rank or (element_strides is not None and len(element_strides) != rank):
            raise ValueError(f"box_dim / element_strides must have {rank} elements")
        strides = self.strides
        if strides is None:                      # C-contiguous
            strides = tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64)) for i in range(rank))
        estr = element_strides if element_strides is not None else (1,) * rank
        request = {"data_type": data_type, "address": self.ptr, "global_dims": tuple(self.shape[::-1]),
                   "global_strides": tuple(s * self.itemsize for s in strides[::-1][1:]),
                   "box_dims": tuple(box_dim[::-1]), "element_strides": tuple(estr[::-1]),
                   "interleave": interleave or TensorMapInterleave.NONE, "swizzle": swizzle or TensorMapSwizzle.NONE,
                   "l2_promotion": l2_promotion or TensorMapL2Promotion.NONE,
                   "oob_fill": oob_fill or TensorMapOOBFill.NONE}
        fake.calls.append(("tensor_map", request))
        return TensorMapDescriptor(request)


class KernelAttributes:
    def __init__(self, kernel):
        self.shared_size_bytes = kernel.static_shared


class Kernel:
    def __init__(self, fake, text, name):
        self.fake, self.text, self.name = fake, text, name
        self.handle = fake._next_address(16)
        body = cuda_launch.entry_text(text, name)
        self.static_shared = sum(int(n) for n in _STATIC_SHARED.findall(body[body.index(f"{name}("):]))
        self.max_dynamic = 48 * 1024 - self.static_shared
        params = body[body.index(f"{name}("):body.index(")", body.index(f"{name}("))]
        self.arguments_info = []
        offset = 0
        for ptype, count in _PARAM.findall(params):
            size = int(count) if count else _BITS[re.sub(r"\D", "", ptype) or "32"]
            offset = -(-offset // min(size, 8)) * min(size, 8)
            self.arguments_info.append(ParamInfo(offset, size))
            offset += size
        self.attributes = KernelAttributes(self)


class ObjectCode:
    def __init__(self, fake, text):
        self.fake, self.text = fake, text

    def get_kernel(self, name):
        if isinstance(name, bytes):
            name = name.decode()
        if name not in cuda_launch.entries(self.text):
            raise CUDAError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name})")
        self.fake.calls.append(("get_kernel", name))
        k = Kernel(self.fake, self.text, name)
        self.fake.kernels[k.handle] = k
        return k


class LaunchConfig:
    def __init__(self, grid=None, cluster=None, block=None, shmem_size=None, **kw):
        self.grid, self.cluster, self.block, self.shmem_size = grid, cluster, block, shmem_size or 0


class Stream:
    def __init__(self, fake):
        self.fake = fake

    def sync(self):
        self.fake.calls.append(("sync",))
        self.fake._maybe_fail("sync")


class Properties:
    def __init__(self, optin):
        self.max_shared_memory_per_block_optin = optin


class Device:
    def __init__(self, fake):
        self.fake, self.device_id = fake, 0
        self.properties = Properties(fake.optin)
        self.arch, self.name = fake.arch[3:], fake.name

    def set_current(self):
        self.fake.calls.append(("set_current",))

    def create_stream(self):
        return Stream(self.fake)

    def allocate(self, size, *, stream):
        b = Buffer(self.fake, size, "device")
        self.fake.calls.append(("allocate", "device", b.handle, size))
        return b


class _Core:
    """The cuda.core names refsim.cuda.gpu uses."""

    def __init__(self, fake):
        self._fake = fake
        self.LaunchConfig = LaunchConfig

        class Buffer:
            @staticmethod
            def from_handle(ptr, size, mr=None, owner=None, *, stream=None):
                return HandleBuffer(fake, ptr, size, owner)

        class _View:
            @staticmethod
            def from_buffer(buffer, shape, strides=None, *, itemsize=None, dtype=None, is_readonly=False):
                return StridedMemoryView(fake, buffer, shape, strides, itemsize or dtype.itemsize)

        class utils:
            StridedMemoryView = _View

        self.Buffer, self.utils = Buffer, utils

    def Device(self, device_id=None):
        if self._fake.device is None:
            self._fake.device = Device(self._fake)
        return self._fake.device

    def LegacyPinnedMemoryResource(self):
        fake = self._fake

        class Pinned:
            def allocate(self, size, stream=None):
                b = Buffer(fake, size, "pinned")
                fake.calls.append(("allocate", "pinned", b.handle, size))
                return b

        return Pinned()

    @property
    def ObjectCode(self):
        fake = self._fake

        class _Loader:
            @staticmethod
            def from_ptx(code, **kw):
                fake.calls.append(("from_ptx", len(code)))
                fake._maybe_fail("load")
                return ObjectCode(fake, code.decode() if isinstance(code, bytes) else code)

        return _Loader

    def launch(self, stream, config, kernel, *args):
        self._fake._launch(config, kernel, args)


class _Bindings:
    """The cuda.bindings.driver names refsim.cuda.gpu uses."""

    CUresult = CUresult
    CUfunction_attribute = CUfunction_attribute

    def __init__(self, fake):
        self._fake = fake

    def cuKernelSetAttribute(self, attrib, val, kernel, dev):
        fake = self._fake
        k = fake.kernels[kernel]
        fake.calls.append(("set_attribute", k.name, attrib, val))
        if "set_attribute" in fake.fail:
            return (CUresult[fake.fail["set_attribute"]],)
        if attrib != CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES or \
                val + k.static_shared > fake.optin or val < 0:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        k.max_dynamic = val
        return (CUresult.CUDA_SUCCESS,)

    def cuKernelGetAttribute(self, attrib, kernel, dev):
        k = self._fake.kernels[kernel]
        assert attrib == CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        return (CUresult.CUDA_SUCCESS, k.max_dynamic)


class FakeCuda:
    """A fake GPU: ``core`` and ``bindings`` as refsim.cuda.gpu reads them from ``_driver()``."""

    def __init__(self, *, arch: str = "sm_90", optin: int = 232448, name: str = "Fake H100", fail=None,
                 exec_arch: str | None = None):
        self.arch, self.optin, self.name = arch, optin, name
        self.exec_arch = exec_arch or arch      # the tensor-core model refsim.ptx executes launches under
        self.fail = dict(fail or {})
        self.calls: list[tuple] = []
        self.memory: dict[int, Buffer] = {}
        self.kernels: dict[int, Kernel] = {}
        self.device = None
        self._address = 0x7F00_0000_0000
        self.configs: list = []
        self.core = _Core(self)
        self.bindings = _Bindings(self)
        self.enums = _Enums()

    def _next_address(self, size: int) -> int:
        a = self._address
        self._address += -(-max(size, 1) // 4096) * 4096 + 4096      # 4 KiB apart, 256-aligned
        return a

    def _maybe_fail(self, step: str) -> None:
        if step in self.fail:
            raise CUDAError(f"{self.fail[step]}: injected by the fake at {step}")

    def _pointer(self, address: int) -> np.ndarray:
        for base, buf in self.memory.items():
            if buf.kind == "device" and base <= address < base + buf.size:
                return buf.data[address - base:]
        raise CUDAError(f"CUDA_ERROR_ILLEGAL_ADDRESS: {address:#x} is in no device allocation")

    def _launch(self, config, kernel, args):
        self.calls.append(("launch", kernel.name, config.grid, config.block, config.shmem_size, args))
        self.configs.append(config)
        self._maybe_fail("launch")
        if config.shmem_size > kernel.max_dynamic:
            raise CUDAError(f"CUDA_ERROR_INVALID_VALUE: {config.shmem_size} bytes of dynamic shared memory above "
                            f"the kernel's limit {kernel.max_dynamic}")
        if any(isinstance(a, TensorMapDescriptor) for a in args):
            return                                 # recorded, not executed (module docstring)
        ptx_args = [self._pointer(a) if isinstance(a, int) else a for a in args]
        grid, extra = config.grid, {}
        if config.cluster is not None:            # cuda.core's grid counts clusters; refsim.ptx's blocks
            grid = tuple(g * c for g, c in zip(config.grid, config.cluster))
            extra = {"cluster": config.cluster}
        cuda_launch.module(kernel.text, kernel.name).launch(kernel.name, grid, config.block, ptx_args,
                                                            arch=self.exec_arch, shared_bytes=config.shmem_size,
                                                            **extra)

    def tensor_maps(self) -> list[dict]:
        """The recorded tensor-map requests, in order."""
        return [c[1] for c in self.calls if c[0] == "tensor_map"]

    def launches(self) -> list[tuple]:
        """The recorded launches: (kernel, grid, block, shmem, args)."""
        return [c[1:] for c in self.calls if c[0] == "launch"]
