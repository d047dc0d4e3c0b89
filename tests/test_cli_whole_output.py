"""Whole outputs of the main commands, pinned like sqlite-utils pins its CLI's outputs: each
command runs in-process (CliRunner) on a small hand-made input, and its entire stdout (or the
summary on stderr) is compared with the text below after the volatile parts are normalised
(``_normalized``: the test's folder -> <TMP>, run times -> <S>, trailing spaces).

Every number below was worked out by hand from the input, in the comment above it; none was
produced by the code under test and pasted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests import small_store
from tests._sim_data import observed_store
from tests.small_store import ACCEPT_REJECT as ACCEPT


def _run(*args: object, exit_code: int = 0) -> Result:
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == exit_code, r.output
    return r


def _normalized(text: str, tmp: Path) -> str:
    """``text`` with the test's folder as <TMP>, the seconds a run took as <S> and no
    trailing spaces (rich pads a title to its table's width)."""
    text = text.replace(str(tmp), "<TMP>")
    text = re.sub(r'("seconds"|"sim_seconds"): [0-9.]+', r"\1: <S>", text)
    text = re.sub(r"ingest: [0-9.]+ s,", "ingest: <S> s,", text)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


# ------------------------------------------------------------------------- ingest
#: A job list of four rows: x1 and x4 are jobs; x2's submit time does not parse and x3's
#: duration is negative, so both are rejected (lines 3 and 4).
JOBS_CSV = (
    "job_id,submit_time,duration_s,gpus,vc,user,status\n"
    "x1,2017-11-01 10:00:00,100,4,vcA,u1,Pass\n"
    "x2,not a time,100,4,vcA,u1,Pass\n"
    "x3,2017-11-01 10:05:00,-5,4,vcA,u1,Pass\n"
    "x4,2017-11-01 10:06:00,50,2,,,Failed\n"
)

#: 2 jobs + their 2 attempts (one each) = 4 rows read, 2 rejected. The table lists the tables
#: that got rows: jobs 2, attempts 2, and rejects (2 rows in the store; "rows read" counts
#: the rows of the data tables, so 0 for rejects, as in rows_added of the JSON). The 2
#: rejects exceed --max-rejects (default 0): exit 1 and one line naming line 3, after the
#: summary.
INGEST_TABLE = """\
ingested <TMP>/jobs.csv (job_list_csv) 4 rows, 2 rejected
ingest: <S> s, 2 rows rejected
┏━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━┓
┃ table    ┃ rows read ┃ in store ┃
┡━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━┩
│ jobs     │         2 │        2 │
│ attempts │         2 │        2 │
│ rejects  │         0 │        2 │
└──────────┴───────────┴──────────┘
error: <TMP>/jobs.csv:3: bad row: submit time 'not a time' is not a date and time (2 rows rejected in all, kept in the store's rejects table; the good rows were ingested; --max-rejects 2 accepts them)
"""

#: The same ingest as JSON: one source, every table of the store with its rows (only jobs,
#: attempts and the 2 rejects hold any).
INGEST_JSON = """\
{
  "seconds": <S>,
  "rejected": 2,
  "not_text_bytes": 0,
  "sources": [
    {
      "source": "<TMP>/jobs.csv",
      "format": "job_list_csv",
      "status": "ingested",
      "message": "",
      "rows": {
        "jobs": 2,
        "attempts": 2
      },
      "rejected": 2,
      "not_text_bytes": 0,
      "not_text_lines": 0,
      "first_not_text_line": null
    }
  ],
  "rows_added": {
    "jobs": 2,
    "attempts": 2
  },
  "rows_in_store": {
    "machines": 0,
    "machine_observations": 0,
    "jobs": 2,
    "attempts": 2,
    "placements": 0,
    "gpu_util": 0,
    "gpu_metrics": 0,
    "cpu_util": 0,
    "mem_util": 0,
    "host_metrics": 0,
    "scheduler_events": 0,
    "epochs": 0,
    "failures": 0,
    "rejects": 2
  },
  "notes": [],
  "source_rejects": {
    "rows": 2,
    "conflicts": 0,
    "first": {
      "source": "<TMP>/jobs.csv",
      "line_no": 3,
      "reason": "bad row: submit time 'not a time' is not a date and time"
    }
  }
}
"""

#: --format csv: the rows of the table above, as numbers.
INGEST_CSV = """\
table,rows_read,rows_in_store
jobs,2,2
attempts,2,2
rejects,0,2
"""


@pytest.fixture()
def jobs_csv(tmp_path: Path) -> Path:
    f = tmp_path / "jobs.csv"
    f.write_text(JOBS_CSV)
    return f


def test_ingest_summary_table_is_pinned(jobs_csv: Path, tmp_path: Path) -> None:
    r = _run("ingest", jobs_csv, "--store", tmp_path / "s", "--timezone", "UTC", exit_code=1)
    assert r.stdout == ""  # the summary table is for people: stderr
    assert _normalized(r.stderr, tmp_path) == INGEST_TABLE


def test_ingest_summary_json_is_pinned(jobs_csv: Path, tmp_path: Path) -> None:
    r = _run("ingest", jobs_csv, "--store", tmp_path / "s", "--timezone", "UTC", "-q",
             "--format", "json", exit_code=1)  # fmt: skip
    assert _normalized(r.stdout, tmp_path) == INGEST_JSON


def test_ingest_summary_csv_is_pinned(jobs_csv: Path, tmp_path: Path) -> None:
    r = _run("ingest", jobs_csv, "--store", tmp_path / "s", "--timezone", "UTC", "-q",
             "--format", "csv", exit_code=1)  # fmt: skip
    assert r.stdout == INGEST_CSV


# ------------------------------------------------------------------------- report
#: tests/small_store.py: j1 (vcA) submitted 10:00, ran 10:05-11:05 on 4 GPUs, passed (4 GPU
#: hours); j2 (vcA) submitted 10:10, ran 10:20-10:50 on 2 GPUs, failed (1 GPU hour); j3 (vcB)
#: never started, killed. Hence:
#: - Table 6: j3 never started, so it is not counted (1 job); passed 1 and unsuccessful 1
#:   (50% each), killed 0; GPU hours 4 + 0 + 1 = 5, i.e. 80% / 0% / 20%.
#: - Queueing: delays 5 and 10 min (both 2-4 GPUs, both vcA): mean 7.5, p50 7.5, and linear
#:   percentiles 5 + 5 x 0.9 = 9.5 (p90), 9.75 (p95), 9.95 (p99); no retries.
#: - Causes: the inferred quota gives vcA all 14 GPUs (m1 8, m2 2, m3 2 and m9 2; vcB used no
#:   GPU time). At 10:00 nothing runs, at 10:10 j1 holds 4 of m1's 8: each waiting job had
#:   quota and a free placement, so both waits are "other" (paper's Table 2 has no such row),
#:   15 minutes = 0.250 hours, 100% other.
#: The (paper) columns are the paper's published values (data/paper_values).
REPORT_MD = """\
# philly-analyze report

Store `<TMP>/store`, scope: all jobs.

(paper) values: Myeongjae Jeon, Shivaram Venkataraman, Amar Phanishayee, Junjie Qian, Wencong Xiao, Fan Yang. Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads. USENIX ATC 2019.

## Final job status (Table 6)

> note: 1 jobs that never started are not counted (as in the paper's Table 6, which covers 96,260 of the trace's 117,325 jobs)

### Jobs and GPU time by final status (paper: Table 6)

_GPU time = sum over attempts of duration x GPUs (hours)._

| status | jobs | (paper) | jobs (%) | (paper) | GPU hours | GPU time (%) | (paper) |
|:--|--:|--:|--:|--:|--:|--:|--:|
| passed | 1 | 66,696 | 50.00 | 69.30 | 4.00 | 80.00 | 44.53 |
| killed | 0 | 12,996 | 0.00 | 13.50 | 0.00 | 0.00 | 37.69 |
| unsuccessful | 1 | 16,568 | 50.00 | 17.20 | 1.00 | 20.00 | 17.76 |
| total | 2 | 96,260 | 100.00 | 100.00 | 5.00 | 100.00 | 100.00 |

## Queueing delay and its causes (Table 2, Figure 3)

> note: 1 jobs never started: left out of the delay percentiles and of Table 2 (no scheduler log gives the end of their wait)

> note: VC quotas (inferred from GPU-time shares (vcquota.infer_quotas)): vcA=14

### Queueing delay (minutes) per VC and GPU demand (paper: Figure 3, as percentiles)

_Delay = first start - submit; zero delays kept._

| VC | GPU bucket | jobs | waiting jobs | mean (min) | p50 (min) | p90 (min) | p95 (min) | p99 (min) |
|:--|:--|--:|--:|--:|--:|--:|--:|--:|
| all | all | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| all | 1 | 0 | 0 | – | – | – | – | – |
| all | 2-4 | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| all | 5-8 | 0 | 0 | – | – | – | – | – |
| all | >8 | 0 | 0 | – | – | – | – | – |
| vcA | all | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| vcA | 2-4 | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |

### Queueing delay (minutes) per attempt: first start, and retries after a failure

_A retry waits from the previous attempt's end to its own start; unstarted: jobs that ended in the queue (end from the scheduler log)._

| wait | GPU bucket | attempts | waiting attempts | mean (min) | p50 (min) | p90 (min) | p95 (min) | p99 (min) |
|:--|:--|--:|--:|--:|--:|--:|--:|--:|
| initial | all | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| initial | 1 | 0 | 0 | – | – | – | – | – |
| initial | 2-4 | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| initial | 5-8 | 0 | 0 | – | – | – | – | – |
| initial | >8 | 0 | 0 | – | – | – | – | – |
| retry | all | 0 | 0 | – | – | – | – | – |
| retry | 1 | 0 | 0 | – | – | – | – | – |
| retry | 2-4 | 0 | 0 | – | – | – | – | – |
| retry | 5-8 | 0 | 0 | – | – | – | – | – |
| retry | >8 | 0 | 0 | – | – | – | – | – |
| all | all | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| all | 1 | 0 | 0 | – | – | – | – | – |
| all | 2-4 | 2 | 2 | 7.50 | 7.50 | 9.50 | 9.75 | 9.95 |
| all | 5-8 | 0 | 0 | – | – | – | – | – |
| all | >8 | 0 | 0 | – | – | – | – | – |

### Waiting jobs by main cause of their wait and GPU demand, in the paper's two causes (paper: Table 2)

_A job counts under the cause that took most of its waiting time; fragmentation here is the paper's: no placement free with quota left, i.e. our fragmentation + capacity; other (no paper row): quota and a placement free; undetermined (no paper row): the moments whose cause the data cannot tell could change which cause took most; gpus_unknown (when present): jobs whose GPU demand is unknown (ended in the queue, or a source that names no GPUs)._

| delay type | 1 GPU | 2-4 GPUs | (paper) | 5-8 GPUs | (paper) | >8 GPUs | (paper) | all |
|:--|--:|--:|--:|--:|--:|--:|--:|--:|
| fair_share | 0 | 0 | 5,168 | 0 | 3,793 | 0 | 66 | 0 |
| fragmentation | 0 | 0 | 7,567 | 0 | 10,928 | 0 | 3,117 | 0 |
| other | 0 | 2 | – | 0 | – | 0 | – | 2 |
| undetermined | 0 | 0 | – | 0 | – | 0 | – | 0 |

### Waiting jobs by main cause of their wait and GPU demand: fair-share, fragmentation, capacity, other, undetermined

_fair_share: the VC at or past its quota; capacity: quota left, fewer GPUs free in the whole cluster than the job needs; fragmentation: quota left, enough GPUs free, none in a placement meeting the locality constraint; other: quota and a placement free, yet the job waited; undetermined: the data cannot tell (an unknown GPU demand, or an attempt whose end is unknown, on which the cause depends: see the notes)._

| delay type | 1 GPU | 2-4 GPUs | 5-8 GPUs | >8 GPUs | all |
|:--|--:|--:|--:|--:|--:|
| fair_share | 0 | 0 | 0 | 0 | 0 |
| fragmentation | 0 | 0 | 0 | 0 | 0 |
| capacity | 0 | 0 | 0 | 0 | 0 |
| other | 0 | 2 | 0 | 0 | 2 |
| undetermined | 0 | 0 | 0 | 0 | 0 |

### Share of waiting time by cause and GPU demand

_Seconds of each cause over all waits (first start and retries); undetermined: moments whose cause the data cannot tell._

| GPU bucket | waiting jobs | wait hours | fair share (%) | fragmentation (%) | capacity (%) | other (%) | undetermined (%) |
|:--|--:|--:|--:|--:|--:|--:|--:|
| all | 2 | 0.250 | 0.00 | 0.00 | 0.00 | 100.00 | 0.00 |
| 1 | 0 | 0.00 | – | – | – | – | – |
| 2-4 | 2 | 0.250 | 0.00 | 0.00 | 0.00 | 100.00 | 0.00 |
| 5-8 | 0 | 0.00 | – | – | – | – | – |
| >8 | 0 | 0.00 | – | – | – | – | – |
"""


def test_report_markdown_of_a_small_store_is_pinned(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _run("ingest", small_store.write(tmp_path / "src"), "--store", store, "-q", *ACCEPT)
    r = _run("report", "--store", store, "--format", "md", "-q",
             "--section", "status", "--section", "queueing")  # fmt: skip
    assert _normalized(r.stdout, tmp_path) == REPORT_MD


def test_report_csv_writes_one_file_per_table(tmp_path: Path) -> None:
    """``--format csv -o DIR``: DIR/<section>_<table>.csv, the values as numbers (the same
    Table 6 as above: 4 and 1 GPU hours, 80% and 20%)."""
    store = tmp_path / "store"
    _run("ingest", small_store.write(tmp_path / "src"), "--store", store, "-q", *ACCEPT)
    _run("report", "--store", store, "--format", "csv", "-o", tmp_path / "csv", "-q",
         "--section", "status")  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == ["status_table6.csv"]
    assert (tmp_path / "csv" / "status_table6.csv").read_text() == (
        "status,jobs,paper_jobs,jobs_pct,paper_jobs_pct,gpu_hours,gpu_time_pct,paper_gpu_time_pct\n"
        "passed,1,66696,50.0,69.3,4.0,80.0,44.53\n"
        "killed,0,12996,0.0,13.5,0.0,0.0,37.69\n"
        "unsuccessful,1,16568,50.0,17.2,1.0,20.0,17.76\n"
        "total,2,96260,100.0,100.0,5.0,100.0,100.0\n"
    )


# ------------------------------------------------------------------------- replay
#: tests/_sim_data.observed_store: three 1-GPU jobs of 100 s submitted at 0, 10 and 20 s on
#: one idle 8-GPU server, observed to wait 60, 0 and 30 s. Under fifo each starts at once:
#: - JCT 100 s each (mean and every percentile), queueing 0, no delay of any cause; the
#:   fair-share share of 0 s of delay is undefined (absent: "-", empty, null);
#: - makespan 0 -> 120 s (2.0 min); allocated (= effective: no slowdown on one GPU)
#:   utilization 3 x 100 GPU-s / (8 GPUs x 120 s) = 31.25%;
#: - one VC: Jain's index 1, worst VC mean queue 0 s;
#: - fidelity: errors |0-60|, |0-0|, |0-30| = 60, 0, 30 s: median 30 s, p90 (linear over
#:   0, 30, 60) 30 + 0.8 x 30 = 54 s, over 3 jobs.
REPLAY_TABLE = """\
replay: policy comparison
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━┓
┃ metric                          ┃    fifo ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━┩
│ jobs                            │       3 │
│ jobs_unscheduled                │       0 │
│ attempts                        │       3 │
│ preemptions                     │       0 │
│ jct_mean_s                      │ 100.0 s │
│ jct_p50_s                       │ 100.0 s │
│ jct_p95_s                       │ 100.0 s │
│ jct_p99_s                       │ 100.0 s │
│ queue_mean_s                    │   0.0 s │
│ queue_p50_s                     │   0.0 s │
│ queue_p95_s                     │   0.0 s │
│ queue_p99_s                     │   0.0 s │
│ fair_share_delay_s              │   0.0 s │
│ fragmentation_delay_s           │   0.0 s │
│ capacity_delay_s                │   0.0 s │
│ other_delay_s                   │   0.0 s │
│ fair_share_delay_frac           │       - │
│ gpu_util_allocated_pct          │   31.2% │
│ gpu_util_effective_pct          │   31.2% │
│ makespan_s                      │ 2.0 min │
│ vc_fairness_jain                │   1.000 │
│ vc_worst_mean_queue_s           │   0.0 s │
│ fidelity_queue_median_abs_err_s │  30.0 s │
│ fidelity_queue_p90_abs_err_s    │  54.0 s │
│ fidelity_jobs                   │       3 │
└─────────────────────────────────┴─────────┘
"""

#: The same as numbers; each fraction followed by the same in percent (both absent here).
REPLAY_CSV = """\
metric,fifo
jobs,3
jobs_unscheduled,0
attempts,3
preemptions,0
jct_mean_s,100.0
jct_p50_s,100.0
jct_p95_s,100.0
jct_p99_s,100.0
queue_mean_s,0.0
queue_p50_s,0.0
queue_p95_s,0.0
queue_p99_s,0.0
fair_share_delay_s,0.0
fragmentation_delay_s,0.0
capacity_delay_s,0.0
other_delay_s,0.0
fair_share_delay_frac,
fair_share_delay_pct,
gpu_util_allocated_pct,31.25
gpu_util_effective_pct,31.25
makespan_s,120.0
vc_fairness_jain,1.0
vc_worst_mean_queue_s,0.0
fidelity_queue_median_abs_err_s,30.0
fidelity_queue_p90_abs_err_s,54.0
fidelity_jobs,3
"""

#: The JSON: fifo's parameters are its defaults (`replay --list-policies`); fifo has no
#: quotas (quota null, quotas {}); the one VC got all the service it was due (ratio 1).
REPLAY_JSON = """\
{
  "store": "<TMP>/obs",
  "cluster": {
    "machines": 1,
    "gpus": 8
  },
  "results": [
    {
      "policy": "fifo",
      "params": {
        "locality_wait_min": 10.0,
        "backfill": false,
        "max_retries": null,
        "retry_delay_s": 0.0,
        "slowdown": true,
        "rack_slowdown": 1.0
      },
      "seed": 0,
      "sim_seconds": <S>,
      "metrics": {
        "jobs": 3,
        "jobs_unscheduled": 0,
        "attempts": 3,
        "preemptions": 0,
        "jct_mean_s": 100.0,
        "jct_p50_s": 100.0,
        "jct_p95_s": 100.0,
        "jct_p99_s": 100.0,
        "queue_mean_s": 0.0,
        "queue_p50_s": 0.0,
        "queue_p95_s": 0.0,
        "queue_p99_s": 0.0,
        "fair_share_delay_s": 0.0,
        "fragmentation_delay_s": 0.0,
        "capacity_delay_s": 0.0,
        "other_delay_s": 0.0,
        "fair_share_delay_frac": null,
        "fair_share_delay_pct": null,
        "gpu_util_allocated_pct": 31.25,
        "gpu_util_effective_pct": 31.25,
        "makespan_s": 120.0,
        "vc_fairness_jain": 1.0,
        "vc_worst_mean_queue_s": 0.0,
        "fidelity_queue_median_abs_err_s": 30.0,
        "fidelity_queue_p90_abs_err_s": 54.0,
        "fidelity_jobs": 3
      },
      "per_vc": [
        {
          "vc": "v",
          "quota": null,
          "jobs": 3,
          "queue_mean_s": 0.0,
          "jct_mean_s": 100.0,
          "service_ratio": 1.0
        }
      ],
      "quotas": {},
      "notes": [],
      "footnotes": {},
      "out": null
    }
  ]
}
"""


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [("table", REPLAY_TABLE), ("csv", REPLAY_CSV), ("json", REPLAY_JSON)],
)
def test_replay_output_is_pinned(fmt: str, expected: str, tmp_path: Path) -> None:
    store = observed_store(tmp_path / "obs")
    r = _run("replay", "--store", store, "--policy", "fifo", "--format", fmt, "-q")
    assert _normalized(r.stdout, tmp_path) == expected


# -------------------------------------------------------------------------- sweep
#: Three cells on the observed store: fifo with backfill off and on, and philly (no backfill
#: parameter: empty). On an idle cluster every job starts at once under each, so every cell
#: has the replay's numbers: JCT 100 s, queueing 0 s, 31.25% allocated, makespan 120 s (2.00
#: min). One seed: no interval, so no "±".
SWEEP_TABLE = """\
sweep: mean over seeds ± half-width of the t-interval
┏━━━━━━━━┳━━━━━━━━━━┳━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┓
┃ policy ┃ backfill ┃ runs ┃ failed ┃ jct_mean_s ┃ queue_mean_s ┃ queue_p95_s ┃ gpu_util_allocated_pct ┃ makespan_s ┃
┡━━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━┩
│ fifo   │    False │    1 │      0 │    100.0 s │          0 s │         0 s │                 31.25% │   2.00 min │
│ fifo   │     True │    1 │      0 │    100.0 s │          0 s │         0 s │                 31.25% │   2.00 min │
│ philly │          │    1 │      0 │    100.0 s │          0 s │         0 s │                 31.25% │   2.00 min │
└────────┴──────────┴──────┴────────┴────────────┴──────────────┴─────────────┴────────────────────────┴────────────┘
"""

#: fifo over two seeds (no jitter: both runs are the same), every metric the runs report:
#: n = 2, sd 0, so the interval is the mean itself and its half-width 0. The values are the
#: replay's above; the fair-share share is absent in every run, so it has no row.
SWEEP_CSV = """\
policy,runs,failed,metric,n,mean,sd,ci_low,ci_high,half_width
fifo,2,0,jobs,2,3.0,0.0,3.0,3.0,0.0
fifo,2,0,jobs_unscheduled,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,attempts,2,3.0,0.0,3.0,3.0,0.0
fifo,2,0,preemptions,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,jct_mean_s,2,100.0,0.0,100.0,100.0,0.0
fifo,2,0,jct_p50_s,2,100.0,0.0,100.0,100.0,0.0
fifo,2,0,jct_p95_s,2,100.0,0.0,100.0,100.0,0.0
fifo,2,0,jct_p99_s,2,100.0,0.0,100.0,100.0,0.0
fifo,2,0,queue_mean_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,queue_p50_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,queue_p95_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,queue_p99_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,fair_share_delay_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,fragmentation_delay_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,capacity_delay_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,other_delay_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,gpu_util_allocated_pct,2,31.25,0.0,31.25,31.25,0.0
fifo,2,0,gpu_util_effective_pct,2,31.25,0.0,31.25,31.25,0.0
fifo,2,0,makespan_s,2,120.0,0.0,120.0,120.0,0.0
fifo,2,0,vc_fairness_jain,2,1.0,0.0,1.0,1.0,0.0
fifo,2,0,vc_worst_mean_queue_s,2,0.0,0.0,0.0,0.0,0.0
fifo,2,0,fidelity_queue_median_abs_err_s,2,30.0,0.0,30.0,30.0,0.0
fifo,2,0,fidelity_queue_p90_abs_err_s,2,54.0,0.0,54.0,54.0,0.0
fifo,2,0,fidelity_jobs,2,3.0,0.0,3.0,3.0,0.0
"""


def test_sweep_table_is_pinned(tmp_path: Path) -> None:
    store = observed_store(tmp_path / "obs")
    r = _run("sweep", "--store", store, "--policy", "fifo,philly", "--workers", "1", "-q",
             "--param", "fifo.backfill=false,true", "--format", "table")  # fmt: skip
    assert _normalized(r.stdout, tmp_path) == SWEEP_TABLE


def test_sweep_csv_is_pinned(tmp_path: Path) -> None:
    store = observed_store(tmp_path / "obs")
    r = _run("sweep", "--store", store, "--policy", "fifo", "--seeds", "2", "--workers", "1",
             "--format", "csv", "-q")  # fmt: skip
    assert r.stdout == SWEEP_CSV


# ------------------------------------------------------------- -o and --format agree
@pytest.mark.parametrize(
    ("args", "says"),
    [
        # No --format: the suffix names csv, and a report of many tables is a folder of them.
        (["-o", "report.csv"], "give a folder (-o report)"),
        (["--format", "md", "-o", "report.csv"], "use --format csv, or a file ending in .md"),
        (["--format", "json", "-o", "r.html"], "use --format html, or a file ending in .json"),
        (["-o", "report.xyz"], "cannot tell the format from the suffix '.xyz'"),
        (["--format", "csv"], "--format csv writes one file per table: add -o DIR"),
    ],
)
def test_report_output_that_disagrees_with_its_format_is_a_usage_error(
    args: list[str], says: str, tmp_path: Path
) -> None:
    """Before, `-o report.csv` wrote Markdown into report.csv (exit 0); now nothing is
    written and the message says how to fix the command."""
    store = tmp_path / "store"
    _run("ingest", small_store.write(tmp_path / "src"), "--store", store, "-q", *ACCEPT)
    out = [str(tmp_path / a) if a.startswith(("report", "r.")) else a for a in args]
    r = CliRunner().invoke(main, ["report", "--store", str(store), "-q", *out])
    assert r.exit_code == 2, r.output
    assert says in " ".join(r.stderr.split()).replace(str(tmp_path) + "/", "")
    assert not any(p.suffix in (".csv", ".xyz", ".html") for p in tmp_path.iterdir())


# --------------------------------------------------------------- the one renderer
def test_one_table_in_every_format() -> None:
    """A hand-made table through the one renderer: text formats show each value for reading
    (thousands separators, 2 decimals, "–" for absent, data text escaped); json and csv the
    plain value (6 decimals at most, null / empty for absent)."""
    import numpy as np
    import pandas as pd

    from philly_analyze.report import render
    from philly_analyze.report.model import Document, Section, Table, plain

    frame = pd.DataFrame({"name": ["a|<b>", "c"], "value": [1234.5678901, np.nan]})
    doc = Document([Section("s", None, [Table("t", "T", frame)])])
    assert render(doc, "md") == (
        "| name | value |\n|:--|--:|\n| a\\|&lt;b> | 1,234.57 |\n| c | – |\n"
    )
    assert render(doc, "csv") == "name,value\na|<b>,1234.56789\nc,\n"
    assert render(doc, "json") == (
        '{\n  "t": [\n    {\n      "name": "a|<b>",\n      "value": 1234.56789\n    },\n'
        '    {\n      "name": "c",\n      "value": null\n    }\n  ]\n}\n'
    )
    html = render(doc, "html")
    assert "<td>a|&lt;b&gt;</td>" in html and '<td class="num">1,234.57</td>' in html
    text = render(doc, "table")
    assert "1,234.57" in text and "a|<b>" in text
    assert [plain(np.int64(3)), plain(np.float32(0.5)), plain(float("inf")), plain(pd.NA)] == [
        3,
        0.5,
        None,
        None,
    ]


def test_experiment_runs_in_each_format() -> None:
    """``replay --ablate|--vary``'s table of runs (the document ``_print_rows`` renders), on a
    hand-made frame: 0.5 of a fraction reads 50.0% (and gets its ``_pct`` twin in csv/json),
    3,600 s reads 60.0 min, an absent value "-" / empty / null; the terminal shows it
    transposed (a metric per row), md one run per row."""
    import pandas as pd

    from philly_analyze.report import render
    from philly_analyze.sim.tables import runs_document

    df = pd.DataFrame(
        {
            "variant": ["muxflow", "no sm"],
            "gpu_util_online": [0.5, 0.25],
            "jct_mean_s": [3600.0, float("nan")],
            "jobs": [10, 12],
        }
    )
    doc = runs_document(df, {"scenario": "paper", "online_gpus": 2000, "seed": 0})
    assert render(doc, "md") == (
        "| variant | gpu_util_online | jct_mean_s | jobs |\n"
        "|:--|--:|--:|--:|\n"
        "| muxflow | 50.0% | 60.0 min | 10 |\n"
        "| no sm | 25.0% | - | 12 |\n"
    )
    assert render(doc, "csv") == (
        "variant,gpu_util_online,gpu_util_online_pct,jct_mean_s,jobs\n"
        "muxflow,0.5,50.0,3600.0,10\n"
        "no sm,0.25,25.0,,12\n"
    )
    table = [line.rstrip() for line in render(doc, "table").splitlines()]
    assert table[0] == "replay: scenario paper"
    assert "│ jct_mean_s      │ 60.0 min │     - │" in table
    assert '"jct_mean_s": null' in render(doc, "json")
