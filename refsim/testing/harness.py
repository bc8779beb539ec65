"""``check_kernel``: test a kernel bit for bit against refsim's emulator, with a diagnosis.

You bring a kernel (any callable taking and returning NumPy arrays: a CUDA kernel behind
CuPy/PyTorch, a simulator, a port, or a ``.cu``/``.ptx`` file run through :mod:`refsim.ptx`); the
harness builds legal cases for a format, calls the kernel, and compares its output bit for bit with
refsim's emulator of that kernel for one architecture and SM count. Phases, one progress line each:

1. **check** arguments and the kernel's signature before any case is built (a ``.cu`` file is
   compiled here: nvcc's errors name your file and line);
2. **pinned** cases: a few shapes chosen so that together they cover every regime of the kernel's
   structure for *your* SM count (Marlin: both tile configs, grouped and per-channel, several
   slices per column, partial last stripe, idle SMs, every host M-split path, and a partition that
   differs from the one of every common SM count), so a partition or reduction-order bug fails on
   the first cases, not by luck;
3. **drawn** cases: ``max_examples`` legal cases drawn with ``seed`` (shapes below ``max_size``
   multiply-adds, or from ``shapes=``), data kinds from zeros to wide exponents;
4. on a mismatch, **shrink** toward smaller shapes, simpler data and seed 0 within
   ``shrink_budget`` seconds, then **diagnose** (:mod:`refsim.testing.diagnose`): where the
   differences are on the kernel's structure, which probes still differ, whether a known bug
   class replayed on the emulator reproduces the kernel's bits exactly, the first differing
   elements in hex with ULP distances, and a one-line ``rebuild_case({...})`` snippet.

``mode="accuracy"`` accepts a kernel that sums in another legitimate order: every output must lie
within the forward-error bound of its stated ``accumulation`` and ``order`` around the exact
product (:mod:`refsim.testing.accuracy`), also on fixed **adversarial** cases that the next-weaker
accumulation fails (:mod:`refsim.testing.adversarial`, run after the pinned cases whatever the
seed), and its errors on the pinned cases must be distributed like those of the stated
accumulation run as written (the statistical criterion); bit-exactness with refsim's order is
reported apart. A failure that refsim's design does not explain is diagnosed from the kernel's own
case data (fields that separate failing from passing cases, where the errors sit, whether the
weights are right).
A kernel that raises, exits, writes to an input, returns the wrong type/shape/dtype, or overruns
``deadline`` seconds fails at once with its case (:mod:`refsim.testing.runner`). Formats and their
rules: :mod:`refsim.testing.cases` and docs/harness.md. :func:`strategy` (the same legal cases as a
hypothesis strategy, for your own property tests) needs ``refsim[test]``.

    from refsim.testing import check_kernel
    check_kernel(my_marlin, "marlin", arch="sm_80", sms=108)     # my_marlin(A, B, s) -> C
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from refsim._validate import require_bool, require_choice, require_instance, require_int
from refsim.arith import tensor_core as tc
from refsim.errors import CompileError, FormatRuleError, RefsimError, ToolchainError
from refsim.testing import adversarial as adv
from refsim.testing import diagnose as dg
from refsim.testing.accuracy import FACTOR, FLOOR, Accumulation, Spread, judge, reference, spread
from refsim.testing.cases import DATA_KINDS, FORMATS, Format
from refsim.testing.legal import shape_rule
from refsim.testing.runner import (KernelCallError, KernelMismatch, KernelModifiedInput, KernelTimeout, Runner,
                                   snippet)

__all__ = ["check_kernel", "rebuild_case", "strategy", "legal_shapes", "pinned_cases", "infer_format",
           "CheckResult", "KernelMismatch", "KernelCallError", "KernelTimeout", "KernelModifiedInput", "FORMATS",
           "DATA_KINDS", "MODES"]

MODES = ("bitexact", "accuracy")
#: how often each data kind is drawn (zeros and ones rarely round, so they are drawn rarely)
_KIND_WEIGHTS = {"zeros": 0.05, "ones": 0.05, "small_integers": 0.2, "normal": 0.45, "wide_exponents": 0.25}
_DEFAULT_EXAMPLES = {"marlin": 12}


@dataclass(frozen=True)
class CheckResult:
    """What a passing :func:`check_kernel` run covered. In accuracy mode, ``accumulation`` states
    the bound, ``worst_ratio`` is the largest error / bound seen, ``outputs`` / ``bit_differ``
    count the outputs and those whose bits differ from refsim's emulator (its order),
    ``adversarial`` counts the adversarial cases (:mod:`refsim.testing.adversarial`) and
    ``spread`` is the statistical criterion on the pinned cases (:class:`refsim.testing.accuracy.Spread`)."""

    fmt: str
    arch: str
    sms: int
    seed: int
    pinned: int
    drawn: int
    replayed: int
    regimes: tuple
    seconds: float
    mode: str = "bitexact"
    accumulation: str | None = None
    outputs: int = 0
    bit_differ: int = 0
    worst_ratio: float = 0.0
    legal: str | None = None           # the kernel's shape rule, as stated
    skipped_pinned: int = 0            # pinned cases the rule skipped
    adversarial: int = 0
    spread: Spread | None = None

    def summary(self) -> str:
        """One line: what passed (and, in accuracy mode, whether it is also bit-exact)."""
        cases = (f"{self.pinned} pinned + " + (f"{self.adversarial} adversarial + " if self.adversarial else "")
                 + f"{self.drawn} drawn" + (f" + {self.replayed} replayed" if self.replayed else ""))
        where = f"on {self.arch}, sms={self.sms} (seed {self.seed}, {self.seconds:.1f} s)"
        if self.legal is not None:
            where += f"; the kernel's shape rule {self.legal!r} ({self.skipped_pinned} pinned cases skipped)"
        if self.mode == "bitexact":
            return f"{self.fmt}: {cases} cases match {where}"
        exact = ("yes, every output" if not self.bit_differ else
                 f"no, {self.bit_differ} of {self.outputs} outputs differ")
        spread = "" if self.spread is None else (
            f"; error RMS {self.spread.kernel_rms:.3g} of the bound on the pinned cases vs "
            f"{self.spread.reference_rms:.3g} "
            f"for the stated accumulation run as written (at most {FACTOR:g}x)")
        return (f"{self.fmt}: {cases} cases within the bound of {self.accumulation} everywhere (largest error "
                f"{self.worst_ratio:.3g} of the bound) {where}{spread}; bit-exact with refsim's order: {exact}")


# ----------------------------------------------------------------------------------------------
# cases


def _spec(fmt: str) -> Format:
    return FORMATS[require_choice("fmt", fmt, tuple(FORMATS))]


@lru_cache(maxsize=64)
def _legal_shapes(fmt: str, max_size: int) -> tuple:
    spec = FORMATS[fmt]
    names = spec.shape_fields
    out = []
    for combo in itertools.product(*(spec.fields[f] for f in names)):
        case = dict(zip(names, combo))
        if dg.is_legal(spec, case) and spec.cost(case) <= max_size:
            out.append(case)
    return tuple(out)


def legal_shapes(fmt: str, max_size: int | None = None) -> list[dict]:
    """Every legal combination of the format's shape fields with at most ``max_size``
    multiply-adds (default: the format's), as a list of dicts (the drawn cases' population)."""
    spec = _spec(fmt)
    max_size = spec.default_max_size if max_size is None else require_int("max_size", max_size, minimum=1)
    return [dict(c) for c in _legal_shapes(fmt, max_size)]


def _validate_case(spec: Format, case, what: str) -> dict:
    if not isinstance(case, dict):
        raise FormatRuleError(f"{what}: must be a dict of the case fields {list(spec.fields)}; got {type(case).__name__}")
    case = {k: v for k, v in case.items() if k != "fmt"}
    unknown = set(case) - set(spec.fields)
    if unknown:
        raise FormatRuleError(f"{what}: unknown field(s) {sorted(unknown)} for format {spec.name!r} "
                              f"(fields {list(spec.fields)}); got {case}")
    for name, allowed in spec.fields.items():
        if name not in case:
            continue
        if name == "seed":
            require_int(f"{what}['seed']", case["seed"], minimum=0)
        elif all(isinstance(v, bool) for v in allowed):      # a flag: True or False, never 1 or "yes"
            if not isinstance(case[name], bool) or case[name] not in allowed:
                raise FormatRuleError(f"{what}[{name!r}]: must be one of {list(allowed)}; got {case[name]!r}")
        elif name not in spec.shape_fields:
            require_choice(f"{what}[{name!r}]", case[name], allowed)
    try:
        spec.legal({**{f: spec.fields[f][0] for f in spec.shape_fields}, **case})
    except RefsimError as err:
        raise type(err)(f"{what}: breaks the {spec.name} kernel's rules: {err}") from None
    return case


def _full_case(spec: Format, case: dict, what: str) -> dict:
    case = _validate_case(spec, case, what)
    missing = [f for f in spec.fields if f not in case]
    if missing:
        raise FormatRuleError(f"{what}: missing field(s) {missing} (a case names every field of {spec.name}: "
                              f"{list(spec.fields)}); got {case}")
    return case


def rebuild_case(case: dict) -> tuple:
    """The exact input arrays of a case printed by :func:`check_kernel`: ``case`` is the dict of
    the report's ``rebuild_case({...})`` line (``'fmt'`` plus every field of that format).
    Returns the tuple of NumPy arrays the kernel receives, in call order (same bits on every
    machine: NumPy's PCG64 stream of ``case['seed']``)."""
    if not isinstance(case, dict) or "fmt" not in case:
        raise FormatRuleError(f"case: must be a dict with 'fmt' and the format's fields; got {case!r}")
    spec = _spec(case["fmt"])
    return spec.make(_full_case(spec, case, "case"))


@lru_cache(maxsize=4096)
def _regimes(fmt: str, key: tuple, sms: int) -> frozenset:
    return frozenset(FORMATS[fmt].regimes(dict(key), sms))


def pinned_cases(fmt: str, sms: int = 108, *, max_size: int | None = None, shapes=None) -> list[tuple[dict, tuple]]:
    """The regime-covering shapes run first: ``[(shape dict, regimes it covers)]``, cheapest first.

    Candidates are the format's pool (or ``shapes``), legal and within ``max_size``; walking them
    by cost, a candidate is kept when it covers a regime no kept one covers. For Marlin the regimes
    include "partition differs from sms=X" for the common SM counts X, so a kernel planned for
    another GPU fails on a pinned case."""
    spec = _spec(fmt)
    sms = require_int("sms", sms, minimum=1)
    max_size = spec.default_max_size if max_size is None else max_size
    pool = [dict(s) for s in (spec.pinned_pool if shapes is None else shapes)]
    pool = sorted((c for c in pool if dg.is_legal(spec, c) and spec.cost(c) <= max_size), key=spec.cost)
    covered: set = set()
    out = []
    for c in pool:
        reg = _regimes(spec.name, tuple((f, c[f]) for f in spec.shape_fields), sms)
        if reg - covered:
            covered |= reg
            out.append((c, tuple(sorted(reg))))
    return out


def _draw(spec: Format, rng: np.random.Generator, shapes: list) -> dict:
    case = dict(shapes[int(rng.integers(len(shapes)))])
    kinds = spec.fields["kind"]
    w = np.array([_KIND_WEIGHTS.get(k, 1.0) for k in kinds])
    case["kind"] = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
    case["seed"] = int(rng.integers(2**31))
    return case


def strategy(fmt: str, *, max_size: int | None = None, shapes=None):
    """A hypothesis strategy of legal case dicts for ``fmt`` (the population ``check_kernel``
    draws from), for your own property tests; needs hypothesis (``pip install refsim[test]``)."""
    try:
        from hypothesis import strategies as st
    except ImportError:  # pragma: no cover - exercised only without the test extra
        raise ImportError("refsim.testing.harness.strategy needs hypothesis: pip install 'refsim[test]'") from None
    spec = _spec(fmt)
    pool = legal_shapes(fmt, max_size) if shapes is None else [_validate_case(spec, s, "shapes[i]") for s in shapes]
    return st.builds(lambda s, kind, seed: {**s, "kind": kind, "seed": seed},
                     st.sampled_from(pool), st.sampled_from(spec.fields["kind"]), st.integers(0, 2**31 - 1))


def _load_case(spec, item, i):
    if isinstance(item, (str, os.PathLike)):
        with np.load(item) as z:
            item = json.loads(str(z["case"]))
    if isinstance(item, dict) and item.get("fmt", spec.name) != spec.name:
        raise FormatRuleError(f"cases[{i}]: is a {item['fmt']!r} case; this check is for {spec.name!r}")
    return _full_case(spec, item, f"cases[{i}]")


# ----------------------------------------------------------------------------------------------
# the kernel


def _parameters(kernel) -> tuple | None:
    """The kernel's positional parameter names, or None where Python cannot tell."""
    try:
        params = inspect.signature(kernel).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def infer_format(kernel) -> str:
    """The one format whose input names (``FORMATS[f].inputs``) are exactly the kernel's positional
    parameter names, e.g. ``def k(x, qweight, lut)`` -> 'anyprec'. FormatRuleError when none or
    several match (``(A, B, C)`` fits every mma instruction: name the format)."""
    names = _parameters(kernel)
    hits = [] if names is None else [f for f, spec in FORMATS.items() if spec.inputs == names]
    if len(hits) == 1:
        return hits[0]
    said = "its parameters cannot be read" if names is None else f"its parameters ({', '.join(names)})"
    fits = f"fit {hits}" if hits else "are no format's inputs"
    raise FormatRuleError(f"fmt: required: the kernel's format cannot be inferred ({said} {fits}); name one of "
                          f"{sorted(FORMATS)}; got fmt=None")


def _validate_kernel(kernel, spec):
    if not callable(kernel):
        raise FormatRuleError(f"kernel: must be callable as {spec.signature}; got {type(kernel).__name__}")
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(spec.n_inputs))
    except TypeError:
        raise FormatRuleError(f"kernel: must accept the {spec.n_inputs} positional inputs of {spec.name!r}, "
                              f"{spec.signature}; got a callable with signature {sig}") from None


_TEMP_SOURCE = re.compile(r"[^\s'\"(]*refsim-ptx-[^/\s'\"]*/kernel\.cu")


def compiler_message(message: str, path, arch: str) -> str:
    """A toolchain error about the temporary copy refsim compiles (``<tempdir>/refsim-ptx-*/kernel.cu``,
    written verbatim, so the line numbers are the file's) rewritten to name ``path``: nvcc's
    diagnostics as ``my_kernel.cu(42): error: ...``, without the temporary command line."""
    text = _TEMP_SOURCE.sub(str(path), message)
    head, _, diagnostics = text.partition("\n")
    if head.startswith("nvcc failed") and diagnostics.strip():
        return f"{path}: nvcc cannot compile it for {arch}:\n{diagnostics}"
    return text


def _compile(path: Path, arch: str) -> None:
    """Compile a ``.cu`` file now (the result is cached for the run), so that nvcc's errors come
    before any case and name the user's file."""
    from refsim import ptx

    try:
        ptx.compile(path.read_text(), arch=arch, include_dirs=(str(path.parent),), source_name=str(path))
    except CompileError as err:                  # nvcc's lines kept, each naming the user's file
        raise CompileError(compiler_message(str(err), path, arch)) from None
    except ToolchainError as err:
        raise ToolchainError(compiler_message(str(err), path, arch)) from None


def _source_kernel(target, entry, launch, arch):
    """``target`` itself when it is a callable; a ``.cu``/``.ptx`` path as a callable through refsim.ptx."""
    if isinstance(target, (str, Path)):
        if entry is None or launch is None:
            raise FormatRuleError(f"kernel: a CUDA/PTX source ({str(target)!r}) needs kernel= (its .entry name) "
                                  f"and launch= (inputs -> refsim.cuda.LaunchPlan); got kernel={entry!r}, "
                                  f"launch={launch!r}")
        from refsim.cuda import user_kernel

        path = Path(target)
        if path.suffix == ".cu" and path.is_file():
            _compile(path, arch)
        return user_kernel(path, kernel=entry, launch=launch, arch=arch)
    if entry is not None or launch is not None:
        raise FormatRuleError(f"kernel=/launch=: only for a CUDA/PTX source path; got a {type(target).__name__}")
    return target


def _progress(progress):
    if progress is True:
        return lambda line: sys.stderr.write(f"check_kernel: {line}\n")
    if progress is False or progress is None:
        return lambda line: None
    if callable(progress):
        return progress
    raise FormatRuleError(f"progress: must be True, False or a callable taking one line; got {progress!r}")


def _positive(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise FormatRuleError(f"{name}: must be a positive number of seconds or None; got {value!r}")
    return float(value)


def _shapes(spec, shapes):
    if shapes is None:
        return None
    if not isinstance(shapes, (list, tuple)) or not shapes:
        raise FormatRuleError(f"shapes: must be a non-empty list of dicts; got {shapes!r}")
    shapes = [_validate_case(spec, s, f"shapes[{i}]") for i, s in enumerate(shapes)]
    for i, s in enumerate(shapes):
        if set(s) != set(spec.shape_fields):
            raise FormatRuleError(f"shapes[{i}]: must give exactly the shape fields {list(spec.shape_fields)}; got {s}")
    return shapes


def _accuracy_lines(spec, acc, lin, j, bits_bad) -> list[str]:
    """The head of an accuracy-mode report: the stated bound, the worst output, bit-exactness."""
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(np.where(j.outside, j.error / j.bound, -1.0)),
                                                   j.outside.shape))
    return [f"  accuracy mode: {acc.describe(lin.terms)}; |y - S| <= B around the exact product S "
            f"(refsim.testing.accuracy)",
            f"  {int(j.outside.sum())} of {j.outside.size} outputs outside the bound; worst at {worst}: |y - S| = "
            f"{j.error[worst]:.4g} > B = {j.bound[worst]:.4g} (S = {j.exact[worst]:.6g})",
            f"  bit-exact with refsim's order: {'no' if bits_bad.any() else 'yes'}, {int(bits_bad.sum())} of "
            f"{bits_bad.size} outputs differ"] + ([] if bits_bad.any() else [
                f"  verdict: the kernel computes what refsim's emulator computes, whose own accumulation leaves this "
                f"bound: the stated {acc.dtype} accumulation is stronger than the kernel's arithmetic (refsim's "
                f"emulators pass under the statements listed in docs/harness.md)"])


_CALL_ERRORS = {cls.__name__: cls for cls in (KernelCallError, KernelTimeout, KernelModifiedInput)}


def _campaign(executor, kernel, spec, arch, sms, deadline, acc, cases, say) -> list:
    """Every planned case's :class:`refsim.testing.campaign.Outcome`, on ``executor``'s workers."""
    from concurrent.futures import Executor

    from refsim.testing import campaign

    t0 = time.perf_counter()
    if isinstance(executor, str):
        from refsim.io.executor import executor_from_spec

        with executor_from_spec(executor) as ex:
            out = campaign.run_cases(ex, kernel, spec.name, arch, sms, deadline, acc, cases, say)
    else:
        require_instance("executor", executor, Executor, "an executor spec string or a concurrent.futures.Executor")
        out = campaign.run_cases(executor, kernel, spec.name, arch, sms, deadline, acc, cases, say)
    say(f"campaign: {len(cases)} cases on {executor if isinstance(executor, str) else type(executor).__name__} in "
        f"{time.perf_counter() - t0:.1f} s ({len(cases) / max(time.perf_counter() - t0, 1e-9):.1f} cases/s)")
    return out


def _statistics(spec, acc, runner, rows, origin, diagnose_budget, vary_budget, say, judged, save_failures):
    """The statistical criterion over the pinned cases ``rows`` (:func:`refsim.testing.accuracy.spread`):
    the :class:`Spread` when it passes; raises :class:`KernelMismatch`, diagnosed on the case whose
    errors depart most from the reference's, when it fails."""
    if not rows:
        return None
    sp = spread(np.concatenate([r[5].ravel() for r in rows]), np.concatenate([r[6].ravel() for r in rows]))
    say(f"statistics: {sp.describe(acc)}: {'within' if sp.passed else 'beyond'} the allowance")
    if sp.passed:
        return sp
    index = max(range(len(rows)), key=lambda i: spread(rows[i][5], rows[i][6]).kernel_rms
                / max(spread(rows[i][5], rows[i][6]).reference_rms, FLOOR))
    case, inputs, actual, expected, bits, ek, er = rows[index]
    failing = ek > np.maximum(FACTOR * er, FLOOR)
    failing = failing if failing.any() else ek > er

    def fails(c, inp):
        j = judged(c, inp)[3]
        ref = reference(acc, spec.linear(c, inp)).astype(np.float64).reshape(j.exact.shape)
        return not spread(j.error / j.bound, np.abs(ref - j.exact) / j.bound).passed

    summary = [f"  statistical criterion (refsim.testing.accuracy): {sp.describe(acc)}",
               f"  on this case: {spread(ek, er).describe(acc)}",
               f"  bit-exact with refsim's order: {'no' if bits.any() else 'yes'}, {int(bits.sum())} of {bits.size} "
               "outputs differ"] + ([] if bits.any() else [
                   f"  verdict: the kernel computes what refsim's emulator computes, whose own accumulation is weaker "
                   f"than the stated {acc.dtype} one (refsim's emulators pass under the statements listed in "
                   "docs/harness.md)"])
    report = dg.report(runner, case, inputs, actual, expected, bits, f"{origin} case {index + 1} of {len(rows)}",
                       diagnose_budget, say, summary, failing=failing, fails=fails, vary_budget=vary_budget,
                       accuracy=True, what=f"makes larger errors than {acc} (statistical criterion)")
    if save_failures is not None:
        report += f"\n  saved: {dg.save(save_failures, spec, case, inputs, actual, expected)}"
    raise KernelMismatch(report, case)


def check_kernel(target, /, fmt: str | None = None, *, kernel: str | None = None, launch=None,
                 arch: str = "sm_80", sms: int = 108,
                 max_examples: int | None = None, seed: int | None = None, shapes=None,
                 max_size: int | None = None, cases=None, save_failures=None, deadline: float | None = None,
                 shrink: bool = True, shrink_budget: float = 8.0, diagnose_budget: float = 20.0,
                 mode: str = "bitexact", accumulation: str = "fp32", order: str = "sequential",
                 legal=None, executor=None, progress=True) -> CheckResult:
    """Check a kernel against refsim's emulator of ``fmt`` (see the module docstring).

    target: any callable taking the format's NumPy inputs (``FORMATS[fmt].signature``) and returning
    its output array, or the path of a CUDA source (``.cu``) or PTX file (``.ptx``): that file is
    compiled (nvcc from the ``cuda`` extra, cached; its errors name the file and line), and its
    ``.entry`` named by ``kernel=`` runs through :mod:`refsim.ptx` on the CPU, launched as
    ``launch(*inputs)`` describes (a function returning a :class:`refsim.cuda.LaunchPlan`).
    fmt: one of ``FORMATS`` ('anyprec', 'atom', 'awq', 'gptq', 'gptq_v2', 'marlin', 'mixed_2_4_16',
    'mma_m16n8k16', 'mma_m16n8k16_f16', 'mma_s4', and the weight-only GEMMs of the block-scaled
    formats 'fp8_channel', 'fp8_block', 'mxfp4', 'nvfp4', 'nf4', 'nf4_dq', 'q4_0', 'q8_0', 'q4_k',
    for which accuracy mode is the recommended mode); None infers it from the kernel's parameter
    names (:func:`infer_format`, said in the progress) and refuses when they do not name exactly
    one. arch: tensor-core model 'sm_70' .. 'sm_90'. sms: SM count = grid size (Marlin's partition
    depends on it). max_examples: drawn cases after the pinned ones (default 12 for Marlin, 20
    otherwise; 0 runs only pinned/replayed cases). seed: int for the draws (default: a fresh one,
    printed). shapes: list of dicts fixing the shape fields (e.g. ``[{'m': 1, 'k': 4096, 'n': 4096,
    'group_size': 128}]``). max_size: largest case in multiply-adds (default per format). cases:
    replay only these (dicts from a report's ``rebuild_case`` line, or ``.npz`` paths written by
    ``save_failures``). save_failures: a ``.npz`` path or a directory for the failing case.
    deadline: seconds one kernel call may take (None: no limit). shrink / shrink_budget: minimise a
    failing case within that many seconds. diagnose_budget: seconds for probes and bug classes.
    mode: 'bitexact' (every bit equals the emulator's) or 'accuracy' (every output within the
    forward-error bound of ``accumulation`` 'fp32' / 'fp16' summed in ``order`` 'sequential' /
    'pairwise' / 'any', around the exact product, on the pinned, adversarial and drawn cases, and
    errors on the pinned cases within ``accuracy.FACTOR`` of the stated accumulation's own in RMS
    and 99th percentile; :mod:`refsim.testing.accuracy`).
    legal: the kernel's own shape rule (:mod:`refsim.testing.legal`: ``legal(**shape) -> bool`` or a
    string such as ``"n%128==0, m<=64"``; default: a ``legal`` attribute of ``launch``, else none):
    pinned and drawn cases respect it, the pinned cases it skips are counted and printed, and a rule
    no case within ``max_size`` satisfies is refused.
    executor: None (every case here, one after the other), an executor spec ("local:N", "dask-local:N",
    "dask://HOST:PORT": :func:`refsim.io.executor.executor_from_spec`) or a ``concurrent.futures``
    Executor: the planned cases run on its workers (:mod:`refsim.testing.campaign`; the kernel must
    pickle), then the first failing one in plan order is shrunk and diagnosed here — the serial verdict.
    progress: True (one line per phase on stderr), False, or a callable.

    Returns a :class:`CheckResult` when every case passes; raises :class:`KernelMismatch`,
    :class:`KernelCallError` (:class:`KernelTimeout`, :class:`KernelModifiedInput`) otherwise, and a
    :class:`~refsim.errors.RefsimError` for bad arguments before any case runs.
    """
    t_start = time.perf_counter()
    say = _progress(progress)
    mode = require_choice("mode", mode, MODES)
    acc = Accumulation(accumulation, order) if mode == "accuracy" else None
    tc.model(arch)
    if fmt is not None:
        _spec(fmt)                                  # a wrong name before any compile
    kernel = _source_kernel(target, kernel, launch, arch)
    if fmt is None:
        fmt = infer_format(kernel)
        say(f"fmt not given: the kernel's parameters {FORMATS[fmt].inputs} are the inputs of {fmt!r}; "
            f"checking it as {fmt}")
    spec = _spec(fmt)
    if acc is not None and spec.no_accuracy:
        raise FormatRuleError(f"mode: {spec.name} is {spec.no_accuracy}: compare its bits (mode='bitexact'); "
                              "got mode='accuracy'")
    sms = require_int("sms", sms, minimum=1)
    _validate_kernel(kernel, spec)
    max_examples = _DEFAULT_EXAMPLES.get(spec.name, 20) if max_examples is None else require_int(
        "max_examples", max_examples, minimum=0)
    seed = int.from_bytes(os.urandom(4), "little") >> 1 if seed is None else require_int("seed", seed, minimum=0)
    max_size = spec.default_max_size if max_size is None else require_int("max_size", max_size, minimum=1)
    deadline = _positive("deadline", deadline)
    shrink_budget = _positive("shrink_budget", shrink_budget) or 0.0
    diagnose_budget = _positive("diagnose_budget", diagnose_budget) or 0.0
    shapes = _shapes(spec, shapes)
    rule = shape_rule(getattr(launch, "legal", None) if legal is None else legal, spec.shape_fields)
    from concurrent.futures import Executor

    if executor is not None and not isinstance(executor, (str, Executor)):
        raise FormatRuleError(f"executor: must be None, an executor spec such as 'dask-local:2' or a "
                              f"concurrent.futures.Executor; got {type(executor).__name__}")
    if cases is not None:
        require_instance("cases", cases, (list, tuple), "list of case dicts or .npz paths")
    shrink = require_bool("shrink", shrink)
    replay = None if cases is None else [_load_case(spec, c, i) for i, c in enumerate(cases)]
    if save_failures is not None and not isinstance(save_failures, (str, os.PathLike)):
        raise FormatRuleError(f"save_failures: must be a path; got {save_failures!r}")

    runner = Runner(kernel, spec, arch, sms, deadline)
    rng = np.random.default_rng(seed)
    adversarial = []
    if replay is not None:
        plan = [(c, f"replayed case {i + 1} of {len(replay)}", None) for i, c in enumerate(replay)]
        pinned = []
    else:
        pinned = pinned_cases(spec.name, sms, max_size=max_size, shapes=shapes)
        skipped = 0
        if rule is not None:       # the regime-covering choice again, among the shapes the kernel accepts
            skipped = sum(not rule(c) for c, _ in pinned)
            pool = [dict(c) for c in (spec.pinned_pool if shapes is None else shapes) if rule(dict(c))]
            pinned = pinned_cases(spec.name, sms, max_size=max_size, shapes=pool) if pool else []
        # accuracy mode pins the data that stresses a sum (exponents over 21 binades: cancellation,
        # small terms next to large ones), with data seeds fixed (0, 1, ...: the statistical
        # criterion's inputs do not depend on the seed); bit-exact mode pins data that rounds everywhere
        kind = "wide_exponents" if acc is not None and "wide_exponents" in spec.fields["kind"] else spec.pinned_kind
        seeds = [int(rng.integers(2**31)) for _ in pinned]
        plan = [({**c, "kind": kind, "seed": i if acc is not None else seeds[i]},
                 f"pinned case {i + 1} of {len(pinned)}", None) for i, (c, _) in enumerate(pinned)]
        if acc is not None:
            adversarial = [a for a in adv.cases(spec.name, acc.dtype)
                           if rule is None or rule({f: a.case[f] for f in spec.shape_fields})]
            plan += [(a.case, f"adversarial case {i + 1} of {len(adversarial)} ({a.name})", a)
                     for i, a in enumerate(adversarial)]
        population = list(shapes) if shapes is not None else legal_shapes(spec.name, max_size)
        if not population:
            raise FormatRuleError(f"max_size: no legal {spec.name} shape has at most {max_size} multiply-adds")
        if rule is not None:
            population = [c for c in population if rule(c)]
            if not population and not pinned:
                raise FormatRuleError(f"legal: no {spec.name} shape with at most {max_size} multiply-adds satisfies "
                                      f"the kernel's rule {rule.text!r}")
            say(f"the kernel's shape rule {rule.text!r}: {skipped} pinned cases skipped, {len(pinned)} pinned and "
                f"{len(population)} drawable shapes satisfy it")
        plan += [(_draw(spec, rng, population), f"drawn case {i + 1} of {max_examples}", None)
                 for i in range(max_examples if population else 0)]
    say(f"{spec.name} on {arch}, sms={sms}, seed={seed}: {len(pinned)} pinned + "
        + (f"{len(adversarial)} adversarial + " if adversarial else "")
        + f"{0 if replay is not None else max_examples} drawn cases"
        + ("" if replay is None else f", {len(replay)} replayed")
        + f" (max_size {max_size} multiply-adds)"
        + (f"; accuracy mode, {acc.dtype} accumulation in {acc.order} order" if acc else ""))

    def judged(case, inputs, exact_weights=False):
        """(actual, expected, bits differ, judgement or None, failing mask) of one case."""
        actual, expected, bits = runner.differs(case, inputs)
        if acc is None:
            return actual, expected, bits, None, bits
        lin = spec.linear(case, inputs)
        j = judge(acc, adv.exact_weights(lin) if exact_weights else lin, actual)
        return actual, expected, bits, j, j.outside

    # a campaign judges the drawn cases on its workers; pinned, adversarial and replayed cases (the
    # statistical criterion reads their outputs) run here, in plan order as always
    drawn = [i for i, (c, o, sp) in enumerate(plan) if o.startswith("drawn") and sp is None]
    outcomes = None if executor is None or not drawn else dict(zip(drawn, _campaign(
        executor, kernel, spec, arch, sms, deadline, acc, [plan[i][0] for i in drawn], say)))
    phase, phase_t0, phase_n = None, time.perf_counter(), 0
    outputs = bit_differ = 0
    worst = 0.0
    spread_of = []                                    # (case, inputs, actual, expected, bits, errors, reference errors)
    stats = None
    for idx, (case, origin, special) in enumerate(plan + [(None, "end", None)]):
        kind_of = origin.split()[0]
        if kind_of != phase:
            if phase is not None:
                say(f"{phase}: {phase_n} cases {'match' if acc is None else 'within the bound'} "
                    f"({time.perf_counter() - phase_t0:.1f} s)")
            if phase in ("pinned", "replayed") and acc is not None:
                stats = _statistics(spec, acc, runner, spread_of, phase, diagnose_budget,
                                    shrink_budget if shrink else 0.0, say, judged, save_failures)
            phase, phase_t0, phase_n = kind_of, time.perf_counter(), 0
        if case is None:
            break
        if outcomes is not None and idx in outcomes:    # judged on a worker: a pass is counted, a failure redone here
            o = outcomes[idx]
            if o.error is not None:
                raise _CALL_ERRORS.get(o.error[0], KernelCallError)(o.error[1], case)
            if not o.bad:
                phase_n += 1
                outputs, bit_differ = outputs + o.outputs, bit_differ + o.bit_differ
                worst = max(worst, o.ratio)
                if o.admissible is not None:
                    runner.admissible.append(o.admissible)
                continue
        inputs = spec.make(case) if special is None else special.inputs
        actual, expected, bits, j, bad = judged(case, inputs, special is not None)
        phase_n += 1
        outputs, bit_differ = outputs + bits.size, bit_differ + int(bits.sum())
        worst = max(worst, j.ratio) if j is not None else worst
        if j is not None and kind_of in ("pinned", "replayed"):
            ref = reference(acc, spec.linear(case, inputs)).astype(np.float64)
            spread_of.append((case, inputs, actual, expected, bits, j.error / j.bound,
                              np.abs(ref.reshape(j.exact.shape) - j.exact) / j.bound))
        if not bad.any():
            continue
        say(f"{origin} {'differs' if acc is None else 'leaves the bound'}: {int(bad.sum())} of {bad.size} outputs; "
            f"case {case}")
        fails = (lambda c, inp: judged(c, inp)[4].any()) if special is None else None
        if fails is not None and shrink and replay is None and shrink_budget > 0:
            case = dg.shrink(spec, case, fails, shrink_budget, say)
            inputs = spec.make(case)
            actual, expected, bits, j, bad = judged(case, inputs)
            origin += " (shrunk)"
        summary = None
        if j is not None:
            lin = spec.linear(case, inputs)
            summary = _accuracy_lines(spec, acc, adv.exact_weights(lin) if special else lin, j, bits)
            if special is not None:
                summary.insert(0, f"  adversarial data ({special.name}): every weight 1, activations "
                                  f"refsim.testing.adversarial.sequence({special.name!r}); built to make "
                                  f"{special.defeats} leave the bound (docs/harness.md)")
        rebuild = None if special is None else f"refsim.testing.adversarial.inputs({spec.name!r}, {special.name!r})"
        report = dg.report(runner, case, inputs, actual, expected, bits, origin, diagnose_budget, say, summary,
                           failing=bad, fails=fails, vary_budget=shrink_budget if shrink else 0.0, rebuild=rebuild,
                           accuracy=acc is not None)
        if save_failures is not None:
            report += f"\n  saved: {dg.save(save_failures, spec, case, inputs, actual, expected)}"
        raise KernelMismatch(report, case)
    if runner.admissible:
        own = sum(v.endswith("ascending order: yes") for v in runner.admissible)
        say(f"{len(runner.admissible)} set-valued cases (hardware-ordered float atomics), each in its admissible "
            f"set; equal to refsim's ascending order: {own} of {len(runner.admissible)}")
    covered = set().union(*(set(regs) for _, regs in pinned))
    n_drawn = sum(1 for _, o, _ in plan if o.startswith("drawn"))
    return CheckResult(spec.name, arch, sms, seed, len(pinned), n_drawn, 0 if replay is None else len(replay),
                       tuple(sorted(covered)), time.perf_counter() - t_start, mode,
                       None if acc is None else str(acc), outputs, bit_differ,
                       worst, None if rule is None else rule.text, 0 if replay is not None else skipped,
                       len(adversarial), stats)
