"""Make data/checkout_button_test.csv: B converts more often, but its buyers spend less."""

import csv
import random
from pathlib import Path

rng = random.Random(5)
VARIANTS = {"A": (0.040, 62.0), "B": (0.050, 48.0)}  # conversion rate, mean basket in EUR

Path("data").mkdir(exist_ok=True)
with open("data/checkout_button_test.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["user_id", "variant", "converted", "revenue"])
    for i in range(1, 12001):
        variant = "A" if rng.random() < 0.5 else "B"
        rate, basket = VARIANTS[variant]
        bought = rng.random() < rate
        revenue = round(rng.gammavariate(4.0, basket / 4.0), 2) if bought else 0.0
        writer.writerow([f"u{i:05d}", variant, int(bought), f"{revenue:.2f}"])
