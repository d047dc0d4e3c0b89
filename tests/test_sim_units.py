"""One unit per kind of metric wherever replay metrics are shown (``units``)."""

from __future__ import annotations

import pytest

from philly_analyze.units import human


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("gpu_util_online", 0.756, "75.6%"),  # a fraction of a whole: as a percentage
        ("gpu_util_allocated_pct", 97.9, "97.9%"),  # already a percentage
        ("fair_share_delay_frac", 0.5, "50.0%"),
        ("queue_mean_s", 456.0, "7.6 min"),  # 456 s / 60
        ("offline_jct_mean_min", 64.044, "64.0 min"),  # minutes stay minutes below 120
        ("offline_queue_p95_min", 990.0, "16.5 h"),  # 990 min = 59,400 s = 16.5 h
        ("minutes", 1440, "24.0 h"),  # the horizon is a duration
        ("outage_minutes", 230, "230 GPU-min"),  # a sum over GPUs, not a duration
        ("offline_work_gpu_hours", 2435.101, "2,435.1 GPU-h"),
        ("jobs_unscheduled", 147956, "147,956"),
        ("offline_throughput_jobs_per_hour", 1651.958, "1,652.0/h"),  # a rate, not a ratio
        ("online_slowdown_p99", 1.2013, "1.201"),
        ("jct_mean_s", None, "-"),
        ("jct_mean_s", float("nan"), "-"),
    ],
)
def test_metric_text(key: str, value: object, text: str) -> None:
    assert human(key, value) == text


def test_each_fraction_is_followed_by_its_percent_key() -> None:
    """Worked by hand: 0.2986 of a whole is 29.86% (no float noise), an absent fraction
    (None, NaN) an absent percentage, other keys as they are, in order."""
    from philly_analyze.units import with_percent_keys

    got = with_percent_keys(
        {"jobs": 3, "gpu_util_online": 0.2986, "shared_fraction": None,
         "fair_share_delay_frac": float("nan"), "slo_violation_budget": 0.01}
    )  # fmt: skip
    assert list(got.items()) == [
        ("jobs", 3),
        ("gpu_util_online", 0.2986),
        ("gpu_util_online_pct", 29.86),
        ("shared_fraction", None),
        ("shared_pct", None),
        ("fair_share_delay_frac", got["fair_share_delay_frac"]),
        ("fair_share_delay_pct", None),
        ("slo_violation_budget", 0.01),
        ("slo_violation_budget_pct", 1.0),
    ]


def _replay(*args: str) -> str:
    from click.testing import CliRunner

    from philly_analyze.cli import main

    r = CliRunner().invoke(main, ["replay", *args, "-q"])
    assert r.exit_code == 0, r.output
    return r.stdout


#: A small sharing run: 16 online GPUs for an hour (well under a second).
SMALL = ("--policy", "muxflow", "--scenario", "paper", "--param", "online_gpus=16",
         "--param", "minutes=60")  # fmt: skip


def test_replay_json_and_csv_give_every_fraction_in_percent_too() -> None:
    import csv
    import io
    import json

    from philly_analyze.units import PERCENT_KEYS

    m = json.loads(_replay(*SMALL, "--format", "json"))["results"][0]["metrics"]
    fractions = [k for k in PERCENT_KEYS if k in m]
    assert len(fractions) == 10  # all of them but the queue replay's fair_share_delay_frac
    for k in fractions:
        keys = list(m)
        assert keys[keys.index(k) + 1] == PERCENT_KEYS[k]
        assert m[PERCENT_KEYS[k]] == pytest.approx(100 * m[k], abs=1e-9), k
    assert m["slo_violation_budget_pct"] == 1.0  # the model file's 0.01
    rows = dict(csv.reader(io.StringIO(_replay(*SMALL, "--format", "csv"))))
    assert rows["gpu_util_online_pct"] == str(m["gpu_util_online_pct"])
    assert rows["gpu_util_online"] == str(m["gpu_util_online"])


def _documented() -> dict[str, str]:
    """Key pattern -> unit, from the metric tables of docs/replay.md and docs/muxflow.md
    (first column: keys; second: unit; muxflow's fourth: the percent keys)."""
    import re

    from tests.conftest import ROOT

    out: dict[str, str] = {}
    for doc in ("replay.md", "muxflow.md"):
        text = (ROOT / "docs" / doc).read_text()
        table = text[text.index("| key | unit | meaning |") :].split("\n\n")[0]
        for line in table.splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            for k in re.findall(r"`([^`]+)`", cells[0]):
                out[k] = cells[1]
            for k in re.findall(r"`([^`]+)`", cells[3]) if len(cells) > 3 else []:
                out[k] = "percent"
    return out


def _matches(pattern: str, key: str) -> bool:
    """``jct_{mean,p50}_s`` and ``evictions_<reason>`` as the docs write key families."""
    import re

    rx = re.sub(r"\\\{([^}]*)\\\}", lambda g: "(" + g.group(1).replace(",", "|") + ")",
                re.escape(pattern))  # fmt: skip
    rx = re.sub(r"<\w+>", r"\\w+", rx)
    return re.fullmatch(rx, key) is not None


def test_every_replay_metric_key_is_documented_with_its_unit(tmp_path) -> None:
    """Every key a replay prints (the queue policies, the sharing policies on a store with
    their philly comparison, and on the paper scenario) has a row in the docs' metric tables
    with a unit."""
    import json

    from tests.test_sharing_policy import busy_store

    store = busy_store(tmp_path / "s", jobs=20)
    keys: set[str] = set()
    for args in (
        ("--store", str(store), "--policy", "philly,relaxed,fifo,las,srtf,muxflow,dedicated"),
        SMALL,
    ):
        for r in json.loads(_replay(*args, "--format", "json"))["results"]:
            keys |= set(r["metrics"])
    documented = _documented()
    assert all(unit for unit in documented.values())
    missing = sorted(k for k in keys if not any(_matches(p, k) for p in documented))
    assert missing == []
    assert len(keys) > 80
