"""The notebook runs top to bottom on the sample store with the very commands the notebook
and README give a user, ``jupyter execute`` from the repository root and from the notebook's
folder after ``make demo`` (no PHILLY_STORE: the notebook finds ``demo-store/``), in the
default suite (about 25 s: two kernels, every analysis twice).

Through nbclient, the figures it draws are counted too; that run is the same notebook on the
same store a third time, so it is left to ``make test-all``."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import skip_unless_strict

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "paper_analyses.ipynb"
#: `jupyter` of this environment (nbclient's `jupyter execute`, installed by `make install`).
JUPYTER = Path(sys.executable).parent / "jupyter"


def _sample_store(store: Path) -> Path:
    """The ingested sample_data/ (what `make demo` writes) when it exists, else a small
    generated store."""
    sample = ROOT / "sample_data"
    if sample.exists() and any(sample.iterdir()):
        from click.testing import CliRunner

        from philly_analyze.cli import main

        r = CliRunner().invoke(main, ["ingest", str(sample), "--store", str(store), "-q"])
        assert r.exit_code == 0, r.output
        return store
    sys.path.insert(0, str(ROOT))  # bench/ is a folder of the repo, not an installed package
    from bench._reportstore import build_store

    return build_store(store, jobs=600, two_gpu=12, eight_gpu=8, days=4, seed=11)


def _dev_dependency(name: str) -> ModuleType:
    """A module ``make install`` installs: skipped without it, a failure in CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        skip_unless_strict(f"{name} is not installed (a dev dependency: make install)")


@pytest.mark.slow  # the notebook's third run (see the module doc): only the figures are new
def test_notebook_executes(tmp_path: Path) -> None:
    nbformat = _dev_dependency("nbformat")
    nbclient = _dev_dependency("nbclient")
    store = _sample_store(tmp_path / "store")
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


def test_jupyter_execute_from_the_root_and_from_the_notebooks_folder(tmp_path: Path) -> None:
    """A copy of the repository's layout: notebooks/paper_analyses.ipynb and, after
    `make demo`, demo-store/ at the root. Both commands of the notebook's introduction run."""
    if not JUPYTER.exists():
        pytest.fail(f"{JUPYTER} missing: `make install` installs nbclient's `jupyter execute`")
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, repo / "notebooks")
    env = {k: v for k, v in os.environ.items() if k != "PHILLY_STORE"}

    def execute(cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(JUPYTER), "execute", path], cwd=cwd, env=env, capture_output=True, text=True
        )

    before = execute(repo, "notebooks/paper_analyses.ipynb")  # no `make demo` yet
    assert before.returncode != 0 and "run `make demo` at the repository root" in before.stderr
    _sample_store(repo / "demo-store")
    for cwd, path in ((repo, "notebooks/paper_analyses.ipynb"),
                      (repo / "notebooks", "paper_analyses.ipynb")):  # fmt: skip
        done = execute(cwd, path)
        assert done.returncode == 0, done.stderr[-3000:]
