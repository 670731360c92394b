"""Missing, for the Ray processes of the ``ray`` tier (``tests/test_map_ray.py``).

The real package (a jsonschema format extra the Jupyter stack installs) builds an Earley
grammar when imported: 1–6 s of CPU in every Ray process, which imports jsonschema. Ray's
raylet waits a fixed 15 s for its agent processes to start, so on a loaded machine the
local cluster fails to start at all (ray-project/ray#65983). Without it jsonschema only
skips checking the ``iri`` formats, which nothing here uses.
"""

raise ImportError("rfc3987_syntax is left out of the Ray tier's processes (see this file)")
