"""Tests for ``refsim explain`` (registry and the marlin target)."""

import re

from refsim.cli import main
from refsim.commands import explain


def test_marlin_target_lists_every_lane_element_consistent_with_ptx_fragments(capsys):
    assert main(["explain", "marlin", "--lanes", "all"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"nibble (\d) \(bits .*?\) -> W\[k=\s*(\d+), n=\s*(\d+)\]", out)
    assert len(rows) == 32 * 4 * 8
    assert len({(int(k), int(n)) for _, k, n in rows}) == 16 * 64  # each element exactly once
    assert "does not match" not in out


def test_lane_table_follows_fragment_rule_for_lane_5():
    # lane 5: g = 1, t = 1 -> rows 2, 3, 10, 11 and columns 1 / 9 (+16 j)
    rows = explain.marlin_lane_table(5)
    first_word = [(r["k"], r["n"]) for r in rows if r["word"] == 0]
    assert first_word == [(2, 1), (10, 1), (2, 9), (10, 9), (3, 1), (11, 1), (3, 9), (11, 9)]


def test_registry_accepts_new_targets():
    assert "marlin" in explain.TARGETS
    explain.register_target(explain.Target("dummy-test", "test", lambda p: None, lambda a: "hello"))
    try:
        assert main(["explain", "dummy-test"]) == 0
    finally:
        explain.TARGETS.pop("dummy-test")
