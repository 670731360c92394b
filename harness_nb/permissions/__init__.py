"""Whether a tool call runs, asks or is refused: the permission hook (``hook.py``), the
names of the approval policies and permission modes (``mode.py``), the person's rules and
where they come from (``rule.py``), the rules kept by "Approve for this session"
(``remember.py``), and ``shell/``, which reads a bash command and judges what it would do.

May import ``core``, ``sandbox``, ``tools`` and ``engine`` (the hook protocol it plugs
into); nothing above it (``subagents``, ``team``, the harness, the notebook).
"""
