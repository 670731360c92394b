"""Make data/orders.csv: a year of orders of a small online shop, prices in euros."""

import csv
import random
from datetime import date, timedelta
from pathlib import Path

rng = random.Random(31)
PRODUCTS = {"Notebook A5": 4.90, "Fountain pen": 38.00, "Ink (3 pack)": 7.50, "Desk lamp": 54.00, "Pencil case": 12.90}
CUSTOMERS = [f"C{n:04d}" for n in range(1, 181)]

rows = []
day = date(2024, 1, 1)
order_id = 5000
while day.year == 2024:
    busy = 1.8 if day.month in (9, 12) else 1.0  # back to school, Christmas
    for _ in range(rng.randint(0, int(6 * busy))):
        order_id += 1
        product = rng.choice(list(PRODUCTS))
        qty = rng.choice([1, 1, 1, 2, 2, 3, 5])
        discount = rng.choice([0, 0, 0, 5, 10])
        rows.append([order_id, day.isoformat(), rng.choice(CUSTOMERS), product, qty, f"{PRODUCTS[product]:.2f}", discount])
    day += timedelta(days=1)

Path("data").mkdir(exist_ok=True)
with open("data/orders.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["order_id", "order_date", "customer", "product", "qty", "unit_price_eur", "discount_pct"])
    writer.writerows(rows)
