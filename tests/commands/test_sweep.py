"""``refsim sweep`` end to end: the CSV and one PNG per GPU written into a new folder, shapes given as
pairs or a model's, and every refusal one line on stderr with exit 2 before anything is written
(the sweep itself is tested in tests/gpu_model/test_sweep.py)."""

import csv

import pytest

from refsim.cli import main


def test_cli_writes_csv_and_png(tmp_path, capsys):
    out = tmp_path / "sw"
    assert main(["sweep", "--gpu", "A10", "--kernel", "marlin,cublas-fp16", "--m", "1..64", "--n", "4096",
                 "--k", "4096", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv", "sweep_a10.png"]
    assert "14 points (14 predicted" in capsys.readouterr().out


def test_cli_shapes_and_model(tmp_path, capsys):
    out = tmp_path / "sw"
    assert main(["sweep", "--gpu", "a10", "--kernel", "cublas-fp16", "--m", "1", "--shape", "4096:4096", "--shape",
                 "11008:4096", "--out", str(out), "--no-plot"]) == 0
    assert "2 points" in capsys.readouterr().out
    out2 = tmp_path / "sw2"
    assert main(["sweep", "--gpu", "a10", "--kernel", "cublas-fp16", "--m", "1", "--model", "llama-2-7b", "--out",
                 str(out2), "--no-plot"]) == 0
    assert "3 points" in capsys.readouterr().out              # llama-2-7b: 3 distinct (n, k)
    with (out2 / "sweep.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert [(r["n"], r["k"], r["layer"]) for r in table] == [
        ("4096", "4096", "q_proj/k_proj/v_proj/o_proj"), ("11008", "4096", "gate_proj/up_proj"),
        ("4096", "11008", "down_proj")]


@pytest.mark.parametrize("argv,fragment", [
    (["--m", "0..4"], "m: values and steps must lie in"),
    (["--m", "x"], "m: each item must be"),
    (["--gpu", "nope"], "nope"),
    (["--kernel", "nope"], "kernel: must be one of"),
    (["--clock", "5GHz"], "a10 runs its SMs between"),
    (["--shape", "4096:4096"], "give exactly one of"),
])
def test_cli_errors_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, argv, fragment):
    base = {"--gpu": "a10", "--kernel": "marlin", "--m": "1", "--n": "4096", "--k": "4096"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    out = tmp_path / "sw"
    rc = main(["sweep", *[x for kv in base.items() for x in kv], "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and fragment in err
    assert not out.exists()


def test_cli_refuses_a_non_empty_out_folder_before_any_work(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    rc = main(["sweep", "--gpu", "a10", "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096",
               "--out", str(tmp_path)])
    assert rc == 2 and "new or empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
