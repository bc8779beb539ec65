"""The performance report section: tables, the pictures embedded in report.md, the notes on
surprising cells."""

import re
from types import SimpleNamespace

import pytest

from refsim.report.sections import performance


@pytest.mark.slow
def test_tables_and_every_embedded_picture_exist(tmp_path):
    md = performance.markdown(tmp_path)
    for gpu in ("a10", "rtx4090", "orin-agx-64gb"):
        assert f"### {gpu}: latency per block" in md and f"### {gpu}: speedup over cublas-fp16" in md
    assert "| marlin |" in md and "compute-bound from" in md
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(links) == ["predicted_vs_measured.png", "sweep_a10.png"]
    # the predicted-vs-measured caption: median and max per GPU with measured rows
    caption = md.split("Median / max |error| per GPU")[1].split("\n")[0]
    for gpu in ("h100-sxm", "a10", "rtx4090", "rtx4070-laptop"):
        assert re.search(rf"{gpu} \([^)]*\): \d+ rows, median \d+\.\d%, max \d+\.\d%", caption), gpu
    for gpu in ("rtx4090", "orin-agx-64gb"):        # the other GPUs' figures: one command away
        assert f"`refsim sweep --gpu {gpu} --kernel cublas-fp16," in md
    for name in links:
        assert (tmp_path / name).stat().st_size > 10_000
    assert "not importable" not in md


def test_marlin_tile_switch_on_a10_is_explained_by_a_numbered_note(tmp_path):
    md = performance.markdown(tmp_path)
    a10 = md.split("### a10: latency per block")[1].split("### a10: speedup")[0]
    row = next(line for line in a10.splitlines() if line.startswith("| marlin |"))
    mark = re.search(r"\[(\d+)\]", row)
    assert mark, row
    note = next(line for line in a10.splitlines() if line.startswith(f"[{mark.group(1)}] marlin:"))
    assert "tile 128x128 → tile 64x256" in note


def _bd(notes, bottleneck="dram"):
    return SimpleNamespace(notes=notes, bottleneck=bottleneck)


def test_footnote_names_a_latency_drop_and_a_path_switch_only():
    same = "tile 128x128, launches [(1, 1, 1)]"
    grown = "tile 128x128, launches [(1, 1, 2)]"      # a launch that grows with M is not a path switch
    assert performance._footnote((10e-6, _bd(same)), (11e-6, _bd(grown)), 1, 2) is None
    drop = performance._footnote((10e-6, _bd(same)), (9e-6, _bd(grown)), 4, 8)
    assert drop == "latency drops from b4 to b8 (10.0 → 9.0 µs)"
    switch = performance._footnote((10e-6, _bd("multi_row=1 ksplit=1 ctas/SM=12 (regs)")),
                                   (12e-6, _bd("M > 8: dequant kernel + cuBLAS FP16")), 8, 16)
    assert switch == ("from b8 to b16 the slowest layer switches path: multi_row=1 ksplit=1 (regs) → "
                      "dequant kernel + cuBLAS FP16 (dram-bound)")


def test_checks_pass():
    for check in performance.checks():
        assert check.run()


def test_layer_batches_equal_per_point_predict():
    # the tables read kernels.predict_many over the batches of one layer shape: each entry must be
    # predict(gpu, kernel, m, n, k) exactly, None where predict refuses
    from refsim.errors import RefsimError
    from refsim.gpu_model.kernels import kernel_names, predict
    for gpu in performance.GPUS:
        for kernel in kernel_names():
            for n, k in ((4096, 4096), (11008, 4096), (4096, 11008), (4224, 4096)):
                got = performance._layer(gpu, kernel, n, k)
                assert list(got) == list(performance.BATCHES)
                for m in performance.BATCHES:
                    try:
                        want = predict(gpu, kernel, m, n, k)
                    except RefsimError:
                        want = None
                    assert repr(got[m]) == repr(want) and got[m] == want
                    assert performance._predict(gpu, kernel, m, n, k) is got[m]
    assert performance._predict("a10", "marlin", 3000, 4096, 4096) == predict("a10", "marlin", 3000, 4096, 4096)
    assert performance._predict("a10", "marlin", 3000, 4224, 4096) is None


def test_every_prediction_in_the_tables_says_what_backs_it(tmp_path):
    md = performance.markdown(tmp_path)
    for gpu in ("a10", "rtx4090", "orin-agx-64gb"):
        part = md.split(f"What backs the {gpu} predictions")[1].split("###")[0]
        assert part.startswith(" (its constants that are estimates: ")
        said = [line for line in part.splitlines() if line.startswith("- ")]
        # one line per run of batches with the same statement: every answered batch of every kernel
        for kernel in ("cublas-fp16", "marlin", "anyprec", "atom-w4a4"):
            covered = set()
            for line in said:
                m = re.match(rf"- {kernel} b(\d+)(?:-b(\d+))?: (validated on |unvalidated: )", line)
                if m:
                    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
                    covered |= {b for b in performance.BATCHES if lo <= b <= hi}
            assert covered == set(performance.BATCHES), (gpu, kernel, covered)
    a10 = md.split("What backs the a10 predictions")[1].split("###")[0]
    assert "- marlin b1: validated on published.csv (a10, marlin 4-bit" in a10
    assert "- marlin b256: unvalidated: outside every validated regime" in a10
    # awq-w4a16 answers only M = 1 (refuses from M = 2): its cells say n/a, and only b1 is backed
    assert "- awq-w4a16 b1: validated on published.csv" in a10 and "- awq-w4a16 b2" not in a10
    row = next(line for line in md.split("### a10: latency per block")[1].splitlines()
               if line.startswith("| awq-w4a16 |"))
    assert row.count("n/a") == len(performance.BATCHES) - 1
