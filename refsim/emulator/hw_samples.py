"""Old import path of :mod:`refsim.arith.hw_samples` (the arithmetic floor); both names give the same module."""

import sys

from refsim.arith import hw_samples

sys.modules[__name__] = hw_samples
