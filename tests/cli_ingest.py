"""Running ``ingest`` through the CLI on hand-made damaged files, and what the tests of bad
input check of the result (``test_ingest_bad_input.py``, ``test_ingest_fuzz_found.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests.philly_files import attempt, job
from tests.store_query import q

RM = "org.apache.hadoop.yarn.server.resourcemanager"


def ingest(store: Path, *args: str | Path) -> Result:
    """``philly-analyze ingest ARGS --store STORE --format json``, in process."""
    return CliRunner().invoke(
        main, ["ingest", *map(str, args), "--store", str(store), "--format", "json"]
    )


def ok(r: Result) -> dict:
    """The JSON summary of a run that must exit 0 without a traceback."""
    assert r.exit_code == 0, r.output + (r.stderr or "")
    assert "Traceback" not in r.output + r.stderr
    return json.loads(r.stdout)


def one_error_line(r: Result, name: Path, line: int | None) -> str:
    """The single error line of a run that must exit 1, naming ``name`` and ``line`` (None:
    a problem of the whole document, such as a JSON object missing a key)."""
    assert r.exit_code == 1, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    where = f"{name}:{line}: " if line is not None else f"{name}: "
    assert errors[0].startswith(f"error: {where}"), errors[0]
    return errors[0]


def rejects(store: Path) -> list[tuple]:
    """(line, reason) of every ``rejects`` row, by line."""
    return q(store, "SELECT line_no, reason FROM rejects ORDER BY line_no")


def one_job(i: int, gpu: str = "gpu0", submitted: str = "2017-10-01 10:00:00") -> dict:
    """A job-log job ``application_7_<i>`` with one attempt on one GPU named ``gpu``."""
    a = attempt("2017-10-01 10:01:00", "2017-10-01 10:03:00", {"m1": []})
    a["detail"][0]["gpus"] = [gpu]
    return job(f"application_7_{i}", submitted, [a])


def rm_line(ts: str, msg: str) -> str:
    """A YARN RM log line at ``ts`` whose logger and message are ``msg`` (``Class: text``)."""
    return f"{ts} INFO {RM}.{msg}"


def rejected(r: Result, name: Path, line: int | None, rows: int) -> dict:
    """The JSON summary of a run whose sources hold ``rows`` rejected rows, more than
    ``--max-rejects`` (default 0) allows: exit 1 with one line naming the first reject
    (``name``, ``line``) and the count, the summary still on stdout (the callers check that
    the good rows were kept)."""
    err = one_error_line(r, name, line)
    assert f"({rows:,} row{'s' * (rows != 1)} rejected in all" in err, err
    return json.loads(r.stdout)
