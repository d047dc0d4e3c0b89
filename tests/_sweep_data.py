"""Inputs shared by the sweep tests: the bundled sample ingested into a store, and a policy
whose runs can crash their worker process (for ``--import``)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main

ROOT = Path(__file__).resolve().parent.parent


def sample_store(path: Path) -> Path:
    """``philly-analyze ingest sample_data``: a few hundred jobs in the published trace's
    formats on a small cluster, with some queueing, so a locality wait changes the metrics."""
    r = CliRunner().invoke(main, ["ingest", str(ROOT / "sample_data"), "--store", str(path), "-q"])
    assert r.exit_code == 0, r.output
    return path


def sweep(*args: str, env: dict[str, str] | None = None):
    """``philly-analyze sweep ARGS`` in-process; stdout and stderr kept apart."""
    return CliRunner().invoke(main, ["sweep", *args], env=env, catch_exceptions=False)
