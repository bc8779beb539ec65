"""Plug-in sections of ``refsim report``; see :mod:`refsim.report`."""
