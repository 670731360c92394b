"""Revenue per region from data/orders.csv (the weekly report)."""

import csv
from collections import defaultdict


def load(path="data/orders.csv"):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def revenue_by_region(rows):
    totals = defaultdict(float)
    for row in rows:
        units = int(row["units"] or 0)
        totals[row["region"]] += units * float(row["price"])
    return dict(totals)


if __name__ == "__main__":
    for region, revenue in sorted(revenue_by_region(load()).items()):
        print(f"{region:>6}  {revenue:8.2f}")
