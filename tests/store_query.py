"""Query a store's catalog read-only with plain duckdb, as any user would (test helper)."""

from __future__ import annotations

from pathlib import Path

import duckdb


def q(store: Path, sql: str, params: list | None = None) -> list[tuple]:
    """Rows of ``sql`` (``?`` parameters) on ``store``'s catalog, in a UTC session."""
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()
