"""refsim.testing.legal: the kernel's own shape rule, as a callable or in the declarative spelling."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.testing.legal import ShapeRule, shape_rule

FIELDS = ("m", "k", "n", "group_size")


def test_declarative_clauses_all_hold():
    rule = shape_rule("n%128==0, m<=64,k>=256", FIELDS)
    assert rule.text == "n%128==0, m<=64, k>=256"
    assert rule({"m": 64, "k": 256, "n": 384, "group_size": 128})
    assert not rule({"m": 65, "k": 256, "n": 384, "group_size": 128})       # m <= 64 fails
    assert not rule({"m": 1, "k": 128, "n": 384, "group_size": 128})        # k >= 256 fails
    assert not rule({"m": 1, "k": 256, "n": 320, "group_size": 128})        # 320 % 128 = 64


def test_none_satisfies_no_clause_but_not_equal():
    shape = {"m": 1, "k": 256, "n": 128, "group_size": None}               # Marlin's per-channel
    assert not shape_rule("group_size%128==0", FIELDS)(shape)
    assert not shape_rule("group_size==128", FIELDS)(shape)
    assert shape_rule("group_size!=128", FIELDS)(shape)
    assert shape_rule("m==1, n!=64", FIELDS)(shape)


def test_a_callable_gets_the_shape_fields_as_keywords_and_must_say_true_or_false():
    seen = []

    def only_big_n(m, k, n, group_size):
        seen.append((m, k, n, group_size))
        return n % 128 == 0

    rule = shape_rule(only_big_n, FIELDS)
    assert isinstance(rule, ShapeRule) and rule.text == "only_big_n"
    assert rule({"m": 2, "k": 64, "n": 256, "group_size": None}) and seen == [(2, 64, 256, None)]
    assert shape_rule(lambda **s: np.bool_(True), FIELDS)({"m": 1, "k": 1, "n": 1, "group_size": 1})
    with pytest.raises(FormatRuleError, match="must return True or False.*got 1"):
        shape_rule(lambda **s: 1, FIELDS)({"m": 1, "k": 1, "n": 1, "group_size": 1})
    assert shape_rule(None, FIELDS) is None and shape_rule(rule, FIELDS) is rule


@pytest.mark.parametrize("text, rule", [("n % 0 == 0", "multiple of 0"), ("n < 3", "each clause must read"),
                                        ("q%8==0", "names 'q', not one of the shape fields"),
                                        (" , ", "at least one clause"), ("n%8==1", "each clause must read")])
def test_bad_declarative_rules_are_named(text, rule):
    with pytest.raises(FormatRuleError, match=rule):
        shape_rule(text, FIELDS)


def test_other_types_are_refused():
    with pytest.raises(FormatRuleError, match="must be None, a callable .* got int"):
        shape_rule(128, FIELDS)
