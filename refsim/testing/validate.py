"""``refsim validate``: run every refsim/cuda kernel, the official kernels' recorded launches and a tensor-core probe
for every mma form refsim models, on a GPU and through refsim, and say per case whether the bits agree.

Spec
----
cases         three groups (:func:`cases`), each case a few inputs chosen to cover a regime:
              ``kernel``   every function of :func:`refsim.cuda.kernels` (Marlin: M <= 16, shared memory above
                           48 KiB, the two-launch host loop; Any-Precision: a K tail; GPTQ v1/v2 with act-order;
                           the sm_90a Hopper W4A16 GEMM; ...), inputs from refsim.formats with ``seed``, and
                           DeepGEMM's official FP8 GEMM (:mod:`refsim.cuda.official_deepgemm`, M 64, N 256, K 512)
                           against its emulator; the sm_90a kernels run at sm_90 only;
              ``official`` the recorded official Marlin / Any-Precision / Atom launches (:mod:`refsim.cuda.official`);
              ``mma``      one case per form of :func:`refsim.cuda.mma.forms` (every mma kind of
                           :func:`refsim.arith.tensor_core_types.modelled`, integer kinds also with .satfinite):
                           ``tiles`` tiles of every input category (random, magnitudes, cancel, subnormal,
                           nearmax, bigC, cancelC, zeros, tf32 lowbits; integers: random, extremes, bigC);
                           and one case per zero-handling rule refsim states but has not measured
                           (``rule <name> [<shape and types>]``, :mod:`refsim.arith.tensor_core_rules`: one probe tile
                           each, :func:`unmeasured_rules` lists them); one case per wgmma probe of
                           :mod:`refsim.testing.wgmma_probes` (242: every kind at N = 8 and 256, each input
                           category; ``tiles`` tiles each), run by refsim/cuda/wgmma.cu (:mod:`refsim.cuda.wgmma`:
                           A and B from no-swizzle shared memory; the f32.f16.f16 probes also with A from
                           registers, ``<probe>, A from registers``) against refsim.arith.wgmma at sm_90. The
                           block-scaled (Blackwell) kinds of :mod:`refsim.arith.block_scaled`, modelled but
                           without a probe kernel, are listed by :func:`pending`.
backend ptx   (the default without a GPU) each case through refsim.ptx, compared with refsim's emulator of it
              (kernels: refsim.emulator; mma: refsim.arith): with ``arch`` None, every mma form under every
              arch model it has, the arch-dependent kernels (Marlin) under each distinct f16 datapath (sm_80,
              sm_90), the others at sm_80; with ``arch`` given, every case refsim models there, at ``arch``.
              The official cases run at sm_90 and are compared with the bytes an H100 wrote.
              ``unverified`` lists the archs whose model of the form was not measured on hardware.
backend gpu   each case once on the current device (:mod:`refsim.cuda.gpu`), compared with refsim's answer under
              every arch model that can differ (the tensor-core models sm_80 .. sm_90; one answer for
              arch-independent kernels): emulators for kernels, refsim.arith (or refsim.ptx where refsim.arith
              has no function) for mma, refsim.ptx replays for the official cases. ``matched`` lists the
              models whose bits equal the GPU's; the verdict is the device arch's model. Cases whose PTX
              needs a newer arch than the device's (fp8 mma: sm_89), or arch-specific PTX of another SM
              (wgmma, the Hopper kernels: sm_90a on sm_90 only), are not run (:func:`applicable`).
              :func:`kinds` summarises the verdicts per tensor-core kind (``--json``: ``kinds``).
verdicts      ``bit-identical``; ``differs`` (with the first differing elements); ``not-run`` (ptx backend:
              refsim.ptx refuses an instruction of the kernel, the reason naming kernel, PTX line and form;
              not a pass); ``error`` (a side raised: a GPU fault, a launcher's refusal); ``no-model`` (gpu
              backend: refsim has no model of this form on the device's arch, ``matched`` still says which
              models agree).
exit status   :func:`exit_status`: 0 when every case is bit-identical; 1 when any differs, errs, is not run
              or has no model; 2 when no case could run. (Bad arguments and a missing GPU raise before any case: 2.)
"""

from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from refsim.archs import parse_sm
from refsim.arith import tensor_core, tensor_core_rules
from refsim.cuda import marlin, official
from refsim.cuda import mma as rmma
from refsim.cuda import wgmma as rwg
from refsim._validate import require_callable, require_fields, require_instance, require_int, require_real
from refsim.errors import FormatRuleError
from refsim.arith.fp import raw_bits
from refsim.ptx.errors import PtxUnsupportedError
from refsim.testing.bits import BitMismatch, assert_bitexact

__all__ = ["GROUPS", "TENSOR_CORE_ARCHS", "Case", "Result", "cases", "applicable", "run_case", "validate", "kinds",
           "exit_status", "format_result", "unmeasured_rules", "pending"]

GROUPS = ("kernel", "official", "mma")
#: the arch models whose tensor-core answers may differ (the archs with the m16n8 shapes)
TENSOR_CORE_ARCHS: tuple[str, ...] = tensor_core.MMA_ARCHS


@dataclass(frozen=True)
class Case:
    """One validation case. ``run(backend, arch)`` and ``reference(backend, arch)`` return ``{name: array}``;
    ``archs``: the models it can be compared under (None: arch-independent), ``fixed_arch``: the only arch
    its ptx-backend reference holds for (the official cases' H100 bytes); ``ptx_archs``: the archs the ptx
    backend runs it under when no arch is chosen (None: sm_80); ``verified``: the archs whose model was
    measured on hardware (None: no tensor-core model to confirm); ``min_arch``: the oldest device its PTX
    runs on."""

    name: str
    group: str
    what: str
    run: Callable
    reference: Callable
    archs: tuple[str, ...] | None = None
    fixed_arch: str | None = None
    labels: Callable | None = None        # element coordinates -> a label (mma: the input category)
    ptx_archs: tuple[str, ...] | None = None
    verified: tuple[str, ...] | None = None
    min_arch: str = "sm_80"
    kind: str = ""                        # tensor-core probes: the instruction kind (``--json``'s per-kind summary)

    def __post_init__(self):
        require_fields(self)  # strs and tuples, whatever came in
        require_callable("run", self.run)
        require_callable("reference", self.reference)
        require_callable("labels", self.labels, allow_none=True)


@dataclass
class Result:
    """The outcome of one case (JSON-ready through :meth:`as_dict`)."""

    name: str
    group: str
    what: str
    verdict: str
    arch: str | None
    compared: list = field(default_factory=list)
    matched: list = field(default_factory=list)
    unverified: list = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0
    kind: str = ""

    def __post_init__(self):
        require_fields(self)  # strs, lists and a Python float, whatever came in

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# ----------------------------------------------------------------------------------------------
# the kernel cases: inputs from refsim.formats, oracles from the registry (refsim.cuda.kernels())


def _marlin_inputs(m, k, n, group):
    from refsim.formats import marlin

    def inputs(rng):
        q = rng.integers(0, 16, (k, n)).astype(np.uint8)                            # (K, N)
        g = 1 if group is None else k // group
        B, s = marlin.pack(q, (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16), group)
        return rng.standard_normal((m, k)).astype(np.float16), B, s                 # A (M, K), B, s
    return inputs


def _anyprec_inputs(m, n, k, bits):
    from refsim.formats import bitplane

    def inputs(rng):
        qweight = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)   # (bits, N, K/32)
        lut = rng.standard_normal((n, 2**bits)).astype(np.float16)
        return rng.standard_normal((m, k)).astype(np.float16), qweight, lut, bits
    return inputs


def _gptq_inputs(m, k, n, group, fmt, act_order):
    from refsim.formats import gptq

    def inputs(rng):
        g = k // group
        g_idx = rng.permutation(np.arange(k) // group).astype(np.int32) if act_order else None
        ckpt = gptq.pack(rng.integers(0, 16, (k, n)), (rng.random((g, n)) * 0.02 + 0.001).astype(np.float32),
                         rng.integers(1, 16, (g, n)), 4, g_idx=g_idx, group_size=group, checkpoint_format=fmt)
        return rng.standard_normal((m, k)).astype(np.float16), ckpt
    return inputs


def _awq_inputs(m, k, n, group):
    from refsim.formats import awq

    def inputs(rng):
        g = k // group
        ckpt = awq.pack(rng.integers(0, 16, (k, n)), (rng.random((g, n)) * 0.02).astype(np.float32),
                        rng.integers(0, 16, (g, n)), group_size=group)
        return rng.standard_normal((m, k)).astype(np.float16), ckpt
    return inputs


def _mixed_inputs(k, n):
    from refsim.formats import mixed_2_4_16 as m2416
    from refsim.quant import mixed_2_4_16 as q2416

    def inputs(rng):
        X = rng.standard_normal((2 * k, k))                                         # calibration (2K, K)
        W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
        p = m2416.pack(q2416.quantize(W, (X.T @ X) / k, alpha=0.25, outlier_ratio=0.005))
        return p, rng.standard_normal(k).astype(np.float16)
    return inputs


def _hopper_inputs(m, k, n):
    from refsim.formats import hopper_w4a16 as layout

    def inputs(rng):
        q = rng.integers(0, 16, (k, n)).astype(np.uint8)                            # (K, N) codes
        s = (rng.random((k // 128, n)) * 0.02 + 2.0**-10).astype(np.float16)
        return rng.standard_normal((m, k)).astype(np.float16), layout.pack(q), s
    return inputs


def _atom_inputs(m, k, n, keeper):
    from refsim.formats import atom

    def inputs(rng):
        a = atom.quantize_activations(rng.standard_normal((m, k)).astype(np.float16), "kernel", keeper=keeper)
        w = atom.quantize_weights((rng.standard_normal((k, n)) * 0.05).astype(np.float16), "kernel", keeper=keeper)
        return a, w
    return inputs


#: (function of refsim.cuda, case label, inputs, keyword arguments): a few cases per kernel, each a
#: regime of its launch plan
_KERNEL_CASES = (
    ("marlin_gemm", "M=1 K=256 N=256 g128 sms=2", _marlin_inputs(1, 256, 256, 128), {"sms": 2}),   # k128 x n128
    ("marlin_gemm", "M=20 K=256 N=256 g128 sms=3", _marlin_inputs(20, 256, 256, 128), {"sms": 3}),  # 51,200 B shared
    ("marlin_gemm", "M=70 K=128 N=256 channel sms=2", _marlin_inputs(70, 128, 256, None), {"sms": 2}),  # 2 launches
    ("anyprec_gemv", "M=1 N=4 K=1024 bits=3", _anyprec_inputs(1, 4, 1024, 3), {}),
    ("anyprec_gemv", "M=2 N=16 K=1312 bits=5", _anyprec_inputs(2, 16, 1312, 5), {}),            # a K tail chunk
    ("gptq_gemv", "M=1 K=64 N=32 g32 gptq", _gptq_inputs(1, 64, 32, 32, "gptq", False), {}),
    ("gptq_gemv", "M=3 K=128 N=160 g32 gptq_v2 act-order", _gptq_inputs(3, 128, 160, 32, "gptq_v2", True), {}),
    ("awq_gemv", "M=2 K=48 N=24 g16", _awq_inputs(2, 48, 24, 16), {}),
    ("mixed_gemv", "K=128 N=16", _mixed_inputs(128, 16), {}),
    ("mixed_gemv", "K=256 N=48", _mixed_inputs(256, 48), {}),
    ("atom_group_gemm", "M=16 K=512 N=16 keeper=128", _atom_inputs(16, 512, 16, 128), {}),
    ("atom_group_gemm", "M=40 K=640 N=64 keeper=128", _atom_inputs(40, 640, 64, 128), {}),
    ("hopper_w4a16_gemm", "M=5 K=256 N=64", _hopper_inputs(5, 256, 64), {}),       # a partial token tile
)
#: kernels whose bits depend on the tensor-core model (their oracles take ``arch``), with the models
_ARCH_DEPENDENT = {"marlin_gemm": marlin.ARCHS}
#: kernels whose launcher fixes the PTX target (arch-specific sm_90a PTX: runs on sm_90 devices only)
_FIXED_TARGET = {"hopper_w4a16_gemm": "sm_90a"}


def _kernel_cases(seed: int) -> list[Case]:
    import importlib

    import refsim.cuda as rc

    oracles = {k.name: k.oracle for k in rc.kernels()}
    out = []
    for func, label, inputs, kw in _KERNEL_CASES:
        module, name = oracles[func].rsplit(".", 1)
        oracle = getattr(importlib.import_module(module), name)
        kernel, archs = getattr(rc, func), _ARCH_DEPENDENT.get(func)

        target = _FIXED_TARGET.get(func)

        def run(backend, arch, kernel=kernel, inputs=inputs, kw=kw, target=target):
            where = {} if target else {"arch": arch}
            return {"out": kernel(*inputs(np.random.default_rng(seed)), backend=backend, **where, **kw)}

        def ref(backend, arch, oracle=oracle, inputs=inputs, kw=kw, archs=archs):
            return {"out": oracle(*inputs(np.random.default_rng(seed)), **kw, **({"arch": arch} if archs else {}))}
        out.append(Case(f"{func} {label}", "kernel", f"refsim.cuda kernel vs its oracle {oracles[func]}", run, ref,
                        archs, fixed_arch="sm_90" if target else None, ptx_archs=_datapaths(archs) if archs else None,
                        min_arch=target or "sm_80"))
    return out + [_deepgemm_case(seed)]


#: DeepGEMM's committed small instantiation (refsim/cuda/official/README.md): M, N, K, SMs
_DEEPGEMM = (64, 256, 512, 4)


def _deepgemm_case(seed: int) -> Case:
    """DeepGEMM's official FP8 GEMM (:mod:`refsim.cuda.official_deepgemm`, its small committed instantiation)
    through refsim.ptx or on the GPU (sm_90 devices: its PTX is sm_90a) against
    :func:`refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm`."""
    from refsim.cuda import official_deepgemm
    from refsim.emulator import deepgemm_kernel

    m, n, k, sms = _DEEPGEMM

    def inputs():
        rng = np.random.default_rng(seed)
        codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)          # finite e4m3
        A, B = rng.choice(codes, (m, k)), rng.choice(codes, (n, k))                        # (M, K), (N, K)
        sfa = rng.uniform(0.5, 2, (m, k // 128)).astype(np.float32)
        sfb = rng.uniform(0.5, 2, (-(-n // 128), k // 128)).astype(np.float32)
        return A, sfa, B, sfb

    def run(backend, arch):
        return {"out": official_deepgemm.deepgemm_fp8_gemm(*inputs(), num_sms=sms, backend=backend).view(np.uint16)}

    def ref(backend, arch):
        return {"out": deepgemm_kernel.deepgemm_fp8_gemm(*inputs()).view(np.uint16)}
    return Case(f"deepgemm_fp8_gemm M={m} N={n} K={k} sms={sms}", "kernel",
                "DeepGEMM's official sm_90 FP8 GEMM vs its oracle refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm",
                run, ref, None, fixed_arch="sm_90", min_arch="sm_90a")


def _datapaths(archs) -> tuple[str, ...]:
    """The first arch of each distinct f16 tensor-core datapath among ``archs`` (sm_80 .. sm_89 share one):
    an f16-mma kernel's ptx-backend runs (each mma form itself runs under every arch in the mma group)."""
    first: dict[tuple, str] = {}
    for a in archs:
        m = tensor_core.model(a)
        first.setdefault((m.block, m.frac_bits, m.e_zero_f32, m.e_zero_f16), a)
    return tuple(first.values())


# ----------------------------------------------------------------------------------------------
# the official cases


def _views(name: str, buffers: dict) -> dict:
    """{buffer id: bytes} -> {"buf<id>": array in its recorded dtype and shape} (readable reports)."""
    bases = {b["id"]: b for b in official.load(name).bases}
    return {f"buf{i}": np.ascontiguousarray(v).view(np.dtype(bases[i]["dtype"])).reshape(bases[i]["shape"])
            for i, v in sorted(buffers.items())}


def _official_cases() -> list[Case]:
    out = []
    for name in official.cases():
        def run(backend, arch, name=name):
            return _views(name, official.replay(name, backend=backend, arch="sm_90" if backend == "ptx" else arch))

        def ref(backend, arch, name=name):
            if backend == "ptx":
                return _views(name, official.h100(name))
            return _views(name, official.replay(name, backend="ptx", arch=arch))
        archs = TENSOR_CORE_ARCHS if official.uses_float_mma(name) else None
        out.append(Case(name, "official", official.load(name).note, run, ref, archs, fixed_arch="sm_90"))
    return out


# ----------------------------------------------------------------------------------------------
# the mma probes


def _once(f):
    """Memoise a no-argument builder (the probe registers of one case: drawn once per run)."""
    box = []

    def get():
        if not box:
            box.append(f())
        return box[0]
    return get


def _probe_case(name: str, what: str, kind, sat: bool, regs: Callable, labels: Callable, ptx_archs, verified) -> Case:
    """A case running the mma.cu entry of ``kind`` on the registers ``regs()`` against refsim.arith."""
    def d_matrix(d):
        D = rmma.unpack(kind, d)
        return {"D": D.view({"f32": np.float32, "f16": np.float16}.get(kind.d, D.dtype))}

    def run(backend, arch):
        return d_matrix(rmma.mma_probe(kind, *regs(), satfinite=sat, backend=backend, arch=arch))

    def ref(backend, arch):
        return d_matrix(rmma.mma_reference(kind, arch, *regs(), satfinite=sat))
    return Case(name, "mma", what, run, ref, kind.archs, labels=labels, ptx_archs=ptx_archs, verified=verified,
                min_arch=rmma.ptx_arch(kind), kind=kind.ptx)


def _mma_cases(seed: int, tiles: int) -> list[Case]:
    out = []
    for i, (kind, sat) in enumerate(rmma.forms()):
        cats = rmma.categories(kind)

        @_once
        def regs(kind=kind, cats=cats, i=i):
            rng = np.random.default_rng([seed, i])
            parts = [rmma.pack(kind, *rmma.probe_inputs(kind, c, tiles, rng)) for c in cats]
            return tuple(np.concatenate(x) for x in zip(*parts))

        def labels(coord, cats=cats):
            return cats[coord[0] // tiles]
        out.append(_probe_case(rmma.instruction(kind, sat), f"{tiles} tiles x {', '.join(cats)}", kind, sat, regs,
                               labels, kind.archs, kind.verified))
    return out + _rule_cases() + _wgmma_cases(seed, tiles)


def _wgmma_cases(seed: int, tiles: int) -> list[Case]:
    """One case per probe of :func:`refsim.testing.wgmma_probes.probes` (``tiles`` tiles each): wgmma.cu's entry
    through :func:`refsim.cuda.wgmma.wgmma_probe` (refsim.ptx at sm_90a, or the GPU) against
    :func:`refsim.cuda.wgmma.wgmma_reference`; the probes of :data:`refsim.cuda.wgmma.RS_KIND` once more with A
    from registers (``<probe>, A from registers``)."""
    from refsim.testing import wgmma_probes

    out = []
    for p in wgmma_probes.probes():
        for a_regs in (False, True) if p.kind.types == rwg.RS_KIND else (False,):
            flags = dict(scale_d=p.scale_d, negate=p.scale_ab == -1, satfinite=p.satfinite, a_registers=a_regs)
            inputs = _once(lambda p=p: p.inputs(seed, tiles))
            values = {"f32": np.float32, "f16": np.float16}.get(p.kind.d, np.int32)

            def run(backend, arch, p=p, flags=flags, inputs=inputs, values=values):
                return {"D": rwg.wgmma_probe(p.kind, p.n, *inputs(), backend=backend, **flags).view(values)}

            def ref(backend, arch, p=p, flags=flags, inputs=inputs, values=values):
                return {"D": rwg.wgmma_reference(p.kind, p.n, *inputs(), **flags).view(values)}
            what = (f"{tiles} tiles x {p.category} (scale-d {int(p.scale_d)}, imm-scale {p.scale_ab})"
                    + ("; A from registers" if a_regs else "; A and B from no-swizzle K-major shared memory"))
            out.append(Case(p.name + (", A from registers" if a_regs else ""), "mma", what, run, ref, p.kind.archs,
                            labels=lambda coord, c=p.category: c, ptx_archs=p.kind.archs, verified=p.kind.verified,
                            min_arch=rwg.PTX_ARCHS[0], kind=f"wgmma {p.kind.types}"))
    return out


def _rule_cases() -> list[Case]:
    """One case per rule of :data:`refsim.arith.tensor_core_rules.UNMEASURED`: its probe tile, compared like any
    mma probe (at the archs where the tile tells refsim's rule from MMA-Sim's on the ptx backend); its
    ``verified`` archs are those where a GPU has answered."""
    out = []
    for r in tensor_core_rules.UNMEASURED:
        kind = rmma.kind_of(r.instruction)
        regs = _once(lambda kind=kind, r=r: rmma.pack(kind, *(x[None] for x in tensor_core_rules.probe_tile(r.name))))
        what = (f"unmeasured rule ({r.status}): refsim: {r.refsim}; MMA-Sim: {r.mma_sim} "
                f"(D{list(r.element)} refsim 0x{r.refsim_d:x}, MMA-Sim 0x{r.mma_sim_d:x})")
        out.append(_probe_case(_rule_case_name(r), what, kind, False, regs,
                               lambda coord, name=r.name: f"rule {name}", r.archs, r.measured_at))
    return out


def unmeasured_rules() -> list[dict]:
    """The rules refsim states but no GPU has answered (:data:`refsim.arith.tensor_core_rules.UNMEASURED`),
    JSON-ready, each with the validate case that probes it (``rule <name>: <instruction>``)."""
    return [dict(r.as_dict(), case=_rule_case_name(r)) for r in tensor_core_rules.UNMEASURED if r.status == "unverified"]


def _rule_case_name(r) -> str:
    """``rule <name> [<shape and types>]``: not a superstring of the instruction text, so ``--only <instruction>``
    selects the form's own probe case alone."""
    return f"rule {r.name} [{r.instruction.removeprefix('mma.sync.aligned.')}]"


def pending(*, groups=GROUPS, only=()) -> list[str]:
    """Names of mma cases defined as data that no kernel runs yet: every block-scaled instruction of
    :func:`refsim.arith.block_scaled.modelled` with its a/b types (``block-scaled <instruction>``: modelled,
    ``verified=False``, no probe kernel). The mma group only."""
    from refsim.arith import block_scaled

    _check_selection(groups, only)
    if "mma" not in groups:
        return []
    names = [f"block-scaled {k.ptx(a, b)}" for k in block_scaled.modelled() for a in k.types for b in k.types]
    return [n for n in names if not only or any(fnmatch.fnmatch(n, p) or p in n for p in only)]


def _check_selection(groups, only) -> None:
    """``groups``: a list or tuple of names of :data:`GROUPS`; ``only``: a list or tuple of strs."""
    for g in require_instance("groups", groups, (list, tuple)):
        if not isinstance(g, str) or g not in GROUPS:
            raise FormatRuleError(f"groups: each must be one of {list(GROUPS)}; got {g!r}")
    for p in require_instance("only", only, (list, tuple)):
        require_instance("only[...]", p, str, "str (a glob pattern or part of a case name)")


def cases(*, seed: int = 0, tiles: int = 4, groups=GROUPS, only=()) -> list[Case]:
    """The validation cases of ``groups`` whose names match one of the ``only`` glob patterns (all when
    empty), inputs drawn with ``seed``, ``tiles`` probe tiles per input category."""
    _check_selection(groups, only)
    tiles = require_int("tiles", tiles, minimum=1)
    if tiles > 1024:
        raise FormatRuleError(f"tiles: must be an int in [1, 1024]; got {tiles!r}")
    seed = require_int("seed", seed, minimum=0)
    out = []
    for g in groups:
        out += {"kernel": lambda: _kernel_cases(seed), "official": _official_cases,
                "mma": lambda: _mma_cases(seed, tiles)}[g]()
    if only:
        out = [c for c in out if any(fnmatch.fnmatch(c.name, p) or p in c.name for p in only)]
    return out


# ----------------------------------------------------------------------------------------------
# running


def _compare(got: dict, want: dict, labels) -> str:
    """'' when every array has the same bits, else the mismatch reports (with input categories)."""
    reports = []
    for key in want:
        try:
            assert_bitexact(got[key], want[key], key, max_report=4)
        except BitMismatch as err:
            text = str(err)
            if labels is not None:
                bad = np.argwhere(_bits(got[key]) != _bits(want[key]))          # (n, ndim) coordinates
                cats: dict[str, int] = {}
                for c in bad:
                    cats[labels(tuple(c))] = cats.get(labels(tuple(c)), 0) + 1
                text += "\n  by input category: " + ", ".join(f"{k} {v}" for k, v in cats.items())
            reports.append(text)
    return "\n".join(reports)


_bits = raw_bits


def applicable(case: Case, backend: str, arch: str | None) -> bool:
    """Whether ``case`` runs on ``backend`` at ``arch`` (module spec): gpu, when the device (``arch``) can load
    its PTX; ptx, when refsim models it at ``arch`` (always when ``arch`` is None: it runs at its own archs)."""
    require_instance("case", case, Case)
    if backend == "gpu":
        if case.min_arch.endswith("a"):        # arch-specific PTX (sm_90a) loads on that SM only
            return parse_sm(arch) == parse_sm(case.min_arch)
        return parse_sm(arch) >= parse_sm(case.min_arch)
    return arch is None or case.archs is None or case.fixed_arch is not None or arch in case.archs


def _ptx_archs(case: Case, arch: str | None) -> list[str]:
    if case.fixed_arch:
        return [case.fixed_arch]
    if arch is not None:
        return [arch]
    return list(case.ptx_archs or ("sm_80",))


def run_case(case: Case, backend: str, arch: str | None) -> Result:
    """Run one case (see the module spec): on the ptx backend ``arch`` is the model (None: the case's own
    archs), on gpu the device's arch."""
    t0 = time.perf_counter()
    res = Result(case.name, case.group, case.what, "error", arch, kind=case.kind)
    try:
        if backend == "ptx":
            ats = _ptx_archs(case, arch)
            res.arch, res.compared = (ats[0] if len(ats) == 1 else None), ats
            details = {at: _compare(case.run("ptx", at), case.reference("ptx", at), case.labels) for at in ats}
            res.matched = [at for at, d in details.items() if not d]
            differing = [at for at in ats if details[at]]
            res.verdict = "differs" if differing else "bit-identical"
            res.detail = "\n".join((f"at {at}:\n" if len(ats) > 1 else "") + details[at] for at in differing)
        else:
            got = case.run("gpu", arch)
            details = {}
            for model in (case.archs or (None,)):
                try:
                    details[model] = _compare(got, case.reference("gpu", model or arch), case.labels)
                except rmma.NoModel:
                    continue
            res.compared = [m for m in details if m]
            res.matched = [m for m, d in details.items() if m and not d]
            key = None if case.archs is None else arch
            if key not in details:
                res.verdict = "no-model"
                res.detail = f"refsim has no model of this on {arch}"
            else:
                res.verdict = "differs" if details[key] else "bit-identical"
                res.detail = details[key]
        if case.verified is not None:
            res.unverified = [a for a in (res.compared if backend == "ptx" else [arch]) if a not in case.verified]
    except PtxUnsupportedError as err:   # refsim.ptx refuses an instruction of the kernel: not run, not a pass
        res.verdict, res.detail = "not-run", f"{type(err).__name__}: {' '.join(str(err).split())}"
        res.compared = res.matched = []
    except Exception as err:  # a GPU fault or a refused instruction is this case's verdict, not the run's end
        res.verdict, res.detail = "error", f"{type(err).__name__}: {' '.join(str(err).split())}"
    return _timed(res, t0)


def _timed(res: Result, t0: float) -> Result:
    res.seconds = round(time.perf_counter() - t0, 3)
    return res


def validate(*, backend: str, arch: str | None, seed: int = 0, tiles: int = 4, groups=GROUPS, only=(),
             on_result: Callable | None = None) -> list[Result]:
    """Run the selected cases (see :func:`cases`) that are :func:`applicable` on ``backend`` at ``arch``
    (ptx: the model, None for every case's own archs; gpu: the device's arch); ``on_result`` is called
    with each :class:`Result` as it completes."""
    if backend == "gpu" and arch is None:
        raise FormatRuleError("arch: the gpu backend needs the device's arch; got None")
    selected = [c for c in cases(seed=seed, tiles=tiles, groups=groups, only=only) if applicable(c, backend, arch)]
    out = []
    for case in selected:
        r = run_case(case, backend, arch)
        out.append(r)
        if on_result is not None:
            on_result(r)
    return out


def kinds(results: list[Result]) -> dict:
    """Per tensor-core kind of the results (``Result.kind``: the mma form's instruction, ``wgmma <d>.<a>.<b>``):
    ``{kind: {verdict: count}}`` (JSON-ready; cases without a kind are left out)."""
    out: dict = {}
    for r in require_instance("results", results, (list, tuple)):
        require_instance("results[...]", r, Result)
        if r.kind:
            row = out.setdefault(r.kind, {})
            row[r.verdict] = row.get(r.verdict, 0) + 1
    return out


def exit_status(results: list[Result]) -> int:
    """0 when every case is bit-identical, 2 when none ran (empty, or every case an error or not run), else 1."""
    for r in require_instance("results", results, (list, tuple)):
        require_instance("results[...]", r, Result)
    if not results or all(r.verdict in ("error", "not-run") for r in results):
        return 2
    return 0 if all(r.verdict == "bit-identical" for r in results) else 1


def _check_result(r) -> None:
    """``r`` must be a Result whose fields hold what run_case puts there (read only: ``r`` is not changed)."""
    require_instance("r", r, Result)
    for name in ("name", "group", "what", "verdict", "detail", "kind"):
        require_instance(f"r.{name}", getattr(r, name), str)
    if r.arch is not None:
        require_instance("r.arch", r.arch, str)
    for name in ("compared", "matched", "unverified"):
        if not isinstance(getattr(r, name), (list, tuple)) or not all(isinstance(x, str) for x in getattr(r, name)):
            raise FormatRuleError(f"r.{name}: must be a list of arch names; got {getattr(r, name)!r:.80}")
    require_real("r.seconds", r.seconds)


def format_result(r: Result, backend: str) -> str:
    """One line (plus the difference report, indented) for a result."""
    _check_result(r)
    head = f"[{r.group}] {r.name}: "
    where = ", ".join(r.compared) if backend == "ptx" else r.arch
    others = [m for m in r.matched if m != r.arch]
    if r.verdict == "bit-identical":
        if backend == "ptx":
            ref = {"official": "the H100's bytes", "mma": "refsim.arith"}.get(r.group, "refsim.emulator")
            line = f"bit-identical (refsim.ptx = {ref} at {where})"
        else:
            line = f"bit-identical ({r.arch} model" + (f"; also matches {', '.join(others)}" if others else "") + ")"
    elif r.verdict == "not-run":
        line = f"NOT RUN: {r.detail}"
    elif r.verdict == "no-model":
        line = f"no verdict: {r.detail}; matches " + (", ".join(r.matched) + " models" if r.matched else "no model")
    elif r.verdict == "differs":
        if backend == "ptx":
            line = f"DIFFERS at {', '.join(a for a in r.compared if a not in r.matched)}" + (
                f" (bit-identical at {', '.join(r.matched)})" if r.matched else "")
        else:
            line = f"DIFFERS from the {r.arch} model" + (f" (matches {', '.join(others)})" if others else "")
    else:
        line = f"ERROR: {r.detail}"
    if r.unverified and r.verdict not in ("error", "not-run"):
        line += f"; model not measured on hardware at {', '.join(r.unverified)}"
    detail = "\n".join("    " + x for x in r.detail.splitlines()) if r.verdict == "differs" else ""
    return head + line + (f"  [{r.seconds:.1f} s]" if r.seconds >= 0.1 else "") + ("\n" + detail if detail else "")
