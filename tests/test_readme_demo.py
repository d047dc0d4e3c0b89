"""The README's report excerpt is the report of the bundled sample as it is now.

`make sample` rewrites ``sample_data/`` whenever the synthesizer's model changes; the README
shows an excerpt of ``report --store demo-store --vc-quotas sample_data/ground_truth/vc_quotas.csv
--format md`` on it (Table 3 and the waiting causes). Every table row of that excerpt must be a
row of the report the same command writes today, so a recalibrated sample cannot leave the
README showing the old one's numbers."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXCERPT_INTRO = "An excerpt of `report --store demo-store"


def _excerpt_rows(readme: str) -> list[str]:
    """The table rows of the first code block after the excerpt's introduction."""
    start = readme.index(EXCERPT_INTRO)
    block = re.search(r"```\n(.*?)```", readme[start:], re.S)
    assert block is not None
    return [ln for ln in block.group(1).splitlines() if ln.startswith("| ")]


def test_readme_report_excerpt_is_the_samples_report(tmp_path: Path) -> None:
    sample = ROOT / "sample_data"
    store = tmp_path / "store"
    r = CliRunner().invoke(main, ["ingest", str(sample), "--store", str(store), "-q"])
    assert r.exit_code == 0, r.output
    quotas = sample / "ground_truth" / "vc_quotas.csv"
    r = CliRunner().invoke(
        main, ["report", "--store", str(store), "--vc-quotas", str(quotas), "--format", "md", "-q"]
    )
    assert r.exit_code == 0, r.output
    report_rows = set(r.output.splitlines())
    rows = _excerpt_rows((ROOT / "README.md").read_text())
    assert len(rows) >= 12  # Table 3's header and sizes, the two cause tables
    missing = [row for row in rows if row not in report_rows]
    assert not missing, missing
