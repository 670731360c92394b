"""Whether a tool call runs, asks or is refused: the permission hook (``hook.py``), the
approval policies and permission modes, the person's rules and where they come from
(``rule.py``), and ``shell/``, which reads a bash command and judges what it would do.

May import ``core``, ``sandbox``, ``tools`` and ``engine`` (the hook protocol it plugs
into); nothing above it (``subagents``, ``team``, the harness, the notebook).
"""
