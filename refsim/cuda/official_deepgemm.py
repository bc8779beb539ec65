"""DeepGEMM's sm_90 FP8 GEMM (``refsim/cuda/official/deepgemm_fp8_gemm.ptx.gz``): its host side, argument for argument.

Spec
----
kernel          ``sm90_fp8_gemm_1d2d_impl<Major::K, 0, N, K, 1, BLOCK_M, BLOCK_N, 128, 128, 128, 128, stages,
                128, math_threads, 1, false, num_sms, GemmType::Normal, bfloat16_t, EpilogueIdentity>``
                (deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b; provenance and the
                instantiations committed: ``refsim/cuda/official/README.md``). Parameters, in order:
                ``float* sfb, int* grouped_layout (null), u32 shape_m, u32 shape_n, u32 shape_k`` and four
                ``__grid_constant__ CUtensorMap`` (128 bytes each): ``tensor_map_a, _b, _d, _sfa``.
configuration   :func:`config`: DeepGEMM's ``get_best_config<SM90ArchSpec>`` (``csrc/jit_kernels/heuristics/
                sm90.hpp``, ``common.hpp``) for ``fp8_gemm_nt`` (GemmType::Normal, Kernel1D2D, e4m3 -> bf16):
                BLOCK_M in {64, 128, 256} (+16, 32 for M <= 16, 32), BLOCK_N 16..192 step 16, BLOCK_K 128,
                clusters (1|2) x (1|2) of at most 2, the candidate rules (1D2D unroll, <= 128 on one side,
                swizzles >= 64 B, >= 3 stages, >= 4 for small blocks), stages from 232,448 B of shared
                memory, and the L1/L2 cycle model choosing the first strict minimum.
tensor maps     ``make_tma_2d_desc`` (``csrc/jit_kernels/impls/runtime_utils.hpp``): rank 2, dims innermost
                first, element strides 1, interleave none, L2 promotion 256B, OOB fill none (zeros); a
                swizzled box's inner dim is ``swizzle bytes / element size``::

                    map   type      dims                 stride (B)     box                 swizzle
                    a     uint8     (K, M)               K              (128, BLOCK_M)      128B
                    b     uint8     (K, N)               K              (128, BLOCK_N)      128B
                    d     bfloat16  (N, M)               2N             (64, BLOCK_M)       128B
                    sfa   float32   (align(M, 4), K/128) 4 align(M, 4)  (BLOCK_M, 1)        none
scales          sfa is read transposed and TMA-aligned (``get_mn_major_tma_aligned_tensor``): float32
                (K/128, align(M, 4)), ``sfa_t[kb, m] = sfa[m, kb]``, padding rows zero here (the kernel never
                stores the rows they scale); sfb float32 (ceil(N/128), K/128) K-major, read through its pointer.
launch          grid num_sms (persistent blocks), block 128 TMA + 128 or 256 math threads, cluster
                cluster_m * cluster_n, dynamic shared memory = the configuration's smem size.
global memory   the tensor maps hold global addresses: the maps' buffers a, b, d, sfa_t are no kernel
                parameters but the launch's extra buffers (``Module.launch(..., buffers=Prepared.buffers)``),
                whose addresses :func:`refsim.ptx.buffer_addresses` gives before the launch, whatever the
                arguments and module variables; sfb is the pointer argument (placed by the launch).
gpu             ``backend="gpu"`` (:func:`launch_args`): the same maps (``_tensor_maps``, fields in
                ``Prepared.maps``) as :class:`refsim.cuda.gpu.TensorMapArg` over a, b, d, sfa_t, which become
                device buffers; cuda.core encodes them at the buffers' device addresses; the grid of
                ``num_sms`` blocks launched in clusters of ``cluster`` (cuda.core's grid: num_sms / cluster
                clusters). Checked against a fake driver only (no GPU here).
status          :func:`deepgemm_fp8_gemm` runs it through refsim.ptx (both executors), bit for bit with
                :func:`refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm` (tests/cuda/test_official_deepgemm.py;
                the layer size: bench/bench_deepgemm.py).
"""

from __future__ import annotations

import functools
import gzip
import re
from dataclasses import dataclass

import numpy as np

from refsim._validate import (MAX_ELEMENTS, require_bounded, require_choice, require_dtype, require_fields,
                              require_instance, require_int, require_ndim)
from refsim.cuda.official import DATA_DIR
from refsim.emulator import deepgemm_kernel
from refsim.errors import FormatRuleError
from refsim.formats import tensor_map
from refsim.gpu_model.kernels.deepgemm_config import SMEM_CAPACITY, TMA_THREADS, Config, config

__all__ = ["PTX_FILE", "ptx_text", "SMEM_CAPACITY", "Config", "config", "instantiations", "sfa_tma_aligned", "MAP_BUFFERS",
           "Prepared", "prepare", "launch_args", "deepgemm_fp8_gemm"]

PTX_FILE = DATA_DIR / "deepgemm_fp8_gemm.ptx.gz"
def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _mangled(n: int, k: int, c: Config, num_sms: int) -> str:
    return (f"_ZN9deep_gemm23sm90_fp8_gemm_1d2d_implILN4cute4UMMA5MajorE0ELj0ELj{n}ELj{k}ELj1ELj{c.block_m}"
            f"ELj{c.block_n}ELj{c.block_k}ELj{c.swizzle_a}ELj{c.swizzle_b}ELj{c.swizzle_d}ELj{c.stages}"
            f"ELj{TMA_THREADS}ELj{c.math_threads}ELj{c.cluster}ELb{int(c.cluster_n > 1)}ELj{num_sms}"
            f"ELNS_8GemmTypeE0EN7cutlass10bfloat16_tENS_8epilogue9transform16EpilogueIdentityEEEvPfPijjj14CUtensorMap_stSC_SC_SC_")


@functools.lru_cache(maxsize=1)
def ptx_text() -> str:
    """The committed PTX text (``PTX_FILE`` unzipped), read once."""
    with gzip.open(PTX_FILE, "rt") as f:
        return f.read()


def instantiations() -> tuple[str, ...]:
    """The ``.entry`` names the committed PTX holds."""
    return tuple(re.findall(r"^\.entry (\S+)\(", ptx_text(), re.M))


def sfa_tma_aligned(sfa: np.ndarray) -> np.ndarray:
    """The activation scales as the kernel reads them: float32 (K/128, align(M, 4)), ``out[kb, m] = sfa[m, kb]``
    (DeepGEMM's ``get_mn_major_tma_aligned_tensor``: M-major, M padded to 16 bytes; padding zero).
    sfa float32 (M, K/128)."""
    sfa = require_ndim("sfa", require_dtype("sfa", sfa, np.float32), 2)
    m, kbs = sfa.shape
    require_bounded("sfa_t", kbs * (_ceil_div(m, 4) * 4), MAX_ELEMENTS, what="element count")
    out = np.zeros((kbs, _ceil_div(m, 4) * 4), np.float32)
    out[:, :m] = sfa.T
    return out


#: the buffer each tensor map points at (``Prepared.buffers`` names), in parameter order a, b, d, sfa
MAP_BUFFERS = {"a": "a", "b": "b", "d": "d", "sfa": "sfa_t"}


def _tensor_maps(m: int, n: int, k: int, c: Config, addresses: dict) -> dict:
    """The kernel's four tensor maps (module spec table; the one definition both backends use, through
    :func:`prepare`'s ``Prepared.maps``) for a checked (M, N, K) problem under configuration ``c``: {"a", "b", "d", "sfa": :class:`refsim.formats.tensor_map.TensorMap`},
    each at ``addresses[MAP_BUFFERS[name]]`` (ints, 16-byte aligned; ``backend="gpu"`` replaces them)."""
    m4 = _ceil_div(m, 4) * 4
    sw = {128: "128B", 64: "64B", 32: "32B", 16: "none", 0: "none"}

    def tiled(dtype, name, dims, stride, box, swizzle):
        return tensor_map.TensorMap(dtype, addresses[MAP_BUFFERS[name]], dims, (stride,), box, (1, 1), "none",
                                    sw[swizzle], "256B", "zero")

    return {"a": tiled("uint8", "a", (k, m), k, (c.swizzle_a, c.block_m), c.swizzle_a),
            "b": tiled("uint8", "b", (k, n), k, (c.swizzle_b, c.block_n), c.swizzle_b),
            "d": tiled("bfloat16", "d", (n, m), 2 * n, (c.swizzle_d // 2 if c.swizzle_d else c.block_n, c.block_m),
                       c.swizzle_d),
            "sfa": tiled("float32", "sfa", (m4, k // 128), 4 * m4, (c.block_m, 1), 0)}


@dataclass(frozen=True)
class Prepared:
    """A launch of the official kernel, prepared as DeepGEMM's host code prepares it (module spec).

    kernel: the mangled ``.entry`` name; grid, block, cluster: ints (1-D); shared_bytes: dynamic shared memory;
    args: the nine parameters in order (sfb array, 0, M, N, K as ints, four 128-byte map images);
    global_buffers: ((name, array), ...): sfb, then a, b, d (uint8 / bf16 bits), sfa_t; buffers: the launch's
    extra buffers ((name, array) for a, b, d, sfa_t: ``Module.launch(..., buffers=buffers)``); addresses:
    {name: global address} of those (:func:`refsim.ptx.buffer_addresses`); maps: {name: TensorMap}; config:
    the :class:`Config`."""

    kernel: str
    grid: int
    block: int
    cluster: int
    shared_bytes: int
    args: tuple
    global_buffers: tuple
    buffers: tuple
    addresses: dict
    maps: dict
    config: Config

    def __post_init__(self):
        require_fields(self)
        for name in ("addresses", "maps"):
            require_instance(name, getattr(self, name), dict)
        require_instance("config", self.config, Config)


def prepare(A, sfa, B, sfb, *, num_sms: int = 132) -> Prepared:
    """The official kernel's launch for A (M, K) e4m3, sfa float32 (M, K/128), B (N, K) e4m3, sfb float32
    (ceil(N/128), K/128) (rules: :func:`refsim.emulator.deepgemm_kernel.check_inputs`) on ``num_sms`` SMs:
    configuration, scale layouts, global addresses, the four tensor maps and the arguments. The output D is a
    new zero bf16 (M, N) buffer (``global_buffers``). Raises FormatRuleError when the committed PTX holds no
    instantiation for (N, K, num_sms) and the chosen blocks (:func:`instantiations`). Inputs are not modified."""
    from refsim.ptx import buffer_addresses

    A, sfa, B, sfb, m, n, k = deepgemm_kernel.check_inputs(A, sfa, B, sfb)
    c = config(m, n, k, num_sms)
    kernel = _mangled(n, k, c, num_sms)
    if kernel not in instantiations():
        raise FormatRuleError(f"DeepGEMM: no committed instantiation for N={n}, K={k}, num_sms={num_sms} with "
                              f"BLOCK {c.block_m}x{c.block_n}x{c.block_k}, {c.stages} stages; committed: "
                              f"{len(instantiations())} entries ({PTX_FILE.name})")
    buffers = (("sfb", np.ascontiguousarray(sfb)), ("a", np.ascontiguousarray(A)), ("b", np.ascontiguousarray(B)),
               ("d", np.zeros((m, n), np.uint16)), ("sfa_t", sfa_tma_aligned(sfa)))
    extra = buffers[1:]
    addresses = buffer_addresses(extra)
    maps = _tensor_maps(m, n, k, c, addresses)
    images = tuple(tensor_map.encode_tiled(**{f: getattr(maps[x], f) for f in maps[x].__dataclass_fields__})
                   for x in ("a", "b", "d", "sfa"))
    args = (buffers[0][1], 0, m, n, k) + images
    return Prepared(kernel, num_sms, c.threads, c.cluster, c.smem_bytes, args, buffers, extra, addresses, maps, c)


@functools.lru_cache(maxsize=1)
def _module():
    from refsim.ptx import Module

    return Module(ptx_text())


def launch_args(A, sfa, B, sfb, *, num_sms: int = 132) -> tuple:
    """``(launch, args, d)``: the official kernel's launch for ``backend="gpu"`` (:func:`refsim.cuda.launch.run`
    with :func:`refsim.cuda.gpu.run`), arguments as :func:`prepare`. ``launch``: grid ``num_sms`` blocks in
    clusters of the configuration's ``cluster``, block and dynamic shared bytes as :func:`prepare`; ``args``:
    the nine parameters as cuda.core takes them (the sfb array, a null ``np.uint64(0)`` grouped_layout,
    ``np.uint32`` M, N, K, then the four maps a, b, d, sfa as :class:`refsim.cuda.gpu.TensorMapArg` over
    :func:`prepare`'s buffers with its ``maps``' fields); ``d``: the zero uint16 (M, N) output the d map
    points at (bf16 bits after the launch). Inputs are not modified."""
    from refsim.cuda.gpu import TensorMapArg
    from refsim.cuda.launch import Launch

    p = prepare(A, sfa, B, sfb, num_sms=num_sms)
    bufs = dict(p.buffers)
    _, _, m, n, k = p.args[:5]
    maps = tuple(TensorMapArg(bufs[MAP_BUFFERS[x]], p.maps[x]) for x in ("a", "b", "d", "sfa"))
    args = (p.args[0], np.uint64(0), np.uint32(m), np.uint32(n), np.uint32(k)) + maps
    return Launch(p.kernel, p.grid, p.block, p.shared_bytes, cluster=p.cluster), args, bufs["d"]


def deepgemm_fp8_gemm(A, sfa, B, sfb, *, num_sms: int = 132, executor: str | None = None,
                      backend: str = "ptx") -> np.ndarray:
    """The official DeepGEMM kernel: ml_dtypes.bfloat16 (M, N), to compare with
    :func:`refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm`. Arguments as :func:`prepare`. ``backend``
    "ptx" (default): refsim.ptx, ``executor`` as for :meth:`refsim.ptx.Module.launch`; where refsim.ptx
    refuses the kernel, PtxUnsupportedError naming the first instruction it does not execute (kernel, PTX
    line, reason). "gpu": the current (sm_90) device through :func:`refsim.cuda.launch.run` with
    :func:`launch_args` (cuda.core encodes the maps at the device buffers; ``executor`` must be None)."""
    import ml_dtypes

    backend = require_choice("backend", backend, ("ptx", "gpu"))
    executor = require_choice("executor", executor, (None, "compiled", "interpreter"))
    if backend == "gpu":
        from refsim.cuda import launch

        if executor is not None:
            raise FormatRuleError(f"executor: only the 'ptx' backend takes an executor; got {executor!r}")
        ln, args, d = launch_args(A, sfa, B, sfb, num_sms=num_sms)
        launch.run(ptx_text(), [(ln, args)], backend="gpu")
        return d.view(ml_dtypes.bfloat16)
    p = prepare(A, sfa, B, sfb, num_sms=num_sms)
    _module().launch(p.kernel, p.grid, p.block, p.args, arch="sm_90a", shared_bytes=p.shared_bytes,
                     executor=executor, buffers=p.buffers, cluster=p.cluster)
    return dict(p.global_buffers)["d"].view(ml_dtypes.bfloat16)
