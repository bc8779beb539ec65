"""refsim.io.output: OUT checked before any work (absent or an empty folder; never a link, a file, a
non-empty folder or a missing parent), written through a temporary sibling that becomes OUT only when
the block completes, with the permissions a plain mkdir/open would give, and nothing left on failure."""

from __future__ import annotations

import os
import stat

import pytest

from refsim.errors import FormatRuleError
from refsim.io.output import atomic_output_dir, check_output_dir


def test_an_absent_path_or_an_empty_folder_is_accepted_and_nothing_is_created(tmp_path):
    assert check_output_dir(str(tmp_path / "new")) == tmp_path / "new"
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert check_output_dir(tmp_path / "empty") == tmp_path / "empty"


def test_links_files_full_folders_and_missing_parents_are_refused_by_rule(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    cases = [(tmp_path / "link", "not a symbolic link"), (tmp_path / "f", "must be a new or empty folder; got a file"),
             (tmp_path / "full", r"nothing is overwritten"),
             (tmp_path / "no" / "out", "parent folder must exist and be writable")]
    for out, rule in cases:
        with pytest.raises(FormatRuleError, match=rf"out: .*{rule}"):
            check_output_dir(out)
    assert (tmp_path / "full" / "keep").read_text() == "mine"


def test_an_absent_out_appears_only_when_the_block_completes_with_normal_permissions(tmp_path):
    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        with atomic_output_dir(out) as tmp:
            assert not out.exists()
            assert tmp.parent == tmp_path and tmp.name.startswith(".out.") and tmp.name.endswith(".tmp")
            (tmp / "a.txt").write_text("a")
            os.chmod(tmp / "a.txt", 0o600)                     # as the safetensors writer leaves it
    finally:
        os.umask(old)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (out / "a.txt").read_text() == "a"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755 and stat.S_IMODE((out / "a.txt").stat().st_mode) == 0o644


def test_an_existing_empty_out_is_kept_and_filled(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    inode = out.stat().st_ino
    with atomic_output_dir(out) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("b")
    assert out.stat().st_ino == inode and (out / "sub" / "b.txt").read_text() == "b"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failure_in_the_block_leaves_out_as_it_was(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="worker died"):
        with atomic_output_dir(out) as tmp:
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("worker died")
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_appears_in_out_while_the_job_runs_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FormatRuleError, match="nothing is overwritten"):
        with atomic_output_dir(out) as tmp:
            (tmp / "a.txt").write_text("refsim's")
            (out / "a.txt").write_text("someone else's")
    assert (out / "a.txt").read_text() == "someone else's"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
