"""What harness_nb does inside the kernel itself: tools over the kernel's namespace
(``tools.py``: ``run_python``, ``list_variables``, ``inspect_variable``), credentials
kept out of what they show (``credential_variable.py``), stopping ``run_python`` at its
time limit (``watchdog.py``), the cell history and code proposals (``history.py``,
``proposal.py``), the input transformers (``transform.py``) and approval cards shown in
a queued cell (``queued_cells.py``).

May import IPython, ipykernel, ``widgets/`` and every layer below the notebook; never
the magics or the controller.
"""
