"""refsim.testing.diagnose: shrinking, structure concentration, the diagnosis and the report, on a toy format.

The toy format "add" is y = a + b over float16 vectors of length m; its spec (a plain namespace with the
attributes check_kernel's formats have) gives one structure label (the element's parity), two probes (b
zeroed; a zeroed) and two known bug classes. Kernels that compute a + a, or add one ULP to odd elements,
are diagnosed and reported as worked out here by hand.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from refsim.errors import FormatRuleError
from refsim.testing.diagnose import (concentration, diagnose, is_legal, report, save, separating_fields, shrink,
                                      weights_exact, where_in_output)
from refsim.testing.runner import KernelCallError, Runner


def _legal(case):
    if case["m"] % 2:
        raise FormatRuleError(f"m: must be even; got {case['m']}")


def _make(case):
    rng = np.random.default_rng(case["seed"])
    m = case["m"]
    return (rng.integers(1, 64, m).astype(np.float16) / 8, rng.integers(1, 64, m).astype(np.float16) / 8)


def _probes(case, inputs):
    a, b = inputs
    return [SimpleNamespace(name="b zeroed (a alone)", family=None, meaning="a is read wrong",
                            inputs=(a, np.zeros_like(b))),
            SimpleNamespace(name="a zeroed (b alone)", family=None, meaning="b is read wrong",
                            inputs=(np.zeros_like(a), b))]


SPEC = SimpleNamespace(
    name="add", inputs=("a", "b"), shape_fields=("m",), fields={"m": [2, 4, 6, 8], "kind": ["random"], "seed": None},
    legal=_legal, cost=lambda case: case["m"], make=_make, emulate=lambda inputs, arch, sms: inputs[0] + inputs[1],
    structure=lambda case, inputs, shape, sms: {"parity": np.arange(shape[0]) % 2},
    probes=_probes, hints=[],
    known_bugs=lambda case, inputs, arch, sms: [
        ("operand swap", "b read as a", lambda inp: inp[0] + inp[0]),
        ("doubling", "the sum doubled", lambda inp: (inp[0] + inp[1]) * 2)],
    locate=lambda case, inputs, coord, arch, sms: f"thread {coord[0]}",
)
CASE = {"m": 4, "kind": "random", "seed": 3}


def _diagnosis(kernel, case=CASE):
    runner = Runner(kernel, SPEC, "sm_80", 2, None)
    inputs = SPEC.make(case)
    actual, expected, bad = runner.differs(case, inputs)
    return runner, inputs, actual, expected, bad


def test_is_legal_is_the_specs_rule_as_a_bool():
    assert is_legal(SPEC, {"m": 4}) and not is_legal(SPEC, {"m": 3})


def test_concentration_names_the_label_values_the_mismatches_are_confined_to():
    labels = {"parity": np.array([0, 1, 0, 1]), "row": np.array([0, 1, 2, 3]), "one": np.zeros(4, int)}
    assert concentration(labels, np.array([False, True, False, True])) == [
        "parity: only 1 (1 of 2 values; 1 never differ)", "row: only 1, 3 (2 of 4 values; 2 never differ)"]
    assert concentration(labels, np.ones(4, bool)) == ["spread over every value of: parity, row, one"]


def test_shrink_walks_to_the_simplest_failing_case_and_skips_candidates_whose_call_fails():
    said = []

    def fails(case, inputs):
        if case["m"] == 2:
            raise KernelCallError("the kernel refuses m = 2")
        return case["m"] >= 4

    got = shrink(SPEC, {"m": 8, "kind": "random", "seed": 5}, fails, 10.0, said.append)
    # m: 8 -> 2 (call fails, skipped) -> 4; seed 5 -> 0
    assert got == {"m": 4, "kind": "random", "seed": 0}
    assert said[0].startswith("shrink: 2 steps in ") and said[0].endswith(": {'m': 4, 'kind': 'random', 'seed': 0}")


def test_a_kernel_equal_to_a_known_bug_on_the_case_and_every_probe_is_named():
    runner, inputs, actual, expected, bad = _diagnosis(lambda a, b: a + a)
    lines = diagnose(runner, CASE, inputs, actual, expected, bad, 10.0, lambda s: None)
    assert lines[-1] == "  verdict: operand swap: the kernel's output equals refsim's emulation with b read as a, bit for bit"
    # probe "b zeroed": a + a vs a (every output differs); probe "a zeroed": 0 + 0 vs b (every output differs)
    assert "    b zeroed (a alone): 4" in lines and "    a zeroed (b alone): 4" in lines


def test_a_bug_that_matches_the_case_but_not_a_probe_is_refuted():
    # the kernel doubles the sum only where a == b; on this case a == b everywhere, so it looks like
    # "the sum doubled" (2 * 3 = 6), but on probe "b zeroed" it gives a where that bug gives 2a
    case_inputs = (np.full(4, 1.5, np.float16), np.full(4, 1.5, np.float16))
    runner = Runner(lambda a, b: np.where(a == b, (a + b) * 2, a + b).astype(np.float16), SPEC, "sm_80", 2, None)
    actual, expected, bad = runner.differs(CASE, case_inputs)
    assert actual.tolist() == [6.0] * 4 and bad.all()
    lines = diagnose(runner, CASE, case_inputs, actual, expected, bad, 10.0, lambda s: None)
    assert "  refuted: the sum doubled (matches the case, not the probe 'b zeroed')" in lines
    assert "    b zeroed (a alone): 0" in lines and "    a zeroed (b alone): 0" in lines
    assert lines[-1].startswith("  verdict: every probe matches, only the full case differs: how partial sums")


def test_the_first_differing_probe_names_the_part_read_wrong():
    # one ULP too much on odd elements where b != 0: probe "a zeroed" still differs, "b zeroed" does not
    def kernel(a, b):
        y = a + b
        odd = (np.arange(y.size) % 2 == 1) & (b != 0)
        return np.where(odd, np.nextafter(y, np.float16(np.inf)), y).astype(np.float16)

    runner, inputs, actual, expected, bad = _diagnosis(kernel)
    lines = diagnose(runner, CASE, inputs, actual, expected, bad, 10.0, lambda s: None)
    assert lines[:2] == ["  where:", "    parity: only 1 (1 of 2 values; 1 never differ)"]
    assert "    b zeroed (a alone): 0" in lines and "    a zeroed (b alone): 2" in lines
    assert lines[-1] == "  verdict: b is read wrong (it already differs with a zeroed)"
    assert any(x.startswith("  size: ") and x.endswith("rounding-sized (order or precision of the arithmetic)")
               for x in lines)


def test_report_gives_the_case_the_count_the_first_elements_in_hex_and_the_replay_lines():
    runner, inputs, actual, expected, bad = _diagnosis(lambda a, b: np.zeros_like(a))
    text = report(runner, CASE, inputs, actual, expected, bad, "drawn case 1", 10.0, lambda s: None).splitlines()
    assert text[0] == "add kernel differs from the refsim emulator (sm_80, sms=2) on drawn case 1"
    assert text[1] == "  case: {'m': 4, 'kind': 'random', 'seed': 3}"
    assert text[2].startswith("  4 of 4 outputs differ (max ")
    first = text.index("  first differing elements (kernel vs emulator):")
    e0 = float(expected[0])
    bits = int(expected[:1].view(np.uint16)[0])
    assert text[first + 1].startswith(f"    (0,): 0x0000 (0) vs 0x{bits:04x} ({e0:.6g}), ")
    # both probes differ and no bug class replays the kernel: the report is about the kernel itself,
    # without the emulator's dataflow (no "produced by: thread ...")
    assert not any(x.startswith("  produced by:") for x in text)
    assert any(x.startswith("  about your kernel (no known bug class reproduces its bits") for x in text)
    assert text[-2] == "  rebuild: refsim.testing.rebuild_case({'fmt': 'add', 'm': 4, 'kind': 'random', 'seed': 3})"
    assert text[-1] == ("  replay:  check_kernel(kernel, 'add', arch='sm_80', sms=2, cases=[{'fmt': 'add', 'm': 4, "
                        "'kind': 'random', 'seed': 3}])")
    assert any("wrong values (weights, scales, layout), not rounding" in x for x in text)


def test_save_writes_the_case_inputs_and_both_outputs(tmp_path):
    inputs = SPEC.make(CASE)
    actual = np.zeros(4, np.float16)
    path = save(tmp_path / "fails", SPEC, CASE, inputs, actual, inputs[0] + inputs[1])
    assert path == tmp_path / "fails" / "add-4-random-3.npz"
    with np.load(path) as z:
        assert json.loads(str(z["case"])) == {"fmt": "add", **CASE}
        assert np.array_equal(z["input_1"], inputs[1]) and np.array_equal(z["actual"], actual)
    assert save(tmp_path / "one.npz", SPEC, CASE, inputs, actual, actual) == tmp_path / "one.npz"


def test_shrink_never_proposes_an_illegal_case():
    tried = []
    shrink(SPEC, {"m": 8, "kind": "random", "seed": 0}, lambda c, i: tried.append(c["m"]) or False, 10.0,
           lambda s: None)
    # m in [2, 4, 6, 8]; odd sizes are illegal and none is in the table to propose
    assert tried == [2, 4, 6]
    spec = SimpleNamespace(**{**vars(SPEC), "fields": {"m": [1, 2, 3, 4], "kind": ["random"], "seed": None}})
    tried.clear()
    shrink(spec, {"m": 4, "kind": "random", "seed": 0}, lambda c, i: tried.append(c["m"]) or False, 10.0,
           lambda s: None)
    assert tried == [2]


def test_a_kernel_that_equals_the_emulator_on_the_narrowest_probe_is_located_in_refsims_design():
    def kernel(a, b):                              # one ULP too much on odd elements where b != 0
        y = a + b
        odd = (np.arange(y.size) % 2 == 1) & (b != 0)
        return np.where(odd, np.nextafter(y, np.float16(np.inf)), y).astype(np.float16)

    runner, inputs, actual, expected, bad = _diagnosis(kernel)
    text = report(runner, CASE, inputs, actual, expected, bad, "drawn case 1", 10.0, lambda s: None).splitlines()
    assert "  produced by: thread 1" in text
    assert not any("about your kernel" in x for x in text)


def test_where_in_output_names_rows_columns_and_a_column_period():
    f = np.zeros((4, 16), bool)
    f[0, 1::4] = f[2, 1::4] = True
    assert where_in_output(f) == ["rows: only 0, 2 of 4", "columns: 4 of 16 (1, 5, 9, 13)",
                                  "failing columns keep to column mod 2 in {1}"]
    assert where_in_output(np.ones(6, bool)) == ["rows: every one of the 1", "columns: every one of the 6"]


def test_separating_fields_runs_one_field_at_a_time_and_names_the_one_that_decides():
    spec = SimpleNamespace(**{**vars(SPEC), "shape_fields": ("m", "flag"),
                              "fields": {"m": [2, 4, 6, 8], "flag": [False, True], "kind": ["random"], "seed": None}})
    tried = []

    def fails(case, inputs):                       # fails only with flag=True, whatever m is
        tried.append((case["m"], case["flag"]))
        return case["flag"]

    lines, fields = separating_fields(spec, {"m": 4, "flag": True, "kind": "random", "seed": 0}, fails, 10.0)
    assert fields == {"flag": ([True], [False])}
    assert lines == ["flag: fails with True; passes with False"]
    # m varied to its legal values no costlier than twice the case (2, 6, 8), flag to False; never both at once
    assert sorted(tried) == [(2, True), (4, False), (6, True), (8, True)]
    lines, fields = separating_fields(spec, {"m": 4, "flag": True, "kind": "random", "seed": 0},
                                      lambda c, i: True, 10.0)
    assert fields == {} and lines[0].startswith("no single field separates: every variant tried fails")


def test_weights_exact_needs_a_linear_form():
    runner, inputs, actual, expected, bad = _diagnosis(lambda a, b: np.zeros_like(a))
    assert weights_exact(SPEC, CASE, inputs, actual) == (None, "")
