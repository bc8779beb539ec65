"""``python -m refsim`` is the same program as the ``refsim`` console script."""

import sys

from refsim.cli import main

sys.exit(main())
