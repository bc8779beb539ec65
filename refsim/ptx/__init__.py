"""refsim.ptx: execute nvcc-compiled PTX on a CPU, bit for bit, with refsim's exact fp and tensor-core models.

(Under construction: the engine lives in this package; the per-instruction semantics in
``refsim.ptx.semantics``.)
"""

from refsim.ptx.errors import *  # noqa: F401,F403
