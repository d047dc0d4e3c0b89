"""The HTML report rendered in a real headless Chromium, as a reader opens it.

Chromium is driven over the DevTools protocol (``bench/_chromium.py``, standard library only).
Checked: no console error, exception or failed load; every figure loads (natural width > 0);
no table reaches past a 1400 px window (wide ones scroll inside their own box); a screenshot.
Skipped when no Chromium is installed, except under ``PHILLY_STRICT_SKIPS=1`` (CI's
``.ci/run`` installs Chromium and sets it), where a missing browser fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from tests._sweep_data import sample_store
from tests.conftest import ROOT, skip_unless_strict

sys.path.insert(0, str(ROOT))  # bench/ is a folder of the repo, not an installed package
from bench._chromium import PageCheck, check_page, find_browser

WINDOW = 1400
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def browser() -> str:
    found = find_browser()
    if found is None:
        skip_unless_strict("no Chromium installed (apt-get install chromium)")
    return found


def _report(*args: str) -> None:
    r = CliRunner().invoke(main, ["report", *args, "-q"])
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, browser: str) -> dict[str, PageCheck]:
    """The demo's report (every ATC'19 section, from the bundled sample) and a sharing
    replay's report (the MuxFlow section), each opened in a 1400 px window."""
    tmp = tmp_path_factory.mktemp("browser")
    store = sample_store(tmp / "store")
    quotas = ROOT / "sample_data" / "ground_truth" / "vc_quotas.csv"
    _report("--store", str(store), "--vc-quotas", str(quotas), "-o", str(tmp / "demo.html"))
    mux = tmp / "mux"
    r = CliRunner().invoke(
        main,
        ["replay", "--policy", "muxflow", "--scenario", "paper", "--param", "online_gpus=30",
         "--param", "minutes=180", "--out", str(mux), "-q", "--format", "json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    _report("--store", str(mux), "-o", str(tmp / "mux.html"))
    return {
        "demo": check_page(tmp / "demo.html", width=WINDOW, binary=browser),
        "mux": check_page(tmp / "mux.html", width=WINDOW, binary=browser),
    }


@pytest.mark.parametrize("name", ["demo", "mux"])
def test_no_console_errors_and_every_image_loads(pages: dict[str, PageCheck], name: str) -> None:
    page = pages[name]
    assert page.errors == []
    # demo: Tables 6 and 2, Figures 3-9 (9 figures); mux: Tables 6 and 2, Figures 3, 4, 9 and
    # the two sharing figures (a replay store has no utilization samples or logs).
    assert len(page.images) == {"demo": 9, "mux": 7}[name]
    assert page.broken_images() == []
    assert all(i["natural_width"] > 300 and i["shown_width"] > 0 for i in page.images)


@pytest.mark.parametrize("name", ["demo", "mux"])
def test_no_table_wider_than_the_window(pages: dict[str, PageCheck], name: str) -> None:
    page = pages[name]
    assert page.viewport_width == WINDOW
    assert page.wide_tables() == []
    assert page.page_width <= WINDOW  # no sideways scrolling of the whole page


def test_table7_scrolls_inside_its_own_box(pages: dict[str, PageCheck]) -> None:
    """Table 7 (26 columns) is wider than the window: it fits only because its box scrolls,
    a visible line above it says so, its first column (the reason) stays in place when the
    box is scrolled, every row is one line high (long log lines cut, not wrapped), and its
    headers read as words ("2-4 GPUs", not "gpu demand 2 4")."""
    t7 = [t for t in pages["demo"].tables if "Table 7" in t["title"]]
    assert len(t7) == 1
    t = t7[0]
    assert t["in_scroll_box"] and t["width"] > t["box_width"]
    assert t["right"] <= WINDOW
    assert t["hint"].startswith("26 columns, wider than the page: scroll sideways")
    assert t["first_column_pinned"] is True
    assert t["row_max"] - t["row_min"] < 1.0
    assert {"1 GPU", "2-4 GPUs", ">4 GPUs", "RTF p50 (min)", "RTF share (%)"} <= set(t["headers"])
    assert not [h for h in t["headers"] if "_" in h or "gpu demand" in h or h.endswith(" min")]


@pytest.mark.parametrize("name", ["demo", "mux"])
def test_a_hint_above_exactly_the_tables_that_scroll(
    pages: dict[str, PageCheck], name: str
) -> None:
    page = pages[name]
    scrolling = {t["title"] for t in page.scrolling_tables()}
    hinted = {t["title"] for t in page.tables if t["hint"]}
    assert scrolling == hinted
    assert {"demo": 1, "mux": 0}[name] == len(scrolling)


def test_screenshot(pages: dict[str, PageCheck], tmp_path: Path) -> None:
    shot = pages["demo"].screenshot
    assert shot[:8] == PNG
    width, height = int.from_bytes(shot[16:20], "big"), int.from_bytes(shot[20:24], "big")
    assert (width, height) == (WINDOW, 900)
    (tmp_path / "report.png").write_bytes(shot)


def test_the_checker_sees_what_it_looks_for(browser: str, tmp_path: Path) -> None:
    """A page with a missing image, a console error, an exception and a 3000 px table: each
    is reported (so an empty list above means none, not a blind checker)."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><h3>wide</h3>"
        '<table style="width:3000px"><tr><td>x</td></tr></table>'
        '<h3>scrolls</h3><div style="overflow-x:auto"><table style="width:3000px"><thead>'
        "<tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>one</td></tr>"
        "<tr><td>2</td><td>two<br>lines</td></tr></tbody></table></div>"
        '<img alt="gone" src="missing.png">'
        "<script>console.error('boom'); null.x;</script></body></html>"
    )
    seen = check_page(page, width=WINDOW, binary=browser)
    assert any("boom" in e for e in seen.errors)
    assert any(e.startswith("exception:") for e in seen.errors)
    assert any("missing.png" in e for e in seen.errors)
    assert [i["alt"] for i in seen.broken_images()] == ["gone"]
    assert [t["title"] for t in seen.wide_tables()] == ["wide"]
    assert seen.page_width > WINDOW
    # A table that scrolls with no hint, its first column scrolling away, uneven rows.
    (box,) = seen.scrolling_tables()
    assert box["title"] == "scrolls" and box["hint"] == "" and box["headers"] == ["a", "b"]
    assert box["first_column_pinned"] is False and box["row_max"] > box["row_min"] + 5
