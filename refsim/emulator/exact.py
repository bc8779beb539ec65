"""Old import path of :mod:`refsim.arith.exact` (the arithmetic floor); both names give the same module."""

import sys

from refsim.arith import exact

sys.modules[__name__] = exact
