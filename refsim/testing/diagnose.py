"""Shrinking a failing case and diagnosing it: what :func:`refsim.testing.check_kernel` prints.

shrink     one field at a time toward the front of its table and seed 0, most aggressive first,
           within a time budget; the data kind is kept (exact data would hide the pattern)
diagnose   in order: (1) a known bug class replayed on the emulator that gives the kernel's bits
           exactly on the case and on every probe; (2) the first probe that still differs, probes
           ordered from the narrowest part of the kernel outward; (3) a structure hint (outputs with
           one label value match, the others differ); (4) otherwise "how partial sums are combined"
report     the case, the diagnosis, the first differing elements in hex with ULP distances, the
           thread/register that wrote the first one, and the rebuild / replay lines
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from refsim.errors import RefsimError
from refsim.testing.bits import ulp_distance
from refsim.testing.runner import KernelCallError, raw_bits, snippet

__all__ = ["is_legal", "shrink", "concentration", "diagnose", "report", "save"]


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


def diagnose(runner, case, inputs, actual, expected, bad, budget, say) -> list[str]:
    """The report lines of the diagnosis (module docstring), within ``budget`` seconds."""
    spec = runner.spec
    t0 = time.perf_counter()
    lines = []
    labels = spec.structure(case, inputs, expected.shape, runner.sms)
    lines.append("  where:")
    lines += [f"    {x}" for x in concentration(labels, bad)]

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


def report(runner, case, inputs, actual, expected, bad, origin, diag_budget, say, summary=None) -> str:
    """The mismatch report of one case: what differs, the diagnosis, the first differing elements,
    where they come from, and the lines that rebuild and replay the case. ``summary``: lines that
    replace the default count of differing outputs (accuracy mode states its bound there)."""
    spec = runner.spec
    what = "differs from the refsim emulator" if summary is None else "leaves the error bound of its accumulation"
    head = [f"{spec.name} kernel {what} ({runner.arch}, sms={runner.sms}) on {origin}", f"  case: {case}"]
    if summary is not None:
        head += summary
    elif np.issubdtype(expected.dtype, np.floating):
        ul = ulp_distance(actual[bad], expected[bad])
        head.append(f"  {int(bad.sum())} of {bad.size} outputs differ (max {int(ul.max())} ULP, "
                    f"median {int(np.median(ul))} ULP)")
    else:
        head.append(f"  {int(bad.sum())} of {bad.size} outputs differ")
    body = diagnose(runner, case, inputs, actual, expected, bad, diag_budget, say) if bad.any() else []
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
    if coords:
        body.append(f"  produced by: {spec.locate(case, inputs, coords[0], runner.arch, runner.sms)}")
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


