"""What the notebook shows, one family per module as ipywidgets keeps its widgets: the run
view (``view.py``, with its lines, effects and static copy in ``view_*.py``), approval
cards (``approval.py``, their argument display in ``highlight.py``), the map progress bar,
the team view, the rewind card, the ``%agents`` table, and what they share (``live.py``
pacing, ``theme.py`` styles, ``wording.py`` plain lines, ``reply.py`` a run's answer).

May import ipywidgets and IPython's display and every layer below the notebook; never
the magics, the controller or ``kernel/`` (they use the widgets, not the other way round).
"""
