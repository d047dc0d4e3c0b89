"""The schema module is the one definition of the tables; docs and views follow it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from philly_analyze import schemas
from philly_analyze.store import Store

ROOT = Path(__file__).resolve().parent.parent


def test_docs_store_md_is_generated_from_schemas() -> None:
    assert (ROOT / "docs" / "store.md").read_text() == schemas.markdown(), (
        "docs/store.md is stale: run `python -m philly_analyze.schemas > docs/store.md`"
    )


def test_conform_fills_nullable_and_rejects_unknown() -> None:
    t = schemas.conform("jobs", {"job_id": ["a"], "vc": ["v"]})
    assert t.schema == schemas.JOBS.physical_schema
    assert t.column("status").to_pylist() == [None]
    with pytest.raises(ValueError, match="unknown columns"):
        schemas.conform("jobs", {"job_id": ["a"], "nope": [1]})
    with pytest.raises(ValueError, match="required column 'job_id'"):
        schemas.conform("jobs", {"vc": ["v"]})


def test_empty_store_views_have_the_contract_columns(store_dir: Path) -> None:
    with Store(store_dir) as s:
        for name, table in schemas.TABLES.items():
            if table.physical_only:
                continue
            cols = list(s.df(f"SELECT * FROM {name} LIMIT 0").columns)
            assert cols == [c.name for c in table.columns], name
        got = s.arrow("SELECT * FROM jobs").schema
        assert got.field("submit_time").type == pa.timestamp("us", tz="UTC")
