"""JSON Lines."""

import json

from ..io.files import open_text


def write_jsonl(rows, path, options):
    with open_text(path, options.encoding, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + options.newline)
