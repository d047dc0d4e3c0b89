"""The paper's published numbers (``philly_analyze/data/paper_atc19.json``), shown beside the
computed ones. The data file names its source; nothing here reads ../shared at run time."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def _data() -> dict[str, Any]:
    text = resources.files("philly_analyze").joinpath("data/paper_atc19.json").read_text()
    return json.loads(text)


def citation() -> str:
    """The paper, for report footers."""
    return str(_data()["source"])


def rows(table: str) -> list[dict[str, Any]]:
    """Rows of one paper table: ``table2`` ... ``table7``, ``fig8``, ``fig9``."""
    return [dict(r) for r in _data()["tables"][table]["rows"]]


def where(table: str) -> str:
    """Where the table is in the paper ("Table 2", "Figure 9")."""
    return str(_data()["tables"][table]["where"])


def lookup(table: str, key: str, value: Any, column: str) -> Any:
    """The paper's ``column`` in the row whose ``key`` equals ``value`` (None if absent)."""
    for r in rows(table):
        if str(r.get(key)) == str(value):
            return r.get(column)
    return None
