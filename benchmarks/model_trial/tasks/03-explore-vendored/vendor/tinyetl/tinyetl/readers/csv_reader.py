"""Delimited text files."""

import csv

from ..io.files import head, open_text
from ..io.sniff import guess_delimiter
from ..transforms.clean import strip_fields


def read_csv(path, options):
    """Rows of a delimited file as dicts keyed by its header."""
    sample = head(path, options.sample_lines + options.skip_rows, options.encoding)[options.skip_rows :]
    delimiter = options.delimiter or guess_delimiter(sample)
    with open_text(path, options.encoding) as f:
        for _ in range(options.skip_rows):
            next(f, None)
        rows = list(csv.DictReader(f, delimiter=delimiter))
    if options.strip_whitespace:
        rows = [strip_fields(row) for row in rows]
    return rows
