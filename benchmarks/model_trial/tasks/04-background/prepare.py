"""Make data/orders.csv, data/customers.csv and data/returns.csv, with a few flaws to find:
customers without an email, duplicated return rows, negative amounts, a date in the future."""

import csv
import random
from datetime import date, timedelta
from pathlib import Path

rng = random.Random(42)
COUNTRIES = ["DE", "FR", "NL", "IT", "ES", "PL"]
STATUSES = ["delivered"] * 14 + ["shipped"] * 3 + ["pending"] * 2 + ["cancelled"]


def write(name, header, rows):
    with open(Path("data") / name, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


Path("data").mkdir(exist_ok=True)
customers = []
for i in range(1, 301):
    signup = date(2022, 1, 1) + timedelta(days=rng.randint(0, 800))
    email = f"customer{i}@example.com"
    customers.append([f"C{i:04d}", f"Customer {i}", email, rng.choice(COUNTRIES), signup.isoformat()])
for i in (17, 122, 260):  # three without an email
    customers[i][2] = ""
write("customers.csv", ["customer_id", "name", "email", "country", "signup_date"], customers)

orders = []
for i in range(1, 2001):
    day = date(2024, 1, 1) + timedelta(days=rng.randint(0, 364))
    amount = round(rng.lognormvariate(3.8, 0.6), 2)
    orders.append([f"O{i:05d}", f"C{rng.randint(1, 300):04d}", day.isoformat(), f"{amount:.2f}", rng.choice(STATUSES)])
orders[411][3] = "-" + orders[411][3]  # two refunds booked as negative orders
orders[1507][3] = "-" + orders[1507][3]
orders[999][2] = "2031-05-01"  # a typo for 2024-05-01
write("orders.csv", ["order_id", "customer_id", "order_date", "amount", "status"], orders)

returns = []
for i in range(1, 121):
    order = orders[rng.randint(0, 1999)]
    returns.append([f"R{i:04d}", order[0], rng.choice(["damaged", "wrong size", "not as described", "late"])])
for i in (90, 77, 40, 5):  # four rows exported twice (from the end: the indexes stay put)
    returns.insert(i + 1, list(returns[i]))
write("returns.csv", ["return_id", "order_id", "reason"], returns)
