"""Skills: ``SKILL.md`` folders the model loads on demand. ``skill.py`` finds and reads
one skill, ``catalog.py`` lists the skills on disk (re-read when a folder changes),
``tool.py`` is the ``skill`` tool the model calls to load one.

May import ``core`` and ``tools``; the engine's prompt builder imports it, never the
other way round.
"""
