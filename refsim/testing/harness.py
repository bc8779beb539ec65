"""``check_kernel``: test a kernel bit for bit against refsim's emulator, with a diagnosis.

You bring a kernel (any callable taking and returning NumPy arrays: a CUDA kernel behind
CuPy/PyTorch, a simulator, a port); the harness builds legal cases for a format, calls the kernel,
and compares its output bit for bit with refsim's emulator of that kernel for one architecture and
SM count. Phases, one progress line each:

1. **check** arguments and the kernel's signature before any case is built;
2. **pinned** cases: a few shapes chosen so that together they cover every regime of the kernel's
   structure for *your* SM count (Marlin: both tile configs, grouped and per-channel, several
   slices per column, partial last stripe, idle SMs, every host M-split path, and a partition that
   differs from the one of every common SM count), so a partition or reduction-order bug fails on
   the first cases, not by luck;
3. **drawn** cases: ``max_examples`` legal cases drawn with ``seed`` (shapes below ``max_size``
   multiply-adds, or from ``shapes=``), data kinds from zeros to wide exponents;
4. on a mismatch, **shrink** toward smaller shapes, simpler data and seed 0 within
   ``shrink_budget`` seconds, then **diagnose**: where the differences are on the kernel's
   structure, which probes (inputs with parts of the kernel switched off) still differ, whether a
   known bug class replayed on the emulator reproduces the kernel's bits exactly, the first
   differing elements in hex with ULP distances, and a one-line ``rebuild_case({...})`` snippet.

A kernel that raises, returns the wrong type/shape/dtype, or overruns ``deadline`` seconds fails
at once with its case (no shrinking). Formats and their rules: :mod:`refsim.testing.cases`
and docs/harness.md. The harness needs only refsim's core dependencies; :func:`strategy` (the same
legal cases as a hypothesis strategy, for your own property tests) needs ``refsim[test]``.

    from refsim.testing import check_kernel
    check_kernel(my_marlin, "marlin", arch="sm_80", sms=108)     # my_marlin(A, B, s) -> C
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from refsim._validate import require_choice, require_int
from refsim.arith import tensor_core as tc
from refsim.arith.admissible import AdmissibleSet
from refsim.errors import FormatRuleError, RefsimError
from refsim.testing.bits import ulp_distance
from refsim.testing.cases import DATA_KINDS, FORMATS, Format

__all__ = ["check_kernel", "rebuild_case", "strategy", "legal_shapes", "pinned_cases", "CheckResult",
           "KernelMismatch", "KernelCallError", "KernelTimeout", "FORMATS", "DATA_KINDS"]

#: how often each data kind is drawn (zeros and ones rarely round, so they are drawn rarely)
_KIND_WEIGHTS = {"zeros": 0.05, "ones": 0.05, "small_integers": 0.2, "normal": 0.45, "wide_exponents": 0.25}
_DEFAULT_EXAMPLES = {"marlin": 12}


class KernelMismatch(AssertionError):
    """The kernel's output differs from the emulator's; the message is the full report.
    ``case`` is the (shrunk) failing case, ``rebuild`` the snippet that rebuilds its inputs."""

    def __init__(self, report: str, case: dict | None = None):
        super().__init__(report)
        self.case = case


class KernelCallError(AssertionError):
    """The kernel raised, or returned something that is not an array of the right shape and dtype."""

    def __init__(self, report: str, case: dict | None = None):
        super().__init__(report)
        self.case = case


class KernelTimeout(KernelCallError):
    """One kernel call took longer than ``deadline`` seconds."""


@dataclass(frozen=True)
class CheckResult:
    """What a passing :func:`check_kernel` run covered."""

    fmt: str
    arch: str
    sms: int
    seed: int
    pinned: int
    drawn: int
    replayed: int
    regimes: tuple
    seconds: float


# ----------------------------------------------------------------------------------------------
# cases


def _spec(fmt: str) -> Format:
    return FORMATS[require_choice("fmt", fmt, tuple(FORMATS))]


def _is_legal(spec: Format, case: dict) -> bool:
    try:
        spec.legal(case)
    except RefsimError:
        return False
    return True


@lru_cache(maxsize=64)
def _legal_shapes(fmt: str, max_size: int) -> tuple:
    spec = FORMATS[fmt]
    names = spec.shape_fields
    out = []
    for combo in itertools.product(*(spec.fields[f] for f in names)):
        case = dict(zip(names, combo))
        if _is_legal(spec, case) and spec.cost(case) <= max_size:
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
        elif (name not in spec.shape_fields and name != "kind") or all(isinstance(v, bool) for v in allowed):
            require_choice(f"{what}[{name!r}]", case[name], allowed)
        elif name == "kind":
            require_choice(f"{what}['kind']", case["kind"], allowed)
    try:
        spec.legal({**_first_shape(spec), **case})
    except RefsimError as err:
        raise type(err)(f"{what}: breaks the {spec.name} kernel's rules: {err}") from None
    return case


def _first_shape(spec: Format) -> dict:
    return {f: spec.fields[f][0] for f in spec.shape_fields}


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


def _snippet(spec: Format, case: dict) -> str:
    return f"refsim.testing.rebuild_case({ {'fmt': spec.name, **case}!r})"


@lru_cache(maxsize=4096)
def _regimes_cached(fmt: str, key: tuple, sms: int) -> frozenset:
    return frozenset(FORMATS[fmt].regimes(dict(key), sms))


def _regimes(spec, case, sms):
    key = tuple((f, case[f]) for f in spec.shape_fields)
    return _regimes_cached(spec.name, key, sms)


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
    pool = [c for c in pool if _is_legal(spec, c) and spec.cost(c) <= max_size]
    pool.sort(key=spec.cost)
    covered: set = set()
    out = []
    for c in pool:
        reg = _regimes(spec, c, sms) | _extra_regimes(spec, c, sms)
        new = reg - covered
        if new:
            covered |= new
            out.append((c, tuple(sorted(reg))))
    return out


def _extra_regimes(spec, case, sms):
    if spec.name != "marlin":
        return frozenset()
    from refsim.testing.cases import _SM_COUNTS

    own = _marlin_iters(case["m"], case["n"], case["k"], case["group_size"], sms)
    return frozenset(f"partition differs from sms={x}" for x in _SM_COUNTS
                     if x != sms and _marlin_iters(case["m"], case["n"], case["k"], case["group_size"], x) != own)


@lru_cache(maxsize=8192)
def _marlin_iters(m, n, k, gs, sms):
    from refsim.formats import stripes

    return tuple(la.iters for la in stripes.stripes(m, n, k, sms, gs).launches)


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


# ----------------------------------------------------------------------------------------------
# running one case


class _Runner:
    def __init__(self, kernel, spec, arch, sms, deadline):
        self.kernel, self.spec, self.arch, self.sms, self.deadline = kernel, spec, arch, sms, deadline
        self.admissible: list[str] = []       # verdicts of the cases whose emulation is a set

    def call(self, case, inputs):
        """The kernel's output on copies of ``inputs``; KernelCallError / KernelTimeout at once."""
        copies = tuple(x.copy() for x in inputs)
        use_alarm = self.deadline is not None and threading.current_thread() is threading.main_thread()
        old = None

        def _alarm(signum, frame):
            raise KernelTimeout(f"{self.spec.name} kernel: one call took more than deadline={self.deadline} s; "
                                f"case {case}\n  rebuild: {_snippet(self.spec, case)}", case)

        t0 = time.perf_counter()
        try:
            if use_alarm:
                old = signal.signal(signal.SIGALRM, _alarm)
                signal.setitimer(signal.ITIMER_REAL, self.deadline)
            out = self.kernel(*copies)
        except KernelTimeout:
            raise
        except Exception as err:
            raise KernelCallError(f"{self.spec.name} kernel raised {type(err).__name__}: {err}\n  case {case}\n"
                                  f"  rebuild: {_snippet(self.spec, case)}", case) from err
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
        took = time.perf_counter() - t0
        if self.deadline is not None and took > self.deadline:
            raise KernelTimeout(f"{self.spec.name} kernel: one call took {took:.2f} s > deadline={self.deadline} s; "
                                f"case {case}\n  rebuild: {_snippet(self.spec, case)}", case)
        return out

    def expected(self, inputs):
        return self.spec.emulate(inputs, self.arch, self.sms)

    def differs(self, case, inputs, expected=None):
        """(actual, expected, bool mask of differing bits) for one case; shape/dtype errors raise.
        A set-valued emulation (an AdmissibleSet) counts an output in the set as equal; expected is
        then refsim's ascending answer and the verdict is kept in ``self.admissible``."""
        expected = self.expected(inputs) if expected is None else expected
        actual = self.call(case, inputs)
        if isinstance(expected, AdmissibleSet) and isinstance(actual, np.ndarray) \
                and actual.dtype == expected.dtype and actual.shape == expected.shape:
            self.admissible.append(expected.verdict(actual))
            return actual, expected.reference, ~expected.contains(actual)
        if not isinstance(actual, np.ndarray) or actual.dtype != expected.dtype or actual.shape != expected.shape:
            got = (f"dtype {actual.dtype} shape {actual.shape}" if isinstance(actual, np.ndarray)
                   else type(actual).__name__)
            raise KernelCallError(f"{self.spec.name} kernel returned {got}; expected a numpy.ndarray of dtype "
                                  f"{expected.dtype} shape {expected.shape}\n  case {case}\n"
                                  f"  rebuild: {_snippet(self.spec, case)}", case)
        return actual, expected, _bits(actual) != _bits(expected)


def _bits(x):
    return np.ascontiguousarray(x).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


# ----------------------------------------------------------------------------------------------
# shrinking and diagnosis


def _simpler(spec: Format, case: dict, max_size: int):
    """Candidate cases one field simpler than ``case``, most aggressive first. The data kind is
    kept: zeros or small integers often round nowhere, and the diagnosis needs rounding to see the
    pattern (probes and bug-class replays would all agree on exact data)."""
    for name, allowed in spec.fields.items():
        if name == "seed":
            if case["seed"] != 0:
                yield {**case, "seed": 0}
            continue
        if name == "kind" or case[name] not in allowed:   # simpler data would hide the pattern
            continue
        for v in allowed[:allowed.index(case[name])]:
            cand = {**case, name: v}
            if _is_legal(spec, cand) and spec.cost(cand) <= max_size:
                yield cand


def _shrink(runner, case, budget, say):
    spec = runner.spec
    t0 = time.perf_counter()
    steps = tries = 0
    improved = True
    while improved and time.perf_counter() - t0 < budget:
        improved = False
        for cand in _simpler(spec, case, spec.cost(case)):
            if time.perf_counter() - t0 >= budget:
                break
            tries += 1
            try:
                _, _, bad = runner.differs(cand, spec.make(cand))
            except KernelCallError:
                continue
            if bad.any():
                case, steps, improved = cand, steps + 1, True
                break
    left = "" if time.perf_counter() - t0 < budget else " (budget reached)"
    say(f"shrink: {steps} steps in {tries} tries, {time.perf_counter() - t0:.1f} s{left}: {case}")
    return case


def _concentration(labels: dict, bad: np.ndarray) -> list[str]:
    """One line per structure label whose mismatches are confined to some of its values."""
    lines = []
    for name, lab in labels.items():
        vals = np.unique(lab)
        if len(vals) < 2:
            continue
        hit = np.unique(lab[bad])
        if len(hit) == len(vals):
            continue
        shown = ", ".join(str(int(v)) for v in hit[:12]) + (" ..." if len(hit) > 12 else "")
        clean = len(vals) - len(hit)
        lines.append(f"{name}: only {shown} ({len(hit)} of {len(vals)} values; {clean} never differ)")
    if not lines:
        lines.append("spread over every value of: " + ", ".join(labels))
    return lines


def _diagnose(runner, case, inputs, actual, expected, bad, budget, say):
    spec = runner.spec
    t0 = time.perf_counter()
    lines = []
    labels = spec.structure(case, inputs, expected.shape, runner.sms)
    lines.append("  where:")
    lines += [f"    {x}" for x in _concentration(labels, bad)]

    verdict = None
    explained = None
    probe_rows = []                                   # (probe, differing outputs or None, kernel output)
    for probe in spec.probes(case, inputs):
        if time.perf_counter() - t0 > budget:
            probe_rows.append((probe, None, None))
            continue
        try:
            pout, _, pbad = runner.differs(case, probe.inputs)
        except KernelCallError:
            pout, pbad = None, None
        probe_rows.append((probe, None if pbad is None else int(pbad.sum()), pout))
    refuted = []
    for bug_class, desc, alt in spec.known_bugs(case, inputs, runner.arch, runner.sms):
        if time.perf_counter() - t0 > budget:
            lines.append("  known bug classes: budget reached before every class was replayed")
            break
        if not np.array_equal(_bits(alt(inputs)), _bits(actual)):
            continue
        # a replay that matches on the case must also match every probe (a small case can make two
        # bugs write the same bits; the probes are built to tell them apart)
        against = next((p.name.split(" (")[0] for p, n, pout in probe_rows
                        if pout is not None and not np.array_equal(_bits(alt(p.inputs)), _bits(pout))), None)
        if against is None:
            explained = f"{bug_class}: the kernel's output equals refsim's emulation with {desc}, bit for bit"
            break
        refuted.append(f"{desc} (matches the case, not the probe '{against}')")
    for r in refuted[:3]:
        lines.append(f"  refuted: {r}")

    if probe_rows:
        lines.append("  probes (the case with parts of the kernel switched off or amplified; differing outputs):")
        for probe, n, _ in probe_rows:
            lines.append(f"    {probe.name}: {'not run' if n is None else n}")
    for probe, n, _ in probe_rows:
        if n and probe.family is None:
            verdict = f"{probe.meaning} (it already differs with {probe.name.split(' (')[0]})"
            break
    families: dict = {}
    for probe, n, _ in probe_rows:
        if probe.family is not None:
            families.setdefault(probe.family, []).append((probe, n))
    for family, members in families.items():
        hit = [probe for probe, n in members if n]
        if verdict is None and hit and len(hit) < len(members):
            verdict = (f"only {len(hit)} of {len(members)} probes of each {family} alone differ ("
                       + ", ".join(p.name.split(" (")[0] for p in hit) + f"): {hit[0].meaning}"
                       + (" and the others listed" if len(hit) > 1 else ""))
    for label, value, meaning in spec.hints:
        lab = labels.get(label)
        if verdict is None and lab is not None and (lab == value).any() and not bad[lab == value].any():
            verdict = meaning
    if verdict is None and probe_rows and all(n == 0 for _, n, _ in probe_rows):
        verdict = ("every probe matches, only the full case differs: how partial sums are combined (the "
                   "association of a reduction, the order or precision of carries between blocks, or the "
                   "partition over SMs)")
        if int(bad.sum()) <= 2:
            verdict += "; with this few differing outputs the probes may simply miss a rare rounding"
    if np.issubdtype(expected.dtype, np.floating):
        e = expected.astype(np.float64)
        scale = float(np.max(np.abs(e[np.isfinite(e)]), initial=0.0))
        err = float(np.max(np.abs(actual.astype(np.float64)[bad] - e[bad]), initial=0.0))
        if scale > 0 and err > scale * 2.0**-6:
            lines.append(f"  size: max |difference| {err:.3g} vs max |output| {scale:.3g}: wrong values "
                         "(weights, scales, layout), not rounding")
        else:
            lines.append(f"  size: max |difference| {err:.3g} vs max |output| {scale:.3g}: rounding-sized "
                         "(order or precision of the arithmetic)")
    lines.append(f"  verdict: {explained or verdict or 'no known bug class matched; see where and probes above'}")
    say(f"diagnose: {time.perf_counter() - t0:.1f} s")
    return lines


def _report(runner, case, inputs, actual, expected, bad, origin, diag_budget, say) -> str:
    spec = runner.spec
    n_bad = int(bad.sum())
    head = [f"{spec.name} kernel differs from the refsim emulator ({runner.arch}, sms={runner.sms}) on {origin}",
            f"  case: {case}"]
    if np.issubdtype(expected.dtype, np.floating):
        ul = ulp_distance(actual[bad], expected[bad])
        head.append(f"  {n_bad} of {bad.size} outputs differ (max {int(ul.max())} ULP, median {int(np.median(ul))} ULP)")
    else:
        head.append(f"  {n_bad} of {bad.size} outputs differ")
    body = _diagnose(runner, case, inputs, actual, expected, bad, diag_budget, say)
    width = expected.dtype.itemsize
    ab, eb = _bits(actual), _bits(expected)
    body.append("  first differing elements (kernel vs emulator):")
    coords = [tuple(int(i) for i in c) for c in np.argwhere(bad)[:5]]
    for c in coords:
        av, ev = actual[c], expected[c]
        if np.issubdtype(expected.dtype, np.floating):
            dist = f"{int(ulp_distance(np.asarray(av), np.asarray(ev)))} ULP"
        else:
            dist = f"difference {int(av) - int(ev)}"
        body.append(f"    {c}: 0x{int(ab[c]):0{2 * width}x} ({float(av):.6g}) vs 0x{int(eb[c]):0{2 * width}x} "
                    f"({float(ev):.6g}), {dist}")
    body.append(f"  produced by: {spec.locate(case, inputs, coords[0], runner.arch, runner.sms)}")
    body.append(f"  rebuild: {_snippet(spec, case)}")
    body.append(f"  replay:  check_kernel(kernel, {spec.name!r}, arch={runner.arch!r}, sms={runner.sms}, "
                f"cases=[{ {'fmt': spec.name, **case}!r}])")
    return "\n".join(head + body)


def _save(path, spec, case, inputs, actual, expected):
    path = Path(path)
    if path.suffix != ".npz":
        path.mkdir(parents=True, exist_ok=True)
        tag = "-".join(str(case[f]) for f in (*spec.shape_fields, "kind", "seed"))
        path = path / f"{spec.name}-{tag}.npz"
    arrays = {f"input_{i}": x for i, x in enumerate(inputs)}
    np.savez(path, case=json.dumps({"fmt": spec.name, **case}), actual=actual, expected=expected, **arrays)
    return path


def _load_case(spec, item, i):
    if isinstance(item, (str, os.PathLike)):
        with np.load(item) as z:
            item = json.loads(str(z["case"]))
    if isinstance(item, dict) and item.get("fmt", spec.name) != spec.name:
        raise FormatRuleError(f"cases[{i}]: is a {item['fmt']!r} case; this check is for {spec.name!r}")
    return _full_case(spec, item, f"cases[{i}]")


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


def _source_kernel(target, entry, launch, arch):
    """``target`` itself when it is a callable; a ``.cu``/``.ptx`` path as a callable through refsim.ptx."""
    from pathlib import Path

    from refsim.errors import FormatRuleError

    if isinstance(target, (str, Path)):
        if entry is None or launch is None:
            raise FormatRuleError(f"kernel: a CUDA/PTX source ({str(target)!r}) needs kernel= (its .entry name) "
                                  f"and launch= (inputs -> refsim.cuda.LaunchPlan); got kernel={entry!r}, "
                                  f"launch={launch!r}")
        from refsim.cuda import user_kernel

        return user_kernel(target, kernel=entry, launch=launch, arch=arch)
    if entry is not None or launch is not None:
        raise FormatRuleError(f"kernel=/launch=: only for a CUDA/PTX source path; got a {type(target).__name__}")
    return target


def check_kernel(target, /, fmt: str = "marlin", *, kernel: str | None = None, launch=None,
                 arch: str = "sm_80", sms: int = 108,
                 max_examples: int | None = None, seed: int | None = None, shapes=None,
                 max_size: int | None = None, cases=None, save_failures=None, deadline: float | None = None,
                 shrink: bool = True, shrink_budget: float = 8.0, diagnose_budget: float = 20.0,
                 progress=True) -> CheckResult:
    """Check ``kernel`` bit for bit against refsim's emulator of ``fmt`` (see the module docstring).

    target: any callable taking the format's NumPy inputs (``FORMATS[fmt].signature``) and returning
    its output array, or the path of a CUDA source (``.cu``) or PTX file (``.ptx``): that file is
    compiled (nvcc from the ``cuda`` extra, cached), and its ``.entry`` named by ``kernel=`` runs
    through :mod:`refsim.ptx` on the CPU, launched as ``launch(*inputs)`` describes (a function
    returning a :class:`refsim.cuda.LaunchPlan`: grid, block, ``.param`` arguments, the output
    array; see :func:`refsim.cuda.user_kernel`). fmt: 'marlin', 'anyprec', 'atom', 'mixed_2_4_16', 'mma_m16n8k16',
    'mma_m16n8k16_f16', 'mma_s4'. arch: tensor-core model 'sm_70' .. 'sm_90'. sms: SM count = grid size (Marlin's
    partition depends on it). max_examples: drawn cases after the pinned ones (default 12 for
    Marlin, 20 otherwise; 0 runs only pinned/replayed cases). seed: int for the draws (default: a
    fresh one, printed in the report). shapes: list of dicts fixing the shape fields (e.g.
    ``[{'m': 1, 'k': 4096, 'n': 4096, 'group_size': 128}]``): pinned and drawn cases use only these.
    max_size: largest case in multiply-adds (default per format, docs/harness.md). cases: replay
    only these (dicts from a report's ``rebuild_case`` line, or ``.npz`` paths written by
    ``save_failures``). save_failures: a ``.npz`` path or a directory for the failing case's inputs,
    outputs and case. deadline: seconds one kernel call may take. shrink / shrink_budget: minimise
    a failing case, within that many seconds. diagnose_budget: seconds for probes and known bug
    classes. progress: True (one line per phase on stderr), False, or a callable.

    Returns a :class:`CheckResult` when every case matches; raises :class:`KernelMismatch`,
    :class:`KernelCallError` or :class:`KernelTimeout` otherwise, and a
    :class:`~refsim.errors.RefsimError` for bad arguments before any case runs.
    """
    t_start = time.perf_counter()
    spec = _spec(fmt)
    tc.model(arch)
    kernel = _source_kernel(target, kernel, launch, arch)
    sms = require_int("sms", sms, minimum=1)
    _validate_kernel(kernel, spec)
    max_examples = _DEFAULT_EXAMPLES.get(spec.name, 20) if max_examples is None else require_int(
        "max_examples", max_examples, minimum=0)
    seed = int.from_bytes(os.urandom(4), "little") >> 1 if seed is None else require_int("seed", seed, minimum=0)
    max_size = spec.default_max_size if max_size is None else require_int("max_size", max_size, minimum=1)
    deadline = _positive("deadline", deadline)
    shrink_budget = _positive("shrink_budget", shrink_budget) or 0.0
    diagnose_budget = _positive("diagnose_budget", diagnose_budget) or 0.0
    say = _progress(progress)
    if shapes is not None:
        if not isinstance(shapes, (list, tuple)) or not shapes:
            raise FormatRuleError(f"shapes: must be a non-empty list of dicts; got {shapes!r}")
        shapes = [_validate_case(spec, s, f"shapes[{i}]") for i, s in enumerate(shapes)]
        for i, s in enumerate(shapes):
            if set(s) != set(spec.shape_fields):
                raise FormatRuleError(f"shapes[{i}]: must give exactly the shape fields {list(spec.shape_fields)}; "
                                      f"got {s}")
    replay = None if cases is None else [_load_case(spec, c, i) for i, c in enumerate(cases)]
    if save_failures is not None and not isinstance(save_failures, (str, os.PathLike)):
        raise FormatRuleError(f"save_failures: must be a path; got {save_failures!r}")

    runner = _Runner(kernel, spec, arch, sms, deadline)
    rng = np.random.default_rng(seed)
    if replay is not None:
        plan = [(c, f"replayed case {i + 1} of {len(replay)}") for i, c in enumerate(replay)]
        pinned = []
    else:
        pinned = pinned_cases(spec.name, sms, max_size=max_size, shapes=shapes)
        plan = [({**c, "kind": spec.pinned_kind, "seed": int(rng.integers(2**31))}, f"pinned case {i + 1} of {len(pinned)}")
                for i, (c, _) in enumerate(pinned)]
        population = list(shapes) if shapes is not None else legal_shapes(spec.name, max_size)
        if not population:
            raise FormatRuleError(f"max_size: no legal {spec.name} shape has at most {max_size} multiply-adds")
        plan += [(_draw(spec, rng, population), f"drawn case {i + 1} of {max_examples}") for i in range(max_examples)]
    covered = set()
    for _, regs in pinned:
        covered |= set(regs)
    say(f"{spec.name} on {arch}, sms={sms}, seed={seed}: {len(pinned)} pinned + "
        f"{0 if replay is not None else max_examples} drawn cases{'' if replay is None else f', {len(replay)} replayed'}"
        f" (max_size {max_size} multiply-adds)")

    phase, phase_t0, phase_n = None, time.perf_counter(), 0
    for case, origin in plan:
        kind_of = origin.split()[0]
        if kind_of != phase:
            if phase is not None:
                say(f"{phase}: {phase_n} cases match ({time.perf_counter() - phase_t0:.1f} s)")
            phase, phase_t0, phase_n = kind_of, time.perf_counter(), 0
        inputs = spec.make(case)
        actual, expected, bad = runner.differs(case, inputs)
        phase_n += 1
        if not bad.any():
            continue
        say(f"{origin} differs: {int(bad.sum())} of {bad.size} outputs; case {case}")
        if shrink and replay is None and shrink_budget > 0:
            case = _shrink(runner, case, shrink_budget, say)
            inputs = spec.make(case)
            actual, expected, bad = runner.differs(case, inputs)
            origin += " (shrunk)"
        report = _report(runner, case, inputs, actual, expected, bad, origin, diagnose_budget, say)
        if save_failures is not None:
            saved = _save(save_failures, spec, case, inputs, actual, expected)
            report += f"\n  saved: {saved}"
        raise KernelMismatch(report, case)
    if phase is not None:
        say(f"{phase}: {phase_n} cases match ({time.perf_counter() - phase_t0:.1f} s)")
    if runner.admissible:
        own = sum(v.endswith("ascending order: yes") for v in runner.admissible)
        say(f"{len(runner.admissible)} set-valued cases (hardware-ordered float atomics), each in its admissible "
            f"set; equal to refsim's ascending order: {own} of {len(runner.admissible)}")
    seconds = time.perf_counter() - t_start
    n_drawn = sum(1 for _, o in plan if o.startswith("drawn"))
    return CheckResult(spec.name, arch, sms, seed, len(pinned), n_drawn, 0 if replay is None else len(replay),
                       tuple(sorted(covered)), seconds)
