"""Delimited text files."""

import csv

from ..io.files import open_text


def write_csv(rows, path, options):
    fields = list(rows[0]) if rows else []
    with open_text(path, options.encoding, "w") as f:
        writer = csv.DictWriter(f, fields, delimiter=options.delimiter, lineterminator=options.newline)
        writer.writeheader()
        writer.writerows(rows)
