"""Plug-in subcommands of the ``refsim`` CLI; see :mod:`refsim.cli`."""
