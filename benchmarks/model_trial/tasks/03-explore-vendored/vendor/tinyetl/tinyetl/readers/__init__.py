"""Readers by file suffix."""

from .csv_reader import read_csv
from .json_reader import read_json, read_jsonl

READERS = {".csv": read_csv, ".tsv": read_csv, ".txt": read_csv, ".json": read_json, ".jsonl": read_jsonl}
