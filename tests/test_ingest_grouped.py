"""Grouped formats (one batch per ingest call): re-reading one changed file must not lose the
rows of the unchanged files that shared its batch."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests.store_query import q

A = "application_1506638472019_0001"
B = "application_1506638472019_0002"


def _log(root: Path, job: str, losses: list[float]) -> Path:
    p = root / "framework" / job / "attempt_0" / "stdout.txt"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        "".join(
            f"Finished Epoch[{i + 1:2d} of {len(losses)}]: [Training] ce = {x:.8f} * 50000; errs = 1.0% * 50000\n"
            for i, x in enumerate(losses)
        )
    )
    return p


def _ingest(*args: str | Path) -> Result:
    r = CliRunner().invoke(main, ["ingest", *map(str, args)])
    assert r.exit_code == 0, r.stderr
    return r


def _epochs(store: Path) -> list[tuple]:
    return q(store, "SELECT job_id, count(*), min(loss) FROM epochs GROUP BY 1 ORDER BY 1")


def test_changed_file_of_a_grouped_batch_keeps_its_neighbours(
    tmp_path: Path, store_dir: Path
) -> None:
    _log(tmp_path, A, [2.0, 1.5, 1.2])
    b = _log(tmp_path, B, [3.0, 2.5])
    _ingest(tmp_path / "framework", "--store", store_dir)
    assert _epochs(store_dir) == [(A, 3, 1.2), (B, 2, 2.5)]
    # B grows (a still-running job's log); A is untouched.
    b.write_text(
        b.read_text()
        + "Finished Epoch[ 3 of 3]: [Training] ce = 2.00000000 * 50000; errs = 1.0% * 50000\n"
    )
    os.utime(b, (1, 1))
    r = _ingest(tmp_path / "framework", "--store", store_dir)
    assert _epochs(store_dir) == [(A, 3, 1.2), (B, 3, 2.0)]
    assert "read again" in r.stderr
    assert q(store_dir, "SELECT count(*), count(DISTINCT batch_id) FROM ingest_log") == [(2, 1)]
    # Naming only the changed file still keeps A (re-read from its recorded path).
    b.write_text(
        b.read_text()
        + "Finished Epoch[ 4 of 4]: [Training] ce = 1.90000000 * 50000; errs = 1.0% * 50000\n"
    )
    os.utime(b, (2, 2))
    _ingest(b, "--store", store_dir)
    assert _epochs(store_dir) == [(A, 3, 1.2), (B, 4, 1.9)]
    # And a run with nothing changed changes nothing.
    before = q(store_dir, "SELECT source, batch_id FROM ingest_log ORDER BY 1")
    r = _ingest(tmp_path / "framework", "--store", store_dir)
    assert r.stderr.count("already ingested") == 2
    assert q(store_dir, "SELECT source, batch_id FROM ingest_log ORDER BY 1") == before
