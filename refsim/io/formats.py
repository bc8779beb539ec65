"""Import side effect: registers every checkpoint reader with :mod:`refsim.io.checkpoint`."""

from refsim.io import containers, gptq  # noqa: F401
