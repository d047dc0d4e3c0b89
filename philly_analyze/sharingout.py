"""What a sharing replay leaves in its store, as the report reads it: ``SharingOutput`` (the
policy, its metrics, the cluster's time series, the online slowdown histogram, and which of
MuxFlow's published numbers it stands beside), kept as the store's ``sharing.json`` and
``sharing_timeseries.parquet`` (``schemas.SHARING``, ``schemas.SHARING_TIMESERIES``).

The simulator (``sim.sharing``) builds one and ``sim.result.write_result_store`` stores it;
``analysis`` and ``report`` read it back from the store, without the simulator."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from philly_analyze import schemas

if TYPE_CHECKING:
    from philly_analyze.store import Store

#: ln(slowdown) histogram: bins of 0.001 up to ln 20.
LN_BIN = 0.001
LN_BINS = int(np.log(20.0) / LN_BIN) + 2

#: Columns of ``SharingOutput.timeseries`` (the declared ``sharing_timeseries.parquet``).
TIMESERIES_COLUMNS = tuple(schemas.SHARING_TIMESERIES.schema.names)

#: Stores written before ``sharing.json`` recorded ``paper_side`` and ``color`` were written
#: by one of the three sharing policies of the time: the side and colour each had then. Frozen
#: history, not the policies' present values (which new files record).
_BEFORE_RECORDED: dict[str, tuple[str | None, str | None]] = {
    "muxflow": ("after", "#1f77b4"),
    "dedicated": ("before", "#7f7f7f"),
    "mps-naive": (None, "#d62728"),
}


@dataclass(kw_only=True)
class SharingOutput:
    """What figures and reports need of a sharing run.

    ``metrics``: flat dict of the run's outputs (see ``docs/muxflow.md`` for each key).
    ``timeseries``: one row per step with the cluster means (``TIMESERIES_COLUMNS``).
    ``slowdown_hist``: counts of ln(slowdown) over shared online GPU-minutes, bins of
    ``LN_BIN``. ``paper_side``: which of MuxFlow's published numbers the run stands beside
    ("before", "after" or None), and ``color`` its line colour in figures: its policy's."""

    policy: str
    metrics: dict[str, Any]
    timeseries: pd.DataFrame
    slowdown_hist: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    paper_side: str | None = None
    color: str | None = None

    def slowdown_cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """(slowdown, fraction of shared online GPU-minutes at or below it)."""
        h = self.slowdown_hist
        if h.sum() == 0:
            return np.ones(1), np.ones(1)
        last = int(np.flatnonzero(h)[-1]) + 1
        x = np.exp((np.arange(last) + 1) * LN_BIN)
        return x, np.cumsum(h[:last]) / h.sum()

    def artifacts(self) -> dict[str, Any]:
        """The store's files of this output (``Batch.write_artifact`` name -> data)."""
        nz = np.flatnonzero(self.slowdown_hist)
        doc = {
            "policy": self.policy,
            "metrics": self.metrics,
            "slowdown_hist": {
                "bin": LN_BIN,
                "index": nz.tolist(),
                "count": self.slowdown_hist[nz].tolist(),
            },
            "paper_side": self.paper_side,
            "color": self.color,
        }
        series = pa.Table.from_pandas(self.timeseries, preserve_index=False)
        return {schemas.SHARING.name: doc, schemas.SHARING_TIMESERIES.name: series}

    @classmethod
    def from_store(cls, store: Store) -> SharingOutput | None:
        """The sharing output a store holds (None if it holds none)."""
        doc = store.read_artifact(schemas.SHARING.name)
        if doc is None:
            return None
        series = store.read_artifact(schemas.SHARING_TIMESERIES.name)
        if series is None:
            from philly_analyze.errors import StoreError

            raise StoreError(
                f"has {schemas.SHARING.file} but not {schemas.SHARING_TIMESERIES.file}: "
                "write the store again with `replay --out`",
                source=str(store.path),
            )
        return cls.from_artifacts(doc, series)

    @classmethod
    def from_artifacts(cls, doc: dict[str, Any], series: pa.Table) -> SharingOutput:
        """Rebuild an output from its ``sharing.json`` document and time series."""
        hist = np.zeros(LN_BINS, np.int64)
        h = doc["slowdown_hist"]
        hist[np.asarray(h["index"], np.int64)] = np.asarray(h["count"], np.int64)
        if "paper_side" in doc:
            side, color = doc["paper_side"], doc.get("color")
        else:  # written before they were recorded
            side, color = _BEFORE_RECORDED.get(doc["policy"], (None, None))
        return cls(
            policy=doc["policy"],
            metrics=doc["metrics"],
            timeseries=series.to_pandas(),
            slowdown_hist=hist,
            paper_side=side,
            color=color,
        )

    @classmethod
    def load(cls, store_path: str | os.PathLike[str]) -> SharingOutput:
        """The sharing output of the store at ``store_path`` (``StoreError`` if it has none)."""
        from philly_analyze.errors import StoreError
        from philly_analyze.store import Store

        with Store(store_path, read_only=True) as store:
            out = cls.from_store(store)
        if out is None:
            raise StoreError(
                f"holds no sharing output ({schemas.SHARING.file}): write one with `replay "
                "--policy muxflow --out DIR`",
                source=str(store_path),
            )
        return out
