"""Host side of ``hopper_w4a16.cu``: the sm_90a W4A16 GEMM (TMA + mbarrier pipeline, producer/consumer
warpgroups, wgmma with the weights converted in registers), equal to
:func:`refsim.emulator.hopper_w4a16.hopper_w4a16_gemm` bit for bit (spec block in the .cu file).

    X (M, K) fp16 + Wp uint32 (N/64 * K/16, 128) + s fp16 (K/128, N)  ─► hopper_w4a16_gemm ─► C (M, N) fp16
    launch: grid (N / 64, ceil(M / 64)), block 256 (producer + consumer warpgroup), 41,984 bytes of static
    shared memory; two tensor maps (X: box 64 x 64, 128B swizzle; Wp: box 128 x 4) as __grid_constant__
    parameters, built by :func:`tensor_maps` with :func:`refsim.formats.tensor_map.encode_tiled`

Global addresses: a tensor map holds its tensor's global address, so the host must know where the
launch puts X and Wp. :func:`plan` assigns them as :class:`refsim.ptx.memory.GlobalMemory` maps a
launch's pointer arguments (in parameter order: X, Wp, scales, C), which is what
:meth:`refsim.ptx.Module.launch` does with the same arrays. The ``gpu`` backend would need the maps
encoded from the device buffers' addresses, which :mod:`refsim.cuda.gpu` does not provide: it is refused.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_int
from refsim.cuda import build, launch
from refsim.cuda.launch import Launch
from refsim.emulator import hopper_w4a16 as ek
from refsim.errors import FormatRuleError
from refsim.formats import hopper_w4a16 as layout, tensor_map

__all__ = ["SOURCE", "ENTRY_POINTS", "PTX_ARCHS", "KERNEL", "BLOCK", "STATIC_SHARED_BYTES", "tensor_maps", "plan",
           "hopper_w4a16_gemm"]

SOURCE = "hopper_w4a16"
ENTRY_POINTS = {"hopper_w4a16_gemm": "refsim.emulator.hopper_w4a16.hopper_w4a16_gemm"}
PTX_ARCHS = ("sm_90a",)          # wgmma, setmaxnreg: arch-specific sm_90a PTX only
KERNEL = "hopper_w4a16_gemm"
BLOCK = 256                      # warpgroup 0 produces, warpgroup 1 consumes
STATIC_SHARED_BYTES = 41984      # 4 stages x (8,192 X + 2,048 Wp) + 8 mbarriers, padded to 1 KB (ptxas)


def tensor_maps(x_address: int, wp_address: int, m: int, k: int, n: int) -> tuple[bytes, bytes]:
    """The two 128-byte tensor map images the kernel takes (spec block "tensor maps"): X float16
    dims (K, M), row stride 2K bytes, box (64, 64), swizzle 128B; Wp uint32 dims (128, N/64 * K/16),
    row stride 512 bytes, box (128, 4). Addresses: the buffers' global addresses (16-byte aligned);
    m >= 1, k % 128, n % 64 (FormatRuleError / ShapeError)."""
    m = require_int("m", m, minimum=1)
    k, n = layout.check_kn(k, n)
    x_map = tensor_map.encode_tiled("float16", x_address, (k, m), (2 * k,), (ek.TILE_K, ek.TILE_M), (1, 1),
                                    swizzle="128B")
    w_map = tensor_map.encode_tiled("uint32", wp_address, (128, n // 64 * (k // 16)), (512,),
                                    (128, ek.TILE_K // 16), (1, 1))
    return x_map, w_map


def plan(x: np.ndarray, wp: np.ndarray, scales: np.ndarray) -> tuple[Launch, tuple, np.ndarray]:
    """``(launch, args, c)``: the launch of ``x`` float16 (M, K), ``wp`` uint32 (N/64 * K/16, 128),
    ``scales`` float16 (K/128, N) (rules: :func:`refsim.emulator.hopper_w4a16.check_inputs`); ``args``
    in parameter order with fresh copies of the inputs (offset 0 in their allocations, so aligned) and
    the tensor maps encoded for the addresses refsim.ptx gives them; ``c`` the zeroed float16 (M, N)
    output inside ``args``. Inputs are not modified."""
    from refsim.ptx.memory import GlobalMemory

    x, wp, scales, m, k, n = ek.check_inputs(x, wp, scales)
    x, wp, scales = (np.array(a, order="C") for a in (x, wp, scales))   # fresh C-order copies: any layout in
    c = np.zeros((m, n), np.float16)
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
    N % 64. backend "ptx" (refsim.ptx, arch sm_90a); "gpu" is refused (module docstring); ``options`` go
    to :meth:`refsim.ptx.Module.launch`."""
    backend = require_choice("backend", backend, launch.BACKENDS)
    if backend == "gpu":
        raise FormatRuleError("backend: 'gpu' needs tensor maps encoded from device addresses, which "
                              "refsim.cuda.gpu does not provide yet; got 'gpu'")
    ln, args, c = plan(x, wp, scales)
    launch.run(build.ptx(SOURCE, PTX_ARCHS[0]), [(ln, args)], backend=backend, arch=PTX_ARCHS[0], options=options)
    return c
