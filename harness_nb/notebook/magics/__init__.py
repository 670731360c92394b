"""The magics, one family per module as IPython keeps its own (``core/magics/``):
``agent.py`` (``%%agent``, ``%agent``, ``%fix``, ``%@<name>``, ``%agents``, ``%task``,
``%approvals``), ``team.py`` (``%team``), ``skill.py`` (``%skills``), ``mcp.py``
(``%mcp``). ``%config`` is ``notebook/config.py``'s, beside the settings it sets.

May import the rest of the notebook layer (the controller, ``widgets/``, ``kernel/``)
and every layer below it.
"""
