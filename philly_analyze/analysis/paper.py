"""The paper's published numbers (``philly_analyze/data/paper_atc19.json``), shown beside the
computed ones, MuxFlow's (``muxflow_published``), and the publications they come from
(``data/citations.json``: the ATC'19 paper, and MuxFlow for the GPU sharing section). Nothing
here reads ../shared at run time."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any


@cache
def _data() -> dict[str, Any]:
    text = resources.files("philly_analyze").joinpath("data/paper_atc19.json").read_text()
    return json.loads(text)


@cache
def _citations() -> dict[str, Any]:
    text = resources.files("philly_analyze").joinpath("data/citations.json").read_text()
    return json.loads(text)


@cache
def _muxflow_paper() -> dict[str, Any]:
    text = resources.files("philly_analyze").joinpath("data/muxflow_model.toml").read_text()
    return dict(tomllib.loads(text)["scenario"]["paper"])


def muxflow_published() -> dict[str, dict[str, float]]:
    """MuxFlow's headline numbers by side, ``{"before": {...}, "after": {...}}`` (gpu_util,
    sm_activity, gpu_memory; fractions): the ``paper_before``/``paper_after`` of
    ``[scenario.paper]`` in ``data/muxflow_model.toml``, where they stand beside the scenario
    that reproduces them (read here as data, without the simulator)."""
    paper = _muxflow_paper()
    return {"before": dict(paper["paper_before"]), "after": dict(paper["paper_after"])}


def citation(key: str = "atc19") -> str:
    """A publication's full citation (default: the ATC'19 paper), for report footers."""
    return str(_citations()[key]["full"])


def citations(keys: Iterable[str]) -> list[tuple[str, str]]:
    """(label, full citation) of each distinct publication in ``keys`` (e.g. the report's
    sections' ``citation``), in first-seen order."""
    data = _citations()
    return [(str(data[k]["label"]), str(data[k]["full"])) for k in dict.fromkeys(keys)]


def note(table: str) -> str | None:
    """What the data file says about a table or figure's values (e.g. none transcribed)."""
    value = _data()["tables"][table].get("note")
    return None if value is None else str(value)


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
