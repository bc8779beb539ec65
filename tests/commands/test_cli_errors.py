"""CLI error contract: every bad argument is one line on stderr, exit status 2, no traceback;
``report --only <typo>`` and an unwritable ``--out`` are refused before any work."""

import pytest

from refsim.cli import main

BAD = [
    ("explain marlin --lanes 40", "0..31"),
    ("explain marlin --lanes x", "'x'"),
    ("explain marlin --lanes -1", "0..31"),
    ("qigen --k 64 --n 64 --bits 4 --mem-gbs 0", "--mem-gbs"),
    ("qigen --k 64 --n 64 --bits 4 --mem-gbs -3", "--mem-gbs"),
    ("qigen --k 64 --n 64 --bits 4 --mem-gbs nan", "--mem-gbs"),
    ("qigen --k 64 --n 64 --bits 4 --group-size 0", "--group-size"),
    ("qigen --k 0 --n 64 --bits 4", "--k"),
    ("predict --gpu a10 --kernel marlin --m -1 --n 256 --k 256", "--m"),
    ("predict --gpu a10 --kernel marlin --m x --n 256 --k 256", "'x'"),
    ("predict --gpu a10 --kernel marlin --m 3000000000 --n 4096 --k 4096", "int32"),
    ("predict --gpu a10 --kernel marlin --m 1 --n 1048576 --k 1048576", "N*K/32"),
    ("predict --gpu orin --kernel marlin --m 1 --n 4096 --k 4096 --ecc on", "ECC"),
    ("predict --gpu a10 --kernel marlin --m 1 --n 4096 --k 4096 --cache hot", "cache"),
    ("predict --gpu nosuch --kernel marlin --m 1 --n 256 --k 256", "nosuch"),
    ("report --only nosuch", "'nosuch'"),
    ("nosuchcommand", "invalid choice"),
]


@pytest.mark.parametrize("argv,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_argument_is_one_line_exit_2(argv, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(argv.split())
    except SystemExit as stop:  # argparse exits itself
        rc = stop.code
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert fragment in err


def test_only_typo_leaves_existing_report_untouched(tmp_path, capsys):
    report = tmp_path / "report.md"
    report.write_text("previous report\n")
    assert main(["report", "--only", "foundaton", "--out", str(tmp_path)]) == 2
    assert report.read_text() == "previous report\n"
    assert "foundation" in capsys.readouterr().err  # the message lists the valid names


def test_unwritable_out_is_refused_before_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["report", "--only", "foundation", "--out", str(blocker / "sub"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(blocker) in err
