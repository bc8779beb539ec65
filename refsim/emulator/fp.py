"""Old import path of :mod:`refsim.arith.fp` (the arithmetic floor); both names give the same module."""

import sys

from refsim.arith import fp

sys.modules[__name__] = fp
