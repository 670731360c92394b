"""Writers by file suffix."""

from .csv_writer import write_csv
from .jsonl_writer import write_jsonl

WRITERS = {".csv": write_csv, ".jsonl": write_jsonl}
