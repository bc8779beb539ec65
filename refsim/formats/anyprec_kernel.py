"""Old import path of :mod:`refsim.formats.anyprec_plan` (the Any-Precision launch plan); both names give the same module."""

import sys

from refsim.formats import anyprec_plan

sys.modules[__name__] = anyprec_plan
