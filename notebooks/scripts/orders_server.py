"""A small MCP server for the MCP-and-skills tutorial: the orders of project/data/orders.csv.

    python scripts/orders_server.py          # serves MCP over stdio (the tutorial starts it)

Two tools, written with the official SDK's server side: ``lookup_order`` reads one order
(it declares ``readOnlyHint``, so harness_nb runs it without asking) and ``flag_order``
records a problem with one (it changes something, so harness_nb asks first).
"""

from __future__ import annotations

import csv
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

ORDERS = Path(__file__).resolve().parent.parent / "project" / "data" / "orders.csv"

server = MCPServer("orders")
FLAGS: list[str] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_order(order_id: int) -> str:
    """One order of the orders file, as `column: value` lines (empty values shown as <empty>)."""
    with ORDERS.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["order_id"] == str(order_id):
                return "\n".join(f"{k}: {v or '<empty>'}" for k, v in row.items())
    return f"no order {order_id} in orders.csv"


@server.tool()
def flag_order(order_id: int, reason: str) -> str:
    """Flag an order for the data team to correct, saying why."""
    FLAGS.append(f"{order_id}: {reason}")
    return f"flagged order {order_id} ({len(FLAGS)} flags)"


if __name__ == "__main__":
    server.run()
