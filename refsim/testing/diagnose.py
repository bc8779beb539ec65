"""Shrinking a failing case and diagnosing it: what :func:`refsim.testing.check_kernel` prints.

shrink     one field at a time toward the front of its table and seed 0, most aggressive first,
           within a time budget; the data kind is kept (exact data would hide the pattern)
diagnose   in order: (1) a known bug class replayed on the emulator that gives the kernel's bits
           exactly on the case and on every probe; (2) the first probe that still differs, probes
           ordered from the narrowest part of the kernel outward; (3) a structure hint (outputs with
           one label value match, the others differ); (4) otherwise "how partial sums are combined".
           Steps (2)-(4) speak refsim's dataflow (slabs, chains, k-warps): they are used only when
           the kernel follows refsim's design, i.e. a bug replay explains it or (bit-exact mode) it
           equals the emulator on the narrowest probe. Otherwise, and always in accuracy mode, the
           report is about the user's kernel (:func:`about_kernel`): which case fields separate
           passing from failing cases, where in the output and in K the failures sit, and whether
           the weights the kernel must have used are exact
report     the case, the diagnosis, the first differing elements in hex with ULP distances, the
           thread/register that wrote the first one (refsim's design only), and the rebuild / replay lines
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from refsim.errors import RefsimError
from refsim.testing.accuracy import Accumulation, judge
from refsim.testing.bits import ulp_distance
from refsim.testing.runner import KernelCallError, raw_bits, snippet

__all__ = ["is_legal", "shrink", "concentration", "diagnose", "report", "save"]

_MAX_VARIANTS = 3            # values tried per field when separating passing from failing cases
_K_PARTS = 4                 # K-slices tried one at a time


def is_legal(spec, case: dict) -> bool:
    """True when ``case`` obeys the format's kernel rules."""
    try:
        spec.legal(case)
    except RefsimError:
        return False
    return True


def _simpler(spec, case: dict, max_size: int):
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
            if is_legal(spec, cand) and spec.cost(cand) <= max_size:
                yield cand


def shrink(spec, case: dict, fails, budget: float, say) -> dict:
    """The simplest case reached from ``case`` (walking :func:`_simpler`) on which ``fails(case,
    inputs)`` still holds, within ``budget`` seconds; a candidate whose kernel call fails is skipped."""
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
                failing = fails(cand, spec.make(cand))
            except KernelCallError:
                continue
            if failing:
                case, steps, improved = cand, steps + 1, True
                break
    left = "" if time.perf_counter() - t0 < budget else " (budget reached)"
    say(f"shrink: {steps} steps in {tries} tries, {time.perf_counter() - t0:.1f} s{left}: {case}")
    return case


def concentration(labels: dict, bad: np.ndarray) -> list[str]:
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


def where_in_output(failing: np.ndarray) -> list[str]:
    """Lines saying which rows and columns of a (M, N) or (N,) output hold the failing outputs
    (``failing`` a bool mask), with the smallest column period p (2 .. 128, at most N / 4) that
    their columns keep to, when at least two failing columns fall on each residue they take."""
    f = np.asarray(failing, bool)
    f = f.reshape(1, -1) if f.ndim == 1 else f.reshape(f.shape[0], -1)
    m, n = f.shape
    rows, cols = np.flatnonzero(f.any(axis=1)), np.flatnonzero(f.any(axis=0))
    show = lambda v: ", ".join(str(int(i)) for i in v[:8]) + (" ..." if len(v) > 8 else "")   # noqa: E731
    every_row, every_col = len(rows) == m, len(cols) == n
    lines = [f"rows: {f'every one of the {m}' if every_row else f'only {show(rows)} of {m}'}",
             f"columns: {f'every one of the {n}' if every_col else f'{len(cols)} of {n} ({show(cols)})'}"]
    for p in (2, 4, 8, 16, 32, 64, 128):
        hit = np.unique(cols % p)
        if n >= 4 * p and len(cols) >= 2 * len(hit) > 0:          # enough columns for a period to mean something
            if len(hit) < p:
                lines.append(f"failing columns keep to column mod {p} in {{{show(hit)}}}")
                break
    return lines


def separating_fields(spec, case: dict, fails, budget: float) -> tuple[list[str], dict]:
    """Cases that differ from ``case`` in one field (its shape fields and data kind, fields with
    the fewest values first, up to ``_MAX_VARIANTS`` legal values each, no costlier than twice the
    case), run within ``budget``
    seconds: ``(lines, {field: (failing values, passing values)})`` for the fields whose values
    separate failing from passing cases."""
    t0 = time.perf_counter()
    tried, out = [], {}
    names = sorted(tuple(spec.shape_fields) + ("kind",), key=lambda f: len(spec.fields.get(f) or ()))
    for name in names:                                # fields with the fewest values (flags) first
        allowed = spec.fields.get(name) or ()
        if case.get(name) not in allowed:
            continue
        here = allowed.index(case[name])
        order = sorted((i for i in range(len(allowed)) if i != here), key=lambda i: abs(i - here))
        results = {case[name]: True}
        for i in order[:_MAX_VARIANTS]:
            cand = {**case, name: allowed[i]}
            if time.perf_counter() - t0 > budget:
                break
            if not is_legal(spec, cand) or spec.cost(cand) > 2 * spec.cost(case):
                continue
            try:
                results[allowed[i]] = bool(fails(cand, spec.make(cand)))
            except KernelCallError:
                continue
        tried.append(name)
        bad = [v for v, f in results.items() if f]
        good = [v for v, f in results.items() if not f]
        if good:
            out[name] = (bad, good)
    lines = [f"{name}: fails with {', '.join(map(str, bad))}; passes with {', '.join(map(str, good))}"
             for name, (bad, good) in out.items()]
    if not lines:
        lines = [f"no single field separates: every variant tried fails (fields varied: {', '.join(tried) or 'none'}"
                 + ("; budget reached" if time.perf_counter() - t0 > budget else "") + ")"]
    return lines, out


def k_slices(case: dict, inputs: tuple, fails, budget: float) -> list[str]:
    """Lines saying which of ``_K_PARTS`` K-slices alone (activations zero elsewhere) still fail,
    for formats whose first input is float16 activations with K last; [] otherwise."""
    x, k = inputs[0], case.get("k")
    if not isinstance(k, int) or x.dtype != np.float16 or x.shape[-1] != k or k % _K_PARTS:
        return []
    t0 = time.perf_counter()
    verdicts = []
    for p in range(_K_PARTS):
        if time.perf_counter() - t0 > budget:
            return verdicts and [f"K-slices: budget reached after {len(verdicts)} of {_K_PARTS}"]
        lo, hi = p * k // _K_PARTS, (p + 1) * k // _K_PARTS
        xp = np.zeros_like(x)
        xp[..., lo:hi] = x[..., lo:hi]
        try:
            verdicts.append((lo, hi, bool(fails(case, (xp,) + tuple(inputs[1:])))))
        except KernelCallError:
            verdicts.append((lo, hi, None))
    said = {True: "fails", False: "passes", None: "the kernel call fails"}
    line = "K-slices alone (activations zero elsewhere): " + "; ".join(f"k {lo}..{hi - 1} {said[v]}"
                                                                       for lo, hi, v in verdicts)
    if all(v is False for _, _, v in verdicts):
        line += " (every slice passes alone: the failure needs several slices together, i.e. how the kernel " \
                "combines partial sums across K)"
    return [line]


def weights_exact(spec, case: dict, inputs: tuple, actual: np.ndarray):
    """``(exact, line)``: whether every finite output lies within the bound of an fp16 pairwise-tree
    accumulation around the exact product of the dequantized weights (``spec.linear``): then the
    weights the kernel used are right and the difference is in its accumulation. ``(None, '')``
    for a format without a linear form."""
    try:
        lin = spec.linear(case, inputs)
    except (NotImplementedError, AttributeError):
        return None, ""
    acc = Accumulation("fp16", "pairwise")
    j = judge(acc, lin, np.asarray(actual).astype(np.float16).reshape(-1) if np.asarray(actual).ndim == 1
              else np.asarray(actual).astype(np.float16))
    n_out = int(j.outside.sum())
    if not n_out:
        return True, (f"weights: every output lies within the bound of {acc.describe(lin.terms)} around the exact "
                      f"product of the dequantized weights: the weights the kernel used are right")
    return False, (f"weights: {n_out} of {j.outside.size} outputs lie beyond any accumulation as precise as {acc} of "
                   f"the right weights (largest error {j.ratio:.3g} of that bound): the weights, scales, zero points, "
                   f"group map or layout the kernel reads differ")


def about_kernel(spec, case, inputs, actual, failing, fails, budget: float) -> tuple[list[str], str]:
    """``(lines, verdict)`` about the user's kernel, in terms of the case data only: where the
    failing outputs sit, which K-slices and which case fields separate failing from passing, and
    whether the weights it must have used are exact (module docstring). ``fails(case, inputs)``
    (None: no extra cases run) says whether a case fails; ``budget`` seconds for those runs."""
    lines = [f"    {x}" for x in where_in_output(failing)]
    fields = {}
    if fails is not None and budget > 0:
        t0 = time.perf_counter()
        lines += [f"    {x}" for x in k_slices(case, inputs, fails, budget / 3)]
        more, fields = separating_fields(spec, case, fails, budget - (time.perf_counter() - t0))
        lines += ["    fields (one changed at a time): " + more[0]] + [f"      {x}" for x in more[1:]]
    exact, wline = weights_exact(spec, case, inputs, actual)
    if wline:
        lines.append(f"    {wline}")
    if fields:
        name, (bad, good) = next(iter(fields.items()))
        verdict = (f"only cases with {name} = {', '.join(map(str, bad))} fail ({name} = "
                   f"{', '.join(map(str, good))} pass)")
        verdict += ("; the weights are right there: the difference is in the accumulation" if exact else
                    f"; the outputs are wrong beyond rounding: how the kernel handles {name}" if exact is False else "")
    elif exact:
        verdict = "the weights are right; the difference is in the accumulation (its precision or its order)"
    elif exact is False:
        verdict = "the outputs are wrong beyond any accumulation of the right weights: the weights the kernel reads"
    else:
        verdict = "the kernel does not follow refsim's design; see where above"
    return lines, verdict


def diagnose(runner, case, inputs, actual, expected, bad, budget, say, *, failing=None, fails=None,
             vary_budget: float = 0.0, accuracy: bool = False) -> list[str]:
    """The report lines of the diagnosis (module docstring), within ``budget`` seconds (probes and
    bug classes) and ``vary_budget`` seconds (extra cases about the user's kernel). ``bad``: outputs
    whose bits differ from the emulator; ``failing``: the outputs that fail the check (default
    ``bad``); ``fails(case, inputs)``: whether a case fails (None: no extra cases);
    ``accuracy``: the check is accuracy mode (the report is then always about the user's kernel)."""
    spec = runner.spec
    t0 = time.perf_counter()
    failing = bad if failing is None else failing
    lines = []

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
        if not np.array_equal(raw_bits(alt(inputs)), raw_bits(actual)):
            continue
        # a replay that matches on the case must also match every probe (a small case can make two
        # bugs write the same bits; the probes are built to tell them apart)
        against = next((p.name.split(" (")[0] for p, n, pout in probe_rows
                        if pout is not None and not np.array_equal(raw_bits(alt(p.inputs)), raw_bits(pout))), None)
        if against is None:
            explained = f"{bug_class}: the kernel's output equals refsim's emulation with {desc}, bit for bit"
            break
        refuted.append(f"{desc} (matches the case, not the probe '{against}')")
    for r in refuted[:3]:
        lines.append(f"  refuted: {r}")
    follows = explained is not None or (not accuracy and bad.any() and (not probe_rows or probe_rows[0][1] == 0))
    user = []
    if not follows:
        why = ("accuracy mode" if accuracy else "no known bug class reproduces its bits and it differs from refsim's "
               "emulator already on the narrowest probe")
        more, user_verdict = about_kernel(spec, case, inputs, actual, failing, fails, vary_budget)
        user = [f"  about your kernel ({why}; refsim's dataflow is not assumed):"] + more
        user += _size(expected, actual, bad if bad.any() else failing)
        user.append(f"  verdict: {user_verdict}")
        if accuracy:
            say(f"diagnose: {time.perf_counter() - t0:.1f} s")
            return lines + user
    labels = spec.structure(case, inputs, expected.shape, runner.sms)
    lines.append("  where:")
    lines += [f"    {x}" for x in concentration(labels, bad)]

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
    lines += _size(expected, actual, bad)
    final = explained or verdict or "no known bug class matched; see where and probes above"
    if user:
        # bit-exact mode, a kernel refsim's design does not explain: its own reading first, then refsim's
        # dataflow reading, marked as what it is
        design = [x for x in lines if not x.startswith("  refuted:")]
        lines = [x for x in lines if x.startswith("  refuted:")] + user + [
            "  if your kernel follows refsim's design (not confirmed: no bug class replays it):"] + [
            f"  {x}" for x in design if not x.startswith("  size:")] + [f"    reading: {final}"]
    else:
        lines.append(f"  verdict: {final}")
    say(f"diagnose: {time.perf_counter() - t0:.1f} s")
    return lines


def _size(expected, actual, bad) -> list[str]:
    """The size line: the largest difference from the emulator against the largest output."""
    if not np.issubdtype(expected.dtype, np.floating):
        return []
    e = expected.astype(np.float64)
    scale = float(np.max(np.abs(e[np.isfinite(e)]), initial=0.0))
    with np.errstate(invalid="ignore"):
        err = float(np.max(np.abs(actual.astype(np.float64)[bad] - e[bad]), initial=0.0))
    if scale > 0 and err > scale * 2.0**-6:
        return [f"  size: max |difference| {err:.3g} vs max |output| {scale:.3g}: wrong values "
                "(weights, scales, layout), not rounding"]
    return [f"  size: max |difference| {err:.3g} vs max |output| {scale:.3g}: rounding-sized "
            "(order or precision of the arithmetic)"]


def report(runner, case, inputs, actual, expected, bad, origin, diag_budget, say, summary=None, *, failing=None,
           fails=None, vary_budget: float = 0.0, accuracy: bool = False, what: str | None = None,
           rebuild: str | None = None) -> str:
    """The mismatch report of one case: what differs, the diagnosis, the first differing elements,
    where they come from, and the lines that rebuild and replay the case. ``summary``: lines that
    replace the default count of differing outputs (accuracy mode states its bound there);
    ``failing``, ``fails``, ``vary_budget``, ``accuracy``: as :func:`diagnose`; ``what``: the
    headline's verb phrase; ``rebuild``: the expression that rebuilds inputs no case dict can (an
    adversarial case), replacing the rebuild and replay lines."""
    spec = runner.spec
    what = what or ("differs from the refsim emulator" if summary is None else
                    "leaves the error bound of its accumulation")
    head = [f"{spec.name} kernel {what} ({runner.arch}, sms={runner.sms}) on {origin}", f"  case: {case}"]
    if summary is not None:
        head += summary
    elif np.issubdtype(expected.dtype, np.floating):
        ul = ulp_distance(actual[bad], expected[bad])
        head.append(f"  {int(bad.sum())} of {bad.size} outputs differ (max {int(ul.max())} ULP, "
                    f"median {int(np.median(ul))} ULP)")
    else:
        head.append(f"  {int(bad.sum())} of {bad.size} outputs differ")
    failing = bad if failing is None else failing
    body = diagnose(runner, case, inputs, actual, expected, bad, diag_budget, say, failing=failing, fails=fails,
                    vary_budget=vary_budget, accuracy=accuracy) if bad.any() else []
    width = expected.dtype.itemsize
    ab, eb = raw_bits(actual), raw_bits(expected)
    coords = [tuple(int(i) for i in c) for c in np.argwhere(bad)[:5]]
    if coords:
        body.append("  first differing elements (kernel vs emulator):")
    for c in coords:
        av, ev = actual[c], expected[c]
        if np.issubdtype(expected.dtype, np.floating):
            dist = f"{int(ulp_distance(np.asarray(av), np.asarray(ev)))} ULP"
        else:
            dist = f"difference {int(av) - int(ev)}"
        body.append(f"    {c}: 0x{int(ab[c]):0{2 * width}x} ({float(av):.6g}) vs 0x{int(eb[c]):0{2 * width}x} "
                    f"({float(ev):.6g}), {dist}")
    design = not any(x.startswith("  about your kernel") for x in body)
    if coords and (design or not accuracy):
        where = "  produced by: " if design else "  in refsim's design, produced by: "
        body.append(f"{where}{spec.locate(case, inputs, coords[0], runner.arch, runner.sms)}")
    if rebuild is not None:
        body.append(f"  rebuild: {rebuild}")
        return "\n".join(head + body)
    body.append(f"  rebuild: {snippet(spec, case)}")
    body.append(f"  replay:  check_kernel(kernel, {spec.name!r}, arch={runner.arch!r}, sms={runner.sms}, "
                f"cases=[{ {'fmt': spec.name, **case}!r}])")
    return "\n".join(head + body)


def save(path, spec, case: dict, inputs: tuple, actual: np.ndarray, expected: np.ndarray) -> Path:
    """Write a failing case to ``path`` (a ``.npz`` file, or a directory that gets one named after
    the case): the case dict (JSON), the inputs, the kernel's and the emulator's outputs."""
    path = Path(path)
    if path.suffix != ".npz":
        path.mkdir(parents=True, exist_ok=True)
        tag = "-".join(str(case[f]) for f in (*spec.shape_fields, "kind", "seed"))
        path = path / f"{spec.name}-{tag}.npz"
    arrays = {f"input_{i}": x for i, x in enumerate(inputs)}
    np.savez(path, case=json.dumps({"fmt": spec.name, **case}), actual=actual, expected=expected, **arrays)
    return path


