"""The calibration CSV loader names file, line and column for every malformed input, and never
lets a foreign exception escape (truncated, random and adversarial files)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from refsim.errors import FormatRuleError
from refsim.gpu_model import calibrate
from refsim.testing import examples

HEADER = "gpu,kernel,n,k,bits,m,latency_us,source\n"
ROW = "rtx4070-laptop,anyprec,2048,2048,3,1,9.64,any-precision-llm table 9\n"


def _write(tmp_path, text, name="cal.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def test_the_committed_table_loads_without_the_shared_folder():
    assert calibrate.default_csv_path().parent.name == "timings"
    assert "shared" not in calibrate.default_csv_path().parts
    assert len(calibrate.load_rows()) == 142


def test_byte_order_mark_is_accepted(tmp_path):
    rows = calibrate.load_rows(_write(tmp_path, "\ufeff" + HEADER + ROW))
    assert [(r.n, r.k, r.bits, r.latency_us) for r in rows] == [(2048, 2048, 3, 9.64)]


@pytest.mark.parametrize("text,fragment", [
    (HEADER.replace(",bits", "") + ROW, "missing ['bits']"),
    (HEADER + ROW.replace(",9.64,", ",fast,"), ":2: column 'latency_us'"),
    (HEADER + ROW + ROW.replace("2048,2048", "2048,x"), ":3: column 'k'"),
    (HEADER + ROW.replace(",3,1,", ",0,1,"), ":2: column 'bits'"),
    (HEADER + ROW.replace(",9.64,", ",nan,"), ":2: column 'latency_us'"),
    (HEADER + ROW.rsplit(",", 1)[0] + "\n", ":2: row must have 8 cells; got 7"),
    (HEADER + ROW.replace("rtx4070-laptop", ""), ":2: column 'gpu'"),
    ("", "empty file"),
], ids=["missing-column", "bad-float", "bad-int-line-3", "zero-bits", "nan-latency", "short-row",
        "empty-cell", "empty-file"])
def test_malformed_file_names_file_line_and_column(tmp_path, text, fragment):
    path = _write(tmp_path, text)
    with pytest.raises(FormatRuleError) as info:
        calibrate.load_rows(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_missing_file_and_non_utf8_are_named_errors(tmp_path):
    with pytest.raises(FormatRuleError, match="readable file"):
        calibrate.load_rows(tmp_path / "absent.csv")
    with pytest.raises(FormatRuleError, match="UTF-8"):
        calibrate.load_rows(_write(tmp_path, HEADER.encode() + b"\xff\xfe\x00bad\n"))


@settings(max_examples=examples(60))
@given(st.binary(max_size=300), st.integers(0, len(HEADER + ROW)))
def test_truncated_and_random_files_give_rows_or_a_named_error(tmp_path_factory, junk, cut):
    tmp = tmp_path_factory.mktemp("csv")
    for data in ((HEADER + ROW).encode()[:cut], junk, HEADER.encode() + junk):
        path = tmp / "f.csv"
        path.write_bytes(data)
        try:
            rows = calibrate.load_rows(path)
        except FormatRuleError as err:
            assert str(path) in str(err)
        else:
            assert all(r.n >= 1 and r.latency_us > 0 for r in rows)


@pytest.mark.parametrize("junk, byte", [(b"\xff\xfe\x00bad\n", "0xff"), (b"h100,\x01\x02,1\n", "0x01")])
def test_a_binary_byte_is_refused_naming_the_file_and_its_line(tmp_path, junk, byte):
    path = _write(tmp_path, HEADER.encode() + ROW.encode() + junk)
    with pytest.raises(FormatRuleError, match=rf"cal.csv:3: must be .*text.*got byte {byte}"):
        calibrate.load_rows(path)
