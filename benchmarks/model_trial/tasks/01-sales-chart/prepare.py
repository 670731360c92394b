"""Make data/sales.csv: a year of orders in four regions, West growing and South shrinking."""

import csv
import random
from datetime import date, timedelta
from pathlib import Path

rng = random.Random(2024)
PRODUCTS = {"Widget": 12.5, "Gadget": 48.0, "Gizmo": 125.0}
# orders a day at the start and at the end of the year
GROWTH = {"North": (3.0, 3.3), "South": (3.2, 2.2), "East": (2.0, 2.4), "West": (1.5, 3.6)}

rows = []
day = date(2024, 1, 1)
order_id = 100000
while day.year == 2024:
    share = (day - date(2024, 1, 1)).days / 365
    for region, (start, end) in GROWTH.items():
        expected = start + (end - start) * share
        for _ in range(int(expected) + (rng.random() < expected - int(expected))):
            order_id += 1
            product = rng.choice(list(PRODUCTS))
            units = rng.randint(1, 6)
            rows.append([order_id, day.isoformat(), region, product, units, f"{units * PRODUCTS[product]:.2f}"])
    day += timedelta(days=1)

Path("data").mkdir(exist_ok=True)
with open("data/sales.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["order_id", "order_date", "region", "product", "units", "revenue"])
    writer.writerows(rows)
