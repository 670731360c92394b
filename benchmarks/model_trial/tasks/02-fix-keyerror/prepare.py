"""Make data/weather.csv: daily readings of three stations through 2024."""

import csv
import math
import random
from datetime import date, timedelta
from pathlib import Path

rng = random.Random(7)
STATIONS = {"Harbor": (11.0, 1.6), "Airport": (10.0, 1.0), "Hilltop": (7.5, 1.3)}  # mean temperature, rain factor

rows = []
day = date(2024, 1, 1)
while day.year == 2024:
    season = math.cos(2 * math.pi * (day.timetuple().tm_yday - 200) / 366)
    for station, (mean, wet) in STATIONS.items():
        temp = round(mean + 8 * season + rng.gauss(0, 2.5), 1) + 0.0  # + 0.0: no "-0.0"
        rain = 0.0 if rng.random() < 0.55 + 0.15 * season else rng.expovariate(1 / (4.0 * wet))
        wind = abs(rng.gauss(14 + (6 if station == "Hilltop" else 0), 6))
        rows.append([day.isoformat(), station, f"{temp:.1f}", f"{rain:.1f}", f"{wind:.0f}"])
    day += timedelta(days=1)

Path("data").mkdir(exist_ok=True)
with open("data/weather.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["date", "station", "temp_c", "precipitation_mm", "wind_kmh"])
    writer.writerows(rows)
