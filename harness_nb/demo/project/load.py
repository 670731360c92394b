"""Load the sales data for the weekly report."""

import pandas as pd

sales = pd.read_csv("data/sales.csv", parse_dates=["date"])
weekly = sales.groupby(pd.Grouper(key="date", freq="W"))["revenue"].sum()
