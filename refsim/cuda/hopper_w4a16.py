"""Host side of ``hopper_w4a16.cu``: the sm_90a W4A16 GEMM (TMA + mbarrier pipeline, producer/consumer
warpgroups, wgmma with the weights converted in registers), equal to
:func:`refsim.emulator.hopper_w4a16.hopper_w4a16_gemm` bit for bit (spec block in the .cu file).

    X (M, K) fp16 + Wp uint32 (N/64 * K/16, 128) + s fp16 (K/128, N)  ─► hopper_w4a16_gemm ─► C (M, N) fp16
    launch: grid (N / 64, ceil(M / 64)), block 256 (producer + consumer warpgroup), 41,984 bytes of static
    shared memory; two tensor maps (X: box 64 x 64, 128B swizzle; Wp: box 128 x 4) as __grid_constant__
    parameters, defined once by :func:`maps` (their :class:`refsim.formats.tensor_map.TensorMap` fields)

Global addresses: a tensor map holds its tensor's global address. For refsim.ptx, :func:`plan` assigns
them as :class:`refsim.ptx.memory.GlobalMemory` maps a launch's pointer arguments (in parameter order: X,
Wp, scales, C), which is what :meth:`refsim.ptx.Module.launch` does with the same arrays, and passes the
images :func:`tensor_maps` encodes. For ``backend="gpu"``, :func:`plan` passes the same maps as
:class:`refsim.cuda.gpu.TensorMapArg` (X, Wp and the fields): cuda.core encodes them at the device
buffers' addresses (:mod:`refsim.cuda.gpu` spec "tensor maps"). Checked against a fake driver only here.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_int
from refsim.cuda import build, launch
from refsim.cuda.launch import Launch
from refsim.emulator import hopper_w4a16 as ek
from refsim.formats import hopper_w4a16 as layout, tensor_map

__all__ = ["SOURCE", "ENTRY_POINTS", "PTX_ARCHS", "KERNEL", "BLOCK", "STATIC_SHARED_BYTES", "maps", "tensor_maps",
           "plan", "hopper_w4a16_gemm"]

SOURCE = "hopper_w4a16"
ENTRY_POINTS = {"hopper_w4a16_gemm": "refsim.emulator.hopper_w4a16.hopper_w4a16_gemm"}
PTX_ARCHS = ("sm_90a",)          # wgmma, setmaxnreg: arch-specific sm_90a PTX only
KERNEL = "hopper_w4a16_gemm"
BLOCK = 256                      # warpgroup 0 produces, warpgroup 1 consumes
STATIC_SHARED_BYTES = 41984      # 4 stages x (8,192 X + 2,048 Wp) + 8 mbarriers, padded to 1 KB (ptxas)


def maps(x_address: int, wp_address: int, m: int, k: int, n: int) -> tuple[tensor_map.TensorMap, tensor_map.TensorMap]:
    """The kernel's two tensor maps as :class:`refsim.formats.tensor_map.TensorMap` fields (spec block
    "tensor maps" of the .cu; the one definition both backends use): X float16 dims (K, M), row stride
    2K bytes, box (64, 64), swizzle 128B; Wp uint32 dims (128, N/64 * K/16), row stride 512 bytes, box
    (128, 4); element strides 1, interleave none, L2 promotion none, oob fill zero. Addresses: the
    buffers' global addresses (16-byte aligned; ``backend="gpu"`` replaces them); m >= 1, k % 128, n % 64
    (FormatRuleError / ShapeError)."""
    m = require_int("m", m, minimum=1)
    k, n = layout.check_kn(k, n)
    x_map = tensor_map.TensorMap("float16", x_address, (k, m), (2 * k,), (ek.TILE_K, ek.TILE_M), (1, 1),
                                 swizzle="128B")
    w_map = tensor_map.TensorMap("uint32", wp_address, (128, n // 64 * (k // 16)), (512,),
                                 (128, ek.TILE_K // 16), (1, 1))
    return x_map, w_map


def tensor_maps(x_address: int, wp_address: int, m: int, k: int, n: int) -> tuple[bytes, bytes]:
    """The two 128-byte tensor map images (``bytes``) of :func:`maps` (same arguments and rules), as
    :func:`refsim.formats.tensor_map.encode_tiled` writes them."""
    return tuple(tensor_map.encode_tiled(**{f: getattr(t, f) for f in t.__dataclass_fields__})
                 for t in maps(x_address, wp_address, m, k, n))


def plan(x: np.ndarray, wp: np.ndarray, scales: np.ndarray, *, backend: str = "ptx") -> tuple[Launch, tuple, np.ndarray]:
    """``(launch, args, c)``: the launch of ``x`` float16 (M, K), ``wp`` uint32 (N/64 * K/16, 128),
    ``scales`` float16 (K/128, N) (rules: :func:`refsim.emulator.hopper_w4a16.check_inputs`); ``args``
    in parameter order with fresh copies of the inputs (offset 0 in their allocations, so aligned) and
    the two tensor maps of :func:`maps`: for ``backend`` "ptx" their images encoded for the addresses
    refsim.ptx gives the arrays, for "gpu" :class:`refsim.cuda.gpu.TensorMapArg` (x and wp with the
    maps' fields); ``c`` the zeroed float16 (M, N) output inside ``args``. Inputs are not modified."""
    from refsim.cuda.gpu import TensorMapArg
    from refsim.ptx.memory import GlobalMemory

    backend = require_choice("backend", backend, launch.BACKENDS)
    x, wp, scales, m, k, n = ek.check_inputs(x, wp, scales)
    x, wp, scales = (np.array(a, order="C") for a in (x, wp, scales))   # fresh C-order copies: any layout in
    c = np.zeros((m, n), np.float16)
    if backend == "gpu":
        x_map, w_map = (TensorMapArg(a, t) for a, t in zip((x, wp), maps(0, 0, m, k, n)))
    else:
        mem = GlobalMemory()
        addresses = [mem.add(a, name) for a, name in ((x, "x"), (wp, "wp"), (scales, "scales"), (c, "c"))]
        x_map, w_map = tensor_maps(addresses[0], addresses[1], m, k, n)
    args = (x, wp, scales, c, x_map, w_map, np.int32(m), np.int32(n), np.int32(k))
    return Launch(KERNEL, (n // ek.TILE_N, -(-m // ek.TILE_M)), BLOCK), args, c


def hopper_w4a16_gemm(x: np.ndarray, wp: np.ndarray, scales: np.ndarray, *, backend: str = "ptx",
                      options: dict | None = None) -> np.ndarray:
    """Run ``hopper_w4a16_gemm`` of hopper_w4a16.cu: float16 (M, N), what
    :func:`refsim.emulator.hopper_w4a16.hopper_w4a16_gemm` returns. x float16 (M, K), M >= 1; wp uint32
    (N/64 * K/16, 128) from :func:`refsim.formats.hopper_w4a16.pack`; scales float16 (K/128, N); K % 128,
    N % 64. backend "ptx" (refsim.ptx, arch sm_90a) or "gpu" (the current device, an sm_90 one: the PTX
    is sm_90a; tensor maps encoded by cuda.core, module docstring); ``options`` go to
    :meth:`refsim.ptx.Module.launch`."""
    backend = require_choice("backend", backend, launch.BACKENDS)
    ln, args, c = plan(x, wp, scales, backend=backend)
    launch.run(build.ptx(SOURCE, PTX_ARCHS[0]), [(ln, args)], backend=backend, arch=PTX_ARCHS[0], options=options)
    return c
