"""Old import path of :mod:`refsim.arith.tensor_core` (the arithmetic floor); both names give the same module."""

import sys

from refsim.arith import tensor_core

sys.modules[__name__] = tensor_core
