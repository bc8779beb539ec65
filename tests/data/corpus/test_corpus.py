"""refsim.data.corpus: the built-in splits are distinct non-empty texts of blank-line separated pages;
a user's text file must be readable UTF-8 holding some text, and is returned unchanged."""

import pytest

from refsim.data import corpus
from refsim.errors import RefsimError


def test_the_two_splits_are_distinct_texts_of_several_pages():
    calib, held = corpus.text("calibration"), corpus.text("heldout")
    assert calib != held and len(calib) > len(held) > 0
    assert calib.count("\n\n") > held.count("\n\n") > 1
    assert corpus.text() == calib                       # calibration is the default


def test_an_unknown_split_is_refused():
    with pytest.raises(RefsimError, match="split"):
        corpus.text("train")


def test_read_text_returns_a_users_file_unchanged(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text("Größe\n\nzwei Seiten\n", encoding="utf-8")
    assert corpus.read_text(f) == "Größe\n\nzwei Seiten\n"


@pytest.mark.parametrize("content,rule", [(b" \n\t\n", "must hold some text"), (b"\xff\xfe\xfa", "readable UTF-8")])
def test_read_text_refuses_blank_and_undecodable_files(tmp_path, content, rule):
    f = tmp_path / "bad.txt"
    f.write_bytes(content)
    with pytest.raises(RefsimError, match=rule):
        corpus.read_text(f)


def test_read_text_refuses_a_missing_file(tmp_path):
    with pytest.raises(RefsimError):
        corpus.read_text(tmp_path / "absent.txt")
