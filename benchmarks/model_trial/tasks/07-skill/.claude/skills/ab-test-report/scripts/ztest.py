"""Two-proportion z-test of an A/B test file: python ztest.py experiment.csv"""

import csv
import math
import sys


def main(path):
    users, buyers, revenue = {}, {}, {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            v = row["variant"]
            users[v] = users.get(v, 0) + 1
            buyers[v] = buyers.get(v, 0) + int(row["converted"])
            revenue[v] = revenue.get(v, 0.0) + float(row["revenue"])
    for v in sorted(users):
        print(
            f"{v}: users={users[v]} conversions={buyers[v]} rate={buyers[v] / users[v]:.4f} "
            f"revenue_per_user={revenue[v] / users[v]:.4f}"
        )
    pa, pb = buyers["A"] / users["A"], buyers["B"] / users["B"]
    pooled = (buyers["A"] + buyers["B"]) / (users["A"] + users["B"])
    se = math.sqrt(pooled * (1 - pooled) * (1 / users["A"] + 1 / users["B"]))
    z = (pb - pa) / se
    p = math.erfc(abs(z) / math.sqrt(2))
    print(f"z={z:.3f} p={p:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
