"""Judging a bash command without running it: ``parser.py`` reads the shell text into
commands and words, ``read_only.py`` is the table of programs known to change nothing,
``policy.py`` names what a command would do that asks (a recursive delete, a write outside
the workdir, a download that runs).

May import ``core`` and ``sandbox`` (which paths are protected); nothing above them.
"""
