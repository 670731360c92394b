"""Convert data/orders.csv (amounts in each order's own currency) to data/orders_usd.csv.

python pipeline/convert_currency.py
"""

import csv
from pathlib import Path

from rates import TO_USD

SOURCE = Path("data/orders.csv")
TARGET = Path("data/orders_usd.csv")


def main():
    with open(SOURCE, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["amount_usd"] = f"{float(row['amount']) * TO_USD[row['currency']]:.2f}"
    with open(TARGET, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    total = sum(float(r["amount_usd"]) for r in rows)
    print(f"wrote {len(rows)} orders to {TARGET}, total {total:,.2f} USD")


if __name__ == "__main__":
    main()
