"""The team's data warehouse as an MCP server (stdio): read-only SQL over SQLite.

Tables are built in memory at start from a fixed seed, so every run sees the same data.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

MAX_ROWS = 200
CATALOG = {
    "Furniture": [("Standing desk", 420.0), ("Office chair", 189.0), ("Bookshelf", 95.0)],
    "Electronics": [("Monitor 27in", 279.0), ("Docking station", 159.0), ("Webcam", 69.0)],
    "Stationery": [("Notebook pack", 12.5), ("Fountain pen", 39.0), ("Desk organiser", 24.0)],
    "Lighting": [("Desk lamp", 34.9), ("Floor lamp", 89.0)],
}


def build() -> sqlite3.Connection:
    rng = random.Random(31)
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT, category TEXT, list_price REAL)")
    db.execute("CREATE TABLE stores (store_id INTEGER PRIMARY KEY, city TEXT, opened DATE)")
    db.execute(
        "CREATE TABLE sales (sale_id INTEGER PRIMARY KEY, sale_date DATE, store_id INTEGER, product_id INTEGER,"
        " quantity INTEGER, unit_price REAL, discount REAL)"
    )
    products = []
    for category, items in CATALOG.items():
        for name, price in items:
            products.append((len(products) + 1, name, category, price))
    db.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", products)
    db.executemany(
        "INSERT INTO stores VALUES (?, ?, ?)",
        [(1, "Hamburg", "2019-04-01"), (2, "Munich", "2020-09-15"), (3, "Cologne", "2022-02-01")],
    )
    # electronics sells best in Q3 (back to school / office refits), furniture the rest of the year
    day, sale_id, rows = date(2024, 1, 1), 0, []
    while day.year == 2024:
        q3 = 7 <= day.month <= 9
        for _ in range(rng.randint(8, 16)):
            product = rng.choice(products)
            weight = {"Electronics": 1.6 if q3 else 0.8, "Furniture": 0.7 if q3 else 1.2}.get(product[2], 1.0)
            if rng.random() > weight / 1.6:
                continue
            sale_id += 1
            discount = rng.choice([0.0, 0.0, 0.0, 0.1, 0.15])
            rows.append(
                (sale_id, day.isoformat(), rng.randint(1, 3), product[0], rng.randint(1, 4), product[3], discount)
            )
        day += timedelta(days=1)
    db.executemany("INSERT INTO sales VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.execute("PRAGMA query_only = ON")
    return db


DB = build()
server = MCPServer("warehouse")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def list_tables() -> str:
    """The warehouse's tables with their row counts."""
    names = [r[0] for r in DB.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return "\n".join(f"{n}: {DB.execute(f'SELECT COUNT(*) FROM {n}').fetchone()[0]} rows" for n in names)


@server.tool(annotations=READ_ONLY)
def describe_table(table: str) -> str:
    """A table's columns and types. Revenue of a sale is quantity * unit_price * (1 - discount)."""
    columns = DB.execute("SELECT name, type FROM pragma_table_info(?)", (table,)).fetchall()
    if not columns:
        raise ToolError(f"no table {table!r}; call list_tables")
    return "\n".join(f"{name} {kind}" for name, kind in columns)


@server.tool(annotations=READ_ONLY)
def query(sql: str) -> str:
    """Run one read-only SQL query (SQLite dialect); at most 200 rows come back, as CSV."""
    try:
        cursor = DB.execute(sql)
    except sqlite3.Error as exc:
        raise ToolError(f"SQL error: {exc}") from None
    header = [d[0] for d in cursor.description or []]
    rows = cursor.fetchmany(MAX_ROWS + 1)
    lines = [",".join(header)] + [",".join("" if v is None else str(v) for v in row) for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        lines.append(f"(more rows not shown: at most {MAX_ROWS})")
    return "\n".join(lines)


if __name__ == "__main__":
    server.run()
