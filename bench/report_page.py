"""The demo's HTML report as a reader's browser shows it: the bundled sample ingested, the
report written with the sample's VC quotas (``make demo``'s command), opened in headless
Chromium 1400 px wide (``bench/_chromium.py``, the checker of tests/test_report_browser.py).
Printed: what the browser met (console errors, images, tables past the window, page size)
and where the screenshots are: ``bench-out/report.png`` (the first screen) and
``bench-out/report-gpu_utilization.png`` (the section docs/report.png shows). Skipped with a
line when no Chromium is installed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from click.testing import CliRunner

from bench._chromium import check_page, find_browser
from bench._util import SCRATCH
from philly_analyze.cli import main

ROOT = Path(__file__).resolve().parent.parent
WINDOW = 1400


def _cli(*args: str) -> None:
    r = CliRunner().invoke(main, [*args, "-q"])
    if r.exit_code != 0:
        raise RuntimeError(f"philly-analyze {' '.join(args)}: {r.output}")


def run() -> None:
    browser = find_browser()
    if browser is None:
        print("skipped: no Chromium installed (apt-get install chromium)")
        return
    out = SCRATCH / "report-page"
    store, page = out / "store", out / "report.html"
    quotas = ROOT / "sample_data" / "ground_truth" / "vc_quotas.csv"
    shutil.rmtree(out, ignore_errors=True)  # a store of an earlier version would mislead
    _cli("ingest", str(ROOT / "sample_data"), "--store", str(store))
    _cli("report", "--store", str(store), "--vc-quotas", str(quotas), "--format", "html",
         "-o", str(page))  # fmt: skip
    shots = {
        SCRATCH / "report.png": None,
        SCRATCH / "report-gpu_utilization.png": "#gpu_utilization",
    }
    for shot, selector in shots.items():
        t0 = time.perf_counter()
        seen = check_page(page, width=WINDOW, binary=browser, shot_of=selector)
        secs = time.perf_counter() - t0
        shot.write_bytes(seen.screenshot)
        if selector is None:
            print(
                f"{page}: {len(seen.errors)} console errors, {len(seen.images)} images "
                f"({len(seen.broken_images())} broken), {len(seen.tables)} tables "
                f"({len(seen.wide_tables())} past {WINDOW} px), page "
                f"{seen.page_width} x {seen.page_height} px"
            )
            for e in seen.errors:
                print(f"  {e}")
        print(f"screenshot {shot} ({selector or 'first screen'}) in {secs:.1f} s")
