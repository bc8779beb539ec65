"""The kernel's own legal shapes: a rule :func:`refsim.testing.check_kernel` draws and pins cases by.

A kernel may accept fewer shapes than its format (vLLM's AWQ GEMM needs N % 128 == 0; a kernel
specialised for M <= 64). The user states the rule; pinned and drawn cases respect it, the pinned
cases it skips are counted, and a rule no case satisfies is refused by name.

Two spellings of one rule:

    callable       legal(**shape) -> bool, called with the format's shape fields as keywords
                   (e.g. ``lambda m, k, n, group_size, **_: n % 128 == 0``)
    declarative    "n%128==0, m<=64": comma-separated clauses FIELD%INT==0 (a multiple of),
                   FIELD<=INT, FIELD>=INT, FIELD==INT or FIELD!=INT over the shape fields; every
                   clause must hold (the spelling of ``refsim check --legal``)

A shape field that is None (e.g. Marlin's per-channel ``group_size``) satisfies no clause but ``!=``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from refsim.errors import FormatRuleError

__all__ = ["ShapeRule", "shape_rule"]

_CLAUSE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:%\s*(\d+)\s*==\s*0|(<=|>=|==|!=)\s*(-?\d+))\s*$")


@dataclass(frozen=True)
class ShapeRule:
    """A kernel's shape rule: ``text`` (how it was stated) and ``test`` (shape dict -> bool)."""

    text: str
    test: Callable[[dict], bool]

    def __post_init__(self):
        if not isinstance(self.text, str) or not callable(self.test):
            raise FormatRuleError(f"ShapeRule: text must be a str and test a callable; got {type(self.text).__name__}, "
                                  f"{type(self.test).__name__}")
        object.__setattr__(self, "text", str(self.text))          # a plain str, whatever str subclass came in

    def __call__(self, shape: dict) -> bool:
        """Whether the shape (a dict of the format's shape fields) is legal for the kernel."""
        return self.test(shape)


def _clause(text: str, fields: tuple[str, ...]) -> Callable[[dict], bool]:
    m = _CLAUSE.match(text)
    if m is None:
        raise FormatRuleError(f"legal: each clause must read FIELD%INT==0, FIELD<=INT, FIELD>=INT, FIELD==INT or "
                              f"FIELD!=INT; got {text.strip()!r}")
    field, modulus, op, value = m.group(1), m.group(2), m.group(3), m.group(4)
    if field not in fields:
        raise FormatRuleError(f"legal: clause {text.strip()!r} names {field!r}, not one of the shape fields "
                              f"{list(fields)}")
    if modulus is not None:
        mod = int(modulus)
        if mod == 0:
            raise FormatRuleError(f"legal: clause {text.strip()!r} takes a multiple of 0")
        return lambda s: s[field] is not None and s[field] % mod == 0
    v = int(value)
    compare = {"<=": lambda a: a <= v, ">=": lambda a: a >= v, "==": lambda a: a == v, "!=": lambda a: a != v}[op]
    return lambda s: compare(s[field]) if s[field] is not None else op == "!="


def shape_rule(rule, fields: tuple[str, ...]) -> ShapeRule | None:
    """``rule`` (None, a callable or a declarative string, see the module doc) as a :class:`ShapeRule`
    over the shape ``fields`` (a tuple of names); None stays None. Bad rules are a FormatRuleError."""
    if not isinstance(fields, tuple) or not all(isinstance(f, str) for f in fields):
        raise FormatRuleError(f"fields: must be a tuple of the format's shape field names; got {fields!r:.80}")
    if rule is None or isinstance(rule, ShapeRule):
        return rule
    if isinstance(rule, str):
        clauses = [c for c in rule.split(",") if c.strip()]
        if not clauses:
            raise FormatRuleError(f"legal: must state at least one clause; got {rule!r}")
        tests = [_clause(c, fields) for c in clauses]
        return ShapeRule(", ".join(c.strip() for c in clauses), lambda s: all(t(s) for t in tests))
    if callable(rule):
        def call(shape: dict) -> bool:
            got = rule(**{f: shape[f] for f in fields})
            if not isinstance(got, bool):
                import numpy as np

                if not isinstance(got, np.bool_):
                    raise FormatRuleError(f"legal: the rule must return True or False for a shape; got {got!r:.60} "
                                          f"for {shape}")
            return bool(got)
        return ShapeRule(getattr(rule, "__name__", "a callable"), call)
    raise FormatRuleError(f"legal: must be None, a callable legal(**shape) -> bool or a string such as "
                          f"'n%128==0, m<=64'; got {type(rule).__name__}")
