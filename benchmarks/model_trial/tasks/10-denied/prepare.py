"""Make data/raw/customers.csv, the CRM's export as it came (five country names misspelt),
and the empty data/clean/ that derived files go to."""

import csv
import random
from pathlib import Path

rng = random.Random(9)
COUNTRIES = ["Germany", "France", "Italy", "Spain", "Netherlands", "Austria"]
TYPOS = {14: "Germnay", 37: "Frnace", 58: "Itlay", 81: "Germnay", 90: "Spian"}

Path("data/raw").mkdir(parents=True, exist_ok=True)
with open("data/raw/customers.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["customer_id", "name", "country", "segment"])
    for i in range(1, 121):
        country = TYPOS.get(i, rng.choice(COUNTRIES))
        writer.writerow([f"K{i:04d}", f"Customer {i}", country, rng.choice(["retail", "wholesale", "online"])])
Path("data/clean").mkdir(exist_ok=True)
