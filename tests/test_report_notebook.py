"""The notebook runs top to bottom on the sample store (``make test-all``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "paper_analyses.ipynb"


def _sample_store(tmp: Path) -> Path:
    """The ingested sample_data/ when it exists, else a small generated store."""
    store = tmp / "store"
    sample = ROOT / "sample_data"
    if sample.exists() and any(sample.iterdir()):
        from click.testing import CliRunner

        from philly_analyze.cli import main

        r = CliRunner().invoke(main, ["ingest", str(sample), "--store", str(store), "-q"])
        assert r.exit_code == 0, r.output
        return store
    import sys

    sys.path.insert(0, str(ROOT))  # bench/ is a folder of the repo, not an installed package
    from bench._reportstore import build_store

    return build_store(store, jobs=600, two_gpu=12, eight_gpu=8, days=4, seed=11)


@pytest.mark.slow
def test_notebook_executes(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    store = _sample_store(tmp_path)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    old = os.environ.get("PHILLY_STORE")
    os.environ["PHILLY_STORE"] = str(store)
    try:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    finally:
        if old is None:
            os.environ.pop("PHILLY_STORE", None)
        else:
            os.environ["PHILLY_STORE"] = old
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 5  # the figures were drawn
