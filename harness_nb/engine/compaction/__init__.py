"""Keeping a conversation inside its model's context window: ``keeper.py`` measures each
request and turns old tool results into stubs, ``summary.py`` has the model summarise the
oldest turns when stubs are not enough.

Part of the engine layer: may import ``core``, ``providers`` and the engine's own
modules (the meter, the session, the offload files of ``engine/hook.py``); nothing above.
"""
