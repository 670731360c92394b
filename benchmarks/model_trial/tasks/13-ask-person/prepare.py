"""Make data/stores.csv: weekly visitors and sales of four stores, first half of 2024."""

import csv
import random
from datetime import date, timedelta
from pathlib import Path

rng = random.Random(13)
# visitors a week in January and in June, and euros spent per visitor
STORES = {"Centre": (5200, 4100, 21.0), "Harbour": (2100, 3300, 18.5), "Mall": (6800, 6900, 14.0), "Station": (3900, 3600, 9.5)}

rows = []
week = date(2024, 1, 1)
for n in range(26):
    for store, (start, end, spend) in STORES.items():
        visitors = round((start + (end - start) * n / 25) * rng.uniform(0.92, 1.08))
        basket = spend * (1 + 0.012 * n if store == "Centre" else 1) * rng.uniform(0.95, 1.05)  # Centre: fewer, richer visitors
        rows.append([week.isoformat(), store, visitors, f"{visitors * basket:.2f}"])
    week += timedelta(weeks=1)

Path("data").mkdir(exist_ok=True)
with open("data/stores.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["week", "store", "visitors", "sales_eur"])
    writer.writerows(rows)
