"""Make data/orders.csv (amounts in five currencies), then run the pipeline once with its
wrong EUR rate, as last month's run left data/orders_usd.csv."""

import csv
import random
import subprocess
import sys
from pathlib import Path

rng = random.Random(3)
CURRENCIES = ["EUR"] * 5 + ["USD"] * 3 + ["GBP"] * 2 + ["CHF", "SEK"]

Path("data").mkdir(exist_ok=True)
with open("data/orders.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["order_id", "country", "currency", "amount"])
    for i in range(1, 301):
        currency = rng.choice(CURRENCIES)
        amount = rng.uniform(20, 400) * (10 if currency == "SEK" else 1)
        writer.writerow(
            [
                f"M{i:04d}",
                {"EUR": "DE", "USD": "US", "GBP": "GB", "CHF": "CH", "SEK": "SE"}[currency],
                currency,
                f"{amount:.2f}",
            ]
        )
subprocess.run([sys.executable, "pipeline/convert_currency.py"], check=True, capture_output=True)
