"""Fuzz every ingest format with hypothesis (issue 14: >= 10,000 cases per format, slow).

Each target of ``fuzz_seeds.SEEDS`` (every registered format; job lists in two layouts,
rrdtool xport as XML and JSON, the Gavel throughputs JSON on its own) is mutated 10,000 times
(``fuzz_harness.mutants``) and read by its format's session without a store
(``fuzz_harness.parse``); ``fuzz_harness.check`` states what must hold. A smaller share of
mutants goes through the whole ``ingest`` (detection, DuckDB assembly of YARN and Ganglia,
commit into a store whose views are then queried).

``PHILLY_FUZZ_EXAMPLES`` (default 10000) and ``PHILLY_FUZZ_INGEST_EXAMPLES`` (default 60) set
the numbers of cases. Measured cost of the whole module on this project's 2-core machine
(``pytest -n 2 -m slow -p no:randomly tests/test_fuzz_parsers.py`` under ``/usr/bin/time -v``,
nothing else running), 2026-12-02, at the default 10,000 cases per format and 60 ingest cases:
1,679 s of CPU (1,584.7 user + 94.6 sys), peak RSS 475 MB (the largest process), 16 min 26 s
wall; 36 passed. An earlier run at ``PHILLY_FUZZ_EXAMPLES=2000`` (487 s of CPU, other jobs
sharing the cores) found a summary message of 1,144 characters
(``test_ingest_fuzz_found.py``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from philly_analyze.ingest.formats import IngestContext
from philly_analyze.ingest.pipeline import SourceOutcome, ingest_paths
from philly_analyze.store import Store
from tests.fuzz_harness import (
    DUCKDB_CSV_FORMATS,
    MAX_MESSAGE,
    check,
    fast_workdir,
    mutants,
    parse,
    shared_duckdb,
    text_lines,
    write_inputs,
)
from tests.fuzz_seeds import SEEDS

EXAMPLES = int(os.environ.get("PHILLY_FUZZ_EXAMPLES", "10000"))
INGEST_EXAMPLES = int(os.environ.get("PHILLY_FUZZ_INGEST_EXAMPLES", "60"))
#: A case slower than this fails (hypothesis' deadline): no parser may take seconds on a few
#: lines, however damaged. Generous: the machine is shared.
DEADLINE = timedelta(seconds=5)
#: A case still running after this long is a hang: stopped by SIGALRM, the test fails.
HANG_S = 120

pytestmark = pytest.mark.slow


class Hang(Exception):
    """A case ran for HANG_S seconds."""


@contextmanager
def no_hang() -> Iterator[None]:
    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"a case ran for {HANG_S} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The work folder of the parser cases (``fast_workdir``, ``shared_duckdb``)."""
    with fast_workdir(tmp_path) as work, shared_duckdb(monkeypatch):
        yield work


@pytest.mark.parametrize("target", sorted(SEEDS))
def test_parser_survives_mutants(target: str, fast: Path) -> None:
    seed = SEEDS[target]
    work = fast / "case"

    @settings(
        max_examples=EXAMPLES,
        deadline=DEADLINE,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=mutants(seed.data, many_fields=seed.format not in DUCKDB_CSV_FORMATS))
    def case(data: bytes) -> None:
        with no_hang():
            out = parse(seed, data, work)
        check(seed, data, out)

    case()


#: Views read after each ingest: the store must stay queryable whatever was ingested.
VIEWS = ("jobs", "attempts", "placements", "machines", "gpu_util", "epochs", "rejects")


@pytest.mark.parametrize("target", sorted(SEEDS))
def test_ingest_survives_mutants(target: str, tmp_path: Path) -> None:
    seed = SEEDS[target]
    inputs = tmp_path / "in"
    store = Store(tmp_path / "store")  # one store: each case is a new version of the file

    @settings(
        max_examples=INGEST_EXAMPLES,
        deadline=None,  # the first case creates the store's views
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=mutants(seed.data, many_fields=seed.format not in DUCKDB_CSV_FORMATS))
    def case(data: bytes) -> None:
        files = write_inputs(seed, data, inputs)
        with no_hang():
            report = ingest_paths(store, [inputs], ctx=IngestContext(), replace=True)
        lines = {str(p): len(text_lines(b)) for p, b in files.items()}
        for o in report.outcomes:
            assert "\n" not in o.message and len(o.message) <= MAX_MESSAGE + len(o.name), o
        # Rejects of this version of the file: unless it was not taken at all (empty, binary,
        # of no format, skipped), when the store keeps the previous version's.
        main = str(inputs / seed.path)
        taken = all(_taken(o) for o in report.outcomes if o.name == main)
        for source, line_no, reason in store.con.execute(
            "SELECT source, line_no, reason FROM rejects"
        ).fetchall():
            assert source in lines, source
            if taken or source != main:
                assert line_no is None or 1 <= line_no <= lines[source] + 1, reason
            assert "\n" not in reason and len(reason) <= MAX_MESSAGE, reason
        for view in VIEWS:
            store.con.execute(f"SELECT count(*) FROM {view}").fetchall()

    try:
        case()
    finally:
        store.close()


def _taken(o: SourceOutcome) -> bool:
    """Whether a source's rows (rejects included) now come from the version just read."""
    if o.status == "skipped":
        return o.message.startswith("same content")
    return o.format is not None and o.status in ("ingested", "error")
