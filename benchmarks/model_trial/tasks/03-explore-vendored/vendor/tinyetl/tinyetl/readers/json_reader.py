"""JSON arrays of objects and JSON Lines."""

import json

from ..io.files import open_text


def read_json(path, options):
    with open_text(path, options.encoding) as f:
        data = json.load(f)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON array of objects")
    return data


def read_jsonl(path, options):
    with open_text(path, options.encoding) as f:
        return [json.loads(line) for line in f if line.strip()]
