"""Old import path of :mod:`refsim.testing.harness` (check_kernel); both names give the same module."""

import sys

from refsim.testing import harness

sys.modules[__name__] = harness
