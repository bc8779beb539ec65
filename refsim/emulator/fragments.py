"""Old import path of :mod:`refsim.arith.fragments` (the arithmetic floor); both names give the same module."""

import sys

from refsim.arith import fragments

sys.modules[__name__] = fragments
