"""Make data/customers.csv: subscription customers, one row each, with whether they churned."""

import csv
import random
from pathlib import Path

rng = random.Random(12)
PLANS = {"Basic": (0.31, 9.0), "Standard": (0.18, 15.0), "Premium": (0.09, 24.0), "Family": (0.14, 29.0)}  # churn, fee

rows = []
for n in range(1, 641):
    plan = rng.choices(list(PLANS), weights=[5, 4, 2, 2])[0]
    churn, fee = PLANS[plan]
    tenure = rng.randint(1, 48)
    churned = int(rng.random() < churn * (1.4 if tenure < 6 else 1.0))
    rows.append([f"U{n:05d}", plan, tenure, f"{fee:.2f}", rng.choice(["web", "app", "partner"]), churned])

Path("data").mkdir(exist_ok=True)
with open("data/customers.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["customer_id", "plan", "tenure_months", "monthly_fee", "signup_channel", "churned"])
    writer.writerows(rows)
