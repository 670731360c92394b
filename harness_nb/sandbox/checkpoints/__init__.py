"""The workdir checkpointed around every call that can change files: what each call did,
rewind and undo, protected paths reverted (the trust issue's "effects, not text").

- ``checkpoint.py``: ``Checkpoints``, the one object the harness holds: a checkpoint
  before a call, the effects after it, ``rewind`` / ``undo``, protected paths reverted.
- ``snapshot.py``: a snapshot of the workdir, hashing only what changed; ``walk.py`` the
  bounded, breadth-first walk it takes; ``manifest.py`` what a snapshot records;
  ``../watch.py`` (inotify) tells whether a walk is needed at all.
- ``effects.py``: what changed, in words for the model and the person.
- ``restore.py``: putting paths back without following symlinks; ``rewind.py``: what
  going back does, and its diff (credential values masked).
- ``history.py``: the checkpoints on disk; ``gitstore.py``: the shadow git repository
  under ``~/.harness_nb/`` that holds their content.

May import ``core`` and ``sandbox.protected`` (the one list of protected paths).
"""

from .checkpoint import DEFAULT_MAX_FILE_MB, CallEffects, Checkpoint, Checkpoints, Rewind

__all__ = ["DEFAULT_MAX_FILE_MB", "CallEffects", "Checkpoint", "Checkpoints", "Rewind"]
